//! Any server speaking OpenAI's `POST /v1/chat/completions`.

use std::time::Duration;

use agentry_domain::agents::{
    ChatModel, Completion, CompletionRequest, FinishReason, ModelError, count_prompt,
};
use agentry_domain::tokens::TokenCounter;
use async_trait::async_trait;
use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;
use serde_json::json;

use crate::builtin::Cl100kTokens;

/// Where the server is and how to reach it.
#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// Base URL, e.g. `https://api.openai.com` or `http://localhost:11434/v1`.
    pub base_url: String,
    /// Bearer key, if the server wants one.
    pub api_key: Option<SecretString>,
    /// Longest wait for an answer.
    pub timeout: Duration,
}

/// An OpenAI-compatible chat model.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    client: reqwest::Client,
    endpoint: String,
    api_key: Option<SecretString>,
    tokens: Cl100kTokens,
}

#[derive(Deserialize)]
struct Response {
    choices: Vec<Choice>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    content: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    prompt_tokens: u64,
    completion_tokens: u64,
}

impl OpenAiModel {
    /// A model client for `settings`. Needs the process's rustls crypto provider for https.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(settings: OpenAiSettings) -> anyhow::Result<Self> {
        let base = settings.base_url.trim_end_matches('/');
        let endpoint = if base.ends_with("/v1") {
            format!("{base}/chat/completions")
        } else {
            format!("{base}/v1/chat/completions")
        };
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout.min(Duration::from_secs(10)))
            .build()?;
        Ok(Self { client, endpoint, api_key: settings.api_key, tokens: Cl100kTokens::default() })
    }
}

#[async_trait]
impl ChatModel for OpenAiModel {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError> {
        let messages: Vec<_> =
            request.messages.iter().map(|t| json!({"role": t.role.as_str(), "content": t.content})).collect();
        let mut body =
            json!({"model": request.model, "messages": messages, "max_tokens": request.max_tokens});
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        let mut call = self.client.post(&self.endpoint).json(&body);
        if let Some(key) = &self.api_key {
            call = call.bearer_auth(key.expose_secret());
        }
        let response = call.send().await.map_err(|e| {
            if e.is_timeout() {
                ModelError::Timeout
            } else {
                ModelError::Upstream(format!("request failed: {e}"))
            }
        })?;
        let status = response.status();
        let text = response.text().await.map_err(|e| {
            if e.is_timeout() {
                ModelError::Timeout
            } else {
                ModelError::Upstream(format!("reading the answer: {e}"))
            }
        })?;
        if !status.is_success() {
            let excerpt: String = text.chars().take(300).collect();
            return Err(ModelError::Upstream(format!("the provider answered {status}: {excerpt}")));
        }
        let parsed: Response = serde_json::from_str(&text)
            .map_err(|e| ModelError::Upstream(format!("unreadable answer from the provider: {e}")))?;
        let choice = parsed
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| ModelError::Upstream("the provider answered without a message".into()))?;
        let finish = if choice.finish_reason.as_deref() == Some("length") {
            FinishReason::Length
        } else {
            FinishReason::Stop
        };
        let content = choice
            .message
            .content
            .ok_or_else(|| ModelError::Upstream("the provider answered without a message".into()))?;
        // Servers that omit usage get an honest local count.
        let (prompt_tokens, completion_tokens) = match parsed.usage {
            Some(u) => (u.prompt_tokens, u.completion_tokens),
            None => (count_prompt(&self.tokens, &request.messages), self.tokens.count(&content)),
        };
        Ok(Completion { content, prompt_tokens, completion_tokens, finish })
    }
}

//! Any server speaking OpenAI's `POST /v1/chat/completions`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentry_domain::agents::{
    ChatModel, ChatRole, ChatTurn, Completion, CompletionRequest, DeltaSink, FinishReason, ModelError,
    ToolCall, count_request,
};
use agentry_domain::tokens::TokenCounter;
use async_trait::async_trait;
use futures_util::StreamExt as _;
use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

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
    /// Longest a call may take, retries included.
    timeout: Duration,
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
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

/// A tool call as OpenAI writes it: `{id, type: "function", function: {name, arguments}}`.
#[derive(Deserialize)]
struct WireToolCall {
    id: String,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: String,
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
        Ok(Self {
            client,
            endpoint,
            api_key: settings.api_key,
            tokens: Cl100kTokens::default(),
            timeout: settings.timeout,
        })
    }
}

/// Attempts of one call: the first and two retries.
const ATTEMPTS: u32 = 3;
/// The wait before the first retry when the provider names none; doubled for the next.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

/// Whether an answer with this status is worth asking again: too many requests, or the
/// provider's own failure.
fn retryable(status: reqwest::StatusCode) -> bool {
    status == reqwest::StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// The wait an answer asks for: `retry-after-ms` (OpenAI's) or `Retry-After` in seconds.
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let header = |name: &str| response.headers().get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    let wait = header("retry-after-ms").map(|ms| ms / 1000.0).or_else(|| header("retry-after"))?;
    (wait.is_finite() && wait >= 0.0).then(|| Duration::from_secs_f64(wait))
}

/// `FIRST_BACKOFF` doubled per earlier retry, times a jitter in [0.5, 1): callers that failed
/// together do not come back together.
fn backoff(retry: u32) -> Duration {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let jitter = 0.5 + f64::from(nanos % 1000) / 2000.0;
    FIRST_BACKOFF.saturating_mul(1 << retry.min(8)).mul_f64(jitter)
}

impl OpenAiModel {
    fn body(request: &CompletionRequest) -> Value {
        let messages: Vec<_> = request.messages.iter().map(wire_message).collect();
        let mut body =
            json!({"model": request.model, "messages": messages, "max_tokens": request.max_tokens});
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if !request.tools.is_empty() {
            let tools: Vec<_> = request
                .tools
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
                .collect();
            body["tools"] = json!(tools);
        } else if let Some(schema) = &request.response_schema {
            // Structured outputs: a provider that supports them holds the reply to the schema;
            // the caller validates it either way.
            body["response_format"] =
                json!({"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}});
        }
        body
    }

    /// Sends `body` until the provider answers with success, retrying 429, 5xx and failed
    /// connections with jittered backoff (or the wait the provider asks for), all within the
    /// call's deadline. Nothing is charged for a failed attempt: a chat is charged once, for
    /// the answer it stores.
    async fn send(&self, body: &Value) -> Result<reqwest::Response, ModelError> {
        let deadline = Instant::now() + self.timeout;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(ModelError::Timeout);
            }
            let mut call = self.client.post(&self.endpoint).timeout(remaining).json(body);
            if let Some(key) = &self.api_key {
                call = call.bearer_auth(key.expose_secret());
            }
            let (failure, asked_wait) = match call.send().await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status();
                    let asked_wait = retry_after(&response);
                    let text = response.text().await.unwrap_or_default();
                    let excerpt: String = text.chars().take(300).collect();
                    let failure = ModelError::Upstream(format!("the provider answered {status}: {excerpt}"));
                    if !retryable(status) {
                        return Err(failure);
                    }
                    (failure, asked_wait)
                }
                Err(e) if e.is_timeout() => return Err(ModelError::Timeout),
                Err(e) if e.is_connect() => (ModelError::Upstream(format!("request failed: {e}")), None),
                Err(e) => return Err(ModelError::Upstream(format!("request failed: {e}"))),
            };
            let wait = asked_wait.unwrap_or_else(|| backoff(attempt - 1));
            if attempt >= ATTEMPTS || Instant::now() + wait >= deadline {
                return Err(failure);
            }
            tracing::debug!(attempt, wait_ms = wait.as_millis(), error = %failure, "retrying the model provider");
            tokio::time::sleep(wait).await;
        }
    }
}

#[async_trait]
impl ChatModel for OpenAiModel {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError> {
        let response = self.send(&Self::body(request)).await?;
        let text = response.text().await.map_err(|e| {
            if e.is_timeout() {
                ModelError::Timeout
            } else {
                ModelError::Upstream(format!("reading the answer: {e}"))
            }
        })?;
        let parsed: Response = serde_json::from_str(&text)
            .map_err(|e| ModelError::Upstream(format!("unreadable answer from the provider: {e}")))?;
        let choice = parsed
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| ModelError::Upstream("the provider answered without a message".into()))?;
        let tool_calls: Vec<ToolCall> = choice
            .message
            .tool_calls
            .into_iter()
            .map(|c| ToolCall { id: c.id, name: c.function.name, arguments: c.function.arguments })
            .collect();
        let finish = match choice.finish_reason.as_deref() {
            Some("length") => FinishReason::Length,
            _ if !tool_calls.is_empty() => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        };
        let content = match choice.message.content {
            Some(content) => content,
            // A message that only calls tools may have no text.
            None if !tool_calls.is_empty() => String::new(),
            None => return Err(ModelError::Upstream("the provider answered without a message".into())),
        };
        Ok(Completion { tool_calls, ..self.counted(request, content, parsed.usage, finish) })
    }

    /// Streams from the provider (`stream: true`, with `stream_options.include_usage`), handing
    /// each piece on as it arrives. A sink that stops listening drops the upstream response,
    /// which ends the provider's generation.
    async fn stream(
        &self,
        request: &CompletionRequest,
        sink: Arc<dyn DeltaSink>,
    ) -> Result<Completion, ModelError> {
        let mut body = Self::body(request);
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
        let response = self.send(&body).await?;
        let mut bytes = response.bytes_stream();
        let mut pending: Vec<u8> = Vec::new();
        let mut content = String::new();
        let mut calls = StreamedCalls::default();
        let (mut usage, mut finish) = (None, FinishReason::Stop);
        'read: while let Some(chunk) = bytes.next().await {
            let chunk = chunk.map_err(|e| {
                if e.is_timeout() {
                    ModelError::Timeout
                } else {
                    ModelError::Upstream(format!("reading the stream: {e}"))
                }
            })?;
            pending.extend_from_slice(&chunk);
            // Server-sent events, line by line: only `data:` lines matter here.
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let Some(data) = line.trim_end().strip_prefix("data:").map(str::trim_start) else { continue };
                if data == "[DONE]" {
                    break 'read;
                }
                let chunk: StreamChunk = serde_json::from_str(data)
                    .map_err(|e| ModelError::Upstream(format!("unreadable chunk from the provider: {e}")))?;
                usage = chunk.usage.or(usage);
                for choice in chunk.choices {
                    if choice.finish_reason.as_deref() == Some("length") {
                        finish = FinishReason::Length;
                    }
                    for delta in choice.delta.tool_calls {
                        calls.add(delta);
                    }
                    let Some(text) = choice.delta.content.filter(|t| !t.is_empty()) else { continue };
                    content.push_str(&text);
                    if !sink.delta(&text) {
                        finish = FinishReason::Cancelled;
                        break 'read;
                    }
                }
            }
        }
        // Dropping the body here ends the upstream request when the listener left.
        drop(bytes);
        let usage_given = usage.is_some() && finish != FinishReason::Cancelled;
        // A stream cut short never sends its usage: the reply is counted here.
        let usage = if finish == FinishReason::Cancelled { None } else { usage };
        let tool_calls = if finish == FinishReason::Cancelled { Vec::new() } else { calls.finish() };
        if !tool_calls.is_empty() && finish == FinishReason::Stop {
            finish = FinishReason::ToolCalls;
        }
        let counted = self.counted(request, content, usage, finish);
        let completion_tokens = if usage_given {
            counted.completion_tokens
        } else {
            // Counted here: the calls are generated tokens too.
            counted.completion_tokens
                + tool_calls.iter().map(|c| self.tokens.count(&c.arguments)).sum::<u64>()
        };
        Ok(Completion { tool_calls, completion_tokens, ..counted })
    }
}

/// A message as OpenAI reads it: an assistant's tool calls, a tool result's call id.
fn wire_message(t: &ChatTurn) -> Value {
    let mut m = json!({"role": t.role.as_str(), "content": t.content});
    if !t.tool_calls.is_empty() {
        let calls: Vec<_> = t
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        m["tool_calls"] = json!(calls);
        if t.content.is_empty() {
            m["content"] = Value::Null;
        }
    }
    if t.role == ChatRole::Tool {
        m["tool_call_id"] = json!(t.tool_call_id);
    }
    m
}

/// Tool calls arriving in pieces: each delta names its call by `index`; the first piece
/// carries its id and name, the following ones more of its arguments.
#[derive(Default)]
struct StreamedCalls {
    calls: Vec<(u32, ToolCall)>,
}

impl StreamedCalls {
    fn add(&mut self, delta: ToolCallDelta) {
        let position = self.calls.iter().position(|(i, _)| *i == delta.index);
        let call = match position {
            Some(p) => &mut self.calls[p].1,
            None => {
                self.calls.push((
                    delta.index,
                    ToolCall { id: String::new(), name: String::new(), arguments: String::new() },
                ));
                &mut self.calls.last_mut().expect("just pushed").1
            }
        };
        if let Some(id) = delta.id {
            call.id = id;
        }
        if let Some(f) = delta.function {
            if let Some(name) = f.name {
                call.name.push_str(&name);
            }
            if let Some(arguments) = f.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    fn finish(mut self) -> Vec<ToolCall> {
        self.calls.sort_by_key(|(i, _)| *i);
        self.calls.into_iter().map(|(_, c)| c).filter(|c| !c.name.is_empty()).collect()
    }
}

impl OpenAiModel {
    /// The completion with the provider's usage, or an honest local count when it sent none.
    fn counted(
        &self,
        request: &CompletionRequest,
        content: String,
        usage: Option<Usage>,
        finish: FinishReason,
    ) -> Completion {
        let (prompt_tokens, completion_tokens) = match usage {
            Some(u) => (u.prompt_tokens, u.completion_tokens),
            None => {
                (count_request(&self.tokens, &request.messages, &request.tools), self.tokens.count(&content))
            }
        };
        Completion { content, prompt_tokens, completion_tokens, finish, tool_calls: Vec::new() }
    }
}

#[derive(Deserialize)]
struct StreamChunk {
    #[serde(default)]
    choices: Vec<StreamChoice>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct StreamChoice {
    #[serde(default)]
    delta: StreamDelta,
    finish_reason: Option<String>,
}

#[derive(Default, Deserialize)]
struct StreamDelta {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallDelta>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: u32,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

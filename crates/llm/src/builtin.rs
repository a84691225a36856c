//! The offline responder and the BPE token counter.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use agentry_domain::agents::{
    ChatModel, ChatRole, ChatTurn, Completion, CompletionRequest, DeltaSink, FinishReason, ModelError,
    SOURCES_HEADER, ToolCall, count_request,
};
use agentry_domain::tokens::TokenCounter;
use async_trait::async_trait;
use tiktoken_rs::CoreBPE;

/// Counts tokens with OpenAI's `cl100k_base` encoding (the BPE ranks ship inside the crate,
/// so this works offline).
#[derive(Clone)]
pub struct Cl100kTokens {
    bpe: &'static CoreBPE,
}

impl std::fmt::Debug for Cl100kTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cl100kTokens")
    }
}

impl Default for Cl100kTokens {
    fn default() -> Self {
        Self { bpe: tiktoken_rs::cl100k_base_singleton() }
    }
}

/// Texts up to this many bytes have their counts remembered (see [`RECENT_COUNTS`]).
const REMEMBERED_TEXT_BYTES: usize = 2048;
/// Counts remembered per thread; the memo starts afresh when it is full.
const REMEMBERED_COUNTS: usize = 512;

thread_local! {
    /// Recent counts of short texts, per thread. Encoding is the costly part of a chat on the
    /// service's side (a regex pre-split, then BPE merges), and the same short texts come back:
    /// an agent's system prompt on each of its chats, and each message twice per chat (the
    /// prompt's budget, then the model's usage). Per thread, so no lock: a request runs on one
    /// thread from start to end.
    static RECENT_COUNTS: RefCell<HashMap<Box<str>, u64>> = RefCell::new(HashMap::new());
}

impl Cl100kTokens {
    /// The first `max` tokens of `text`, decoded back to text, and how many tokens that is.
    fn truncate(&self, text: &str, max: usize) -> (String, u64) {
        let tokens = self.bpe.encode_ordinary(text);
        if tokens.len() <= max {
            return (text.to_owned(), tokens.len() as u64);
        }
        let cut = self.bpe.decode(&tokens[..max]).unwrap_or_default();
        // Decoding a prefix can end inside a character that then re-encodes differently:
        // count what is returned.
        let count = self.count(&cut);
        (cut, count)
    }
}

impl TokenCounter for Cl100kTokens {
    fn count(&self, text: &str) -> u64 {
        if text.len() > REMEMBERED_TEXT_BYTES {
            return self.bpe.encode_ordinary(text).len() as u64;
        }
        if let Some(n) = RECENT_COUNTS.with(|m| m.borrow().get(text).copied()) {
            return n;
        }
        let n = self.bpe.encode_ordinary(text).len() as u64;
        RECENT_COUNTS.with(|m| {
            let mut m = m.borrow_mut();
            if m.len() >= REMEMBERED_COUNTS {
                m.clear();
            }
            m.insert(text.into(), n);
        });
        n
    }
}

/// A deterministic responder for running without any model provider: same input, same answer,
/// and usage counted with a real tokenizer.
#[derive(Debug, Clone, Default)]
pub struct BuiltinModel {
    tokens: Arc<Cl100kTokens>,
}

impl BuiltinModel {
    /// A responder counting with `cl100k_base`.
    pub fn new() -> Self {
        Self::default()
    }
}

fn quote(text: &str, max_chars: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max_chars {
        flat
    } else {
        format!("{}…", flat.chars().take(max_chars).collect::<String>())
    }
}

/// The first source of a turn that gives sources (see [`SOURCES_HEADER`]): its number, its
/// place and its text.
fn first_source(turn: &ChatTurn) -> Option<(u32, &str, &str)> {
    let listed = turn.content.strip_prefix(SOURCES_HEADER)?.trim_start().strip_prefix('[')?;
    let (index, rest) = listed.split_once("] ")?;
    let (place, rest) = rest.split_once(":\n")?;
    let text = rest.split("\n\n[").next().unwrap_or(rest);
    Some((index.parse().ok()?, place, text))
}

/// The first JSON object written in `text`, if any.
fn first_json_object(text: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    text.match_indices('{').find_map(|(start, _)| {
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<serde_json::Value>();
        match stream.next() {
            Some(Ok(serde_json::Value::Object(map))) => Some(map),
            _ => None,
        }
    })
}

impl BuiltinModel {
    /// The responder's one rule for tools, deterministic so that tool round trips can be tried
    /// without a language model: a user message that names an offered tool calls it, with the
    /// first JSON object of the message as its arguments (`{}` without one); a tool's result
    /// is answered by quoting it.
    fn tool_step(&self, request: &CompletionRequest, last: &ChatTurn) -> Option<Completion> {
        if request.tools.is_empty() {
            return None;
        }
        let prompt_tokens = count_request(self.tokens.as_ref(), &request.messages, &request.tools);
        if last.role == ChatRole::Tool {
            let mut reply = format!(
                "The tool {} answered: {}",
                last.name.as_deref().unwrap_or("(unnamed)"),
                quote(&last.content, 300)
            );
            // Numbered results (a knowledge search's) are cited: the first one.
            let first = serde_json::from_str::<serde_json::Value>(&last.content)
                .ok()
                .and_then(|v| v["results"][0]["index"].as_u64());
            if let Some(index) = first {
                reply.push_str(&format!(" [{index}]"));
            }
            let completion_tokens = self.tokens.count(&reply);
            return Some(Completion {
                content: reply,
                prompt_tokens,
                completion_tokens,
                finish: FinishReason::Stop,
                tool_calls: Vec::new(),
            });
        }
        if last.role != ChatRole::User {
            return None;
        }
        let lowered = last.content.to_lowercase();
        let tool = request.tools.iter().find(|t| {
            lowered
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
                .any(|word| word == t.name.to_lowercase())
        })?;
        let arguments =
            serde_json::Value::Object(first_json_object(&last.content).unwrap_or_default()).to_string();
        let earlier_calls = request.messages.iter().map(|t| t.tool_calls.len()).sum::<usize>();
        let call = ToolCall { id: format!("call_{}", earlier_calls + 1), name: tool.name.clone(), arguments };
        let completion_tokens = self.tokens.count(&call.name) + self.tokens.count(&call.arguments);
        Some(Completion {
            content: String::new(),
            prompt_tokens,
            completion_tokens,
            finish: FinishReason::ToolCalls,
            tool_calls: vec![call],
        })
    }
}

#[async_trait]
impl ChatModel for BuiltinModel {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError> {
        let Some((last, earlier)) = request.messages.split_last() else {
            return Err(ModelError::Upstream("the prompt is empty".into()));
        };
        if let Some(step) = self.tool_step(request, last) {
            return Ok(step);
        }
        let earlier_user: Vec<&str> =
            earlier.iter().filter(|t| t.role == ChatRole::User).map(|t| t.content.as_str()).collect();
        let memories = earlier
            .iter()
            .filter(|t| t.role == ChatRole::System && !t.content.starts_with(SOURCES_HEADER))
            .skip(1)
            .count();
        let mut reply = format!(
            "I am Agentry's built-in responder: no language model is connected, so I can only \
             reflect what I receive. You said: \"{}\" ({} tokens).",
            quote(&last.content, 200),
            self.tokens.count(&last.content)
        );
        match earlier_user.as_slice() {
            [] => reply.push_str(" This is the first message of our conversation."),
            [first, ..] => reply.push_str(&format!(
                " I remember {} earlier message{} of yours in this conversation; the first was: \"{}\".",
                earlier_user.len(),
                if earlier_user.len() == 1 { "" } else { "s" },
                quote(first, 120)
            )),
        }
        if memories > 0 {
            reply.push_str(" I was also given memories relevant to your message.");
        }
        if let Some((index, place, text)) = earlier.iter().find_map(first_source) {
            reply.push_str(&format!(
                " The best source I was given, {place}, says: \"{}\" [{index}].",
                quote(text, 160)
            ));
        }
        let (truncated_reply, completion_tokens) =
            self.tokens.truncate(&reply, usize::try_from(request.max_tokens).unwrap_or(usize::MAX));
        let truncated = truncated_reply.len() < reply.len();
        let reply = truncated_reply;
        Ok(Completion {
            prompt_tokens: count_request(self.tokens.as_ref(), &request.messages, &request.tools),
            completion_tokens,
            finish: if truncated { FinishReason::Length } else { FinishReason::Stop },
            content: reply,
            tool_calls: Vec::new(),
        })
    }

    /// The same answer as [`BuiltinModel::complete`], handed over word by word (each piece a
    /// word with the white space before it), as a model generates it.
    async fn stream(
        &self,
        request: &CompletionRequest,
        sink: Arc<dyn DeltaSink>,
    ) -> Result<Completion, ModelError> {
        let whole = self.complete(request).await?;
        let mut sent = 0;
        for (end, _) in whole.content.match_indices(' ').chain([(whole.content.len(), "")]) {
            if end <= sent {
                continue;
            }
            if !sink.delta(&whole.content[sent..end]) {
                // The listener left: what it received is the reply, counted as such.
                let content = whole.content[..end].to_owned();
                let completion_tokens = self.tokens.count(&content);
                return Ok(Completion {
                    content,
                    completion_tokens,
                    finish: FinishReason::Cancelled,
                    ..whole
                });
            }
            sent = end;
        }
        Ok(whole)
    }
}

#[cfg(test)]
mod tests {
    use agentry_domain::agents::ChatTurn;

    use super::*;

    fn turn(role: ChatRole, content: &str) -> ChatTurn {
        ChatTurn::new(role, content)
    }

    fn request(messages: Vec<ChatTurn>, max_tokens: u32) -> CompletionRequest {
        CompletionRequest {
            model: "builtin".into(),
            temperature: None,
            max_tokens,
            messages,
            tools: Vec::new(),
            response_schema: None,
        }
    }

    #[test]
    fn cl100k_counts_like_openai() {
        let t = Cl100kTokens::default();
        // Reference counts from OpenAI's tiktoken for cl100k_base.
        assert_eq!(t.count("hello world"), 2);
        assert_eq!(t.count("tiktoken is great!"), 6);
        assert_eq!(t.count(""), 0);
    }

    #[test]
    fn remembered_counts_are_the_counts() {
        let t = Cl100kTokens::default();
        let fresh = |text: &str| t.bpe.encode_ordinary(text).len() as u64;
        let long = "tokens ".repeat(REMEMBERED_TEXT_BYTES);
        // More texts than the memo holds, each counted three times: from the encoder, then
        // from the memo (or afresh after the memo started over).
        let texts: Vec<String> = (0..REMEMBERED_COUNTS + 100)
            .map(|i| format!("message {i}: {}", "ünïcödé ".repeat(i % 7)))
            .collect();
        for text in texts.iter().map(String::as_str).chain([long.as_str(), "", "hello world"]) {
            let expected = fresh(text);
            assert_eq!(t.count(text), expected, "{text:?}");
            assert_eq!(t.count(text), expected, "{text:?}, again");
        }
        assert_eq!(t.count("hello world"), 2);
    }

    #[test]
    fn a_truncated_reply_is_counted_as_returned() {
        let t = Cl100kTokens::default();
        let text = "The quick brown fox jumps over the lazy dog, and then it rests. ".repeat(4);
        let (whole, n) = t.truncate(&text, 10_000);
        assert_eq!((whole.as_str(), n), (text.as_str(), t.count(&text)));
        let (cut, n) = t.truncate(&text, 7);
        assert!(text.starts_with(&cut), "{cut:?}");
        assert_eq!(n, 7);
        assert_eq!(n, t.count(&cut));
    }

    #[tokio::test]
    async fn the_reply_is_deterministic_honest_and_counted() {
        let m = BuiltinModel::new();
        let req = request(
            vec![turn(ChatRole::System, "You are Helper."), turn(ChatRole::User, "Hello there")],
            500,
        );
        let a = m.complete(&req).await.unwrap();
        let b = m.complete(&req).await.unwrap();
        assert_eq!(a, b);
        assert!(a.content.contains("built-in responder"));
        assert!(a.content.contains("\"Hello there\""));
        assert!(a.content.contains("first message"));
        let counter = Cl100kTokens::default();
        assert_eq!(a.completion_tokens, counter.count(&a.content));
        assert_eq!(a.prompt_tokens, agentry_domain::agents::count_prompt(&counter, &req.messages));
    }

    #[tokio::test]
    async fn it_tells_what_it_remembers_and_history_grows_the_prompt() {
        let m = BuiltinModel::new();
        let first = request(vec![turn(ChatRole::System, "s"), turn(ChatRole::User, "My name is Ada")], 500);
        let second = request(
            vec![
                turn(ChatRole::System, "s"),
                turn(ChatRole::User, "My name is Ada"),
                turn(ChatRole::Assistant, "Noted."),
                turn(ChatRole::User, "What is my name?"),
            ],
            500,
        );
        let a = m.complete(&first).await.unwrap();
        let b = m.complete(&second).await.unwrap();
        assert!(b.content.contains("1 earlier message"));
        assert!(b.content.contains("My name is Ada"));
        assert!(b.prompt_tokens > a.prompt_tokens);
    }

    #[tokio::test]
    async fn given_sources_it_quotes_and_cites_the_first() {
        let m = BuiltinModel::new();
        let sources = format!(
            "{SOURCES_HEADER}\n\n[1] handbook.pdf, page 2:\nRefunds are paid within five days.\n\n[2] notes.md:\nOther."
        );
        let req = request(
            vec![
                turn(ChatRole::System, "s"),
                turn(ChatRole::System, &sources),
                turn(ChatRole::User, "Refunds?"),
            ],
            500,
        );
        let a = m.complete(&req).await.unwrap();
        assert!(
            a.content.ends_with(
                " The best source I was given, handbook.pdf, page 2, says: \"Refunds are paid within five days.\" [1]."
            ),
            "{}",
            a.content
        );
        assert!(!a.content.contains("memories"), "sources are not memories");
    }

    #[tokio::test]
    async fn max_tokens_caps_the_reply() {
        let m = BuiltinModel::new();
        let c = m.complete(&request(vec![turn(ChatRole::User, "Hello there")], 5)).await.unwrap();
        assert_eq!(c.completion_tokens, 5);
    }

    #[tokio::test]
    async fn a_message_naming_an_offered_tool_calls_it_and_its_result_is_quoted() {
        let m = BuiltinModel::new();
        let tool = agentry_domain::agents::ToolSpec {
            name: "get_weather".into(),
            description: "The weather".into(),
            parameters: serde_json::json!({"type": "object"}),
        };
        let mut req = request(
            vec![turn(ChatRole::User, r#"Please use get_weather with {"city": "Paris"} for me"#)],
            500,
        );
        assert!(m.complete(&req).await.unwrap().tool_calls.is_empty(), "no tool offered: no call");
        req.tools = vec![tool];
        let called = m.complete(&req).await.unwrap();
        assert_eq!(called.finish, FinishReason::ToolCalls);
        assert_eq!(
            called.tool_calls,
            [ToolCall {
                id: "call_1".into(),
                name: "get_weather".into(),
                arguments: r#"{"city":"Paris"}"#.into()
            }]
        );
        let mut asked = ChatTurn::new(ChatRole::Assistant, "");
        asked.tool_calls = called.tool_calls.clone();
        let mut result = ChatTurn::new(ChatRole::Tool, r#"{"temperature": 21}"#);
        result.tool_call_id = Some("call_1".into());
        result.name = Some("get_weather".into());
        req.messages.extend([asked, result]);
        let answered = m.complete(&req).await.unwrap();
        assert_eq!(answered.content, r#"The tool get_weather answered: {"temperature": 21}"#);
        assert!(answered.tool_calls.is_empty());
        let plain = request(vec![turn(ChatRole::User, "what is the weather?")], 500);
        assert!(
            m.complete(&CompletionRequest { tools: req.tools.clone(), ..plain })
                .await
                .unwrap()
                .tool_calls
                .is_empty()
        );
    }
}

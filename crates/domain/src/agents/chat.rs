//! Conversations: messages, what a model is asked and answers, and token counting of prompts.
//! The model port itself is in `ports`; the prompt a chat sends is assembled in `prompt`.

use chrono::{DateTime, Utc};

use crate::ids::{AgentId, MessageId, SessionId, TenantId};
use crate::tokens::TokenCounter;

crate::string_enum! {
    /// Who wrote a turn of a conversation.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ChatRole {
        /// Instructions to the model.
        System => "system",
        /// The user.
        User => "user",
        /// The agent.
        Assistant => "assistant",
        /// The result of a tool the agent called.
        Tool => "tool",
    }
}

/// A tool call a model asked for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    /// The model's id of the call; its result names it.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments as the model wrote them: JSON text (not always valid JSON).
    pub arguments: String,
}

/// A tool as a model is told about it (OpenAI's `function` tool).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolSpec {
    /// Its name, `[A-Za-z0-9_-]{1,64}`.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its arguments: a JSON Schema object.
    pub parameters: serde_json::Value,
}

/// What a tool call gave: its output, or why it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// Its output, or the reason it failed (both are given to the model).
    pub output: Result<serde_json::Value, String>,
}

impl ToolResult {
    /// The result as the model reads it: the output, or `{"error": …}`.
    pub fn to_json(&self) -> serde_json::Value {
        match &self.output {
            Ok(value) => value.clone(),
            Err(message) => serde_json::json!({ "error": message }),
        }
    }
}

/// One turn sent to a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatTurn {
    /// Who speaks.
    pub role: ChatRole,
    /// What they say.
    pub content: String,
    /// For an assistant turn: the tools it called.
    pub tool_calls: Vec<ToolCall>,
    /// For a tool turn: the call it answers.
    pub tool_call_id: Option<String>,
    /// For a tool turn: the tool.
    pub name: Option<String>,
}

impl ChatTurn {
    /// A plain turn: `role` says `content`.
    pub fn new(role: ChatRole, content: impl Into<String>) -> Self {
        Self { role, content: content.into(), tool_calls: Vec::new(), tool_call_id: None, name: None }
    }

    /// The turn of a stored message.
    pub fn of_message(m: &Message) -> Self {
        Self {
            role: m.role,
            content: m.content.clone(),
            tool_calls: m.tool_calls.clone(),
            tool_call_id: m.tool_call_id.clone(),
            name: m.tool_name.clone(),
        }
    }
}

/// A stored message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its id.
    pub id: MessageId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The agent of the conversation.
    pub agent_id: AgentId,
    /// The conversation.
    pub session_id: SessionId,
    /// `user` or `assistant`.
    pub role: ChatRole,
    /// The text.
    pub content: String,
    /// For an assistant message: the prompt tokens of the exchange.
    pub prompt_tokens: u64,
    /// For an assistant message: the completion tokens.
    pub completion_tokens: u64,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// For an assistant message: the reply stopped before its end because its streaming client
    /// left; it holds what was generated until then (and was charged for that).
    pub incomplete: bool,
    /// For an assistant message: the tools it called (their results follow as `tool` messages).
    pub tool_calls: Vec<ToolCall>,
    /// For a tool message: the call it answers.
    pub tool_call_id: Option<String>,
    /// For a tool message: the tool.
    pub tool_name: Option<String>,
    /// For a reply: the sources its text refers to (`[1]`), from the agent's knowledge bases.
    pub citations: Vec<super::citation::Citation>,
    /// For a reply: why its model stopped (`length`: cut off at the token limit). `None` for
    /// other messages and for replies stored before it was kept.
    pub finish_reason: Option<FinishReason>,
}

impl Message {
    /// A plain message of `role` with `content`: no tokens, tools or citations yet.
    pub fn plain(
        id: MessageId,
        (tenant_id, agent_id, session_id): (TenantId, AgentId, SessionId),
        role: ChatRole,
        content: String,
        created_at: DateTime<Utc>,
    ) -> Self {
        Self {
            id,
            tenant_id,
            agent_id,
            session_id,
            role,
            content,
            prompt_tokens: 0,
            completion_tokens: 0,
            created_at,
            incomplete: false,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            citations: Vec::new(),
            finish_reason: None,
        }
    }
}

/// What a model is asked.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CompletionRequest {
    /// The model to use.
    pub model: String,
    /// Sampling temperature, if the agent sets one.
    pub temperature: Option<f64>,
    /// Longest reply.
    pub max_tokens: u32,
    /// The prompt: system turns, history, the new user turn last (then, in later rounds of a
    /// chat that calls tools, the calls and their results).
    pub messages: Vec<ChatTurn>,
    /// Tools the model may call; none: it answers in text.
    pub tools: Vec<ToolSpec>,
    /// A JSON Schema the reply must be an instance of (for callers that parse it, such as
    /// memory extraction); `None`: free text. Ignored when `tools` are offered.
    pub response_schema: Option<serde_json::Value>,
}

/// What a model answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The reply.
    pub content: String,
    /// Tokens of the prompt, as the model counted them.
    pub prompt_tokens: u64,
    /// Tokens of the reply.
    pub completion_tokens: u64,
    /// Why the model stopped.
    pub finish: FinishReason,
    /// The tools it asks to call (with [`FinishReason::ToolCalls`]).
    pub tool_calls: Vec<ToolCall>,
}

impl Completion {
    /// No answer at all (the chat ended before a model call answered), for `finish`.
    pub fn nothing(finish: FinishReason) -> Self {
        Self {
            content: String::new(),
            prompt_tokens: 0,
            completion_tokens: 0,
            finish,
            tool_calls: Vec::new(),
        }
    }
}

crate::string_enum! {
    /// Why a model stopped generating.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum FinishReason {
        /// It ended its answer.
        Stop => "stop",
        /// It reached the most tokens it was allowed (or its deadline).
        Length => "length",
        /// Nobody listened any more (a streaming client left): the reply is incomplete.
        Cancelled => "cancelled",
        /// It asks for tools to be called before it answers.
        ToolCalls => "tool_calls",
    }
}

/// Where a streamed completion's text goes while it is generated.
pub trait DeltaSink: Send + Sync {
    /// Takes the next piece of the reply. `false` when nobody listens any more (the client
    /// left): the model then stops generating and answers what it has.
    fn delta(&self, text: &str) -> bool;

    /// A tool the agent calls, before it runs. `false` when nobody listens any more: the
    /// tool is then not run, and the chat ends.
    fn tool_call(&self, _call: &ToolCall) -> bool {
        true
    }

    /// What a tool call gave.
    fn tool_result(&self, _result: &ToolResult) {}
}

/// A sink that listens to nothing and never stops a generation: an unstreamed answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDeltas;

impl DeltaSink for NoDeltas {
    fn delta(&self, _text: &str) -> bool {
        true
    }
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The provider answered with an error or something unreadable.
    #[error("the model provider failed: {0}")]
    Upstream(String),
    /// The provider did not answer in time.
    #[error("the model provider did not answer in time")]
    Timeout,
    /// An in-process model has as many generations running and waiting as it takes.
    #[error("the model is busy; try again in {retry_after_secs} s")]
    Busy {
        /// When to try again.
        retry_after_secs: u64,
    },
}

/// Tokens of a whole prompt: each turn's content plus the fixed framing chat models add per
/// turn (OpenAI's published accounting: 3 per turn, 1 for the role, 3 to prime the reply).
/// A turn's tool calls count as their names and arguments.
pub fn count_prompt(counter: &dyn TokenCounter, turns: &[ChatTurn]) -> u64 {
    turns
        .iter()
        .map(|t| {
            let calls: u64 =
                t.tool_calls.iter().map(|c| counter.count(&c.name) + counter.count(&c.arguments) + 3).sum();
            counter.count(&t.content) + 4 + calls
        })
        .sum::<u64>()
        + 3
}

/// Tokens of a request: its prompt and the tools it offers (each tool's definition is sent to
/// the model as part of the prompt).
pub fn count_request(counter: &dyn TokenCounter, turns: &[ChatTurn], tools: &[ToolSpec]) -> u64 {
    let tools: u64 = tools
        .iter()
        .map(|t| {
            counter.count(&t.name) + counter.count(&t.description) + counter.count(&t.parameters.to_string())
        })
        .sum();
    count_prompt(counter, turns) + tools
}

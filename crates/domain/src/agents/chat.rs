//! Conversations: messages, what a model is asked and answers, token counting of prompts and
//! prompt assembly. The model port itself is in `ports`.

use chrono::{DateTime, Utc};

use super::model::Agent;
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
    }
}

/// One turn sent to a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatTurn {
    /// Who speaks.
    pub role: ChatRole,
    /// What they say.
    pub content: String,
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
}

/// What a model is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionRequest {
    /// The model to use.
    pub model: String,
    /// Sampling temperature, if the agent sets one.
    pub temperature: Option<f64>,
    /// Longest reply.
    pub max_tokens: u32,
    /// The prompt: system turns, history, the new user turn last.
    pub messages: Vec<ChatTurn>,
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
    }
}

/// Where a streamed completion's text goes while it is generated.
pub trait DeltaSink: Send + Sync {
    /// Takes the next piece of the reply. `false` when nobody listens any more (the client
    /// left): the model then stops generating and answers what it has.
    fn delta(&self, text: &str) -> bool;
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
pub fn count_prompt(counter: &dyn TokenCounter, turns: &[ChatTurn]) -> u64 {
    turns.iter().map(|t| counter.count(&t.content) + 4).sum::<u64>() + 3
}

/// The agent's instructions: its system prompt, or a sentence naming it. The sentence is the one
/// small instruction-tuned models were trained with ("a helpful AI assistant named …"): SmolLM2
/// answers sensibly under it, and drifts into another language under variants as small as
/// "You are Helper, a helpful assistant agent."
pub fn system_turn(agent: &Agent) -> ChatTurn {
    let system = agent
        .config
        .system_prompt
        .clone()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| format!("You are a helpful AI assistant named {}.", agent.name.as_str()));
    ChatTurn { role: ChatRole::System, content: system }
}

/// Assembles the prompt: the system prompt, recalled memories, as much recent history as fits
/// in `history_budget` tokens (newest kept first), and the new message.
pub fn build_prompt(
    agent: &Agent,
    memories: &[String],
    history: &[Message],
    message: &str,
    counter: &dyn TokenCounter,
    history_budget: u64,
) -> Vec<ChatTurn> {
    let mut turns = vec![system_turn(agent)];
    if !memories.is_empty() {
        let listed: Vec<String> = memories.iter().map(|m| format!("- {m}")).collect();
        turns.push(ChatTurn {
            role: ChatRole::System,
            content: format!("What you remember that may help:\n{}", listed.join("\n")),
        });
    }
    let mut kept = Vec::new();
    let mut used = 0;
    for m in history.iter().rev() {
        let cost = counter.count(&m.content) + 4;
        if used + cost > history_budget {
            break;
        }
        used += cost;
        kept.push(ChatTurn { role: m.role, content: m.content.clone() });
    }
    kept.reverse();
    turns.extend(kept);
    turns.push(ChatTurn { role: ChatRole::User, content: message.to_owned() });
    turns
}

//! What chat takes and gives, and what it is built on: its settings and ports, a message's
//! rules, the reply and the errors. The service's requests are in `chat_service`, the
//! answering of a prepared chat in `answer`.

use std::sync::Arc;

use super::blocks::MemoryBlockRepository;
use super::chat::{ChatTurn, FinishReason, Message, ModelError, ToolSpec};
use super::knowledge::KnowledgeRetrieval;
use super::ports::{AgentRepository, ChatModel, ConversationRepository, MemoryRecall};
use super::registry::ToolRegistry;
use crate::billing::CreditRepository;
use crate::ids::{IdGenerator, SessionId};
use crate::tenancy::Forbidden;
use crate::time::Clock;
use crate::tokens::TokenCounter;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors, check_long_text};

/// Settings of chat.
#[derive(Debug, Clone)]
pub struct ChatSettings {
    /// The model when an agent names none.
    pub default_model: String,
    /// Longest reply when an agent sets no `max_tokens`.
    pub default_max_tokens: u32,
    /// Most history messages loaded per chat.
    pub history_messages: u32,
    /// Most tokens of history put into a prompt.
    pub history_token_budget: u64,
    /// Balance below which `billing.credits.low` is emitted.
    pub credits_low_threshold: i64,
}

impl Default for ChatSettings {
    fn default() -> Self {
        Self {
            default_model: "builtin".into(),
            default_max_tokens: 1024,
            history_messages: 50,
            history_token_budget: 4000,
            credits_low_threshold: 100,
        }
    }
}

/// Most characters of one chat message.
pub const MAX_MESSAGE_CHARS: usize = 32_000;

/// Validates a chat message: 1–32,000 characters, not only white space; tabs and line breaks
/// allowed, other control characters not.
///
/// # Errors
/// A [`FieldError`] naming `message`.
pub fn chat_message(raw: String) -> Result<String, FieldError> {
    check_long_text(&raw, 1, MAX_MESSAGE_CHARS, "message")?;
    if raw.trim().is_empty() {
        return Err(FieldError::new("message", FieldErrorKind::TooShort, "message must not be empty"));
    }
    Ok(raw)
}

/// A validated chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatInput {
    /// The message (see [`chat_message`]).
    pub message: String,
    /// The conversation to continue or start; absent starts one with a new `ses_…` id.
    pub session_id: Option<SessionId>,
}

/// A conversation the client sends whole (OpenAI's chat completions).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConversation {
    /// The client's turns, oldest first; at least one of them the user's.
    pub turns: Vec<ChatTurn>,
    /// A session to store the exchange in; `None` for a stateless call.
    pub session_id: Option<SessionId>,
    /// The client's cap on the reply's tokens (never above the agent's own).
    pub max_tokens: Option<u32>,
    /// The client's temperature, in place of the agent's.
    pub temperature: Option<f64>,
    /// Tools the client runs itself: a call of one ends the answer with the call
    /// ([`FinishReason::ToolCalls`]) for the client to answer in its next request.
    pub tools: Vec<ToolSpec>,
}

/// An agent's answer.
#[derive(Debug, Clone)]
pub struct ChatReply {
    /// The stored reply.
    pub message: Message,
    /// The conversation.
    pub session_id: SessionId,
    /// Credits charged.
    pub charged: i64,
    /// Balance left.
    pub remaining: i64,
    /// Why the model stopped.
    pub finish: FinishReason,
}

/// Why a chat failed.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The caller lacks `agents:write`.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// Invalid input.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No such agent in the caller's tenant (also: deleted while the chat ran).
    #[error("no such agent")]
    AgentNotFound,
    /// No such conversation with this agent.
    #[error("no such session for this agent")]
    SessionNotFound,
    /// The agent is paused.
    #[error("the agent is paused")]
    AgentPaused,
    /// The balance does not cover the prompt and one token of reply.
    #[error("not enough credits: this message needs at least {needed}")]
    InsufficientCredits {
        /// The credits the smallest possible exchange costs.
        needed: i64,
    },
    /// The model failed; nothing was charged or stored.
    #[error(transparent)]
    Upstream(#[from] ModelError),
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// The ports chat uses.
#[derive(Clone)]
pub struct ChatServiceDeps {
    /// Agents.
    pub agents: Arc<dyn AgentRepository>,
    /// Conversations.
    pub conversations: Arc<dyn ConversationRepository>,
    /// Credits.
    pub credits: Arc<dyn CreditRepository>,
    /// The model.
    pub model: Arc<dyn ChatModel>,
    /// Token counting.
    pub tokens: Arc<dyn TokenCounter>,
    /// Memory recall.
    pub memory: Arc<dyn MemoryRecall>,
    /// The agents' core memory blocks, in every prompt.
    pub blocks: Arc<dyn MemoryBlockRepository>,
    /// Passages of the agents' knowledge bases.
    pub knowledge: Arc<dyn KnowledgeRetrieval>,
    /// The agents' tools: every kind's provider.
    pub tools: ToolRegistry,
    /// Identifiers.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ChatServiceDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChatServiceDeps { .. }")
    }
}

/// Sends messages to agents and keeps the conversations.
#[derive(Clone, Debug)]
pub struct ChatService {
    pub(super) deps: ChatServiceDeps,
    pub(super) settings: ChatSettings,
}

/// Tokens a completion may use so that prompt and reply together cost at most `credits`.
pub fn affordable_completion(credits: i64, prompt_tokens: u64) -> u64 {
    u64::try_from(credits).unwrap_or(0).saturating_mul(1000).saturating_sub(prompt_tokens)
}

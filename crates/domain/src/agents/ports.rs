//! What the agent services need from the outside world: storage, the chat model, and memory.

use std::sync::Arc;

use async_trait::async_trait;

use super::chat::{Completion, CompletionRequest, DeltaSink, Message, ModelError};
use super::model::Agent;
use crate::billing::Settlement;
use crate::events::Event;
use crate::ids::{AgentId, MessageId, SessionId, TenantId};
use crate::memory::AgentDirectory;
use crate::pagination::Page;

/// A chat model.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// Answers `request`.
    ///
    /// # Errors
    /// [`ModelError::Upstream`] for a provider error, [`ModelError::Timeout`] when it is slow.
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError>;

    /// Answers `request`, handing the reply to `sink` piece by piece as it is generated; stops
    /// early, answering what it has with [`FinishReason::Cancelled`](super::chat::FinishReason),
    /// when the sink stops listening. The returned content is exactly the pieces joined.
    ///
    /// A model that cannot stream answers whole and hands the reply over as one piece.
    ///
    /// # Errors
    /// As [`ChatModel::complete`].
    async fn stream(
        &self,
        request: &CompletionRequest,
        sink: Arc<dyn DeltaSink>,
    ) -> Result<Completion, ModelError> {
        let completion = self.complete(request).await?;
        if !completion.content.is_empty() {
            sink.delta(&completion.content);
        }
        Ok(completion)
    }
}

/// Retrieves what an agent remembers that bears on a message, and keeps the episodic memory
/// of an exchange. The seam through which the memory module takes part in chat.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait MemoryRecall: Send + Sync {
    /// Texts to put before the conversation, most relevant first.
    async fn recall(&self, agent: &Agent, message: &str) -> anyhow::Result<Vec<String>>;

    /// Stores the episodic memory of a stored exchange (its reply `reply_id`), unless the agent
    /// keeps none or it is stored already: `true` when it stored one. Idempotent: the memory's
    /// id is made from the reply's.
    async fn record_episode(&self, agent: &Agent, exchange: &StoredExchange) -> anyhow::Result<bool>;
}

/// A stored exchange as the consumers of its events read it back: the user's message and the
/// agent's reply.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredExchange {
    /// The user's message.
    pub message: Message,
    /// The agent's reply.
    pub reply: Message,
}

/// Agents, always within a tenant: an id of another tenant's agent finds nothing.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait AgentRepository: Send + Sync {
    /// Stores a new agent and its `agent.created` event, atomically.
    async fn create(&self, agent: &Agent, event: &Event) -> anyhow::Result<()>;

    /// The tenant's agent with this id.
    async fn get(&self, tenant: &TenantId, id: &AgentId) -> anyhow::Result<Option<Agent>>;

    /// A page of the tenant's agents, oldest first, and how many there are.
    async fn list(&self, tenant: &TenantId, page: Page) -> anyhow::Result<(Vec<Agent>, u64)>;

    /// Replaces the tenant's agent and stores its `agent.updated` event, atomically; `false`
    /// when there is no such agent (nothing is stored then).
    async fn update(&self, agent: &Agent, event: &Event) -> anyhow::Result<bool>;

    /// Deletes the tenant's agent with its conversations and memory; `false` when absent.
    async fn delete(&self, tenant: &TenantId, id: &AgentId) -> anyhow::Result<bool>;
}

/// Memory checks that an entry's agent is the tenant's through its own narrow port; any agent
/// repository answers it.
#[async_trait]
impl<T: AgentRepository> AgentDirectory for T {
    async fn agent_exists(&self, tenant: &TenantId, agent: &AgentId) -> anyhow::Result<bool> {
        Ok(self.get(tenant, agent).await?.is_some())
    }
}

/// A completed chat exchange, stored as one unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The conversation; created with this exchange when it does not exist yet.
    pub session_id: SessionId,
    /// The user's message.
    pub user_message: Message,
    /// Between the two, in order: the agent's messages that called tools, and the tools'
    /// results (none when it called no tool).
    pub steps: Vec<Message>,
    /// The agent's reply.
    pub reply: Message,
    /// The charge for it.
    pub settlement: Settlement,
    /// `agent.message.created` and `agent.message.completed`.
    pub events: Vec<Event>,
    /// Whether the session and both messages are stored. `false` for a stateless call (an
    /// OpenAI-compatible completion naming no session): only the charge and the events are.
    pub keep_conversation: bool,
}

/// What storing an exchange did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangeOutcome {
    /// Stored and charged; the tenant's available balance after it.
    Recorded {
        /// The available balance.
        remaining: i64,
    },
    /// The agent was deleted while the model answered: nothing was stored or charged.
    AgentGone,
}

/// Conversations and their messages. A conversation is identified by its session id within
/// one (tenant, agent): the same id with another agent is another conversation.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait ConversationRepository: Send + Sync {
    /// The last `limit` messages of a conversation, oldest first; none when it does not exist.
    async fn recent(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        session: &SessionId,
        limit: u32,
    ) -> anyhow::Result<Vec<Message>>;

    /// A page of a conversation, oldest first, and how many messages it has; `None` when the
    /// conversation does not exist.
    async fn page(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        session: &SessionId,
        page: Page,
    ) -> anyhow::Result<Option<(Vec<Message>, u64)>>;

    /// In one transaction: creates the conversation if new and stores its messages (unless
    /// the exchange keeps no conversation), settles the credit hold (charge, ledger entry, return of the rest, the low-balance event if the
    /// balance crosses the threshold) and stores the events. MUST answer
    /// [`ExchangeOutcome::AgentGone`], storing nothing, when the agent no longer exists.
    async fn record_exchange(&self, exchange: &Exchange) -> anyhow::Result<ExchangeOutcome>;

    /// The stored exchange whose reply is `reply`: the reply and the last user message before
    /// it in its conversation; `None` when the reply is not stored (a stateless call, or a
    /// conversation deleted since).
    async fn exchange_of(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        reply: &MessageId,
    ) -> anyhow::Result<Option<StoredExchange>>;
}

//! The agent services: agents' lifecycle, and chat.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::chat::{
    ChatRole, ChatTurn, Completion, CompletionRequest, DeltaSink, FinishReason, Message, ModelError,
    ToolCall, ToolResult, ToolSpec, build_prompt, count_request, system_turn,
};
use super::model::{Agent, AgentChanges, AgentStatus, NewAgent};
use super::ports::{
    AgentRepository, ChatModel, ConversationRepository, Exchange, ExchangeOutcome, MemoryRecall,
};
use super::tools::{DEFAULT_TOOL_ROUNDS, ToolProvider, ToolRegistry, Toolbox};
use crate::billing::{
    CreditHold, CreditRepository, HoldRequest, LedgerEntry, LedgerReason, Settlement, chat_cost,
};
use crate::events::{Event, EventPayload, MessageCompletedData, MessageCreatedData, ToolCalledData};
use crate::ids::{AgentId, CreditHoldId, EventId, IdGenerator, LedgerEntryId, MessageId, SessionId};
use crate::pagination::Page;
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::tokens::TokenCounter;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors, check_long_text};

/// Why an agent operation failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The caller lacks the right.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// Invalid input.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No such agent in the caller's tenant.
    #[error("no such agent")]
    NotFound,
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// Creates, reads, changes and deletes agents.
#[derive(Clone)]
pub struct AgentService {
    agents: Arc<dyn AgentRepository>,
    ids: Arc<dyn IdGenerator>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for AgentService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentService { .. }")
    }
}

impl AgentService {
    /// A service over `agents`.
    pub fn new(agents: Arc<dyn AgentRepository>, ids: Arc<dyn IdGenerator>, clock: Arc<dyn Clock>) -> Self {
        Self { agents, ids, clock }
    }

    /// Creates an agent in the caller's tenant and announces it (`agent.created`).
    ///
    /// # Errors
    /// [`AgentError::Forbidden`] without `agents:write`.
    pub async fn create(&self, caller: &Principal, new: NewAgent) -> Result<Agent, AgentError> {
        caller.require(Permission::AgentsWrite)?;
        let now = self.clock.now();
        let agent = Agent {
            id: AgentId::generate(self.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            name: new.name,
            agent_type: new.agent_type,
            status: new.status,
            description: new.description,
            memory_types: new.memory_types,
            config: new.config,
            created_at: now,
            updated_at: now,
        };
        let event =
            Event::new(self.ids.as_ref(), &agent.tenant_id, EventPayload::AgentCreated(agent.to_data()), now);
        self.agents.create(&agent, &event).await?;
        Ok(agent)
    }

    /// One agent of the caller's tenant.
    ///
    /// # Errors
    /// [`AgentError::NotFound`] when absent or another tenant's.
    pub async fn get(&self, caller: &Principal, id: &AgentId) -> Result<Agent, AgentError> {
        caller.require(Permission::AgentsRead)?;
        self.agents.get(&caller.tenant_id, id).await?.ok_or(AgentError::NotFound)
    }

    /// A page of the tenant's agents and their total.
    ///
    /// # Errors
    /// [`AgentError::Forbidden`] without `agents:read`.
    pub async fn list(&self, caller: &Principal, page: Page) -> Result<(Vec<Agent>, u64), AgentError> {
        caller.require(Permission::AgentsRead)?;
        Ok(self.agents.list(&caller.tenant_id, page).await?)
    }

    /// Every agent of the tenant, oldest first, read a page at a time (the OpenAI-compatible
    /// `models` list and `model` names: a tenant has tens of agents, not thousands).
    ///
    /// # Errors
    /// [`AgentError::Forbidden`] without `agents:read`.
    pub async fn all(&self, caller: &Principal) -> Result<Vec<Agent>, AgentError> {
        caller.require(Permission::AgentsRead)?;
        self.all_of_tenant(caller).await
    }

    /// Every agent of the caller's tenant, without a permission check of its own.
    async fn all_of_tenant(&self, caller: &Principal) -> Result<Vec<Agent>, AgentError> {
        let mut all = Vec::new();
        for page in 1.. {
            let (agents, total) =
                self.agents.list(&caller.tenant_id, Page { page, per_page: Page::MAX_PER_PAGE }).await?;
            let last = agents.len() < Page::MAX_PER_PAGE as usize;
            all.extend(agents);
            if last || all.len() as u64 >= total {
                break;
            }
        }
        Ok(all)
    }

    /// The agent an OpenAI-style `model` names: its id, or `agent:<name>` (the oldest agent of
    /// that name).
    ///
    /// # Errors
    /// [`AgentError::NotFound`] when none is the caller's.
    pub async fn by_model(&self, caller: &Principal, model: &str) -> Result<Agent, AgentError> {
        // Naming the model is part of chatting with it: the chat's permission (`agents:write`,
        // as `/agents/{id}/chat` asks), not the list's.
        caller.require(Permission::AgentsWrite)?;
        match model.strip_prefix("agent:") {
            Some(name) => {
                let all = self.all_of_tenant(caller).await?;
                all.into_iter().find(|a| a.name.as_str() == name).ok_or(AgentError::NotFound)
            }
            None => self
                .agents
                .get(&caller.tenant_id, &AgentId::from_string(model))
                .await?
                .ok_or(AgentError::NotFound),
        }
    }

    /// Applies a partial update and announces it (`agent.updated`).
    ///
    /// # Errors
    /// [`AgentError::NotFound`], [`AgentError::Forbidden`].
    pub async fn update(
        &self,
        caller: &Principal,
        id: &AgentId,
        changes: AgentChanges,
    ) -> Result<Agent, AgentError> {
        caller.require(Permission::AgentsWrite)?;
        let current = self.agents.get(&caller.tenant_id, id).await?.ok_or(AgentError::NotFound)?;
        let now = self.clock.now();
        let agent = changes.apply(&current, now);
        let payload = EventPayload::AgentUpdated {
            agent: agent.to_data(),
            changed: AgentChanges::changed_fields(&current, &agent),
        };
        let event = Event::new(self.ids.as_ref(), &agent.tenant_id, payload, now);
        if self.agents.update(&agent, &event).await? { Ok(agent) } else { Err(AgentError::NotFound) }
    }

    /// Deletes an agent with its conversations and memory.
    ///
    /// # Errors
    /// [`AgentError::NotFound`], [`AgentError::Forbidden`].
    pub async fn delete(&self, caller: &Principal, id: &AgentId) -> Result<(), AgentError> {
        caller.require(Permission::AgentsWrite)?;
        if self.agents.delete(&caller.tenant_id, id).await? { Ok(()) } else { Err(AgentError::NotFound) }
    }
}

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

/// The tools a model is offered: the agent's own, and those the client runs itself.
struct Offered {
    toolbox: Toolbox,
    clients: Vec<ToolSpec>,
}

/// How long and how freely a reply may be.
struct ReplyLimits {
    max_tokens: Option<u32>,
    temperature: Option<f64>,
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
    deps: ChatServiceDeps,
    settings: ChatSettings,
}

/// Tokens a completion may use so that prompt and reply together cost at most `credits`.
pub fn affordable_completion(credits: i64, prompt_tokens: u64) -> u64 {
    u64::try_from(credits).unwrap_or(0).saturating_mul(1000).saturating_sub(prompt_tokens)
}

impl ChatService {
    /// A service over `deps` with `settings`.
    pub fn new(deps: ChatServiceDeps, settings: ChatSettings) -> Self {
        Self { deps, settings }
    }

    /// This service with one more kind of tool. A provider that needs what is built after
    /// chat (the executions, whose steps chat) is added where both exist, so that nothing
    /// holds chat through its own tools.
    #[must_use]
    pub fn with_tools(&self, provider: Arc<dyn ToolProvider>) -> Self {
        let mut deps = self.deps.clone();
        deps.tools = deps.tools.with(provider);
        Self { deps, settings: self.settings.clone() }
    }

    /// The tools `agent` offers its model in a chat with `caller`: none when it may run no
    /// round of them.
    async fn toolbox(&self, agent: &Agent, caller: &Principal) -> Toolbox {
        if agent.config.max_tool_rounds == Some(0) {
            return Toolbox::default();
        }
        self.deps.tools.toolbox(agent, caller).await
    }

    /// Sends `input` to an agent: holds the most the exchange can cost, asks the model, then
    /// stores both messages, the charge and the events in one transaction. When the balance
    /// covers the prompt but not the agent's whole `max_tokens`, the reply is capped at what the
    /// balance pays, so the last credits can be spent; 402 comes, before the model is called,
    /// only when not even the prompt and one token of reply are covered. A model failure
    /// releases the hold and stores nothing.
    ///
    /// # Errors
    /// See [`ChatError`].
    pub async fn chat(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        input: ChatInput,
    ) -> Result<ChatReply, ChatError> {
        self.prepare(caller, agent_id, input).await?.answer(None).await
    }

    /// The first half of [`ChatService::chat`]: every check, the prompt and the credit hold,
    /// so that a streamed reply can refuse with an ordinary answer (401, 402, 404, 409, 422)
    /// before its stream begins. The prepared chat holds credits until it is answered.
    ///
    /// # Errors
    /// See [`ChatError`].
    pub async fn prepare(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        input: ChatInput,
    ) -> Result<PreparedChat, ChatError> {
        let agent = self.active_agent(caller, agent_id).await?;
        let d = &self.deps;
        // A client's own id continues its conversation, or starts it on first use.
        let (session_id, history) = match input.session_id {
            Some(session) => {
                let history = d
                    .conversations
                    .recent(&caller.tenant_id, &agent.id, &session, self.settings.history_messages)
                    .await?;
                (session, history)
            }
            None => (SessionId::generate(d.ids.as_ref()), Vec::new()),
        };
        let memories = d.memory.recall(&agent, &input.message).await?;
        let turns = build_prompt(
            &agent,
            &memories,
            &history,
            &input.message,
            d.tokens.as_ref(),
            self.settings.history_token_budget,
        );
        let limits =
            ReplyLimits { max_tokens: agent.config.max_tokens, temperature: agent.config.temperature };
        let toolbox = self.toolbox(&agent, caller).await;
        let offered = Offered { toolbox, clients: Vec::new() };
        let mut prepared =
            self.hold(caller, agent, session_id, input.message, turns, offered, limits).await?;
        prepared.remember = true;
        Ok(prepared)
    }

    /// Prepares a reply to a conversation the client sends whole, as OpenAI's chat completions
    /// do: the agent's system prompt first, then the client's turns; no history or memory is
    /// added. With a session id, the last user turn and the reply are stored in that session as
    /// chat stores them; without, only the charge and the events are (a stateless call).
    ///
    /// # Errors
    /// As [`ChatService::prepare`]; [`ChatError::Invalid`] when no turn is the user's.
    pub async fn prepare_conversation(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        conversation: ClientConversation,
    ) -> Result<PreparedChat, ChatError> {
        let agent = self.active_agent(caller, agent_id).await?;
        let d = &self.deps;
        let Some(last_user) = conversation.turns.iter().rev().find(|t| t.role == ChatRole::User) else {
            return Err(ValidationErrors(vec![FieldError::new(
                "messages",
                FieldErrorKind::InvalidValue,
                "messages must hold at least one message of role user",
            )])
            .into());
        };
        let message = last_user.content.clone();
        let toolbox = self.toolbox(&agent, caller).await;
        for (i, tool) in conversation.tools.iter().enumerate() {
            if toolbox.offers(&tool.name) {
                return Err(ValidationErrors(vec![FieldError::new(
                    format!("tools[{i}].function.name"),
                    FieldErrorKind::InvalidValue,
                    format!("the agent has a tool of its own named {:?}; name yours otherwise", tool.name),
                )])
                .into());
            }
        }
        let mut turns = vec![system_turn(&agent)];
        turns.extend(conversation.turns);
        let keep_conversation = conversation.session_id.is_some();
        let session_id = conversation.session_id.unwrap_or_else(|| SessionId::generate(d.ids.as_ref()));
        // The client may ask for less than the agent allows, never more.
        let max_tokens = match (conversation.max_tokens, agent.config.max_tokens) {
            (Some(asked), Some(allowed)) => Some(asked.min(allowed)),
            (asked, allowed) => asked.or(allowed),
        };
        let limits =
            ReplyLimits { max_tokens, temperature: conversation.temperature.or(agent.config.temperature) };
        let offered = Offered { toolbox, clients: conversation.tools };
        let mut prepared = self.hold(caller, agent, session_id, message, turns, offered, limits).await?;
        prepared.keep_conversation = keep_conversation;
        Ok(prepared)
    }

    /// The caller's agent that may chat: 403 without `agents:write`, 404 when absent, 409 when
    /// paused.
    async fn active_agent(&self, caller: &Principal, agent_id: &AgentId) -> Result<Agent, ChatError> {
        caller.require(Permission::AgentsWrite)?;
        let agent =
            self.deps.agents.get(&caller.tenant_id, agent_id).await?.ok_or(ChatError::AgentNotFound)?;
        if agent.status == AgentStatus::Paused {
            return Err(ChatError::AgentPaused);
        }
        Ok(agent)
    }

    /// Holds the most a reply to `turns` can cost, or refuses with 402 when not even the
    /// prompt and one token of reply are covered.
    #[allow(clippy::too_many_arguments)]
    async fn hold(
        &self,
        caller: &Principal,
        agent: Agent,
        session_id: SessionId,
        message: String,
        turns: Vec<ChatTurn>,
        offered: Offered,
        limits: ReplyLimits,
    ) -> Result<PreparedChat, ChatError> {
        let d = &self.deps;
        let Offered { toolbox, clients } = offered;
        let mut tools = toolbox.specs();
        tools.extend(clients);
        let prompt_tokens = count_request(d.tokens.as_ref(), &turns, &tools);
        let max_tokens = limits.max_tokens.unwrap_or(self.settings.default_max_tokens);
        let request = HoldRequest {
            id: CreditHoldId::generate(d.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            wanted: chat_cost(prompt_tokens + u64::from(max_tokens)),
            minimum: chat_cost(prompt_tokens + 1),
            created_at: d.clock.now(),
        };
        let Some(hold) = d.credits.hold(&request).await? else {
            return Err(ChatError::InsufficientCredits { needed: request.minimum });
        };
        let affordable = affordable_completion(hold.amount, prompt_tokens);
        let request = CompletionRequest {
            model: agent.config.model.clone().unwrap_or_else(|| self.settings.default_model.clone()),
            temperature: limits.temperature,
            max_tokens: u32::try_from(affordable).unwrap_or(u32::MAX).min(max_tokens),
            messages: turns,
            tools,
        };
        Ok(PreparedChat {
            service: self.clone(),
            caller: caller.clone(),
            agent,
            session_id,
            message,
            request,
            max_tokens,
            hold,
            toolbox,
            keep_conversation: true,
            remember: false,
        })
    }

    /// A message of the conversation, its id taken now (ids sort in the order they are taken,
    /// which is the order the history lists).
    fn message(
        &self,
        caller: &Principal,
        agent: &Agent,
        session_id: &SessionId,
        role: ChatRole,
        content: String,
        created_at: DateTime<Utc>,
    ) -> Message {
        Message {
            id: MessageId::generate(self.deps.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            agent_id: agent.id.clone(),
            session_id: session_id.clone(),
            role,
            content,
            prompt_tokens: 0,
            completion_tokens: 0,
            created_at,
            incomplete: false,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
        }
    }

    /// The exchange to store: the messages (the user's, the tool rounds', the reply), the
    /// charge of every model call as one ledger entry, and the events.
    fn exchange(&self, caller: &Principal, agent: &Agent, answer: Answer, hold: CreditHold) -> Exchange {
        let Answer { session_id, user_message, steps, reply, cost, tool_events, asked_at } = answer;
        let ids = self.deps.ids.as_ref();
        // A model may overrun `max_tokens` slightly; the hold is what the tenant agreed to.
        let cost = cost.min(hold.amount);
        let answered_at = reply.created_at;
        let latency_ms = u64::try_from((answered_at - asked_at).num_milliseconds()).unwrap_or(0);
        let mut events = vec![Event::new(
            ids,
            &caller.tenant_id,
            EventPayload::AgentMessageCreated(MessageCreatedData {
                agent_id: agent.id.clone(),
                conversation_id: session_id.clone(),
                message_id: user_message.id.clone(),
                content: user_message.content.clone(),
                role: ChatRole::User.as_str().to_owned(),
            }),
            asked_at,
        )];
        events.extend(tool_events);
        events.push(Event::new(
            ids,
            &caller.tenant_id,
            EventPayload::AgentMessageCompleted(MessageCompletedData {
                agent_id: agent.id.clone(),
                conversation_id: session_id.clone(),
                message_id: reply.id.clone(),
                content: reply.content.clone(),
                tokens_used: reply.prompt_tokens + reply.completion_tokens,
                latency_ms,
            }),
            answered_at,
        ));
        let entry = LedgerEntry {
            id: LedgerEntryId::generate(ids),
            tenant_id: caller.tenant_id.clone(),
            delta: -cost,
            balance_after: 0,
            reason: LedgerReason::ChatUsage,
            reference: Some(reply.id.to_string()),
            created_at: answered_at,
        };
        let settlement = Settlement {
            hold,
            entry,
            low_threshold: self.settings.credits_low_threshold,
            low_event: EventId::generate(ids),
        };
        Exchange {
            session_id,
            user_message,
            steps,
            reply,
            settlement,
            events,
            memory: None,
            keep_conversation: true,
        }
    }

    async fn release(&self, hold: &CreditHold) {
        if let Err(e) = self.deps.credits.release(&hold.id).await {
            // The stale-hold sweeper returns it later.
            tracing::error!(error = ?e, hold_id = %hold.id, "releasing a credit hold failed");
        }
    }

    /// A page of a conversation with an agent.
    ///
    /// # Errors
    /// [`ChatError::AgentNotFound`], [`ChatError::SessionNotFound`], [`ChatError::Forbidden`].
    pub async fn history(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        session: &SessionId,
        page: Page,
    ) -> Result<(Vec<Message>, u64), ChatError> {
        caller.require(Permission::AgentsRead)?;
        let d = &self.deps;
        d.agents.get(&caller.tenant_id, agent_id).await?.ok_or(ChatError::AgentNotFound)?;
        d.conversations
            .page(&caller.tenant_id, agent_id, session, page)
            .await?
            .ok_or(ChatError::SessionNotFound)
    }
}

/// A chat that passed its checks and holds its credits: what remains is the model's answer
/// and storing it ([`PreparedChat::answer`]). Dropped unanswered, its hold is returned by the
/// stale-hold sweeper.
pub struct PreparedChat {
    service: ChatService,
    caller: Principal,
    agent: Agent,
    session_id: SessionId,
    message: String,
    request: CompletionRequest,
    /// The longest reply of one model call, before what the balance pays.
    max_tokens: u32,
    hold: CreditHold,
    /// The agent's own tools offered to the model.
    toolbox: Toolbox,
    /// Whether the session and messages are stored (see [`Exchange::keep_conversation`]).
    keep_conversation: bool,
    /// Whether the exchange becomes an episodic memory (when the agent keeps them).
    remember: bool,
}

impl std::fmt::Debug for PreparedChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedChat")
            .field("agent", &self.agent.id)
            .field("session_id", &self.session_id)
            .field("hold", &self.hold.id)
            .finish_non_exhaustive()
    }
}

impl PreparedChat {
    /// The conversation this chat continues or starts.
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// The id of its credit hold: unique to this call (OpenAI's completion id is made of it).
    pub fn hold_id(&self) -> &CreditHoldId {
        &self.hold.id
    }

    /// Asks the model, runs the tools it calls and asks again with their results (up to the
    /// agent's `max_tool_rounds`), then stores the messages, the charge and the events in one
    /// transaction. With a `sink`, the reply, the tool calls and their results are streamed
    /// into it as they happen; a sink that stops listening (its client left) ends the
    /// generation, and what was generated is stored, marked incomplete, and charged. Each
    /// model call is held before it is made; all are charged as one ledger entry. A model
    /// failure releases the hold and stores nothing.
    ///
    /// # Errors
    /// [`ChatError::Upstream`], [`ChatError::AgentNotFound`] (deleted meanwhile),
    /// [`ChatError::Unexpected`].
    pub async fn answer(self, sink: Option<Arc<dyn DeltaSink>>) -> Result<ChatReply, ChatError> {
        let service = self.service.clone();
        let hold_at_start = self.hold.clone();
        match self.run(sink).await {
            Ok(reply) => Ok(reply),
            Err((e, hold)) => {
                service.release(hold.as_ref().unwrap_or(&hold_at_start)).await;
                Err(e)
            }
        }
    }

    /// [`PreparedChat::answer`]; an error comes with the hold to release.
    async fn run(
        self,
        sink: Option<Arc<dyn DeltaSink>>,
    ) -> Result<ChatReply, (ChatError, Option<CreditHold>)> {
        let Self {
            service,
            caller,
            agent,
            session_id,
            message,
            mut request,
            max_tokens,
            mut hold,
            toolbox,
            keep_conversation,
            remember,
        } = self;
        let d = &service.deps;
        let asked_at = d.clock.now();
        let user_message = service.message(&caller, &agent, &session_id, ChatRole::User, message, asked_at);
        let max_rounds = agent.config.max_tool_rounds.unwrap_or(DEFAULT_TOOL_ROUNDS);
        // The client's own tools (OpenAI's protocol): every offered tool that is not the agent's.
        let client_tools: Vec<String> =
            request.tools.iter().filter(|t| !toolbox.offers(&t.name)).map(|t| t.name.clone()).collect();
        let mut rounds = Rounds::default();
        let (last, note) = loop {
            let answered = match &sink {
                Some(sink) => d.model.stream(&request, sink.clone()).await,
                None => d.model.complete(&request).await,
            };
            let completion = match answered {
                // A model's answer is remote text: stored alike on both databases.
                Ok(c) => Completion { content: crate::storable::text(c.content), ..c },
                // Nothing answered yet: nothing is charged or stored.
                Err(e) if rounds.cost == 0 => return Err((e.into(), Some(hold))),
                // The calls before it answered, and the tools ran: those calls are charged and
                // the rounds kept, with the failure said in the reply.
                Err(e) => {
                    let note =
                        format!("I stopped before answering: the model failed after the tools ran ({e}).");
                    break (Completion::nothing(FinishReason::Length), Some(note));
                }
            };
            rounds.count(&completion);
            if completion.tool_calls.is_empty() || completion.finish == FinishReason::Cancelled {
                break (Completion { tool_calls: Vec::new(), ..completion }, None);
            }
            // A call of a tool the client runs ends the answer: the client runs it and asks
            // again with its result (OpenAI's protocol). A call of a tool nobody offered is the
            // agent's to answer (with an error the model reads).
            let (clients, own): (Vec<ToolCall>, Vec<ToolCall>) =
                completion.tool_calls.iter().cloned().partition(|c| client_tools.contains(&c.name));
            if !clients.is_empty() {
                break (
                    Completion { tool_calls: clients, finish: FinishReason::ToolCalls, ..completion },
                    None,
                );
            }
            if rounds.tool_rounds >= max_rounds {
                let note = format!(
                    "I stopped before answering: I had used {max_rounds} rounds of tool calls, the most \
                     this agent allows (config.max_tool_rounds)."
                );
                break (
                    Completion { tool_calls: Vec::new(), finish: FinishReason::Length, ..completion },
                    Some(note),
                );
            }
            rounds.tool_rounds += 1;
            let mut step = service.message(
                &caller,
                &agent,
                &session_id,
                ChatRole::Assistant,
                completion.content.clone(),
                d.clock.now(),
            );
            step.tool_calls = own.clone();
            request.messages.push(ChatTurn::of_message(&step));
            rounds.steps.push(step);
            for (ran, call) in own.iter().enumerate() {
                if let Some(sink) = &sink
                    && !sink.tool_call(call)
                {
                    // The client left: nothing more runs. The calls kept are those that ran,
                    // each followed by its result, as providers require of a history.
                    rounds.keep_calls_that_ran(ran);
                    return service
                        .finish(
                            Finished { caller, agent, keep_conversation, remember, user_message, rounds },
                            Completion::nothing(FinishReason::Cancelled),
                            None,
                            hold,
                        )
                        .await;
                }
                // A hold still working is no stale hold: the sweeper must not return it while a
                // tool (a workflow may take minutes) runs.
                if let Err(e) = d.credits.extend_hold(&hold, 0, 0, d.clock.now()).await {
                    tracing::warn!(error = ?e, hold_id = %hold.id, "refreshing a chat's credit hold failed");
                }
                let result =
                    service.call_tool(&toolbox, &caller, &agent, &session_id, call, &mut rounds).await;
                if let Some(sink) = &sink {
                    sink.tool_result(&result);
                }
            }
            request
                .messages
                .extend(rounds.steps.iter().rev().take(own.len()).rev().map(ChatTurn::of_message));
            // Hold the next model call as the first was held.
            let prompt = count_request(d.tokens.as_ref(), &request.messages, &request.tools);
            let spent = rounds.cost;
            let (most, least) =
                (spent + chat_cost(prompt + u64::from(max_tokens)), spent + chat_cost(prompt + 1));
            if hold.amount < most {
                match d
                    .credits
                    .extend_hold(&hold, most - hold.amount, least - hold.amount, d.clock.now())
                    .await
                {
                    Ok(Some(added)) => hold.amount += added,
                    Ok(None) => {
                        let note = "I stopped before answering: the credits left do not pay for another \
                                    model call with the tools' results."
                            .to_owned();
                        break (Completion::nothing(FinishReason::Length), Some(note));
                    }
                    Err(e) => return Err((e.into(), Some(hold))),
                }
            }
            let affordable = affordable_completion(hold.amount - spent, prompt);
            request.max_tokens = u32::try_from(affordable).unwrap_or(u32::MAX).min(max_tokens);
        };
        service
            .finish(
                Finished { caller, agent, keep_conversation, remember, user_message, rounds },
                last,
                note,
                hold,
            )
            .await
    }
}

/// What the rounds of a chat have done so far.
#[derive(Default)]
struct Rounds {
    /// Tokens of every model call.
    prompt_tokens: u64,
    completion_tokens: u64,
    /// The charge of every model call, each counted as a chat is.
    cost: i64,
    /// Rounds of tool calls run.
    tool_rounds: u8,
    /// The assistant messages that called tools and the tools' results, in order.
    steps: Vec<Message>,
    /// An `agent.tool.called` per call.
    tool_events: Vec<Event>,
}

impl Rounds {
    /// After a client left before the call at `ran` of the last round ran: that round's
    /// assistant message keeps only the calls that ran (it goes when none did and it said
    /// nothing).
    fn keep_calls_that_ran(&mut self, ran: usize) {
        let Some(at) = self.steps.iter().rposition(|m| m.role == ChatRole::Assistant) else { return };
        self.steps[at].tool_calls.truncate(ran);
        if ran == 0 && self.steps[at].content.is_empty() {
            self.steps.remove(at);
        }
    }

    fn count(&mut self, c: &Completion) {
        self.prompt_tokens += c.prompt_tokens;
        self.completion_tokens += c.completion_tokens;
        self.cost += chat_cost(c.prompt_tokens + c.completion_tokens);
    }
}

/// A chat whose model calls are done, to be stored.
struct Finished {
    caller: Principal,
    agent: Agent,
    keep_conversation: bool,
    remember: bool,
    user_message: Message,
    rounds: Rounds,
}

/// A finished chat's messages and charge, for [`ChatService::exchange`].
struct Answer {
    session_id: SessionId,
    user_message: Message,
    steps: Vec<Message>,
    reply: Message,
    cost: i64,
    tool_events: Vec<Event>,
    asked_at: DateTime<Utc>,
}

impl ChatService {
    /// Runs one of the agent's tools as the caller, records its message and event, and
    /// returns its result.
    async fn call_tool(
        &self,
        toolbox: &Toolbox,
        caller: &Principal,
        agent: &Agent,
        session_id: &SessionId,
        call: &ToolCall,
        rounds: &mut Rounds,
    ) -> ToolResult {
        let d = &self.deps;
        let started = std::time::Instant::now();
        let output = d.tools.call(toolbox, caller, agent, session_id, call).await.map_err(|e| e.to_string());
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let result = ToolResult { call_id: call.id.clone(), name: call.name.clone(), output };
        let now = d.clock.now();
        let content = crate::storable::text(result.to_json().to_string());
        let mut message = self.message(caller, agent, session_id, ChatRole::Tool, content, now);
        message.tool_call_id = Some(call.id.clone());
        message.tool_name = Some(call.name.clone());
        rounds.steps.push(message);
        rounds.tool_events.push(Event::new(
            d.ids.as_ref(),
            &caller.tenant_id,
            EventPayload::AgentToolCalled(ToolCalledData {
                agent_id: agent.id.clone(),
                session_id: session_id.clone(),
                tool: call.name.clone(),
                call_id: call.id.clone(),
                ok: result.output.is_ok(),
                duration_ms,
            }),
            now,
        ));
        metrics::counter!(crate::metrics::TOOL_CALLS, "tool" => toolbox.kind_of(&call.name), "ok" => if result.output.is_ok() { "true" } else { "false" }).increment(1);
        result
    }

    /// Stores a finished chat: its reply is the last model call's text (with `note` when the
    /// chat stopped early), its usage and charge those of every call.
    async fn finish(
        &self,
        f: Finished,
        last: Completion,
        note: Option<String>,
        hold: CreditHold,
    ) -> Result<ChatReply, (ChatError, Option<CreditHold>)> {
        let d = &self.deps;
        let Finished { caller, agent, keep_conversation, remember, user_message, rounds } = f;
        let answered_at = d.clock.now();
        let content = match note {
            Some(note) if last.content.trim().is_empty() => note,
            Some(note) => format!("{}\n\n{note}", last.content),
            None => last.content,
        };
        let session_id = user_message.session_id.clone();
        let mut reply = self.message(&caller, &agent, &session_id, ChatRole::Assistant, content, answered_at);
        reply.prompt_tokens = rounds.prompt_tokens;
        reply.completion_tokens = rounds.completion_tokens;
        reply.incomplete = last.finish == FinishReason::Cancelled;
        reply.tool_calls = last.tool_calls;
        // The exchange as an episodic memory. The reply is already paid for by the hold: a
        // failing embedder costs the memory, not the answer.
        // A stateless call (nothing of it stored) is not remembered either.
        let memory = if remember {
            match d
                .memory
                .episode(&agent, &session_id, &user_message.content, &reply.content, answered_at)
                .await
            {
                Ok(memory) => memory,
                Err(e) => {
                    tracing::error!(error = ?e, agent_id = %agent.id, "making the episodic memory of a chat failed");
                    None
                }
            }
        } else {
            None
        };
        let asked_at = user_message.created_at;
        let answer = Answer {
            session_id,
            user_message,
            steps: rounds.steps,
            reply,
            cost: rounds.cost,
            tool_events: rounds.tool_events,
            asked_at,
        };
        let mut exchange = self.exchange(&caller, &agent, answer, hold.clone());
        exchange.memory = memory;
        exchange.keep_conversation = keep_conversation;
        match d.conversations.record_exchange(&exchange).await {
            Ok(ExchangeOutcome::Recorded { remaining }) => {
                let charged = exchange.settlement.entry.delta.abs();
                metrics::counter!(crate::metrics::CREDITS_CHARGED).increment(charged.unsigned_abs());
                Ok(ChatReply {
                    charged,
                    session_id: exchange.session_id,
                    message: exchange.reply,
                    remaining,
                    finish: last.finish,
                })
            }
            Ok(ExchangeOutcome::AgentGone) => Err((ChatError::AgentNotFound, Some(hold))),
            Err(e) => Err((e.into(), Some(hold))),
        }
    }
}

#[cfg(test)]
mod tests;

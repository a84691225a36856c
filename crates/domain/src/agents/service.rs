//! The agent services: agents' lifecycle, and chat.

use std::sync::Arc;

use serde_json::json;

use super::chat::{
    ChatModel, ChatRole, CompletionRequest, MemoryRecall, Message, ModelError, TokenCounter, build_prompt,
    count_prompt,
};
use super::model::{Agent, AgentChanges, AgentConfig, AgentFields, AgentStatus, AgentType};
use super::ports::{AgentRepository, ConversationRepository, Exchange};
use crate::billing::{CreditHold, CreditRepository, LedgerEntry, LedgerReason, Settlement, chat_cost};
use crate::events::{Event, EventType};
use crate::identity::{Forbidden, Principal};
use crate::ids::{AgentId, CreditHoldId, EventId, IdGenerator, LedgerEntryId, MessageId, SessionId};
use crate::pagination::Page;
use crate::tenancy::Permission;
use crate::time::Clock;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors, check_length};

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
    /// [`AgentError::Forbidden`] without `agents:write`; [`AgentError::Invalid`].
    pub async fn create(&self, caller: &Principal, fields: AgentFields) -> Result<Agent, AgentError> {
        caller.require(Permission::AgentsWrite)?;
        let changes = AgentChanges::new(fields, true)?;
        let now = self.clock.now();
        let Some(name) = changes.name.clone() else {
            return Err(ValidationErrors::one(FieldError::missing("name")).into());
        };
        let blank = Agent {
            id: AgentId::generate(self.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            name,
            agent_type: AgentType::Assistant,
            status: AgentStatus::Active,
            description: None,
            memory_types: Vec::new(),
            config: AgentConfig::default(),
            created_at: now,
            updated_at: now,
        };
        let agent = changes.apply(&blank, now);
        let event =
            Event::new(self.ids.as_ref(), &agent.tenant_id, EventType::AgentCreated, agent.to_json(), now);
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

    /// Applies a partial update and announces it (`agent.updated`).
    ///
    /// # Errors
    /// [`AgentError::NotFound`], [`AgentError::Invalid`], [`AgentError::Forbidden`].
    pub async fn update(
        &self,
        caller: &Principal,
        id: &AgentId,
        fields: AgentFields,
    ) -> Result<Agent, AgentError> {
        caller.require(Permission::AgentsWrite)?;
        let changes = AgentChanges::new(fields, false)?;
        let current = self.agents.get(&caller.tenant_id, id).await?.ok_or(AgentError::NotFound)?;
        let now = self.clock.now();
        let agent = changes.apply(&current, now);
        let event = Event::new(
            self.ids.as_ref(),
            &agent.tenant_id,
            EventType::AgentUpdated,
            json!({ "agent": agent.to_json(), "changed": changed_fields(&current, &agent) }),
            now,
        );
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

fn changed_fields(before: &Agent, after: &Agent) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if before.name != after.name {
        changed.push("name");
    }
    if before.agent_type != after.agent_type {
        changed.push("type");
    }
    if before.status != after.status {
        changed.push("status");
    }
    if before.description != after.description {
        changed.push("description");
    }
    if before.memory_types != after.memory_types {
        changed.push("memory_types");
    }
    if before.config != after.config {
        changed.push("config");
    }
    changed
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

/// A chat message as received.
#[derive(Debug, Clone)]
pub struct ChatInput {
    /// The message; 1–32,000 characters.
    pub message: Option<String>,
    /// The conversation to continue; absent starts a new one.
    pub session_id: Option<String>,
}

/// Most characters of one chat message.
pub const MAX_MESSAGE_CHARS: usize = 32_000;

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
    /// No such agent in the caller's tenant.
    #[error("no such agent")]
    AgentNotFound,
    /// No such conversation with this agent.
    #[error("no such session for this agent")]
    SessionNotFound,
    /// The agent is paused.
    #[error("the agent is paused")]
    AgentPaused,
    /// The balance does not cover the chat's maximum cost.
    #[error("not enough credits: this message may cost up to {needed}")]
    InsufficientCredits {
        /// The credits the chat holds while it runs.
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

impl ChatService {
    /// A service over `deps` with `settings`.
    pub fn new(deps: ChatServiceDeps, settings: ChatSettings) -> Self {
        Self { deps, settings }
    }

    /// Sends `input` to an agent: holds the most the exchange can cost (402 before the model
    /// is called when the balance cannot cover it), asks the model, then stores both messages,
    /// the charge and the events in one transaction. A model failure releases the hold and
    /// stores nothing.
    ///
    /// # Errors
    /// See [`ChatError`].
    pub async fn chat(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        input: ChatInput,
    ) -> Result<ChatReply, ChatError> {
        caller.require(Permission::AgentsWrite)?;
        let d = &self.deps;
        let message = validate_message(input.message)?;
        let agent = d.agents.get(&caller.tenant_id, agent_id).await?.ok_or(ChatError::AgentNotFound)?;
        if agent.status == AgentStatus::Paused {
            return Err(ChatError::AgentPaused);
        }
        let (session_id, is_new) = match input.session_id.filter(|s| !s.trim().is_empty()) {
            Some(raw) => {
                let session = SessionId::from_string(raw);
                match d.conversations.session_agent(&caller.tenant_id, &session).await? {
                    Some(owner) if owner == agent.id => (session, false),
                    _ => return Err(ChatError::SessionNotFound),
                }
            }
            None => (SessionId::generate(d.ids.as_ref()), true),
        };
        let history = if is_new {
            Vec::new()
        } else {
            d.conversations.recent(&session_id, self.settings.history_messages).await?
        };
        let memories = d.memory.recall(&agent, &message).await?;
        let turns = build_prompt(
            &agent,
            &memories,
            &history,
            &message,
            d.tokens.as_ref(),
            self.settings.history_token_budget,
        );
        let max_tokens = agent.config.max_tokens.unwrap_or(self.settings.default_max_tokens);
        let ceiling = chat_cost(count_prompt(d.tokens.as_ref(), &turns) + u64::from(max_tokens));
        let hold = CreditHold {
            id: CreditHoldId::generate(d.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            amount: ceiling,
            created_at: d.clock.now(),
        };
        if d.credits.hold(&hold).await?.is_none() {
            return Err(ChatError::InsufficientCredits { needed: ceiling });
        }
        let request = CompletionRequest {
            model: agent.config.model.clone().unwrap_or_else(|| self.settings.default_model.clone()),
            temperature: agent.config.temperature,
            max_tokens,
            messages: turns,
        };
        let asked_at = d.clock.now();
        let completion = match d.model.complete(&request).await {
            Ok(c) => c,
            Err(e) => {
                self.release(&hold).await;
                return Err(e.into());
            }
        };
        let answered_at = d.clock.now();
        let exchange = self.exchange(
            caller,
            &agent,
            (session_id, is_new),
            message,
            completion,
            hold.clone(),
            asked_at,
            answered_at,
        );
        match d.conversations.record_exchange(&exchange).await {
            Ok(remaining) => Ok(ChatReply {
                charged: exchange.settlement.entry.delta.abs(),
                session_id: exchange.session.0,
                message: exchange.reply,
                remaining,
            }),
            Err(e) => {
                self.release(&hold).await;
                Err(e.into())
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn exchange(
        &self,
        caller: &Principal,
        agent: &Agent,
        session: (SessionId, bool),
        message: String,
        completion: super::chat::Completion,
        hold: CreditHold,
        asked_at: chrono::DateTime<chrono::Utc>,
        answered_at: chrono::DateTime<chrono::Utc>,
    ) -> Exchange {
        let d = &self.deps;
        let ids = d.ids.as_ref();
        let total = completion.prompt_tokens + completion.completion_tokens;
        // A model may overrun `max_tokens` slightly; the hold is what the tenant agreed to.
        let cost = chat_cost(total).min(hold.amount);
        let base = |role, content, prompt_tokens, completion_tokens, created_at| Message {
            id: MessageId::generate(ids),
            tenant_id: caller.tenant_id.clone(),
            agent_id: agent.id.clone(),
            session_id: session.0.clone(),
            role,
            content,
            prompt_tokens,
            completion_tokens,
            created_at,
        };
        let user_message = base(ChatRole::User, message, 0, 0, asked_at);
        let reply = base(
            ChatRole::Assistant,
            completion.content,
            completion.prompt_tokens,
            completion.completion_tokens,
            answered_at,
        );
        let latency_ms = (answered_at - asked_at).num_milliseconds().max(0);
        let events = vec![
            Event::new(
                ids,
                &caller.tenant_id,
                EventType::AgentMessageCreated,
                json!({"agent_id": agent.id, "conversation_id": session.0, "message_id": user_message.id,
                       "content": user_message.content, "role": "user"}),
                asked_at,
            ),
            Event::new(
                ids,
                &caller.tenant_id,
                EventType::AgentMessageCompleted,
                json!({"agent_id": agent.id, "conversation_id": session.0, "message_id": reply.id,
                       "content": reply.content, "tokens_used": total, "latency_ms": latency_ms}),
                answered_at,
            ),
        ];
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
        Exchange { session, user_message, reply, settlement, events }
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
        match d.conversations.session_agent(&caller.tenant_id, session).await? {
            Some(owner) if &owner == agent_id => Ok(d.conversations.page(session, page).await?),
            _ => Err(ChatError::SessionNotFound),
        }
    }
}

fn validate_message(message: Option<String>) -> Result<String, ValidationErrors> {
    let message = message.ok_or_else(|| ValidationErrors::one(FieldError::missing("message")))?;
    if message.trim().is_empty() {
        return Err(ValidationErrors::one(FieldError::new(
            "message",
            FieldErrorKind::TooShort,
            "message must not be empty",
        )));
    }
    check_length(&message, 1, MAX_MESSAGE_CHARS, "message").map_err(ValidationErrors::one)?;
    Ok(message)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use chrono::{DateTime, TimeZone, Utc};

    use super::*;
    use crate::agents::chat::{Completion, MockChatModel, MockTokenCounter, NoRecall};
    use crate::agents::model::{AgentName, MemoryType};
    use crate::agents::ports::{MockAgentRepository, MockConversationRepository};
    use crate::billing::MockCreditRepository;
    use crate::identity::Credential;
    use crate::ids::{MockIdGenerator, TenantId, UserId};
    use crate::tenancy::{Plan, Role, Scope};
    use crate::time::MockClock;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
    }

    fn caller(credential: Credential) -> Principal {
        Principal {
            user_id: UserId::from_string("usr_1"),
            tenant_id: TenantId::from_string("ten_1"),
            plan: Plan::Starter,
            role: Role::Owner,
            credential,
        }
    }

    fn owner() -> Principal {
        caller(Credential::AccessToken)
    }

    fn agent(status: AgentStatus) -> Agent {
        Agent {
            id: AgentId::from_string("agt_1"),
            tenant_id: TenantId::from_string("ten_1"),
            name: AgentName::new("Helper").unwrap(),
            agent_type: AgentType::Support,
            status,
            description: None,
            memory_types: vec![MemoryType::Episodic],
            config: AgentConfig { max_tokens: Some(2000), ..AgentConfig::default() },
            created_at: t0(),
            updated_at: t0(),
        }
    }

    struct Mocks {
        agents: MockAgentRepository,
        conversations: MockConversationRepository,
        credits: MockCreditRepository,
        model: MockChatModel,
    }

    impl Mocks {
        fn new() -> Self {
            Self {
                agents: MockAgentRepository::new(),
                conversations: MockConversationRepository::new(),
                credits: MockCreditRepository::new(),
                model: MockChatModel::new(),
            }
        }

        fn chat(self) -> ChatService {
            let mut ids = MockIdGenerator::new();
            let n = AtomicU64::new(0);
            ids.expect_generate().returning(move |p| format!("{p}_{}", n.fetch_add(1, Ordering::SeqCst)));
            let mut clock = MockClock::new();
            clock.expect_now().returning(t0);
            let mut tokens = MockTokenCounter::new();
            // One token per word keeps the arithmetic of these tests readable.
            tokens.expect_count().returning(|t| t.split_whitespace().count() as u64);
            ChatService::new(
                ChatServiceDeps {
                    agents: Arc::new(self.agents),
                    conversations: Arc::new(self.conversations),
                    credits: Arc::new(self.credits),
                    model: Arc::new(self.model),
                    tokens: Arc::new(tokens),
                    memory: Arc::new(NoRecall),
                    ids: Arc::new(ids),
                    clock: Arc::new(clock),
                },
                ChatSettings::default(),
            )
        }
    }

    fn input(message: &str, session: Option<&str>) -> ChatInput {
        ChatInput { message: Some(message.into()), session_id: session.map(str::to_owned) }
    }

    #[tokio::test]
    async fn without_enough_credits_the_model_is_never_called() {
        let mut m = Mocks::new();
        m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
        m.credits.expect_hold().withf(|h| h.amount == 3).returning(|_| Ok(None));
        m.model.expect_complete().never();
        m.conversations.expect_record_exchange().never();
        let err = m
            .chat()
            .chat(&owner(), &AgentId::from_string("agt_1"), input("hello there", None))
            .await
            .unwrap_err();
        assert!(matches!(err, ChatError::InsufficientCredits { needed: 3 }));
    }

    #[tokio::test]
    async fn a_model_failure_releases_the_hold_and_stores_nothing() {
        let mut m = Mocks::new();
        m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
        m.credits.expect_hold().returning(|_| Ok(Some(99)));
        m.model.expect_complete().returning(|_| Err(ModelError::Timeout));
        m.credits.expect_release().times(1).returning(|_| Ok(()));
        m.conversations.expect_record_exchange().never();
        let err =
            m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hello", None)).await.unwrap_err();
        assert!(matches!(err, ChatError::Upstream(ModelError::Timeout)));
    }

    #[tokio::test]
    async fn an_answer_is_recorded_with_its_charge_and_both_events() {
        let mut m = Mocks::new();
        m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
        m.credits.expect_hold().returning(|_| Ok(Some(99)));
        m.model
            .expect_complete()
            .withf(|r| {
                r.max_tokens == 2000
                    && r.model == "builtin"
                    && r.messages.len() == 2
                    && r.messages[0].content.contains("Helper")
                    && r.messages[1].content == "hello there"
            })
            .returning(|_| {
                Ok(Completion { content: "hi".into(), prompt_tokens: 1200, completion_tokens: 300 })
            });
        m.conversations
            .expect_record_exchange()
            .withf(|x| {
                x.session.1
                    && x.settlement.entry.delta == -2
                    && x.settlement.entry.reason == LedgerReason::ChatUsage
                    && x.events.len() == 2
                    && x.events[0].event_type == EventType::AgentMessageCreated
                    && x.events[1].event_type == EventType::AgentMessageCompleted
                    && x.events[1].data["tokens_used"] == 1500
                    && x.events[1].data["conversation_id"] == x.session.0.as_str()
                    && x.events[1].data["message_id"] == x.reply.id.as_str()
                    && x.reply.prompt_tokens == 1200
                    && x.user_message.role == ChatRole::User
            })
            .times(1)
            .returning(|_| Ok(97));
        let reply = m
            .chat()
            .chat(&owner(), &AgentId::from_string("agt_1"), input("hello there", None))
            .await
            .unwrap();
        assert_eq!((reply.charged, reply.remaining), (2, 97));
        assert_eq!(reply.message.content, "hi");
    }

    #[tokio::test]
    async fn paused_agents_foreign_sessions_and_read_only_keys_are_refused() {
        let mut m = Mocks::new();
        m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Paused))));
        let err =
            m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hi", None)).await.unwrap_err();
        assert!(matches!(err, ChatError::AgentPaused));

        let mut m = Mocks::new();
        m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
        m.conversations.expect_session_agent().returning(|_, _| Ok(Some(AgentId::from_string("agt_other"))));
        let err = m
            .chat()
            .chat(&owner(), &AgentId::from_string("agt_1"), input("hi", Some("ses_x")))
            .await
            .unwrap_err();
        assert!(matches!(err, ChatError::SessionNotFound));

        let reader = caller(Credential::ApiKey {
            key_id: crate::ids::ApiKeyId::from_string("key_1"),
            scopes: vec!["agents:read".parse::<Scope>().unwrap()],
        });
        let err = Mocks::new()
            .chat()
            .chat(&reader, &AgentId::from_string("agt_1"), input("hi", None))
            .await
            .unwrap_err();
        assert!(matches!(err, ChatError::Forbidden(_)));

        let err = Mocks::new()
            .chat()
            .chat(&owner(), &AgentId::from_string("agt_1"), input("   ", None))
            .await
            .unwrap_err();
        assert!(matches!(err, ChatError::Invalid(_)));
    }

    #[tokio::test]
    async fn a_continued_session_sends_its_history() {
        let mut m = Mocks::new();
        m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
        m.conversations.expect_session_agent().returning(|_, _| Ok(Some(AgentId::from_string("agt_1"))));
        m.conversations.expect_recent().returning(|s, _| {
            let msg = |role, content: &str| Message {
                id: MessageId::from_string("msg_0"),
                tenant_id: TenantId::from_string("ten_1"),
                agent_id: AgentId::from_string("agt_1"),
                session_id: s.clone(),
                role,
                content: content.into(),
                prompt_tokens: 0,
                completion_tokens: 0,
                created_at: t0(),
            };
            Ok(vec![msg(ChatRole::User, "my name is Ada"), msg(ChatRole::Assistant, "hello Ada")])
        });
        m.credits.expect_hold().returning(|_| Ok(Some(10)));
        m.model
            .expect_complete()
            .withf(|r| r.messages.len() == 4 && r.messages[1].content == "my name is Ada")
            .returning(|_| Ok(Completion { content: "Ada".into(), prompt_tokens: 10, completion_tokens: 1 }));
        m.conversations.expect_record_exchange().withf(|x| !x.session.1).returning(|_| Ok(9));
        let reply = m
            .chat()
            .chat(&owner(), &AgentId::from_string("agt_1"), input("what is my name", Some("ses_1")))
            .await
            .unwrap();
        assert_eq!(reply.session_id.as_str(), "ses_1");
    }

    #[tokio::test]
    async fn creating_an_agent_writes_its_event_and_never_takes_ids_from_input() {
        let mut agents = MockAgentRepository::new();
        agents
            .expect_create()
            .withf(|a, e| {
                a.id.as_str() == "agt_0"
                    && a.tenant_id.as_str() == "ten_1"
                    && a.agent_type == AgentType::Assistant
                    && e.event_type == EventType::AgentCreated
                    && e.data["id"] == "agt_0"
            })
            .times(1)
            .returning(|_, _| Ok(()));
        let mut ids = MockIdGenerator::new();
        let n = AtomicU64::new(0);
        ids.expect_generate().returning(move |p| format!("{p}_{}", n.fetch_add(1, Ordering::SeqCst)));
        let mut clock = MockClock::new();
        clock.expect_now().returning(t0);
        let service = AgentService::new(Arc::new(agents), Arc::new(ids), Arc::new(clock));
        let fields = AgentFields { name: Some("Helper".into()), ..AgentFields::default() };
        let created = service.create(&owner(), fields).await.unwrap();
        assert_eq!(created.status, AgentStatus::Active);
    }
}

use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, TimeZone, Utc};

use super::*;
use crate::agents::chat::{Completion, DeltaSink, FinishReason, ModelError, ToolCall};
use crate::agents::chat_api::{ChatServiceDeps, MAX_MESSAGE_CHARS, chat_message};
use crate::agents::knowledge::MockKnowledgeRetrieval;
use crate::agents::model::{AgentConfig, AgentName, AgentType, NewAgent};
use crate::agents::ports::{ExchangeOutcome, MockAgentRepository, MockChatModel, MockConversationRepository};
use crate::agents::providers::{MockToolProvider, OfferedTool};
use crate::agents::recall::NoRecall;
use crate::agents::registry::ToolRegistry;
use crate::agents::service::AgentService;
use crate::agents::tools::{AgentTool, ToolError};
use crate::billing::{CreditHold, LedgerReason, MockCreditRepository};
use crate::events::EventPayload;
use crate::ids::{MessageId, MockIdGenerator, TenantId, UserId};
use crate::memory::MemoryType;
use crate::tenancy::{Credential, Plan, Role, Scope};
use crate::time::MockClock;
use crate::tokens::MockTokenCounter;

pub(super) fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
}

pub(super) fn caller(credential: Credential) -> Principal {
    Principal {
        user_id: UserId::from_string("usr_1"),
        tenant_id: TenantId::from_string("ten_1"),
        plan: Plan::Starter,
        role: Role::Owner,
        credential,
        chain: Default::default(),
    }
}

pub(super) fn owner() -> Principal {
    caller(Credential::AccessToken)
}

pub(super) fn agent(status: AgentStatus) -> Agent {
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

pub(super) struct Mocks {
    pub(super) agents: MockAgentRepository,
    pub(super) conversations: MockConversationRepository,
    pub(super) credits: MockCreditRepository,
    pub(super) model: MockChatModel,
    pub(super) tools: MockToolProvider,
    pub(super) knowledge: MockKnowledgeRetrieval,
}

impl Mocks {
    pub(super) fn new() -> Self {
        Self {
            agents: MockAgentRepository::new(),
            conversations: MockConversationRepository::new(),
            credits: MockCreditRepository::new(),
            model: MockChatModel::new(),
            tools: offering_the_agents_tools(),
            knowledge: MockKnowledgeRetrieval::new(),
        }
    }

    pub(super) fn chat(self) -> ChatService {
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
                blocks: Arc::new(crate::agents::blocks::NoBlocks),
                knowledge: Arc::new(self.knowledge),
                tools: ToolRegistry::new(None).with(Arc::new(self.tools)),
                ids: Arc::new(ids),
                clock: Arc::new(clock),
            },
            ChatSettings::default(),
        )
    }
}

/// A provider offering the agent's configured tools as they are described.
fn offering_the_agents_tools() -> MockToolProvider {
    let mut tools = MockToolProvider::new();
    tools.expect_offer().returning(|agent, _| {
        agent
            .config
            .tools
            .iter()
            .enumerate()
            .map(|(position, t)| OfferedTool {
                spec: t.spec(),
                timeout: t.timeout(),
                kind: t.kind.type_name(),
                position,
            })
            .collect()
    });
    tools
}

pub(super) fn input(message: &str, session: Option<&str>) -> ChatInput {
    ChatInput { message: message.into(), session_id: session.map(|s| SessionId::parse(s).unwrap()) }
}

pub(super) fn granted(request: &HoldRequest, amount: i64) -> CreditHold {
    CreditHold {
        id: request.id.clone(),
        tenant_id: request.tenant_id.clone(),
        amount,
        created_at: request.created_at,
    }
}

// The prompt of "hello there" to the agent above: the system turn (8 words) and the
// message (2 words), each plus 4 tokens of framing, plus 3: 21 tokens.
const PROMPT: u64 = 21;

#[tokio::test]
async fn without_credits_for_the_prompt_the_model_is_never_called() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
    m.credits.expect_hold().withf(|h| h.wanted == 3 && h.minimum == 1).returning(|_| Ok(None));
    m.model.expect_complete().never();
    m.conversations.expect_record_exchange().never();
    let err = m
        .chat()
        .chat(&owner(), &AgentId::from_string("agt_1"), input("hello there", None))
        .await
        .unwrap_err();
    assert!(matches!(err, ChatError::InsufficientCredits { needed: 1 }));
}

#[tokio::test]
async fn the_last_credits_buy_a_reply_capped_at_what_they_pay() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
    // The agent may answer 2,000 tokens (3 credits); the tenant has 1.
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, 1))));
    m.model.expect_complete().withf(|r| u64::from(r.max_tokens) == 1000 - PROMPT).times(1).returning(|_| {
        Ok(Completion {
            content: "hi".into(),
            prompt_tokens: PROMPT,
            completion_tokens: 980,
            finish: FinishReason::Stop,
            tool_calls: Vec::new(),
        })
    });
    m.conversations
        .expect_record_exchange()
        .withf(|x| x.settlement.entry.delta == -1 && x.settlement.hold.amount == 1)
        .returning(|_| Ok(ExchangeOutcome::Recorded { remaining: 0 }));
    let reply =
        m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hello there", None)).await.unwrap();
    assert_eq!((reply.charged, reply.remaining), (1, 0));
}

#[test]
fn an_affordable_completion_fills_the_credits_left_after_the_prompt() {
    assert_eq!(affordable_completion(1, 20), 980);
    assert_eq!(affordable_completion(3, 2500), 500);
    assert_eq!(affordable_completion(0, 20), 0);
    assert_eq!(affordable_completion(i64::MAX, 1), u64::MAX - 1);
}

#[tokio::test]
async fn a_model_failure_releases_the_hold_and_stores_nothing() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, r.wanted))));
    m.model.expect_complete().returning(|_| Err(ModelError::Timeout));
    m.credits.expect_release().times(1).returning(|_| Ok(()));
    m.conversations.expect_record_exchange().never();
    let err =
        m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hello", None)).await.unwrap_err();
    assert!(matches!(err, ChatError::Upstream(ModelError::Timeout)));
}

#[tokio::test]
async fn an_agent_deleted_while_it_answered_is_not_found_and_costs_nothing() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, r.wanted))));
    m.model.expect_complete().returning(|_| {
        Ok(Completion {
            content: "hi".into(),
            prompt_tokens: 5,
            completion_tokens: 1,
            finish: FinishReason::Stop,
            tool_calls: Vec::new(),
        })
    });
    m.conversations.expect_record_exchange().returning(|_| Ok(ExchangeOutcome::AgentGone));
    m.credits.expect_release().times(1).returning(|_| Ok(()));
    let err =
        m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hello", None)).await.unwrap_err();
    assert!(matches!(err, ChatError::AgentNotFound));
}

#[tokio::test]
async fn an_answer_is_recorded_with_its_charge_and_both_events() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, r.wanted))));
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
            Ok(Completion {
                content: "hi".into(),
                prompt_tokens: 1200,
                completion_tokens: 300,
                finish: FinishReason::Stop,
                tool_calls: Vec::new(),
            })
        });
    m.conversations
        .expect_record_exchange()
        .withf(|x| {
            let completed = match &x.events[1].payload {
                EventPayload::AgentMessageCompleted(d) => d.clone(),
                _ => return false,
            };
            x.session_id.as_str().starts_with("ses_")
                && x.settlement.entry.delta == -2
                && x.settlement.entry.reason == LedgerReason::ChatUsage
                && x.events.len() == 2
                && matches!(x.events[0].payload, EventPayload::AgentMessageCreated(_))
                && completed.tokens_used == 1500
                && completed.conversation_id == x.session_id
                && completed.message_id == x.reply.id
                && x.reply.prompt_tokens == 1200
                && x.user_message.role == ChatRole::User
        })
        .times(1)
        .returning(|_| Ok(ExchangeOutcome::Recorded { remaining: 97 }));
    let reply =
        m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hello there", None)).await.unwrap();
    assert_eq!((reply.charged, reply.remaining), (2, 97));
    assert_eq!(reply.message.content, "hi");
}

#[tokio::test]
async fn paused_agents_and_read_only_keys_are_refused() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Paused))));
    let err = m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hi", None)).await.unwrap_err();
    assert!(matches!(err, ChatError::AgentPaused));

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
}

#[test]
fn messages_are_bounded_and_not_blank() {
    assert!(chat_message("line one\n\tline two".into()).is_ok());
    assert_eq!(chat_message("   ".into()).unwrap_err().kind, FieldErrorKind::TooShort);
    assert_eq!(chat_message("nul \u{0}".into()).unwrap_err().kind, FieldErrorKind::InvalidFormat);
    assert_eq!(chat_message("x".repeat(MAX_MESSAGE_CHARS + 1)).unwrap_err().kind, FieldErrorKind::TooLong);
}

#[tokio::test]
async fn a_client_session_id_continues_its_conversation_or_starts_it() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
    m.conversations
        .expect_recent()
        .withf(|t, a, s, _| t.as_str() == "ten_1" && a.as_str() == "agt_1" && s.as_str() == "user-42:support")
        .returning(|_, _, s, _| {
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
                incomplete: false,
                tool_calls: Vec::new(),
                tool_call_id: None,
                tool_name: None,
                citations: Vec::new(),
                finish_reason: None,
            };
            Ok(vec![msg(ChatRole::User, "my name is Ada"), msg(ChatRole::Assistant, "hello Ada")])
        });
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, r.wanted))));
    m.model
        .expect_complete()
        .withf(|r| r.messages.len() == 4 && r.messages[1].content == "my name is Ada")
        .returning(|_| {
            Ok(Completion {
                content: "Ada".into(),
                prompt_tokens: 10,
                completion_tokens: 1,
                finish: FinishReason::Stop,
                tool_calls: Vec::new(),
            })
        });
    m.conversations
        .expect_record_exchange()
        .withf(|x| x.session_id.as_str() == "user-42:support")
        .returning(|_| Ok(ExchangeOutcome::Recorded { remaining: 9 }));
    let reply = m
        .chat()
        .chat(&owner(), &AgentId::from_string("agt_1"), input("what is my name", Some("user-42:support")))
        .await
        .unwrap();
    assert_eq!(reply.session_id.as_str(), "user-42:support");
}

#[tokio::test]
async fn the_history_of_an_unknown_session_is_not_found() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
    m.conversations.expect_page().returning(|_, _, _, _| Ok(None));
    let err = m
        .chat()
        .history(&owner(), &AgentId::from_string("agt_1"), &SessionId::from_string("s-1"), Page::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ChatError::SessionNotFound));
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
                && matches!(&e.payload, EventPayload::AgentCreated(d) if d.id.as_str() == "agt_0")
        })
        .times(1)
        .returning(|_, _| Ok(()));
    let mut ids = MockIdGenerator::new();
    let n = AtomicU64::new(0);
    ids.expect_generate().returning(move |p| format!("{p}_{}", n.fetch_add(1, Ordering::SeqCst)));
    let mut clock = MockClock::new();
    clock.expect_now().returning(t0);
    let service = AgentService::new(Arc::new(agents), Arc::new(ids), Arc::new(clock));
    let new = NewAgent {
        name: AgentName::new("Helper").unwrap(),
        agent_type: AgentType::Assistant,
        status: AgentStatus::Active,
        description: None,
        memory_types: Vec::new(),
        config: AgentConfig::default(),
    };
    let created = service.create(&owner(), new).await.unwrap();
    assert_eq!(created.status, AgentStatus::Active);
}

/// A sink that keeps nothing and stops listening at once: a client that left.
struct Gone;

impl DeltaSink for Gone {
    fn delta(&self, _text: &str) -> bool {
        false
    }
}

#[tokio::test]
async fn a_streamed_reply_whose_client_left_is_stored_incomplete_and_charged_once() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent(AgentStatus::Active))));
    m.conversations.expect_recent().returning(|_, _, _, _| Ok(Vec::new()));
    m.credits.expect_hold().times(1).returning(|r| Ok(Some(granted(r, r.wanted))));
    m.model.expect_complete().never();
    m.model.expect_stream().times(1).returning(|_, sink| {
        let listening = sink.delta("Once");
        assert!(!listening);
        Ok(Completion {
            content: "Once".into(),
            prompt_tokens: PROMPT,
            completion_tokens: 1,
            finish: FinishReason::Cancelled,
            tool_calls: Vec::new(),
        })
    });
    m.conversations
        .expect_record_exchange()
        .withf(|x| {
            x.reply.incomplete
                && x.reply.content == "Once"
                && !x.user_message.incomplete
                && x.settlement.entry.delta == -1
        })
        .times(1)
        .returning(|_| Ok(ExchangeOutcome::Recorded { remaining: 99 }));
    // Settled with the exchange: the hold is never released apart.
    m.credits.expect_release().never();
    let service = m.chat();
    let prepared =
        service.prepare(&owner(), &AgentId::from_string("agt_1"), input("hello there", Some("s-1"))).await;
    let prepared = prepared.unwrap();
    assert_eq!(prepared.session_id().as_str(), "s-1");
    let reply = prepared.answer(Some(Arc::new(Gone))).await.unwrap();
    assert!(reply.message.incomplete);
    assert_eq!((reply.charged, reply.remaining), (1, 99));
}

/// An agent with a `memory_search` tool and at most `rounds` rounds of tool calls.
fn agent_with_tools(rounds: Option<u8>) -> Agent {
    let mut agent = agent(AgentStatus::Active);
    agent.config.tools = AgentTool::parse_list(&serde_json::json!([{"type": "memory_search"}])).unwrap();
    agent.config.max_tool_rounds = rounds;
    agent
}

fn calls_memory_search(prompt_tokens: u64) -> Completion {
    Completion {
        content: String::new(),
        prompt_tokens,
        completion_tokens: 1500,
        finish: FinishReason::ToolCalls,
        tool_calls: vec![ToolCall {
            id: "call_1".into(),
            name: "memory_search".into(),
            arguments: r#"{"query": "favourite colour"}"#.into(),
        }],
    }
}

#[tokio::test]
async fn a_tool_round_runs_the_tool_on_the_agents_memory_and_charges_each_model_call() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent_with_tools(None))));
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, r.wanted))));
    // The second call's prompt is longer (the call and its result): the hold grows for it.
    // Refreshed before the tool runs, grown before the second call.
    m.credits.expect_extend_hold().times(2).returning(|_, wanted, _, _| Ok(Some(wanted)));
    let calls = AtomicU64::new(0);
    m.model.expect_complete().times(2).returning(move |r| {
        assert_eq!(r.tools.len(), 1, "the agent's tool is offered");
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            return Ok(calls_memory_search(PROMPT));
        }
        let last = r.messages.last().unwrap();
        assert_eq!((last.role, last.tool_call_id.as_deref()), (ChatRole::Tool, Some("call_1")));
        assert_eq!(last.content, r#"{"results":["teal"]}"#, "the tool's output reaches the model");
        Ok(Completion {
            content: "Teal.".into(),
            prompt_tokens: 600,
            completion_tokens: 2,
            finish: FinishReason::Stop,
            tool_calls: Vec::new(),
        })
    });
    m.tools
        .expect_call()
        .withf(|context, name, arguments| {
            context.caller.role == Role::Owner
                && context.agent.id.as_str() == "agt_1"
                && name == "memory_search"
                && arguments["query"] == "favourite colour"
        })
        .times(1)
        .returning(|_, _, _| Ok(serde_json::json!({"results": ["teal"]})));
    m.conversations
        .expect_record_exchange()
        .withf(|x| {
            let roles: Vec<ChatRole> = x.steps.iter().map(|s| s.role).collect();
            let tool_events = x.events.iter().filter(|e| matches!(e.payload, EventPayload::AgentToolCalled(ref d) if d.ok && d.tool == "memory_search")).count();
            // 21 + 1,500 tokens cost 2 credits, 600 + 2 cost 1: one entry of 3.
            roles == [ChatRole::Assistant, ChatRole::Tool]
                && x.steps[0].tool_calls.len() == 1
                && x.reply.content == "Teal."
                && x.reply.tool_calls.is_empty()
                && (x.reply.prompt_tokens, x.reply.completion_tokens) == (PROMPT + 600, 1502)
                && x.settlement.entry.delta == -3
                && tool_events == 1
                && x.user_message.id < x.steps[0].id
                && x.steps[1].id < x.reply.id
        })
        .times(1)
        .returning(|_| Ok(ExchangeOutcome::Recorded { remaining: 7 }));
    let reply =
        m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hello there", None)).await.unwrap();
    assert_eq!(reply.charged, 3);
    assert_eq!(reply.finish, FinishReason::Stop);
}

#[tokio::test]
async fn the_most_rounds_stop_the_chat_with_a_message_saying_so() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent_with_tools(Some(1)))));
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, 100))));
    // Refreshed before its one tool call; never grown (100 credits cover every call).
    m.credits
        .expect_extend_hold()
        .withf(|_, wanted, _, _| *wanted == 0)
        .times(1)
        .returning(|_, _, _, _| Ok(Some(0)));
    // The model asks for the tool every time; the second ask is past the one round allowed.
    m.model.expect_complete().times(2).returning(|_| Ok(calls_memory_search(PROMPT)));
    m.tools.expect_call().times(1).returning(|_, _, _| Ok(serde_json::json!({"results": []})));
    m.conversations
        .expect_record_exchange()
        .withf(|x| {
            x.reply.content.contains("max_tool_rounds")
                && x.reply.tool_calls.is_empty()
                && x.steps.len() == 2
                && x.settlement.entry.delta == -4
        })
        .times(1)
        .returning(|_| Ok(ExchangeOutcome::Recorded { remaining: 7 }));
    let reply =
        m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hello there", None)).await.unwrap();
    assert_eq!(reply.finish, FinishReason::Length);
}

#[tokio::test]
async fn a_round_the_balance_cannot_pay_ends_the_chat_with_what_was_paid_for() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent_with_tools(None))));
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, 2))));
    m.credits
        .expect_extend_hold()
        .times(2)
        .returning(|_, wanted, _, _| Ok(if wanted == 0 { Some(0) } else { None }));
    m.model.expect_complete().times(1).returning(|_| Ok(calls_memory_search(PROMPT)));
    m.tools.expect_call().times(1).returning(|_, _, _| Err(ToolError::Failed("the memory is empty".into())));
    m.conversations
        .expect_record_exchange()
        .withf(|x| {
            x.reply.content.contains("credits")
                && x.settlement.entry.delta == -2
                && x.events.iter().any(|e| matches!(e.payload, EventPayload::AgentToolCalled(ref d) if !d.ok))
                && x.steps[1].content == r#"{"error":"the memory is empty"}"#
        })
        .times(1)
        .returning(|_| Ok(ExchangeOutcome::Recorded { remaining: 0 }));
    m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hello there", None)).await.unwrap();
}

#[tokio::test]
async fn no_rounds_allowed_offers_no_tools() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent_with_tools(Some(0)))));
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, r.wanted))));
    m.model.expect_complete().withf(|r| r.tools.is_empty()).times(1).returning(|_| {
        Ok(Completion {
            content: "hi".into(),
            prompt_tokens: 1,
            completion_tokens: 1,
            finish: FinishReason::Stop,
            tool_calls: Vec::new(),
        })
    });
    m.conversations.expect_record_exchange().returning(|_| Ok(ExchangeOutcome::Recorded { remaining: 7 }));
    m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hello there", None)).await.unwrap();
}

#[tokio::test]
async fn a_model_failing_after_the_tools_ran_charges_the_calls_that_answered() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent_with_tools(None))));
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, 100))));
    m.credits.expect_extend_hold().returning(|_, _, _, _| Ok(Some(0)));
    m.credits.expect_release().never();
    let calls = AtomicU64::new(0);
    m.model.expect_complete().times(2).returning(move |_| {
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            Ok(calls_memory_search(PROMPT))
        } else {
            Err(ModelError::Upstream("context too long".into()))
        }
    });
    m.tools.expect_call().times(1).returning(|_, _, _| Ok(serde_json::json!({"results": []})));
    m.conversations
        .expect_record_exchange()
        .withf(|x| {
            x.settlement.entry.delta == -2
                && x.reply.content.contains("context too long")
                && x.steps.len() == 2
        })
        .times(1)
        .returning(|_| Ok(ExchangeOutcome::Recorded { remaining: 7 }));
    let reply =
        m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hello there", None)).await.unwrap();
    assert_eq!(reply.charged, 2, "the first call answered and is paid for");
}

#[tokio::test]
async fn a_tool_nobody_offered_is_answered_with_an_error_not_handed_to_the_client() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(agent_with_tools(None))));
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, 100))));
    m.credits.expect_extend_hold().returning(|_, _, _, _| Ok(Some(0)));
    let calls = AtomicU64::new(0);
    m.model.expect_complete().times(2).returning(move |r| {
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            let mut c = calls_memory_search(PROMPT);
            c.tool_calls[0].name = "delete_everything".into();
            return Ok(c);
        }
        assert!(r.messages.last().unwrap().content.contains("no tool named"), "{:?}", r.messages.last());
        Ok(Completion::nothing(FinishReason::Stop))
    });
    m.tools.expect_call().never();
    m.conversations
        .expect_record_exchange()
        .withf(|x| x.reply.tool_calls.is_empty() && x.steps.len() == 2)
        .returning(|_| Ok(ExchangeOutcome::Recorded { remaining: 7 }));
    let reply =
        m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("hello there", None)).await.unwrap();
    assert_eq!(reply.finish, FinishReason::Stop);
}

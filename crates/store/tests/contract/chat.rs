use agentry_domain::agents::{
    AgentRepository, ChatRole, ConversationRepository, Exchange, ExchangeOutcome, Message, ToolCall,
};
use agentry_domain::billing::{
    CreditHold, CreditRepository, HoldRequest, LedgerEntry, LedgerReason, Settlement,
};
use agentry_domain::events::{EventLog, EventPayload, EventType};
use agentry_domain::ids::{AgentId, CreditHoldId, EventId, LedgerEntryId, MessageId, SessionId, TenantId};
use agentry_domain::pagination::Page;
use agentry_store::{ConversationStore, CreditStore, Database, EventStore};
use chrono::{DateTime, TimeZone, Utc};

use crate::harness::event;

crate::contract!(
    an_exchange_stores_messages_charge_and_events_together,
    a_session_id_is_scoped_to_its_tenant_and_agent,
    an_exchange_without_its_hold_stores_nothing,
    an_exchange_for_a_deleted_agent_stores_and_charges_nothing,
    crossing_the_low_threshold_adds_the_warning_event,
    the_low_credit_event_is_written_once_at_the_crossing_only,
    deleting_an_agent_deletes_its_conversations,
    a_stored_exchange_is_read_back_by_its_replys_id,
    tool_calls_and_results_are_stored_in_order_between_the_two_messages,
    charges_are_summed_per_utc_day_in_their_tenant_only,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 3, 10, 0, 0).unwrap()
}

fn tenant() -> TenantId {
    TenantId::from_string("ten_1")
}

fn agent_id(id: &str) -> AgentId {
    AgentId::from_string(id)
}

fn session(id: &str) -> SessionId {
    SessionId::from_string(id)
}

fn message(id: &str, agent: &str, session_id: &str, role: ChatRole, content: &str) -> Message {
    Message {
        id: MessageId::from_string(id),
        tenant_id: tenant(),
        agent_id: agent_id(agent),
        session_id: session(session_id),
        role,
        content: content.into(),
        prompt_tokens: if role == ChatRole::Assistant { 40 } else { 0 },
        completion_tokens: if role == ChatRole::Assistant { 12 } else { 0 },
        created_at: t0(),
        incomplete: false,
        tool_calls: Vec::new(),
        tool_call_id: None,
        tool_name: None,
        citations: Vec::new(),
        finish_reason: None,
    }
}

fn exchange_in(n: u32, agent: &str, session_id: &str, hold_id: &str, cost: i64, threshold: i64) -> Exchange {
    Exchange {
        session_id: session(session_id),
        user_message: message(&format!("msg_{n}a"), agent, session_id, ChatRole::User, "hello"),
        steps: Vec::new(),
        reply: message(&format!("msg_{n}b"), agent, session_id, ChatRole::Assistant, "hi there"),
        settlement: Settlement {
            hold: CreditHold {
                id: CreditHoldId::from_string(hold_id),
                tenant_id: tenant(),
                amount: 5,
                created_at: t0(),
            },
            entry: LedgerEntry {
                id: LedgerEntryId::from_string(format!("led_chat_{n}")),
                tenant_id: tenant(),
                delta: -cost,
                balance_after: 0,
                reason: LedgerReason::ChatUsage,
                reference: Some(format!("msg_{n}b")),
                created_at: t0(),
            },
            low_threshold: threshold,
            low_event: EventId::from_string(format!("evt_low_{n}")),
        },
        events: vec![
            event(&format!("evt_{n}a"), "ten_1", EventType::AgentMessageCreated),
            event(&format!("evt_{n}b"), "ten_1", EventType::AgentMessageCompleted),
        ],
        keep_conversation: true,
    }
}

fn exchange(n: u32, hold_id: &str, cost: i64, threshold: i64) -> Exchange {
    exchange_in(n, "agt_1", "ses_1", hold_id, cost, threshold)
}

/// Holds 5 credits under `id`, as a chat does before it calls the model.
async fn hold(credits: &CreditStore, id: &str) {
    let request = HoldRequest {
        id: CreditHoldId::from_string(id),
        tenant_id: tenant(),
        wanted: 5,
        minimum: 1,
        created_at: t0(),
    };
    assert_eq!(credits.hold(&request).await.unwrap().map(|h| h.amount), Some(5));
}

async fn setup(db: &Database) -> (ConversationStore, CreditStore) {
    let agents = super::agents::setup(db).await;
    agents
        .create(&super::agents::agent("agt_1", "ten_1"), &event("evt_c1", "ten_1", EventType::AgentCreated))
        .await
        .unwrap();
    agents
        .create(&super::agents::agent("agt_2", "ten_1"), &event("evt_c2", "ten_1", EventType::AgentCreated))
        .await
        .unwrap();
    (ConversationStore::new(db.clone()), CreditStore::new(db.clone()))
}

async fn an_exchange_stores_messages_charge_and_events_together(db: Database) {
    let (conversations, credits) = setup(&db).await;
    hold(&credits, "hld_1").await;
    let outcome = conversations.record_exchange(&exchange(1, "hld_1", 2, 100)).await.unwrap();
    assert_eq!(outcome, ExchangeOutcome::Recorded { remaining: 998 }, "held 5, charged 2, 3 returned");
    let (messages, total) = conversations
        .page(&tenant(), &agent_id("agt_1"), &session("ses_1"), Page::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(total, 2);
    assert_eq!(messages[1].prompt_tokens, 40);
    assert_eq!(db.count_rows("credit_holds").await.unwrap(), 0);
    let (ledger, _) = credits.ledger(&tenant(), Page::default()).await.unwrap();
    assert_eq!(ledger[0].delta, -2);
    assert_eq!(ledger[0].balance_after, 998);
    assert_eq!(db.count_rows("events").await.unwrap(), 4, "two agents created, two message events");

    // A second exchange in the same session continues it.
    hold(&credits, "hld_2").await;
    conversations.record_exchange(&exchange(2, "hld_2", 1, 100)).await.unwrap();
    let recent = conversations.recent(&tenant(), &agent_id("agt_1"), &session("ses_1"), 3).await.unwrap();
    assert_eq!(recent.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["msg_1b", "msg_2a", "msg_2b"]);
    assert_eq!(db.count_rows("chat_sessions").await.unwrap(), 1);
}

async fn a_session_id_is_scoped_to_its_tenant_and_agent(db: Database) {
    let (conversations, credits) = setup(&db).await;
    hold(&credits, "hld_1").await;
    conversations.record_exchange(&exchange_in(1, "agt_1", "s-1", "hld_1", 1, 0)).await.unwrap();
    hold(&credits, "hld_2").await;
    conversations.record_exchange(&exchange_in(2, "agt_2", "s-1", "hld_2", 1, 0)).await.unwrap();
    assert_eq!(db.count_rows("chat_sessions").await.unwrap(), 2, "one conversation per agent");
    let (one, total) = conversations
        .page(&tenant(), &agent_id("agt_1"), &session("s-1"), Page::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((total, one[0].id.as_str()), (2, "msg_1a"));
    let (past, total) = conversations
        .page(&tenant(), &agent_id("agt_1"), &session("s-1"), Page::new(Some(2), Some(2)).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((past.len(), total), (0, 2), "past the end the total is still counted");
    let other_tenant = TenantId::from_string("ten_2");
    assert_eq!(
        conversations
            .page(&other_tenant, &agent_id("agt_1"), &session("s-1"), Page::default())
            .await
            .unwrap(),
        None
    );
    assert!(
        conversations
            .recent(&other_tenant, &agent_id("agt_1"), &session("s-1"), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        conversations.page(&tenant(), &agent_id("agt_1"), &session("s-2"), Page::default()).await.unwrap(),
        None,
        "an unknown session"
    );
}

async fn an_exchange_without_its_hold_stores_nothing(db: Database) {
    let (conversations, _) = setup(&db).await;
    assert!(conversations.record_exchange(&exchange(1, "hld_missing", 2, 100)).await.is_err());
    for table in ["chat_sessions", "chat_messages"] {
        assert_eq!(db.count_rows(table).await.unwrap(), 0, "{table}");
    }
    assert_eq!(
        db.count_rows("credit_ledger").await.unwrap(),
        2,
        "only the welcome grants of the two accounts"
    );
}

async fn an_exchange_for_a_deleted_agent_stores_and_charges_nothing(db: Database) {
    let (conversations, credits) = setup(&db).await;
    hold(&credits, "hld_1").await;
    let agents = agentry_store::AgentStore::new(db.clone());
    assert!(agents.delete(&tenant(), &agent_id("agt_1")).await.unwrap());
    let outcome = conversations.record_exchange(&exchange(1, "hld_1", 2, 100)).await.unwrap();
    assert_eq!(outcome, ExchangeOutcome::AgentGone);
    for table in ["chat_sessions", "chat_messages"] {
        assert_eq!(db.count_rows(table).await.unwrap(), 0, "{table}");
    }
    assert_eq!(db.count_rows("credit_holds").await.unwrap(), 1, "the hold is left for the caller to release");
    credits.release(&CreditHoldId::from_string("hld_1")).await.unwrap();
    assert_eq!(credits.account(&tenant()).await.unwrap().unwrap().0, 1000);
}

async fn crossing_the_low_threshold_adds_the_warning_event(db: Database) {
    let (conversations, credits) = setup(&db).await;
    hold(&credits, "hld_1").await;
    // 1000 → 997 crosses a threshold of 999.
    conversations.record_exchange(&exchange(1, "hld_1", 3, 999)).await.unwrap();
    let events = EventStore::new(db.clone()).recent(&tenant(), 10).await.unwrap();
    let low =
        events.iter().find(|e| e.event_type() == EventType::BillingCreditsLow).expect("a low-credit event");
    assert_eq!(low.payload, EventPayload::BillingCreditsLow { credits: 997, threshold: 999 });
}

async fn the_low_credit_event_is_written_once_at_the_crossing_only(db: Database) {
    let (conversations, credits) = setup(&db).await;
    let low_events = || async {
        let events = EventStore::new(db.clone()).recent(&tenant(), 20).await.unwrap();
        events.into_iter().filter(|e| e.event_type() == EventType::BillingCreditsLow).collect::<Vec<_>>()
    };
    // 1000 → 999: at or above a threshold of 998.
    hold(&credits, "hld_1").await;
    conversations.record_exchange(&exchange(1, "hld_1", 1, 998)).await.unwrap();
    assert!(low_events().await.is_empty());
    // 999 → 997 crosses it.
    hold(&credits, "hld_2").await;
    conversations.record_exchange(&exchange(2, "hld_2", 2, 998)).await.unwrap();
    // 997 → 996: already below.
    hold(&credits, "hld_3").await;
    conversations.record_exchange(&exchange(3, "hld_3", 1, 998)).await.unwrap();
    let low = low_events().await;
    assert_eq!(low.len(), 1, "one event, at the crossing: {low:?}");
    assert_eq!(low[0].id.as_str(), "evt_low_2");
    assert_eq!(low[0].payload, EventPayload::BillingCreditsLow { credits: 997, threshold: 998 });
    assert_eq!(credits.account(&tenant()).await.unwrap().unwrap().0, 996, "each chat charged once");
}

async fn deleting_an_agent_deletes_its_conversations(db: Database) {
    let (conversations, credits) = setup(&db).await;
    hold(&credits, "hld_1").await;
    conversations.record_exchange(&exchange(1, "hld_1", 1, 0)).await.unwrap();
    let agents = agentry_store::AgentStore::new(db.clone());
    assert!(agents.delete(&tenant(), &agent_id("agt_1")).await.unwrap());
    assert_eq!(db.count_rows("chat_sessions").await.unwrap(), 0);
    assert_eq!(db.count_rows("chat_messages").await.unwrap(), 0);
}

async fn a_stored_exchange_is_read_back_by_its_replys_id(db: Database) {
    let (conversations, credits) = setup(&db).await;
    hold(&credits, "hld_1").await;
    let x = exchange(1, "hld_1", 2, 100);
    conversations.record_exchange(&x).await.unwrap();
    hold(&credits, "hld_2").await;
    let second = exchange(2, "hld_2", 2, 100);
    conversations.record_exchange(&second).await.unwrap();
    let got =
        conversations.exchange_of(&tenant(), &agent_id("agt_1"), &second.reply.id).await.unwrap().unwrap();
    assert_eq!((got.message, got.reply), (second.user_message.clone(), second.reply.clone()));
    // Another tenant's, or another agent's, finds nothing; nor does a stateless call's reply.
    let other = TenantId::from_string("ten_2");
    assert!(conversations.exchange_of(&other, &agent_id("agt_1"), &x.reply.id).await.unwrap().is_none());
    assert!(conversations.exchange_of(&tenant(), &agent_id("agt_2"), &x.reply.id).await.unwrap().is_none());
    hold(&credits, "hld_3").await;
    let mut stateless = exchange(3, "hld_3", 2, 100);
    stateless.keep_conversation = false;
    conversations.record_exchange(&stateless).await.unwrap();
    assert!(
        conversations
            .exchange_of(&tenant(), &agent_id("agt_1"), &stateless.reply.id)
            .await
            .unwrap()
            .is_none()
    );
}

async fn tool_calls_and_results_are_stored_in_order_between_the_two_messages(db: Database) {
    let (conversations, credits) = setup(&db).await;
    hold(&credits, "hld_1").await;
    let mut x = exchange(1, "hld_1", 3, 100);
    let mut call = message("msg_1a1", "agt_1", "ses_1", ChatRole::Assistant, "");
    call.tool_calls = vec![ToolCall {
        id: "call_1".into(),
        name: "memory_search".into(),
        arguments: r#"{"query": "colour"}"#.into(),
    }];
    let mut result = message("msg_1a2", "agt_1", "ses_1", ChatRole::Tool, r#"{"results": []}"#);
    result.tool_call_id = Some("call_1".into());
    result.tool_name = Some("memory_search".into());
    x.steps = vec![call.clone(), result.clone()];
    x.reply.citations = vec![agentry_domain::agents::Citation {
        index: 1,
        chunk_id: agentry_domain::ids::ChunkId::from_string("kbc_1"),
        file_id: agentry_domain::ids::KnowledgeFileId::from_string("kbf_1"),
        file_name: "handbook.pdf".into(),
        page: Some(2),
        snippet: "Refunds are paid within fourteen days ünïcödé".into(),
    }];
    conversations.record_exchange(&x).await.unwrap();
    let (messages, total) = conversations
        .page(&tenant(), &agent_id("agt_1"), &session("ses_1"), Page::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(total, 4);
    assert_eq!(
        messages.iter().map(|m| m.role).collect::<Vec<_>>(),
        [ChatRole::User, ChatRole::Assistant, ChatRole::Tool, ChatRole::Assistant]
    );
    assert_eq!(messages[1], call, "the calls read back as written");
    assert_eq!(messages[2], result);
    assert!(messages[3].tool_calls.is_empty());
    assert_eq!(messages[3], x.reply, "the reply's citations read back as written");
    assert!(messages[0].citations.is_empty());
}

/// Charges `cost` to `tenant` at `at` through a chat of its agent `agent`, as a chat does:
/// a hold, then the exchange that settles it.
async fn charge_at(
    conversations: &ConversationStore,
    credits: &CreditStore,
    n: u32,
    (tenant, agent): (&str, &str),
    cost: i64,
    at: DateTime<Utc>,
) {
    let hold_id = format!("hld_{n}");
    let request = HoldRequest {
        id: CreditHoldId::from_string(&hold_id),
        tenant_id: TenantId::from_string(tenant),
        wanted: 5,
        minimum: 1,
        created_at: at,
    };
    assert!(credits.hold(&request).await.unwrap().is_some());
    let mut x = exchange_in(n, agent, &format!("ses_{n}"), &hold_id, cost, 0);
    for m in [&mut x.user_message, &mut x.reply] {
        m.tenant_id = TenantId::from_string(tenant);
    }
    x.settlement.hold.tenant_id = TenantId::from_string(tenant);
    x.settlement.entry.tenant_id = TenantId::from_string(tenant);
    x.settlement.entry.created_at = at;
    x.events.clear();
    conversations.record_exchange(&x).await.unwrap();
}

async fn charges_are_summed_per_utc_day_in_their_tenant_only(db: Database) {
    let (conversations, credits) = setup(&db).await;
    super::agents::setup_agent(&db, "agt_9", "ten_2").await;
    let day = |d: u32| chrono::NaiveDate::from_ymd_opt(2026, 11, d).unwrap();
    let at = |d: u32, h: u32, m: u32, s: u32| Utc.with_ymd_and_hms(2026, 11, d, h, m, s).unwrap();
    let ours = ("ten_1", "agt_1");
    // Before the window (the 1st), on the 3rd twice up to its last second, on the 4th from its
    // first second; another tenant's on the 3rd.
    charge_at(&conversations, &credits, 1, ours, 7, at(1, 12, 0, 0)).await;
    charge_at(&conversations, &credits, 2, ours, 2, at(3, 0, 0, 0)).await;
    charge_at(&conversations, &credits, 3, ours, 3, at(3, 23, 59, 59)).await;
    charge_at(&conversations, &credits, 4, ours, 4, at(4, 0, 0, 1)).await;
    charge_at(&conversations, &credits, 5, ("ten_2", "agt_9"), 5, at(3, 12, 0, 0)).await;
    let since = at(2, 0, 0, 0);
    let mut spent = credits.spent_per_day(&tenant(), since).await.unwrap();
    spent.sort();
    // The welcome grant is no spending; the 2nd had none.
    assert_eq!(spent, [(day(3), 5), (day(4), 4)]);
    let theirs = credits.spent_per_day(&TenantId::from_string("ten_2"), since).await.unwrap();
    assert_eq!(theirs, [(day(3), 5)]);
    assert!(credits.spent_per_day(&tenant(), at(5, 0, 0, 0)).await.unwrap().is_empty());
}

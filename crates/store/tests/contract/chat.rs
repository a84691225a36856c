use agentry_domain::agents::{AgentRepository, ChatRole, ConversationRepository, Exchange, Message};
use agentry_domain::billing::{CreditHold, CreditRepository, LedgerEntry, LedgerReason, Settlement};
use agentry_domain::events::{Event, EventLog, EventType};
use agentry_domain::ids::{AgentId, CreditHoldId, EventId, LedgerEntryId, MessageId, SessionId, TenantId};
use agentry_domain::pagination::Page;
use agentry_store::{ConversationStore, CreditStore, Database, EventStore};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;

crate::contract!(
    an_exchange_stores_messages_charge_and_events_together,
    an_exchange_without_its_hold_stores_nothing,
    crossing_the_low_threshold_adds_the_warning_event,
    deleting_an_agent_deletes_its_conversations,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 3, 10, 0, 0).unwrap()
}

fn tenant() -> TenantId {
    TenantId::from_string("ten_1")
}

fn message(id: &str, role: ChatRole, content: &str) -> Message {
    Message {
        id: MessageId::from_string(id),
        tenant_id: tenant(),
        agent_id: AgentId::from_string("agt_1"),
        session_id: SessionId::from_string("ses_1"),
        role,
        content: content.into(),
        prompt_tokens: if role == ChatRole::Assistant { 40 } else { 0 },
        completion_tokens: if role == ChatRole::Assistant { 12 } else { 0 },
        created_at: t0(),
    }
}

fn exchange(n: u32, hold_id: &str, cost: i64, threshold: i64, new: bool) -> Exchange {
    Exchange {
        session: (SessionId::from_string("ses_1"), new),
        user_message: message(&format!("msg_{n}a"), ChatRole::User, "hello"),
        reply: message(&format!("msg_{n}b"), ChatRole::Assistant, "hi there"),
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
            Event {
                id: EventId::from_string(format!("evt_{n}a")),
                tenant_id: tenant(),
                event_type: EventType::AgentMessageCreated,
                data: json!({}),
                created_at: t0(),
            },
            Event {
                id: EventId::from_string(format!("evt_{n}b")),
                tenant_id: tenant(),
                event_type: EventType::AgentMessageCompleted,
                data: json!({}),
                created_at: t0(),
            },
        ],
    }
}

/// Holds 5 credits under `id`, as a chat does before it calls the model.
async fn hold(credits: &CreditStore, id: &str) {
    let hold =
        CreditHold { id: CreditHoldId::from_string(id), tenant_id: tenant(), amount: 5, created_at: t0() };
    assert!(credits.hold(&hold).await.unwrap().is_some());
}

async fn setup(db: &Database) -> (ConversationStore, CreditStore) {
    let agents = super::agents::setup(db).await;
    let created = Event {
        id: EventId::from_string("evt_created"),
        tenant_id: tenant(),
        event_type: EventType::AgentCreated,
        data: json!({}),
        created_at: t0(),
    };
    agents.create(&super::agents::agent("agt_1", "ten_1"), &created).await.unwrap();
    (ConversationStore::new(db.clone()), CreditStore::new(db.clone()))
}

async fn an_exchange_stores_messages_charge_and_events_together(db: Database) {
    let (conversations, credits) = setup(&db).await;
    hold(&credits, "hld_1").await;
    let left = conversations.record_exchange(&exchange(1, "hld_1", 2, 100, true)).await.unwrap();
    assert_eq!(left, 998, "held 5, charged 2, 3 returned");
    assert_eq!(
        conversations
            .session_agent(&tenant(), &SessionId::from_string("ses_1"))
            .await
            .unwrap()
            .unwrap()
            .as_str(),
        "agt_1"
    );
    assert_eq!(
        conversations
            .session_agent(&TenantId::from_string("ten_2"), &SessionId::from_string("ses_1"))
            .await
            .unwrap(),
        None
    );
    let (messages, total) =
        conversations.page(&SessionId::from_string("ses_1"), Page::default()).await.unwrap();
    assert_eq!(total, 2);
    assert_eq!(messages[1].prompt_tokens, 40);
    assert_eq!(db.count_rows("credit_holds").await.unwrap(), 0);
    let (ledger, _) = credits.ledger(&tenant(), Page::default()).await.unwrap();
    assert_eq!(ledger[0].delta, -2);
    assert_eq!(ledger[0].balance_after, 998);
    assert_eq!(db.count_rows("events").await.unwrap(), 3);

    // A second exchange in the same session.
    hold(&credits, "hld_2").await;
    conversations.record_exchange(&exchange(2, "hld_2", 1, 100, false)).await.unwrap();
    let recent = conversations.recent(&SessionId::from_string("ses_1"), 3).await.unwrap();
    assert_eq!(recent.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["msg_1b", "msg_2a", "msg_2b"]);
}

async fn an_exchange_without_its_hold_stores_nothing(db: Database) {
    let (conversations, _) = setup(&db).await;
    assert!(conversations.record_exchange(&exchange(1, "hld_missing", 2, 100, true)).await.is_err());
    for table in ["chat_sessions", "chat_messages"] {
        assert_eq!(db.count_rows(table).await.unwrap(), 0, "{table}");
    }
    assert_eq!(
        db.count_rows("credit_ledger").await.unwrap(),
        2,
        "only the welcome grants of the two accounts"
    );
}

async fn crossing_the_low_threshold_adds_the_warning_event(db: Database) {
    let (conversations, credits) = setup(&db).await;
    hold(&credits, "hld_1").await;
    // 1000 → 997 crosses a threshold of 999.
    conversations.record_exchange(&exchange(1, "hld_1", 3, 999, true)).await.unwrap();
    let events = EventStore::new(db.clone()).recent(&tenant(), 10).await.unwrap();
    let low =
        events.iter().find(|e| e.event_type == EventType::BillingCreditsLow).expect("a low-credit event");
    assert_eq!(low.data["credits"], 997);
}

async fn deleting_an_agent_deletes_its_conversations(db: Database) {
    let (conversations, credits) = setup(&db).await;
    hold(&credits, "hld_1").await;
    conversations.record_exchange(&exchange(1, "hld_1", 1, 0, true)).await.unwrap();
    let agents = agentry_store::AgentStore::new(db.clone());
    assert!(agents.delete(&tenant(), &AgentId::from_string("agt_1")).await.unwrap());
    assert_eq!(db.count_rows("chat_sessions").await.unwrap(), 0);
    assert_eq!(db.count_rows("chat_messages").await.unwrap(), 0);
}

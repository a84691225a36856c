//! Test databases: one per test, migrated, on either backend.

use agentry_store::test_support::{postgres_url, sqlite_url};
use agentry_store::{Database, DatabaseSettings};

/// A migrated database that lives as long as this value.
pub struct TestDb {
    pub db: Database,
    /// Its URL, for a test that needs a connection of its own.
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

async fn open(url: String, dir: Option<tempfile::TempDir>) -> TestDb {
    let db = Database::connect(&DatabaseSettings::new(url.clone())).await.expect("open the test database");
    db.migrate().await.expect("migrate the test database");
    TestDb { db, url, _dir: dir }
}

/// A fresh SQLite file in a temporary directory.
pub async fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().expect("temporary directory");
    open(sqlite_url(dir.path()), Some(dir)).await
}

/// A fresh PostgreSQL schema, or `None` when no test database is configured.
pub async fn postgres() -> Option<TestDb> {
    match postgres_url().await.expect("a test schema") {
        Some(url) => Some(open(url, None).await),
        None => {
            eprintln!("skipping PostgreSQL contract test: AGENTRY_TEST_DATABASE_URL is not set");
            None
        }
    }
}

/// Declares each listed `async fn name(db: Database)` as two tests, `name::sqlite` and
/// `name::postgres`.
#[macro_export]
macro_rules! contract {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let t = $crate::harness::sqlite().await;
                super::$name(t.db.clone()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(t) = $crate::harness::postgres().await {
                    super::$name(t.db.clone()).await;
                }
            }
        }
    )*};
}

/// An event of type `t` with a small, valid payload of that type.
pub fn event(id: &str, tenant: &str, t: agentry_domain::events::EventType) -> agentry_domain::events::Event {
    use agentry_domain::events::{
        AgentData, Event, EventPayload, EventType, MessageCompletedData, MessageCreatedData,
    };
    use agentry_domain::ids::{AgentId, EventId, MessageId, PurchaseId, SessionId, TenantId};
    use chrono::TimeZone as _;
    let at = chrono::Utc.with_ymd_and_hms(2026, 11, 3, 9, 0, 0).unwrap();
    let agent = || AgentData {
        id: AgentId::from_string("agt_1"),
        tenant_id: TenantId::from_string(tenant),
        name: "Helper".into(),
        agent_type: "assistant".into(),
        status: "active".into(),
        description: None,
        memory_types: vec![],
        config: serde_json::json!({}),
        created_at: at,
        updated_at: at,
    };
    let payload = match t {
        EventType::AgentCreated => EventPayload::AgentCreated(agent()),
        EventType::AgentUpdated => {
            EventPayload::AgentUpdated { agent: agent(), changed: vec!["name".into()] }
        }
        EventType::AgentMessageCreated => EventPayload::AgentMessageCreated(MessageCreatedData {
            agent_id: AgentId::from_string("agt_1"),
            conversation_id: SessionId::from_string("ses_1"),
            message_id: MessageId::from_string("msg_1"),
            content: "hello".into(),
            role: "user".into(),
        }),
        EventType::AgentMessageCompleted => EventPayload::AgentMessageCompleted(MessageCompletedData {
            agent_id: AgentId::from_string("agt_1"),
            conversation_id: SessionId::from_string("ses_1"),
            message_id: MessageId::from_string("msg_2"),
            content: "hi".into(),
            tokens_used: 12,
            latency_ms: 3,
        }),
        EventType::BillingCreditsLow => EventPayload::BillingCreditsLow { credits: 9, threshold: 10 },
        EventType::BillingPurchaseCompleted => EventPayload::BillingPurchaseCompleted {
            purchase_id: PurchaseId::from_string("pur_1"),
            credits: 250,
            provider: "manual".into(),
        },
        other => panic!("no sample payload for {other}"),
    };
    Event { id: EventId::from_string(id), tenant_id: TenantId::from_string(tenant), payload, created_at: at }
}

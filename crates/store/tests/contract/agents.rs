use agentry_domain::agents::{Agent, AgentConfig, AgentName, AgentRepository, AgentStatus, AgentType};
use agentry_domain::events::{EventLog, EventType};
use agentry_domain::identity::AccountRepository;
use agentry_domain::ids::{AgentId, TenantId};
use agentry_domain::memory::MemoryType;
use agentry_domain::pagination::Page;
use agentry_store::{AccountStore, AgentStore, Database, EventStore};
use chrono::{DateTime, TimeZone, Utc};

crate::contract!(
    an_agent_and_its_event_are_stored_together,
    agents_are_listed_per_tenant_with_a_total,
    another_tenants_agent_is_invisible_everywhere,
    an_update_replaces_the_agent_and_adds_its_event,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 3, 9, 0, 0).unwrap()
}

pub fn agent(id: &str, tenant: &str) -> Agent {
    Agent {
        id: AgentId::from_string(id),
        tenant_id: TenantId::from_string(tenant),
        name: AgentName::new("Helper").unwrap(),
        agent_type: AgentType::Support,
        status: AgentStatus::Active,
        description: Some("answers tickets".into()),
        memory_types: vec![MemoryType::Semantic, MemoryType::Episodic],
        config: AgentConfig {
            model: Some("gpt-test".into()),
            temperature: Some(0.25),
            system_prompt: None,
            max_tokens: Some(256),
            tools: agentry_domain::agents::AgentTool::parse_list(&serde_json::json!([
                {"type": "memory_search"},
                {"type": "http_request", "name": "weather", "description": "The weather", "allowed_hosts": ["127.0.0.1"]}
            ]))
            .unwrap(),
            max_tool_rounds: Some(3),
            knowledge_bases: vec![agentry_domain::ids::KnowledgeBaseId::from_string("kb_1")],
            knowledge: agentry_domain::agents::AgentKnowledge {
                mode: agentry_domain::agents::KnowledgeMode::Tool,
                top_k: 7,
                max_context_tokens: 900,
            },
            memory_extraction: agentry_domain::agents::ExtractionMode::Model,
        },
        created_at: t0(),
        updated_at: t0(),
    }
}

use crate::harness::event;

pub async fn setup(db: &Database) -> AgentStore {
    let accounts = AccountStore::new(db.clone());
    accounts.create_account(&super::accounts::account("1", "one@example.com")).await.unwrap();
    accounts.create_account(&super::accounts::account("2", "two@example.com")).await.unwrap();
    AgentStore::new(db.clone())
}

/// Stores agent `id` of `tenant` (with its event) in a database [`setup`] prepared.
pub async fn setup_agent(db: &Database, id: &str, tenant: &str) {
    let event = crate::harness::event(&format!("evt_{id}"), tenant, EventType::AgentCreated);
    AgentStore::new(db.clone()).create(&agent(id, tenant), &event).await.unwrap();
}

async fn an_agent_and_its_event_are_stored_together(db: Database) {
    let repo = setup(&db).await;
    let a = agent("agt_1", "ten_1");
    repo.create(&a, &event("evt_1", "ten_1", EventType::AgentCreated)).await.unwrap();
    assert_eq!(repo.get(&a.tenant_id, &a.id).await.unwrap(), Some(a.clone()));
    let events = EventStore::new(db.clone()).recent(&a.tenant_id, 10).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].event_type(), EventType::AgentCreated);

    // A failing create (duplicate id) stores neither the agent nor its event.
    assert!(repo.create(&a, &event("evt_2", "ten_1", EventType::AgentCreated)).await.is_err());
    assert_eq!(db.count_rows("events").await.unwrap(), 1);
}

async fn agents_are_listed_per_tenant_with_a_total(db: Database) {
    let repo = setup(&db).await;
    for i in 0..5 {
        repo.create(
            &agent(&format!("agt_{i}"), "ten_1"),
            &event(&format!("evt_{i}"), "ten_1", EventType::AgentCreated),
        )
        .await
        .unwrap();
    }
    repo.create(&agent("agt_x", "ten_2"), &event("evt_x", "ten_2", EventType::AgentCreated)).await.unwrap();
    let (page, total) =
        repo.list(&TenantId::from_string("ten_1"), Page::new(Some(2), Some(2)).unwrap()).await.unwrap();
    assert_eq!(total, 5);
    assert_eq!(page.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(), ["agt_2", "agt_3"]);
    let (last, _) =
        repo.list(&TenantId::from_string("ten_1"), Page::new(Some(3), Some(2)).unwrap()).await.unwrap();
    assert_eq!(last.len(), 1);
    // The total comes with the page; past the end there is no row to carry it, and it is
    // still right.
    let (past, total) =
        repo.list(&TenantId::from_string("ten_1"), Page::new(Some(9), Some(2)).unwrap()).await.unwrap();
    assert_eq!((past.len(), total), (0, 5));
    let (none, total) = repo.list(&TenantId::from_string("ten_3"), Page::default()).await.unwrap();
    assert_eq!((none.len(), total), (0, 0));
}

async fn another_tenants_agent_is_invisible_everywhere(db: Database) {
    let repo = setup(&db).await;
    let a = agent("agt_1", "ten_1");
    repo.create(&a, &event("evt_1", "ten_1", EventType::AgentCreated)).await.unwrap();
    let other = TenantId::from_string("ten_2");
    assert_eq!(repo.get(&other, &a.id).await.unwrap(), None);
    let mut moved = a.clone();
    moved.tenant_id = other.clone();
    assert!(!repo.update(&moved, &event("evt_2", "ten_2", EventType::AgentUpdated)).await.unwrap());
    assert!(!repo.delete(&other, &a.id).await.unwrap());
    assert!(repo.get(&a.tenant_id, &a.id).await.unwrap().is_some());
    assert_eq!(db.count_rows("events").await.unwrap(), 1, "no event for a refused update");
}

async fn an_update_replaces_the_agent_and_adds_its_event(db: Database) {
    let repo = setup(&db).await;
    let a = agent("agt_1", "ten_1");
    repo.create(&a, &event("evt_1", "ten_1", EventType::AgentCreated)).await.unwrap();
    let mut changed = a.clone();
    changed.status = AgentStatus::Paused;
    changed.description = None;
    changed.updated_at = t0() + chrono::Duration::seconds(1);
    assert!(repo.update(&changed, &event("evt_2", "ten_1", EventType::AgentUpdated)).await.unwrap());
    assert_eq!(repo.get(&a.tenant_id, &a.id).await.unwrap(), Some(changed));
    assert_eq!(db.count_rows("events").await.unwrap(), 2);
    assert!(repo.delete(&a.tenant_id, &a.id).await.unwrap());
    assert_eq!(repo.get(&a.tenant_id, &a.id).await.unwrap(), None);
}

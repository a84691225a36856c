#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use chrono::TimeZone;

use super::*;
use crate::agents::model::{AgentConfig, AgentName, AgentStatus, AgentType};
use crate::ids::{AgentId, MockIdGenerator, TenantId};
use crate::memory::{
    EmbeddingModel, MemoryServiceDeps, MemorySettings, MockAgentDirectory, MockEmbedder, MockMemoryRepository,
};
use crate::time::MockClock;
use crate::tokens::MockTokenCounter;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
}

fn agent(types: Vec<MemoryType>) -> Agent {
    Agent {
        id: AgentId::from_string("agt_1"),
        tenant_id: TenantId::from_string("ten_1"),
        name: AgentName::new("Helper").unwrap(),
        agent_type: AgentType::Assistant,
        status: AgentStatus::Active,
        description: None,
        memory_types: types,
        config: AgentConfig::default(),
        created_at: t0(),
        updated_at: t0(),
    }
}

/// A memory service whose store holds nothing, and an embedder that is called `embeds` times.
fn memory(memories: MockMemoryRepository, embeds: usize) -> MemoryService {
    let mut embedder = MockEmbedder::new();
    embedder.expect_model().return_const(EmbeddingModel {
        provider: "test".into(),
        id: "test:2".into(),
        dimension: 2,
    });
    embedder
        .expect_embed()
        .times(embeds)
        .returning(|texts| Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect()));
    let mut ids = MockIdGenerator::new();
    ids.expect_generate().returning(|prefix| format!("{prefix}_1"));
    let mut clock = MockClock::new();
    clock.expect_now().returning(t0);
    MemoryService::new(
        MemoryServiceDeps {
            memories: Arc::new(memories),
            agents: Arc::new(MockAgentDirectory::new()),
            embedder: Arc::new(embedder),
            tokens: Arc::new(MockTokenCounter::new()),
            ids: Arc::new(ids),
            clock: Arc::new(clock),
        },
        MemorySettings::default(),
    )
}

#[tokio::test]
async fn only_episodic_agents_remember_exchanges() {
    let session = SessionId::from_string("ses_1");
    let semantic = memory(MockMemoryRepository::new(), 0);
    let none =
        semantic.episode(&agent(vec![MemoryType::Semantic]), &session, "hi", "hello", t0()).await.unwrap();
    assert!(none.is_none());
    let episodic = memory(MockMemoryRepository::new(), 1);
    let some = episodic
        .episode(&agent(vec![MemoryType::Episodic]), &session, "hi", "hello", t0())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(some.entry.memory_type, MemoryType::Episodic);
    assert_eq!(some.entry.content, "User: hi\nAssistant: hello");
    assert_eq!(some.entry.agent_id, Some(AgentId::from_string("agt_1")));
}

#[tokio::test]
async fn recall_searches_the_agents_own_memory() {
    let mut memories = MockMemoryRepository::new();
    memories
        .expect_vector_count()
        .withf(|tenant, _, filter, _| {
            tenant.as_str() == "ten_1" && filter.agent_id.as_ref().map(AgentId::as_str) == Some("agt_1")
        })
        .times(1)
        .returning(|_, _, _, _| Ok(0));
    let got = memory(memories, 0).recall(&agent(vec![MemoryType::Semantic]), "hello").await.unwrap();
    assert!(got.is_empty());
}

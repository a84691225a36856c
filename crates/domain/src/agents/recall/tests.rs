#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use super::*;
use crate::agents::fixtures::{agent, exchange, t0};
use crate::ids::{AgentId, MockIdGenerator};
use crate::memory::{
    EmbeddingModel, MemoryServiceDeps, MemorySettings, MockAgentDirectory, MockEmbedder, MockMemoryRepository,
};
use crate::time::MockClock;
use crate::tokens::MockTokenCounter;

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
async fn only_episodic_agents_remember_exchanges_once_under_the_replys_id() {
    let semantic = memory(MockMemoryRepository::new(), 0);
    let (agent_of_semantic, stored) = (agent(vec![MemoryType::Semantic]), exchange());
    assert!(!MemoryRecall::record_episode(&semantic, &agent_of_semantic, &stored).await.unwrap());

    let mut memories = MockMemoryRepository::new();
    memories.expect_get().withf(|_, id| id.as_str() == "mem_01b").times(1).returning(|_, _| Ok(None));
    memories
        .expect_insert()
        .withf(|entries, _| {
            let e = &entries[0].entry;
            entries.len() == 1
                && e.id.as_str() == "mem_01b"
                && e.memory_type == MemoryType::Episodic
                && e.content == "User: hi\nAssistant: hello"
                && e.agent_id == Some(AgentId::from_string("agt_1"))
        })
        .times(1)
        .returning(|_, _| Ok(()));
    let episodic = memory(memories, 1);
    let agent = agent(vec![MemoryType::Episodic]);
    assert!(MemoryRecall::record_episode(&episodic, &agent, &exchange()).await.unwrap());
}

#[tokio::test]
async fn an_exchange_handed_over_again_is_not_remembered_twice() {
    let mut memories = MockMemoryRepository::new();
    let stored = exchange();
    memories.expect_get().returning(|_, _| {
        Ok(Some(crate::memory::MemoryEntry {
            id: MemoryId::from_string("mem_01b"),
            memory_type: MemoryType::Episodic,
            source: "chat".into(),
            ..crate::memory::fixtures::entry("mem_01b", "User: hi\nAssistant: hello")
        }))
    });
    let episodic = memory(memories, 0);
    assert!(
        !MemoryRecall::record_episode(&episodic, &agent(vec![MemoryType::Episodic]), &stored).await.unwrap()
    );
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

#![allow(clippy::unwrap_used)]

use super::*;
use crate::agents::fixtures::{agent, exchange, t0};
use crate::agents::ports::{MockAgentRepository, MockConversationRepository, MockMemoryRecall};
use crate::events::MessageCompletedData;
use crate::ids::{AgentId, EventId, MessageId, SessionId, TenantId};

fn completed() -> Event {
    Event {
        id: EventId::from_string("evt_1"),
        tenant_id: TenantId::from_string("ten_1"),
        payload: EventPayload::AgentMessageCompleted(MessageCompletedData {
            agent_id: AgentId::from_string("agt_1"),
            conversation_id: SessionId::from_string("ses_1"),
            message_id: MessageId::from_string("msg_01b"),
            content: "hello".into(),
            tokens_used: 3,
            latency_ms: 5,
        }),
        created_at: t0(),
    }
}

fn consumer(
    types: Vec<MemoryType>,
    stored: Option<StoredExchange>,
    memory: MockMemoryRecall,
) -> EpisodicMemory {
    let mut agents = MockAgentRepository::new();
    agents
        .expect_get()
        .withf(|t, a| t.as_str() == "ten_1" && a.as_str() == "agt_1")
        .returning(move |_, _| Ok(Some(agent(types.clone()))));
    let mut conversations = MockConversationRepository::new();
    conversations
        .expect_exchange_of()
        .withf(|t, a, reply| t.as_str() == "ten_1" && a.as_str() == "agt_1" && reply.as_str() == "msg_01b")
        .returning(move |_, _, _| Ok(stored.clone()));
    let reader = ExchangeReader { agents: Arc::new(agents), conversations: Arc::new(conversations) };
    EpisodicMemory::new(reader, Arc::new(memory))
}

#[tokio::test]
async fn a_stored_exchange_of_an_episodic_agent_becomes_its_memory() {
    let mut memory = MockMemoryRecall::new();
    memory
        .expect_record_episode()
        .withf(|a, x| a.id.as_str() == "agt_1" && *x == exchange())
        .times(1)
        .returning(|_, _| Ok(true));
    let consumer = consumer(vec![MemoryType::Episodic], Some(exchange()), memory);
    assert!(
        consumer.wants(EventType::AgentMessageCompleted) && !consumer.wants(EventType::AgentMessageCreated)
    );
    consumer.handle(&completed()).await.unwrap();
}

#[tokio::test]
async fn an_agent_without_episodic_memory_or_a_stateless_exchange_leaves_nothing() {
    let mut memory = MockMemoryRecall::new();
    memory.expect_record_episode().never();
    consumer(vec![MemoryType::Semantic], Some(exchange()), memory).handle(&completed()).await.unwrap();
    let mut memory = MockMemoryRecall::new();
    memory.expect_record_episode().never();
    consumer(vec![MemoryType::Episodic], None, memory).handle(&completed()).await.unwrap();
}

#[tokio::test]
async fn a_failing_memory_fails_the_event_for_a_retry() {
    let mut memory = MockMemoryRecall::new();
    memory.expect_record_episode().returning(|_, _| Err(anyhow::anyhow!("embedder down")));
    let err = consumer(vec![MemoryType::Episodic], Some(exchange()), memory).handle(&completed()).await;
    assert!(err.unwrap_err().to_string().contains("embedder down"));
}

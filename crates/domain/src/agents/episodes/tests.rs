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

/// The event of the exchange whose reply is `reply_id`.
fn completed_with(reply_id: &str) -> Event {
    let mut event = completed();
    event.id = EventId::from_string(format!("evt_{reply_id}"));
    if let EventPayload::AgentMessageCompleted(data) = &mut event.payload {
        data.message_id = MessageId::from_string(reply_id);
    }
    event
}

/// An extraction consumer over agent `agt_1` (semantic memory, rules) whose exchanges are
/// `stored` by reply id, learning into `memories`.
fn extraction(
    stored: Vec<(&'static str, Option<&'static str>)>,
    memories: crate::memory::MockMemoryRepository,
) -> MemoryExtraction {
    use crate::memory::{
        EmbeddingModel, MemoryServiceDeps, MemorySettings, MockAgentDirectory, MockEmbedder,
    };
    let mut agents = MockAgentRepository::new();
    agents.expect_get().returning(|_, _| Ok(Some(agent(vec![MemoryType::Semantic]))));
    let mut conversations = MockConversationRepository::new();
    conversations.expect_exchange_of().returning(move |_, _, reply| {
        let said = stored.iter().find(|(id, _)| *id == reply.as_str()).and_then(|(_, said)| *said);
        Ok(said.map(|said| {
            let mut x = exchange();
            x.message.id = MessageId::from_string(format!("{reply}_q"));
            x.message.content = said.into();
            x.reply.id = reply.clone();
            x
        }))
    });
    let reader = ExchangeReader { agents: Arc::new(agents), conversations: Arc::new(conversations) };
    let mut embedder = MockEmbedder::new();
    embedder.expect_model().return_const(EmbeddingModel {
        provider: "hashing".into(),
        id: "test".into(),
        dimension: 2,
    });
    embedder
        .expect_embed_background()
        .times(..=1)
        .returning(|texts| Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect()));
    let mut ids = crate::ids::MockIdGenerator::new();
    let n = std::sync::atomic::AtomicU64::new(0);
    ids.expect_generate()
        .returning(move |p| format!("{p}_{}", n.fetch_add(1, std::sync::atomic::Ordering::SeqCst)));
    let mut clock = crate::time::MockClock::new();
    clock.expect_now().returning(t0);
    let mut tokens = crate::tokens::MockTokenCounter::new();
    tokens.expect_count().returning(|t| t.split_whitespace().count() as u64);
    let memory = MemoryService::new(
        MemoryServiceDeps {
            memories: Arc::new(memories),
            agents: Arc::new(MockAgentDirectory::new()),
            embedder: Arc::new(embedder),
            tokens: Arc::new(tokens),
            ids: Arc::new(ids),
            clock: Arc::new(clock),
        },
        MemorySettings::default(),
    );
    MemoryExtraction::new(reader, memory)
}

#[tokio::test]
async fn a_pass_of_extraction_learns_from_its_exchanges_in_one_transaction() {
    let stored =
        vec![("msg_1", Some("I live in Lyon.")), ("msg_2", None), ("msg_3", Some("I moved to Porto."))];
    let mut memories = crate::memory::MockMemoryRepository::new();
    memories.expect_learned_already().times(1).returning(|_| Ok(vec![]));
    memories.expect_on_topic().times(1).returning(|_, _, _, _, _| Ok(vec![]));
    memories
        .expect_learn_all()
        .withf(|all| {
            let [lyon, porto] = all else { return false };
            lyon.exchange.as_str() == "msg_1_q"
                && porto.exchange.as_str() == "msg_3_q"
                && porto.invalidated[0].id == lyon.added[0].entry.id
        })
        .times(1)
        .returning(|all| Ok(vec![true; all.len()]));
    let events = [completed_with("msg_1"), completed_with("msg_2"), completed_with("msg_3")];
    let results = extraction(stored, memories).handle_batch(&events).await;
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(Result::is_ok));
}

#[tokio::test]
async fn a_failed_transaction_fails_every_exchange_it_held_and_only_those() {
    let stored =
        vec![("msg_1", Some("I live in Lyon.")), ("msg_2", None), ("msg_3", Some("I moved to Porto."))];
    let mut memories = crate::memory::MockMemoryRepository::new();
    memories.expect_learned_already().returning(|_| Ok(vec![]));
    memories.expect_on_topic().returning(|_, _, _, _, _| Ok(vec![]));
    memories.expect_learn_all().times(1).returning(|_| Err(anyhow::anyhow!("database gone")));
    let events = [completed_with("msg_1"), completed_with("msg_2"), completed_with("msg_3")];
    let results = extraction(stored, memories).handle_batch(&events).await;
    let failed: Vec<bool> = results.iter().map(Result::is_err).collect();
    assert_eq!(failed, [true, false, true]);
    assert!(format!("{:#}", results[0].as_ref().unwrap_err()).contains("database gone"));
}

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mockall::Sequence;

use super::*;
use crate::agents::chat::{Completion, FinishReason, ModelError};
use crate::agents::extraction_config::{ExtractionMode, Extractor};
use crate::agents::fixtures::{agent, t0};
use crate::agents::ports::MockChatModel;
use crate::billing::MockCreditRepository;
use crate::ids::{MemoryId, MessageId, MockIdGenerator};
use crate::memory::fixtures::entry;
use crate::memory::learning::Learned;
use crate::memory::{
    EmbeddingModel, MemoryServiceDeps, MemorySettings, MemoryType, MockAgentDirectory, MockEmbedder,
    MockMemoryRepository,
};
use crate::time::MockClock;
use crate::tokens::MockTokenCounter;

const PORTO: &str = r#"{"facts": [
    {"event": "INVALIDATE", "id": "mem_lyon", "reason": "the user moved"},
    {"event": "ADD", "text": "The user lives in Porto."}
]}"#;

fn exchange() -> ExchangeText {
    ExchangeText {
        message_id: MessageId::from_string("msg_01a"),
        reply_id: MessageId::from_string("msg_01b"),
        message: "Good news: I moved to Porto!".into(),
        reply: "Congratulations!".into(),
        at: t0(),
    }
}

fn ids() -> Arc<MockIdGenerator> {
    let mut ids = MockIdGenerator::new();
    let n = AtomicU64::new(0);
    ids.expect_generate().returning(move |p| format!("{p}_{}", n.fetch_add(1, Ordering::SeqCst)));
    Arc::new(ids)
}

fn clock() -> Arc<MockClock> {
    let mut clock = MockClock::new();
    clock.expect_now().returning(t0);
    Arc::new(clock)
}

fn words() -> Arc<MockTokenCounter> {
    let mut tokens = MockTokenCounter::new();
    tokens.expect_count().returning(|t| t.split_whitespace().count() as u64);
    Arc::new(tokens)
}

/// A memory whose agent knows "The user lives in Lyon." (`mem_lyon`), applying what it is
/// handed through `learn`.
fn memory(learn: impl Fn(&Learned) -> bool + Send + Sync + 'static, times: usize) -> MemoryService {
    let mut memories = MockMemoryRepository::new();
    memories
        .expect_nearest()
        .returning(|_, _, _, _, _, _| Ok(vec![(MemoryId::from_string("mem_lyon"), 0.8)]));
    memories.expect_get_many().returning(|_, _| Ok(vec![entry("mem_lyon", "The user lives in Lyon.")]));
    memories.expect_learn().times(times).returning(move |l| Ok(learn(l)));
    let mut embedder = MockEmbedder::new();
    embedder.expect_model().return_const(EmbeddingModel {
        provider: "test".into(),
        id: "test:2".into(),
        dimension: 2,
    });
    embedder.expect_embed_background().returning(|texts| Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect()));
    MemoryService::new(
        MemoryServiceDeps {
            memories: Arc::new(memories),
            agents: Arc::new(MockAgentDirectory::new()),
            embedder: Arc::new(embedder),
            tokens: words(),
            ids: ids(),
            clock: clock(),
        },
        MemorySettings::default(),
    )
}

/// Credits that hold `held` (none: the tenant has none), released `released` times.
fn credits(held: Option<i64>, released: usize) -> MockCreditRepository {
    let mut credits = MockCreditRepository::new();
    credits.expect_hold().returning(move |r| {
        Ok(held.map(|amount| CreditHold {
            id: r.id.clone(),
            tenant_id: r.tenant_id.clone(),
            amount: amount.min(r.wanted),
            created_at: r.created_at,
        }))
    });
    credits.expect_release().times(released).returning(|_| Ok(()));
    credits
}

fn answer(content: &str, tokens: (u64, u64)) -> Completion {
    Completion {
        content: content.into(),
        prompt_tokens: tokens.0,
        completion_tokens: tokens.1,
        finish: FinishReason::Stop,
        tool_calls: Vec::new(),
    }
}

fn extractor(model: MockChatModel, credits: MockCreditRepository, memory: MemoryService) -> ModelExtractor {
    ModelExtractor::new(ModelExtractorDeps {
        model: Arc::new(model),
        credits: Arc::new(credits),
        tokens: words(),
        memory,
        ids: ids(),
        clock: clock(),
        default_model: "gpt-test".into(),
        credits_low_threshold: 100,
    })
}

#[tokio::test]
async fn a_valid_answer_is_applied_with_the_charge_of_its_call() {
    let mut model = MockChatModel::new();
    model
        .expect_complete()
        .withf(|r| {
            r.model == "gpt-test"
                && r.response_schema == Some(decision::answer_schema())
                && r.tools.is_empty()
                && r.messages[1].content.contains("- [mem_lyon] The user lives in Lyon.")
                && r.messages[1].content.contains("User: Good news: I moved to Porto!")
        })
        .times(1)
        .returning(|_| Ok(answer(PORTO, (1_200, 300))));
    let memory = memory(
        |l| {
            let charge = l.charge.as_ref().unwrap();
            l.added.len() == 1
                && l.added[0].entry.content == "The user lives in Porto."
                && l.invalidated.len() == 1
                && l.invalidated[0].id.as_str() == "mem_lyon"
                && l.invalidated[0].superseded_by.as_ref() == Some(&l.added[0].entry.id)
                && charge.entry.reason == LedgerReason::MemoryExtraction
                && charge.entry.delta == -2
                && charge.entry.reference.as_deref() == Some("msg_01a")
                && l.source_message_ids.len() == 2
        },
        1,
    );
    let extractor = extractor(model, credits(Some(50), 0), memory);
    let learned = extractor.learn(&agent(vec![MemoryType::Semantic]), &exchange()).await.unwrap();
    assert_eq!(learned, Extracted::Learned(2));
}

#[tokio::test]
async fn a_malformed_answer_is_asked_for_once_more_and_then_nothing_but_the_charge_is_stored() {
    let mut model = MockChatModel::new();
    let mut order = Sequence::new();
    model
        .expect_complete()
        .times(1)
        .in_sequence(&mut order)
        .returning(|_| Ok(answer("Sure! Porto.", (100, 5))));
    model
        .expect_complete()
        .withf(|r| r.messages.len() == 4 && r.messages[3].content.contains("rejected"))
        .times(1)
        .in_sequence(&mut order)
        .returning(|_| Ok(answer(r#"{"facts": "Porto"}"#, (900, 10))));
    let memory = memory(|l| l.changes() == 0 && l.charge.as_ref().unwrap().entry.delta == -2, 1);
    let extractor = extractor(model, credits(Some(50), 0), memory);
    let learned = extractor.learn(&agent(vec![MemoryType::Semantic]), &exchange()).await.unwrap();
    assert_eq!(learned, Extracted::Learned(0));
}

#[tokio::test]
async fn an_id_it_was_not_shown_rejects_the_answer_and_a_reworded_fact_is_an_update() {
    let mut model = MockChatModel::new();
    let mut order = Sequence::new();
    // Another agent's (or tenant's) memory: never touched.
    let foreign = r#"{"facts": [{"event": "INVALIDATE", "id": "mem_of_another_tenant"}]}"#;
    model.expect_complete().times(1).in_sequence(&mut order).returning(move |_| Ok(answer(foreign, (10, 5))));
    let reworded = r#"{"facts": [{"event": "UPDATE", "id": "mem_lyon", "text": "The user lives in Lyon, near the Saône."}]}"#;
    model
        .expect_complete()
        .times(1)
        .in_sequence(&mut order)
        .returning(move |_| Ok(answer(reworded, (10, 5))));
    let memory = memory(
        |l| {
            l.invalidated.is_empty()
                && l.added.is_empty()
                && l.updated.len() == 1
                && l.updated[0].id.as_str() == "mem_lyon"
                && l.updated[0].content == "The user lives in Lyon, near the Saône."
                && l.updated[0].source_message_ids.len() == 2
                && l.events.len() == 1
                && l.events[0].event_type().as_str() == "memory.updated"
        },
        1,
    );
    let extractor = extractor(model, credits(Some(50), 0), memory);
    let learned = extractor.learn(&agent(vec![MemoryType::Semantic]), &exchange()).await.unwrap();
    assert_eq!(learned, Extracted::Learned(1));
}

#[tokio::test]
async fn a_tenant_without_credits_skips_without_asking_the_model() {
    let mut model = MockChatModel::new();
    model.expect_complete().never();
    let extractor = extractor(model, credits(None, 0), memory(|_| true, 0));
    let learned = extractor.learn(&agent(vec![MemoryType::Semantic]), &exchange()).await.unwrap();
    assert!(matches!(learned, Extracted::Skipped(reason) if reason.contains("no credits")));
}

#[tokio::test]
async fn an_exchange_learned_from_already_gives_its_credits_back() {
    let mut model = MockChatModel::new();
    model.expect_complete().returning(|_| Ok(answer(PORTO, (100, 20))));
    let extractor = extractor(model, credits(Some(50), 1), memory(|_| false, 1));
    let learned = extractor.learn(&agent(vec![MemoryType::Semantic]), &exchange()).await.unwrap();
    assert_eq!(learned, Extracted::AlreadyLearned);
}

#[tokio::test]
async fn a_failing_model_gives_the_credits_back_and_fails_for_a_retry() {
    let mut model = MockChatModel::new();
    model.expect_complete().returning(|_| Err(ModelError::Timeout));
    let extractor = extractor(model, credits(Some(50), 1), memory(|_| true, 0));
    let err = extractor.learn(&agent(vec![MemoryType::Semantic]), &exchange()).await.unwrap_err();
    assert!(err.to_string().contains("did not answer in time"), "{err}");
}

#[test]
fn auto_asks_the_model_only_when_the_service_has_a_remote_one() {
    use ExtractionMode::{Auto, Model, Off, Rules};
    let table = [
        (Auto, true, Some(Extractor::Model)),
        (Auto, false, Some(Extractor::Rules)),
        (Rules, true, Some(Extractor::Rules)),
        (Model, false, Some(Extractor::Model)),
        (Off, true, None),
    ];
    for (mode, remote, expected) in table {
        assert_eq!(mode.extractor(remote), expected, "{mode} with a remote model: {remote}");
    }
    assert_eq!("off".parse::<ExtractionMode>().unwrap(), Off);
    assert_eq!("sometimes".parse::<ExtractionMode>().unwrap_err().field, "config.memory_extraction");
}

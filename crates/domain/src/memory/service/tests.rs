#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, Ordering};

use chrono::TimeZone;
use serde_json::json;

use super::consolidation::plan_merges;
use super::*;
use crate::events::EventPayload;
use crate::ids::MockIdGenerator;
use crate::memory::{EmbeddingModel, MemoryFilter, MockAgentDirectory, MockEmbedder, MockMemoryRepository};
use crate::tenancy::Role;
use crate::time::MockClock;
use crate::tokens::MockTokenCounter;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
}

fn tenant() -> TenantId {
    TenantId::from_string("ten_1")
}

fn caller(role: Role) -> Principal {
    Principal::test(role)
}

fn entry(id: &str, content: &str) -> MemoryEntry {
    crate::memory::fixtures::entry(id, content)
}

fn new_memory(content: &str) -> NewMemory {
    NewMemory {
        agent_id: Some(AgentId::from_string("agt_1")),
        memory_type: MemoryType::Semantic,
        key: None,
        content: content.into(),
        source: None,
        metadata: Map::new(),
        tags: Vec::new(),
        importance: None,
        expiry: None,
        origin: crate::memory::model::MemoryOrigin::Api,
    }
}

struct Mocks {
    memories: MockMemoryRepository,
    agents: MockAgentDirectory,
    embedder: MockEmbedder,
}

impl Mocks {
    fn new() -> Self {
        let mut embedder = MockEmbedder::new();
        let model = EmbeddingModel { provider: "test".into(), id: "test:2".into(), dimension: 2 };
        embedder.expect_model().return_const(model);
        Self { memories: MockMemoryRepository::new(), agents: MockAgentDirectory::new(), embedder }
    }

    fn agent_exists(mut self) -> Self {
        self.agents.expect_agent_exists().returning(|_, _| Ok(true));
        self
    }

    fn embeds(mut self) -> Self {
        self.embedder.expect_embed().returning(|texts| Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect()));
        self.embedder
            .expect_embed_background()
            .returning(|texts| Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect()));
        self.embedder.expect_embed_query().returning(|_| Ok(vec![1.0, 0.0]));
        self
    }

    fn service(self) -> MemoryService {
        let mut ids = MockIdGenerator::new();
        let n = AtomicU64::new(0);
        ids.expect_generate().returning(move |p| format!("{p}_{}", n.fetch_add(1, Ordering::SeqCst)));
        let mut clock = MockClock::new();
        clock.expect_now().returning(t0);
        let mut tokens = MockTokenCounter::new();
        tokens.expect_count().returning(|t| t.split_whitespace().count() as u64);
        MemoryService::new(
            MemoryServiceDeps {
                memories: Arc::new(self.memories),
                agents: Arc::new(self.agents),
                embedder: Arc::new(self.embedder),
                tokens: Arc::new(tokens),
                ids: Arc::new(ids),
                clock: Arc::new(clock),
            },
            MemorySettings::default(),
        )
    }
}

#[tokio::test]
async fn adding_to_another_tenants_agent_stores_nothing() {
    let mut m = Mocks::new();
    m.agents.expect_agent_exists().returning(|_, _| Ok(false));
    m.memories.expect_insert().never();
    m.embedder.expect_embed().never();
    let err = m.service().add(&caller(Role::Owner), new_memory("x")).await.unwrap_err();
    assert!(matches!(err, MemoryError::AgentNotFound));
}

#[tokio::test]
async fn viewers_may_not_write() {
    let m = Mocks::new();
    let err = m.service().add(&caller(Role::Viewer), new_memory("x")).await.unwrap_err();
    assert!(matches!(err, MemoryError::Forbidden(_)));
}

#[tokio::test]
async fn an_entry_is_stored_with_its_embedding_and_model() {
    let mut m = Mocks::new().agent_exists().embeds();
    m.memories
        .expect_insert()
        .withf(|entries, docs| {
            docs.is_empty()
                && entries.len() == 1
                && entries[0].embedding.model_id == "test:2"
                && entries[0].entry.source == "api"
                && (entries[0].entry.importance - 0.5).abs() < 1e-12
        })
        .times(1)
        .returning(|_, _| Ok(()));
    let mut new = new_memory("fact");
    new.expiry = Some(Expiry::After(Duration::hours(1)));
    let e = m.service().add(&caller(Role::Owner), new).await.unwrap();
    assert_eq!(e.expires_at, Some(t0() + Duration::hours(1)));
}

#[tokio::test]
async fn an_entry_with_a_key_is_upserted() {
    let mut m = Mocks::new().embeds();
    m.memories.expect_insert().never();
    m.memories.expect_upsert_keyed().times(1).returning(|e| {
        let mut stored = e.entry.clone();
        stored.id = MemoryId::from_string("mem_existing");
        Ok(stored)
    });
    let mut new = new_memory("fact");
    new.agent_id = None;
    new.key = Some("k".into());
    let e = m.service().add(&caller(Role::Owner), new).await.unwrap();
    assert_eq!(e.id.as_str(), "mem_existing");
}

#[tokio::test]
async fn search_fuses_both_retrievers_filters_and_counts_access() {
    let mut m = Mocks::new().agent_exists().embeds();
    m.memories.expect_nearest().returning(|_, _, _, _, _, _| {
        Ok(vec![(MemoryId::from_string("mem_a"), 0.45), (MemoryId::from_string("mem_b"), 0.40)])
    });
    m.memories
        .expect_lexical()
        .withf(|_, terms, _, _, _| terms == ["colour", "client", "like"])
        .returning(|_, _, _, _, _| Ok(vec![MemoryId::from_string("mem_b"), MemoryId::from_string("mem_c")]));
    m.memories.expect_get_many().returning(|_, ids| {
        assert_eq!(ids.len(), 3, "each candidate is read once");
        let mut c = entry("mem_c", "untagged");
        c.tags = vec![];
        let mut a = entry("mem_a", "a");
        a.tags = vec!["t".into()];
        let mut b = entry("mem_b", "the client likes that colour");
        b.tags = vec!["t".into()];
        Ok(vec![a, b, c])
    });
    m.memories
        .expect_touch()
        .withf(|_, ids| ids.iter().map(MemoryId::as_str).collect::<Vec<_>>() == ["mem_b"])
        .times(1)
        .returning(|_, _| Ok(()));
    let query = SearchQuery {
        text: "What colour does the client like?".into(),
        filter: MemoryFilter {
            agent_id: Some(AgentId::from_string("agt_1")),
            tags: vec!["t".into()],
            ..Default::default()
        },
        skip: 0,
        limit: 1,
        count_access: true,
        mode: SearchMode::Hybrid,
        min_score: 0.0,
    };
    let r = m.service().search(&caller(Role::Owner), query).await.unwrap();
    // mem_c fails the tag filter; mem_b, a little further in meaning but holding every term
    // of the question, wins.
    assert_eq!(r.total, 2);
    assert_eq!(r.hits.len(), 1);
    assert_eq!(r.hits[0].entry.id.as_str(), "mem_b");
    assert_eq!(r.hits[0].entry.access_count, 1);
    assert_eq!(r.hits[0].ranking.candidate.vector_rank, Some(2));
    assert_eq!(r.hits[0].ranking.candidate.lexical_rank, Some(1));
}

#[tokio::test]
async fn recall_skips_the_model_when_the_agent_remembers_nothing() {
    let mut m = Mocks::new();
    m.memories.expect_vector_count().returning(|_, _, _, _| Ok(0));
    m.embedder.expect_embed().never();
    m.embedder.expect_embed_query().never();
    let got = m.service().recall_for(&tenant(), &AgentId::from_string("agt_1"), "hello").await.unwrap();
    assert!(got.is_empty());
}

#[tokio::test]
async fn recall_returns_the_best_memories_within_the_budget() {
    let mut m = Mocks::new().embeds();
    m.memories.expect_vector_count().returning(|_, _, _, _| Ok(2));
    m.memories
        .expect_nearest()
        .withf(|_, _, _, f, _, _| {
            f.agent_id.as_ref().map(AgentId::as_str) == Some("agt_1")
                && f.memory_types == [MemoryType::Semantic, MemoryType::Episodic]
        })
        .returning(|_, _, _, _, _, _| {
            Ok(vec![(MemoryId::from_string("mem_a"), 0.9), (MemoryId::from_string("mem_b"), 0.1)])
        });
    m.memories.expect_lexical().returning(|_, _, _, _, _| Ok(vec![]));
    m.memories.expect_get_many().returning(|_, _| {
        Ok(vec![entry("mem_a", "the favourite colour is teal"), entry("mem_b", &"word ".repeat(2000))])
    });
    let got = m.service().recall_for(&tenant(), &AgentId::from_string("agt_1"), "colour?").await.unwrap();
    // The second memory alone is over the token budget.
    assert_eq!(got, vec!["the favourite colour is teal".to_owned()]);
}

#[tokio::test]
async fn an_exchange_is_remembered_as_an_episode_once() {
    let mut m = Mocks::new().embeds();
    m.memories.expect_get().times(1).returning(|_, _| Ok(None));
    m.memories
        .expect_insert()
        .withf(|entries, _| {
            let e = &entries[0].entry;
            e.id.as_str() == "mem_ep"
                && e.tenant_id == tenant()
                && e.agent_id.as_ref().map(AgentId::as_str) == Some("agt_1")
                && e.memory_type == MemoryType::Episodic
                && e.content == "User: hi\nAssistant: hello"
                && e.source == "chat"
                && e.metadata.get("session_id") == Some(&json!("ses_1"))
        })
        .times(1)
        .returning(|_, _| Ok(()));
    let svc = m.service();
    let (session, agent) = (SessionId::from_string("ses_1"), AgentId::from_string("agt_1"));
    let id = MemoryId::from_string("mem_ep");
    assert!(svc.record_episode(id, &tenant(), &agent, &session, "hi", "hello", t0()).await.unwrap());
}

#[tokio::test]
async fn documents_are_chunked_embedded_and_stored_at_once() {
    let mut m = Mocks::new().agent_exists().embeds();
    m.memories
        .expect_insert()
        .withf(|entries, docs| {
            docs.len() == 2
                && entries.len() == 3
                && entries.iter().all(|e| e.entry.document_id.is_some() && e.entry.source == "document")
                && entries[0].entry.metadata.get("title") == Some(&json!("First"))
        })
        .times(1)
        .returning(|_, _| Ok(()));
    let docs = vec![
        NewDocument {
            title: "First".into(),
            content: format!("{}. {}.", "a ".repeat(200), "b ".repeat(200)),
            metadata: Map::new(),
        },
        NewDocument { title: "Second".into(), content: "Short.".into(), metadata: Map::new() },
    ];
    let out =
        m.service().add_documents(&caller(Role::Owner), &AgentId::from_string("agt_1"), docs).await.unwrap();
    assert_eq!(out.iter().map(|s| s.document.chunk_count).collect::<Vec<_>>(), vec![2, 1]);
}

#[tokio::test]
async fn a_search_embeds_its_text_as_a_query() {
    // Through `embed_query`, which the composition root caches, and never `embed`.
    let mut m = Mocks::new().agent_exists();
    m.embedder.expect_embed().never();
    m.embedder.expect_embed_query().withf(|text| text == "teal?").times(1).returning(|_| Ok(vec![1.0, 0.0]));
    m.memories
        .expect_nearest()
        .withf(|_, _, q, _, _, _| q == [1.0, 0.0])
        .returning(|_, _, _, _, _, _| Ok(vec![]));
    m.memories.expect_lexical().returning(|_, _, _, _, _| Ok(vec![]));
    m.memories.expect_get_many().returning(|_, _| Ok(vec![]));
    let query = SearchQuery {
        text: "teal?".into(),
        filter: MemoryFilter::default(),
        skip: 0,
        limit: 10,
        count_access: false,
        mode: SearchMode::Vector,
        min_score: 0.0,
    };
    let r = m.service().search(&caller(Role::Owner), query).await.unwrap();
    assert_eq!(r.total, 0);
}

#[tokio::test]
async fn every_chunk_of_every_document_of_a_request_is_embedded_in_one_call() {
    let mut m = Mocks::new().agent_exists();
    m.embedder
        .expect_embed()
        .withf(|texts| texts.len() == 4 && texts[3] == "Third.")
        .times(1)
        .returning(|texts| Ok(texts.iter().map(|_| vec![0.0, 1.0]).collect()));
    m.memories
        .expect_insert()
        .withf(|entries, docs| entries.len() == 4 && docs.len() == 3)
        .times(1)
        .returning(|_, _| Ok(()));
    let docs = vec![
        NewDocument {
            title: "First".into(),
            content: format!("{}. {}.", "a ".repeat(200), "b ".repeat(200)),
            metadata: Map::new(),
        },
        NewDocument { title: "Second".into(), content: "Short.".into(), metadata: Map::new() },
        NewDocument { title: "Third".into(), content: "Third.".into(), metadata: Map::new() },
    ];
    let out =
        m.service().add_documents(&caller(Role::Owner), &AgentId::from_string("agt_1"), docs).await.unwrap();
    assert_eq!(out.iter().map(|s| s.document.chunk_count).collect::<Vec<_>>(), vec![2, 1, 1]);
}

#[tokio::test]
async fn a_reindex_batch_is_embedded_in_one_call() {
    let mut m = Mocks::new();
    m.memories.expect_stale_embeddings().returning(|_, limit| {
        Ok((0..limit)
            .map(|i| (tenant(), MemoryId::from_string(format!("mem_{i}")), format!("text {i}")))
            .collect())
    });
    m.embedder
        .expect_embed()
        .withf(|texts| texts.len() == 50)
        .times(1)
        .returning(|texts| Ok(texts.iter().map(|_| vec![0.0, 1.0]).collect()));
    m.memories.expect_set_embeddings().withf(|updates| updates.len() == 50).times(1).returning(|_| Ok(()));
    assert_eq!(m.service().reindex_batch(50).await.unwrap(), 50);
}

#[test]
fn consolidation_merges_near_duplicates_into_the_most_important() {
    let mut a = entry("mem_a", "teal is the favourite");
    a.importance = 0.4;
    a.tags = vec!["x".into()];
    a.access_count = 2;
    let mut b = entry("mem_b", "favourite is teal");
    b.importance = 0.9;
    b.tags = vec!["y".into()];
    b.access_count = 3;
    let c = entry("mem_c", "unrelated");
    let rows = vec![(a, vec![1.0, 0.0]), (b, vec![0.96, 0.28]), (c, vec![0.0, 1.0])];
    let merges = plan_merges(rows, 0.92, t0());
    assert_eq!(merges.len(), 1);
    let m = &merges[0];
    assert_eq!(m.kept.id.as_str(), "mem_b");
    assert_eq!(m.absorbed, vec![MemoryId::from_string("mem_a")]);
    assert_eq!(m.kept.tags, vec!["y", "x"]);
    assert_eq!(m.kept.access_count, 5);
}

#[tokio::test]
async fn consolidation_writes_its_event_with_the_counts() {
    let mut m = Mocks::new().agent_exists();
    m.memories.expect_agent_vectors().returning(|_, _, _, _| {
        Ok(vec![
            (entry("mem_a", "x"), vec![1.0, 0.0]),
            (entry("mem_b", "y"), vec![1.0, 0.0]),
            (entry("mem_c", "z"), vec![0.0, 1.0]),
        ])
    });
    m.memories
        .expect_consolidate()
        .withf(|_, merges, event| {
            merges.len() == 1
                && matches!(
                    event.payload,
                    EventPayload::MemoryConsolidated { examined: 3, merged: 1, kept: 1, .. }
                )
        })
        .times(1)
        .returning(|_, _, _| Ok(()));
    let r =
        m.service().consolidate(&caller(Role::Owner), &AgentId::from_string("agt_1"), None).await.unwrap();
    assert_eq!((r.examined, r.merged, r.kept), (3, 1, 1));
}

#[test]
fn lexical_terms_drop_stop_words_and_repeats() {
    assert_eq!(lexical_terms("What colour does the client like? Colour!"), vec!["colour", "client", "like"]);
    assert!(lexical_terms("the of and").is_empty());
}

#[test]
fn a_lexical_match_must_cover_enough_of_the_query() {
    let terms = lexical_terms("which shade does the client prefer?");
    assert_eq!(terms, vec!["shade", "client", "prefer"]);
    assert_eq!(matched_terms("The client's account manager is Priya.", &terms), 1);
    assert!(!enough_terms(1, 3));
    assert_eq!(matched_terms("Clients preferred a darker shade.", &terms), 3);
    assert!(enough_terms(2, 3));
    assert!(enough_terms(1, 2));
    assert!(enough_terms(1, 1));
    assert!(!enough_terms(0, 1));
    assert_eq!(matched_terms("favourite colours", &["colour".to_owned()]), 1);
    assert_eq!(matched_terms("Größe", &["größen".to_owned()]), 1, "stems are cut on characters, not bytes");
}

#[test]
fn identifiers_are_matched_whole() {
    use crate::memory::{identifiers, lexical_coverage, lexical_terms};
    assert_eq!(identifiers("Where is order P-01234, and INV-2024-007?"), ["p-01234", "inv-2024-007"]);
    assert_eq!(identifiers("v2.4.1 on x86_64 in 2024 with 3 cats"), ["v2.4.1", "x86_64"]);
    let query = "What is the status of order P-01234?";
    let (terms, named) = (lexical_terms(query), identifiers(query));
    let exact = lexical_coverage("Order P-01234 shipped; status: delayed.", &terms, &named, false);
    assert_eq!(exact, Some(1.0));
    let other = lexical_coverage("Order P-01235 shipped; status: delayed.", &terms, &named, false).unwrap();
    assert!(other < 1.0, "another identifier covers only the words: {other}");
    assert_eq!(
        lexical_coverage("P-012345 is unrelated", &terms, &named, false),
        None,
        "not inside a longer one"
    );
    assert_eq!(
        lexical_coverage("see p 01234", &["p".into(), "01234".into()], &["p-01234".into()], false),
        None
    );
    assert_eq!(lexical_coverage("It is P-01234.", &terms, &named, false), Some(1.0), "a full stop ends it");
}

fn exchange(message: &str) -> ExchangeText {
    ExchangeText {
        message_id: crate::ids::MessageId::from_string("msg_1"),
        reply_id: crate::ids::MessageId::from_string("msg_2"),
        message: message.into(),
        reply: "Noted.".into(),
        at: t0(),
    }
}

#[tokio::test]
async fn a_new_statement_replaces_the_fact_on_its_topic_in_one_learned_change() {
    let mut m = Mocks::new().embeds();
    let mut lyon = entry("mem_lyon", "The user lives in Lyon.");
    lyon.metadata.insert("topic".into(), json!("home"));
    // The fact on the topic is found by its topic, with no vector search.
    m.memories.expect_nearest().never();
    m.memories
        .expect_on_topic()
        .withf(|_, agent, topic, _, _| agent.as_str() == "agt_1" && topic == "home")
        .times(1)
        .returning(move |_, _, _, _, _| Ok(vec![lyon.clone()]));
    m.memories.expect_learned_already().times(1).returning(|_| Ok(vec![]));
    m.memories
        .expect_learn_all()
        .withf(|all| {
            let [l] = all else { return false };
            let added = &l.added[0].entry;
            l.exchange.as_str() == "msg_1"
                && l.added.len() == 1
                && added.content == "The user lives in Porto."
                && added.origin == crate::memory::model::MemoryOrigin::Extraction
                && added.metadata.get("topic") == Some(&json!("home"))
                && added.source_message_ids.len() == 2
                && l.invalidated.len() == 1
                && l.invalidated[0].id.as_str() == "mem_lyon"
                && l.invalidated[0].superseded_by.as_ref() == Some(&added.id)
                && l.events.iter().map(|e| e.event_type().as_str()).collect::<Vec<_>>()
                    == ["memory.created", "memory.invalidated"]
        })
        .times(1)
        .returning(|all| Ok(vec![true; all.len()]));
    let learned = m
        .service()
        .learn_by_rules(&tenant(), &AgentId::from_string("agt_1"), &exchange("I moved to Porto."))
        .await;
    assert_eq!(learned.unwrap(), Some(2));
}

#[tokio::test]
async fn small_talk_stores_nothing_and_a_replayed_exchange_reports_so() {
    let mut m = Mocks::new().embeds();
    m.memories.expect_learn().never();
    let svc = m.service();
    let agent = AgentId::from_string("agt_1");
    assert_eq!(
        svc.learn_by_rules(&tenant(), &agent, &exchange("What's the weather like?")).await.unwrap(),
        Some(0)
    );

    // Known as learned from before anything is decided: nothing is read or stored.
    let mut m = Mocks::new().embeds();
    m.memories.expect_learned_already().times(1).returning(|x| Ok(vec![x[0].1.clone()]));
    m.memories.expect_on_topic().never();
    m.memories.expect_learn_all().never();
    let replayed = m.service().learn_by_rules(&tenant(), &agent, &exchange("My name is Ada.")).await.unwrap();
    assert_eq!(replayed, None);

    // Learned from meanwhile (the store's receipt decides): the same answer.
    let mut m = Mocks::new().embeds();
    m.memories.expect_learned_already().returning(|_| Ok(vec![]));
    m.memories.expect_on_topic().returning(|_, _, _, _, _| Ok(vec![]));
    m.memories.expect_learn_all().times(1).returning(|all| Ok(vec![false; all.len()]));
    let replayed = m.service().learn_by_rules(&tenant(), &agent, &exchange("My name is Ada.")).await.unwrap();
    assert_eq!(replayed, None);
}

#[tokio::test]
async fn a_fact_stated_again_costs_no_embedding_and_a_new_one_on_a_topic_one_call() {
    let mut m = Mocks::new();
    let mut ada = entry("mem_ada", "The user's name is Ada.");
    ada.metadata.insert("topic".into(), json!("name"));
    m.memories.expect_nearest().never();
    m.memories
        .expect_on_topic()
        .returning(move |_, _, topic, _, _| Ok(if topic == "name" { vec![ada.clone()] } else { vec![] }));
    // Only the home is new: one call embeds it; the name, known in the same words, is not embedded.
    m.embedder
        .expect_embed_background()
        .withf(|texts| texts == ["The user lives in Porto."])
        .times(1)
        .returning(|texts| Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect()));
    m.memories.expect_learned_already().returning(|_| Ok(vec![]));
    m.memories
        .expect_learn_all()
        .withf(|all| {
            let [l] = all else { return false };
            l.added.len() == 1 && l.invalidated.is_empty() && l.updated.is_empty()
        })
        .times(1)
        .returning(|all| Ok(vec![true; all.len()]));
    let agent = AgentId::from_string("agt_1");
    let learned = m
        .service()
        .learn_by_rules(&tenant(), &agent, &exchange("My name is Ada and I live in Porto."))
        .await
        .unwrap();
    assert_eq!(learned, Some(1));
}

fn exchange_of(id: &str, message: &str) -> RuleExchange {
    let mut exchange = exchange(message);
    exchange.message_id = crate::ids::MessageId::from_string(id);
    RuleExchange { tenant: tenant(), agent: AgentId::from_string("agt_1"), exchange }
}

#[tokio::test]
async fn a_pass_decides_each_exchange_on_the_ones_before_it_and_stores_them_in_one_go() {
    let mut m = Mocks::new();
    // Each topic is read from the store once; the pass's own facts are known after that.
    m.memories.expect_learned_already().times(1).returning(|_| Ok(vec![]));
    m.memories
        .expect_on_topic()
        .withf(|_, _, t, _, _| t == "home")
        .times(1)
        .returning(|_, _, _, _, _| Ok(vec![]));
    m.memories
        .expect_on_topic()
        .withf(|_, _, t, _, _| t == "name")
        .times(1)
        .returning(|_, _, _, _, _| Ok(vec![]));
    m.memories.expect_nearest().never();
    // One call embeds every fact the pass stores; the name stated again is not among them.
    m.embedder
        .expect_embed_background()
        .withf(|texts| {
            texts == ["The user lives in Lyon.", "The user lives in Porto.", "The user's name is Ada."]
        })
        .times(1)
        .returning(|texts| Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect()));
    m.memories
        .expect_learn_all()
        .withf(|all| {
            let [lyon, porto, ada, again] = all else { return false };
            let lyon_id = &lyon.added[0].entry.id;
            lyon.added.len() == 1
                && lyon.invalidated.is_empty()
                && porto.added.len() == 1
                && porto.invalidated.len() == 1
                && &porto.invalidated[0].id == lyon_id
                && porto.invalidated[0].superseded_by.as_ref() == Some(&porto.added[0].entry.id)
                && ada.added.len() == 1
                && ada.invalidated.is_empty()
                && again.changes() == 0
                && all.iter().flat_map(|l| &l.added).all(|a| a.embedding.vector == [1.0, 0.0])
        })
        .times(1)
        .returning(|all| Ok(vec![true; all.len()]));
    let pass = [
        exchange_of("msg_a", "I live in Lyon."),
        exchange_of("msg_b", "What's the weather like?"),
        exchange_of("msg_c", "I moved to Porto."),
        exchange_of("msg_d", "My name is Ada."),
        exchange_of("msg_e", "My name is Ada."),
    ];
    let learned = m.service().learn_by_rules_all(&pass).await.unwrap();
    assert_eq!(learned, [Some(1), Some(0), Some(2), Some(1), Some(0)]);
}

#[tokio::test]
async fn a_pass_done_again_leaves_out_what_was_learned_and_decides_the_rest_on_the_store() {
    let mut m = Mocks::new().embeds();
    let mut porto = entry("mem_porto", "The user lives in Porto.");
    porto.metadata.insert("topic".into(), json!("home"));
    m.memories
        .expect_learned_already()
        .withf(|x| x.len() == 2)
        .times(1)
        .returning(|x| Ok(vec![x[0].1.clone()]));
    m.memories.expect_on_topic().times(1).returning(move |_, _, _, _, _| Ok(vec![porto.clone()]));
    m.memories
        .expect_learn_all()
        .withf(|all| {
            let [berlin] = all else { return false };
            berlin.exchange.as_str() == "msg_b" && berlin.invalidated[0].id.as_str() == "mem_porto"
        })
        .times(1)
        .returning(|all| Ok(vec![true; all.len()]));
    let pass = [exchange_of("msg_a", "I moved to Porto."), exchange_of("msg_b", "I moved to Berlin.")];
    assert_eq!(m.service().learn_by_rules_all(&pass).await.unwrap(), [None, Some(2)]);
}

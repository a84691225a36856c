use std::sync::Arc;

use agentry_domain::agents::AgentRepository;
use agentry_domain::events::{EventLog, EventPayload, EventType};
use agentry_domain::ids::{AgentId, DocumentId, EventId, MemoryId, TenantId};
use agentry_domain::memory::{
    EmbeddedEntry, Embedding, MemoryDocument, MemoryEntry, MemoryFilter, MemoryRepository, MemoryType, Merge,
    Validity,
};
use agentry_domain::pagination::Page;
use agentry_store::{Database, EventStore, MemoryStore};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{Map, json};

crate::contract!(
    entries_are_stored_read_and_listed_per_tenant,
    a_key_is_upserted_into_one_entry_under_concurrent_writes,
    vector_search_is_exact_and_sees_other_instances_changes_at_once,
    lexical_search_matches_any_term_within_the_scope,
    lexical_search_leaves_common_words_out,
    deleting_a_document_removes_its_chunks_everywhere,
    touch_counts_each_entry_once,
    consolidation_merges_and_writes_its_event,
    deleting_an_agent_deletes_its_memory,
    reindex_finds_and_replaces_other_models_embeddings,
);

const MODEL: &str = "test:2";

pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 3, 9, 0, 0).unwrap()
}

pub fn entry(id: &str, tenant: &str, agent: Option<&str>, content: &str) -> MemoryEntry {
    MemoryEntry {
        id: MemoryId::from_string(id),
        tenant_id: TenantId::from_string(tenant),
        agent_id: agent.map(AgentId::from_string),
        document_id: None,
        memory_type: MemoryType::Semantic,
        key: None,
        content: content.into(),
        source: "api".into(),
        metadata: json!({"lang": "en"}).as_object().cloned().unwrap(),
        tags: vec!["t".into()],
        importance: 0.5,
        access_count: 0,
        created_at: t0(),
        updated_at: t0(),
        expires_at: None,
        valid_from: t0(),
        invalid_at: None,
        superseded_by: None,
        origin: agentry_domain::memory::model::MemoryOrigin::Api,
        source_message_ids: Vec::new(),
    }
}

pub fn embedded(e: MemoryEntry, v: [f32; 2]) -> EmbeddedEntry {
    EmbeddedEntry { entry: e, embedding: Embedding { model_id: MODEL.into(), vector: v.to_vec() } }
}

pub async fn setup(db: &Database) -> MemoryStore {
    let agents = super::agents::setup(db).await;
    agents
        .create(
            &super::agents::agent("agt_1", "ten_1"),
            &crate::harness::event("evt_a1", "ten_1", EventType::AgentCreated),
        )
        .await
        .unwrap();
    agents
        .create(
            &super::agents::agent("agt_2", "ten_2"),
            &crate::harness::event("evt_a2", "ten_2", EventType::AgentCreated),
        )
        .await
        .unwrap();
    MemoryStore::new(db.clone(), 2)
}

fn agent_filter(agent: &str) -> MemoryFilter {
    MemoryFilter { agent_id: Some(AgentId::from_string(agent)), ..MemoryFilter::default() }
}

async fn entries_are_stored_read_and_listed_per_tenant(db: Database) {
    let repo = setup(&db).await;
    let a = entry("mem_1", "ten_1", Some("agt_1"), "first");
    let mut expired = entry("mem_2", "ten_1", None, "gone");
    expired.expires_at = Some(t0() - Duration::seconds(1));
    let other = entry("mem_3", "ten_2", Some("agt_2"), "theirs");
    repo.insert(&[embedded(a.clone(), [1.0, 0.0]), embedded(expired.clone(), [0.0, 1.0])], &[])
        .await
        .unwrap();
    repo.insert(&[embedded(other.clone(), [1.0, 0.0])], &[]).await.unwrap();

    assert_eq!(repo.get(&a.tenant_id, &a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(repo.get(&a.tenant_id, &other.id).await.unwrap(), None, "another tenant's entry");
    let (page, total) =
        repo.list(&a.tenant_id, None, None, None, Validity::default(), t0(), Page::default()).await.unwrap();
    assert_eq!((page, total), (vec![a.clone()], 1), "expired entries are not listed");
    let (page, total) = repo
        .list(
            &a.tenant_id,
            Some(AgentId::from_string("agt_2")),
            None,
            None,
            Validity::default(),
            t0(),
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!((page.len(), total), (0, 0));
    let (_, total) = repo
        .list(
            &a.tenant_id,
            None,
            Some(MemoryType::Episodic),
            None,
            Validity::default(),
            t0(),
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(total, 0);
    let tagged = |tag: &str| {
        repo.list(&a.tenant_id, None, None, Some(tag.to_owned()), Validity::default(), t0(), Page::default())
    };
    assert_eq!(tagged("t").await.unwrap(), (vec![a.clone()], 1), "the entry's tag");
    for other_tag in ["x", "%", "_", "\"", "T"] {
        assert_eq!(tagged(other_tag).await.unwrap().1, 0, "no entry carries {other_tag:?}");
    }
    let many = repo.get_many(&a.tenant_id, &[a.id.clone(), other.id.clone()]).await.unwrap();
    assert_eq!(many, vec![a.clone()]);

    // An entry of a deleted (or another tenant's) agent is refused whole.
    let bad = entry("mem_4", "ten_1", Some("agt_missing"), "x");
    assert!(
        repo.insert(
            &[embedded(entry("mem_5", "ten_1", None, "y"), [1.0, 0.0]), embedded(bad, [1.0, 0.0])],
            &[]
        )
        .await
        .is_err()
    );
    assert_eq!(repo.get(&a.tenant_id, &MemoryId::from_string("mem_5")).await.unwrap(), None);

    assert!(repo.delete(&a.tenant_id, &a.id).await.unwrap());
    assert!(!repo.delete(&a.tenant_id, &a.id).await.unwrap());
    assert!(!repo.delete(&a.tenant_id, &other.id).await.unwrap(), "another tenant's entry is not deleted");
}

async fn a_key_is_upserted_into_one_entry_under_concurrent_writes(db: Database) {
    let repo = Arc::new(setup(&db).await);
    let mut tasks = Vec::new();
    for i in 0..20 {
        let repo = repo.clone();
        tasks.push(tokio::spawn(async move {
            let mut e = entry(&format!("mem_{i:02}"), "ten_1", None, &format!("version {i}"));
            e.key = Some("favourite".into());
            e.updated_at = t0() + Duration::seconds(i);
            repo.upsert_keyed(&embedded(e, [1.0, 0.0])).await.unwrap()
        }));
    }
    let mut ids = std::collections::HashSet::new();
    for t in tasks {
        ids.insert(t.await.unwrap().id);
    }
    assert_eq!(ids.len(), 1, "every upsert answered the one entry: {ids:?}");
    let (page, total) = repo
        .list(&TenantId::from_string("ten_1"), None, None, None, Validity::default(), t0(), Page::default())
        .await
        .unwrap();
    assert_eq!(total, 1);
    assert_eq!(&page[0].id, ids.iter().next().unwrap());
    assert_eq!(page[0].created_at, t0(), "created_at is kept");
    // The same key of another type, or in another tenant, is another entry.
    let mut e = entry("mem_other_type", "ten_1", None, "x");
    e.key = Some("favourite".into());
    e.memory_type = MemoryType::Procedural;
    assert_eq!(repo.upsert_keyed(&embedded(e, [1.0, 0.0])).await.unwrap().id.as_str(), "mem_other_type");
    let mut e = entry("mem_other_tenant", "ten_2", None, "x");
    e.key = Some("favourite".into());
    assert_eq!(repo.upsert_keyed(&embedded(e, [1.0, 0.0])).await.unwrap().id.as_str(), "mem_other_tenant");
}

async fn vector_search_is_exact_and_sees_other_instances_changes_at_once(db: Database) {
    let one = setup(&db).await;
    let two = MemoryStore::new(db.clone(), 2); // another instance: its own cache
    let tenant = TenantId::from_string("ten_1");
    let f = agent_filter("agt_1");
    one.insert(&[embedded(entry("mem_a", "ten_1", Some("agt_1"), "a"), [1.0, 0.0])], &[]).await.unwrap();
    one.insert(&[embedded(entry("mem_b", "ten_1", Some("agt_1"), "b"), [0.6, 0.8])], &[]).await.unwrap();
    one.insert(&[embedded(entry("mem_x", "ten_2", Some("agt_2"), "x"), [1.0, 0.0])], &[]).await.unwrap();
    let hits = two.nearest(&tenant, MODEL, &[0.0, 1.0], &f, t0(), 10).await.unwrap();
    let ids: Vec<&str> = hits.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, vec!["mem_b", "mem_a"]);
    assert!((hits[0].1 - 0.8).abs() < 1e-6);
    assert_eq!(two.vector_count(&tenant, MODEL, &f, t0()).await.unwrap(), 2);

    // Changes through the first instance are seen by the second's next search.
    one.delete(&tenant, &MemoryId::from_string("mem_b")).await.unwrap();
    let mut moved = entry("mem_c", "ten_1", Some("agt_1"), "c");
    moved.key = Some("k".into());
    one.upsert_keyed(&embedded(moved.clone(), [0.0, 1.0])).await.unwrap();
    let ids: Vec<String> = two
        .nearest(&tenant, MODEL, &[0.0, 1.0], &f, t0(), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id.to_string())
        .collect();
    assert_eq!(ids, vec!["mem_c", "mem_a"]);
    // An upsert that moves the vector replaces it in the cache.
    one.upsert_keyed(&embedded(moved, [1.0, 0.0])).await.unwrap();
    let hits = two.nearest(&tenant, MODEL, &[0.0, 1.0], &f, t0(), 10).await.unwrap();
    assert!(hits.iter().all(|(_, s)| s.abs() < 1e-6), "{hits:?}");

    // Filters: tags, metadata, type, expiry, and another model's vectors.
    let tagged = MemoryFilter { tags: vec!["t".into(), "u".into()], ..f.clone() };
    assert!(two.nearest(&tenant, MODEL, &[1.0, 0.0], &tagged, t0(), 10).await.unwrap().is_empty());
    let meta = MemoryFilter { metadata: json!({"lang": "de"}).as_object().cloned().unwrap(), ..f.clone() };
    assert!(two.nearest(&tenant, MODEL, &[1.0, 0.0], &meta, t0(), 10).await.unwrap().is_empty());
    let mut expiring = entry("mem_e", "ten_1", Some("agt_1"), "e");
    expiring.expires_at = Some(t0() + Duration::hours(1));
    one.insert(&[embedded(expiring, [1.0, 0.0])], &[]).await.unwrap();
    assert_eq!(two.nearest(&tenant, MODEL, &[1.0, 0.0], &f, t0(), 10).await.unwrap().len(), 3);
    assert_eq!(
        two.nearest(&tenant, MODEL, &[1.0, 0.0], &f, t0() + Duration::hours(2), 10).await.unwrap().len(),
        2
    );
    assert!(two.nearest(&tenant, "other:2", &[1.0, 0.0], &f, t0(), 10).await.unwrap().is_empty());
    assert!(
        two.nearest(&TenantId::from_string("ten_2"), MODEL, &[1.0, 0.0], &f, t0(), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn lexical_search_matches_any_term_within_the_scope(db: Database) {
    let repo = setup(&db).await;
    let tenant = TenantId::from_string("ten_1");
    let teal =
        entry("mem_teal", "ten_1", Some("agt_1"), "The customer's favourite colours are teal and navy.");
    let cat = entry("mem_cat", "ten_1", Some("agt_1"), "The cat sleeps on the mat all afternoon.");
    let mut old = entry("mem_old", "ten_1", Some("agt_1"), "Teal was the colour of last year.");
    old.expires_at = Some(t0());
    let theirs = entry("mem_theirs", "ten_2", Some("agt_2"), "Their favourite colour is teal too.");
    let tenant_wide = entry("mem_wide", "ten_1", None, "Teal mugs are on sale.");
    repo.insert(
        &[
            embedded(teal, [1.0, 0.0]),
            embedded(cat, [0.0, 1.0]),
            embedded(old, [1.0, 0.0]),
            embedded(tenant_wide, [1.0, 0.0]),
        ],
        &[],
    )
    .await
    .unwrap();
    repo.insert(&[embedded(theirs, [1.0, 0.0])], &[]).await.unwrap();

    let terms = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // Stemmed: "colour" finds "colours".
    let hits =
        repo.lexical(&tenant, &terms(&["colour", "client"]), &agent_filter("agt_1"), t0(), 10).await.unwrap();
    assert_eq!(hits, vec![MemoryId::from_string("mem_teal")]);
    // Any term.
    let hits = repo
        .lexical(&tenant, &terms(&["teal", "favourite", "cat"]), &agent_filter("agt_1"), t0(), 10)
        .await
        .unwrap();
    let mut ids: Vec<&str> = hits.iter().map(MemoryId::as_str).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec!["mem_cat", "mem_teal"]);
    // Without an agent: the tenant's entries, never another tenant's.
    let hits = repo.lexical(&tenant, &terms(&["teal"]), &MemoryFilter::default(), t0(), 10).await.unwrap();
    let mut ids: Vec<&str> = hits.iter().map(MemoryId::as_str).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec!["mem_teal", "mem_wide"]);
    let episodic = MemoryFilter { memory_types: vec![MemoryType::Episodic], ..MemoryFilter::default() };
    assert!(repo.lexical(&tenant, &terms(&["teal"]), &episodic, t0(), 10).await.unwrap().is_empty());
    // Quotes and operators in a term are text, not syntax.
    assert!(
        repo.lexical(&tenant, &terms(&["\"teal", "OR", "NEAR("]), &MemoryFilter::default(), t0(), 10)
            .await
            .is_ok()
    );
}

async fn deleting_a_document_removes_its_chunks_everywhere(db: Database) {
    let repo = setup(&db).await;
    let tenant = TenantId::from_string("ten_1");
    let doc = MemoryDocument {
        id: DocumentId::from_string("doc_1"),
        tenant_id: tenant.clone(),
        agent_id: AgentId::from_string("agt_1"),
        title: "Handbook".into(),
        metadata: Map::new(),
        chunk_count: 2,
        created_at: t0(),
    };
    let mut c1 = entry("mem_c1", "ten_1", Some("agt_1"), "Refunds take five days.");
    c1.document_id = Some(doc.id.clone());
    let mut c2 = entry("mem_c2", "ten_1", Some("agt_1"), "Refunds need a receipt.");
    c2.document_id = Some(doc.id.clone());
    repo.insert(&[embedded(c1, [1.0, 0.0]), embedded(c2, [1.0, 0.0])], std::slice::from_ref(&doc))
        .await
        .unwrap();
    let f = agent_filter("agt_1");
    assert_eq!(repo.nearest(&tenant, MODEL, &[1.0, 0.0], &f, t0(), 10).await.unwrap().len(), 2);
    assert!(!repo.delete_document(&TenantId::from_string("ten_2"), &doc.id).await.unwrap(), "not theirs");
    assert!(repo.delete_document(&tenant, &doc.id).await.unwrap());
    assert!(!repo.delete_document(&tenant, &doc.id).await.unwrap());
    assert!(repo.nearest(&tenant, MODEL, &[1.0, 0.0], &f, t0(), 10).await.unwrap().is_empty());
    assert!(repo.lexical(&tenant, &["refunds".to_owned()], &f, t0(), 10).await.unwrap().is_empty());
    assert_eq!(
        repo.list(&tenant, None, None, None, Validity::default(), t0(), Page::default()).await.unwrap().1,
        0
    );
}

async fn touch_counts_each_entry_once(db: Database) {
    let repo = setup(&db).await;
    let tenant = TenantId::from_string("ten_1");
    repo.insert(
        &[
            embedded(entry("mem_a", "ten_1", None, "a"), [1.0, 0.0]),
            embedded(entry("mem_b", "ten_1", None, "b"), [1.0, 0.0]),
        ],
        &[],
    )
    .await
    .unwrap();
    repo.insert(&[embedded(entry("mem_x", "ten_2", None, "x"), [1.0, 0.0])], &[]).await.unwrap();
    let ids = [MemoryId::from_string("mem_a"), MemoryId::from_string("mem_x")];
    let repo = Arc::new(repo);
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let (repo, tenant, ids) = (repo.clone(), tenant.clone(), ids.clone());
        tasks.push(tokio::spawn(async move { repo.touch(&tenant, &ids).await.unwrap() }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let get = |t: &str, id: &str| {
        let repo = repo.clone();
        let (t, id) = (TenantId::from_string(t), MemoryId::from_string(id));
        async move { repo.get(&t, &id).await.unwrap().unwrap().access_count }
    };
    assert_eq!(get("ten_1", "mem_a").await, 10);
    assert_eq!(get("ten_1", "mem_b").await, 0);
    assert_eq!(get("ten_2", "mem_x").await, 0, "another tenant's entry is not touched");
}

async fn consolidation_merges_and_writes_its_event(db: Database) {
    let repo = setup(&db).await;
    let tenant = TenantId::from_string("ten_1");
    let agent = AgentId::from_string("agt_1");
    repo.insert(
        &[
            embedded(entry("mem_a", "ten_1", Some("agt_1"), "a"), [1.0, 0.0]),
            embedded(entry("mem_b", "ten_1", Some("agt_1"), "b"), [1.0, 0.0]),
        ],
        &[],
    )
    .await
    .unwrap();
    let rows = repo.agent_vectors(&tenant, &agent, MODEL, t0()).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].1, vec![1.0, 0.0]);
    let mut kept = rows[0].0.clone();
    kept.tags.push("merged".into());
    kept.access_count = 7;
    let event = agentry_domain::events::Event {
        id: EventId::from_string("evt_c"),
        tenant_id: tenant.clone(),
        payload: EventPayload::MemoryConsolidated {
            agent_id: agent.clone(),
            examined: 2,
            merged: 1,
            kept: 1,
            threshold: 0.92,
        },
        created_at: t0(),
    };
    repo.consolidate(
        &tenant,
        &[Merge { kept: kept.clone(), absorbed: vec![MemoryId::from_string("mem_b")] }],
        &event,
    )
    .await
    .unwrap();
    assert_eq!(repo.get(&tenant, &MemoryId::from_string("mem_b")).await.unwrap(), None);
    let stored = repo.get(&tenant, &kept.id).await.unwrap().unwrap();
    assert_eq!((stored.tags, stored.access_count), (vec!["t".to_owned(), "merged".to_owned()], 7));
    assert_eq!(
        repo.nearest(&tenant, MODEL, &[1.0, 0.0], &agent_filter("agt_1"), t0(), 10).await.unwrap().len(),
        1
    );
    let events = EventStore::new(db.clone()).recent(&tenant, 10).await.unwrap();
    assert_eq!(events[0].event_type(), EventType::MemoryConsolidated);
}

async fn deleting_an_agent_deletes_its_memory(db: Database) {
    let repo = setup(&db).await;
    let agents = agentry_store::AgentStore::new(db.clone());
    let tenant = TenantId::from_string("ten_1");
    repo.insert(
        &[
            embedded(entry("mem_a", "ten_1", Some("agt_1"), "agent's"), [1.0, 0.0]),
            embedded(entry("mem_t", "ten_1", None, "tenant's"), [1.0, 0.0]),
        ],
        &[],
    )
    .await
    .unwrap();
    assert_eq!(
        repo.nearest(&tenant, MODEL, &[1.0, 0.0], &MemoryFilter::default(), t0(), 10).await.unwrap().len(),
        2
    );
    assert!(agents.delete(&tenant, &AgentId::from_string("agt_1")).await.unwrap());
    assert_eq!(repo.get(&tenant, &MemoryId::from_string("mem_a")).await.unwrap(), None);
    let hits = repo.nearest(&tenant, MODEL, &[1.0, 0.0], &MemoryFilter::default(), t0(), 10).await.unwrap();
    assert_eq!(hits.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), vec!["mem_t"]);
    assert!(
        repo.lexical(&tenant, &["agent".to_owned()], &MemoryFilter::default(), t0(), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn reindex_finds_and_replaces_other_models_embeddings(db: Database) {
    let repo = setup(&db).await;
    let tenant = TenantId::from_string("ten_1");
    let mut old = embedded(entry("mem_old", "ten_1", None, "old text"), [1.0, 0.0]);
    old.embedding.model_id = "hashing:v1-2".into();
    repo.insert(&[old, embedded(entry("mem_new", "ten_1", None, "new"), [1.0, 0.0])], &[]).await.unwrap();
    assert_eq!(
        repo.nearest(&tenant, MODEL, &[1.0, 0.0], &MemoryFilter::default(), t0(), 10).await.unwrap().len(),
        1
    );
    let stale = repo.stale_embeddings(MODEL, 10).await.unwrap();
    assert_eq!(stale, vec![(tenant.clone(), MemoryId::from_string("mem_old"), "old text".to_owned())]);
    repo.set_embeddings(&[(
        tenant.clone(),
        MemoryId::from_string("mem_old"),
        Embedding { model_id: MODEL.into(), vector: vec![0.0, 1.0] },
    )])
    .await
    .unwrap();
    assert!(repo.stale_embeddings(MODEL, 10).await.unwrap().is_empty());
    let hits = repo.nearest(&tenant, MODEL, &[0.0, 1.0], &MemoryFilter::default(), t0(), 1).await.unwrap();
    assert_eq!(hits[0].0.as_str(), "mem_old");
}

async fn lexical_search_leaves_common_words_out(db: Database) {
    let repo = setup(&db).await;
    let tenant = TenantId::from_string("ten_1");
    // "order" is in 1,000 entries of the agent's scope: common.
    let mut entries: Vec<EmbeddedEntry> = (0..1000)
        .map(|i| {
            embedded(
                entry(
                    &format!("mem_{i:04}"),
                    "ten_1",
                    Some("agt_1"),
                    &format!("Order {i} shipped by truck."),
                ),
                [1.0, 0.0],
            )
        })
        .collect();
    entries.push(embedded(
        entry("mem_rare", "ten_1", Some("agt_1"), "The order with the walnut desk is late."),
        [0.0, 1.0],
    ));
    entries.push(embedded(
        entry("mem_both", "ten_1", Some("agt_1"), "Truck order moved to Tuesday."),
        [0.0, 1.0],
    ));
    repo.insert(&entries, &[]).await.unwrap();
    let terms = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // A rare word with a common one: the rare word decides which entries match.
    let hits =
        repo.lexical(&tenant, &terms(&["order", "walnut"]), &agent_filter("agt_1"), t0(), 10).await.unwrap();
    assert_eq!(hits, vec![MemoryId::from_string("mem_rare")]);
    // Only common words: entries holding all of them.
    let hits =
        repo.lexical(&tenant, &terms(&["order", "truck"]), &agent_filter("agt_1"), t0(), 5).await.unwrap();
    assert_eq!(hits.len(), 5);
    assert!(!hits.contains(&MemoryId::from_string("mem_rare")));
    // One word alone is searched as it is, common or not.
    assert_eq!(
        repo.lexical(&tenant, &terms(&["order"]), &agent_filter("agt_1"), t0(), 3).await.unwrap().len(),
        3
    );
}

//! The ingestion queue and the chunk index of knowledge files.

use agentry_domain::events::{Event, EventLog, EventPayload, EventType};
use agentry_domain::ids::{ChunkId, EventId, KnowledgeBaseId, KnowledgeFileId, TenantId};
use agentry_domain::knowledge::chunking::{Chunk, ChunkLimits};
use agentry_domain::knowledge::{
    ChunkScope, FileAdded, FileStatus, IndexedChunk, KnowledgeFile, KnowledgeIndex, KnowledgeRepository,
};
use agentry_domain::work::{Lease, LeaseQueue};
use agentry_store::{Database, EventStore, KnowledgeStore};
use chrono::{DateTime, Duration, TimeZone, Utc};

use super::knowledge::{base, file, setup};

crate::contract!(
    a_queued_file_is_claimed_once_indexed_whole_and_searchable,
    a_failed_or_deleted_file_leaves_no_chunk_and_a_stale_lease_writes_nothing,
    files_of_another_model_are_queued_again_and_keep_their_chunks_meanwhile,
    another_tenants_chunks_are_never_found,
);

const MODEL: &str = "test:3";

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 7, 9, 0, 0).unwrap()
}

fn lease(token: &str) -> Lease {
    Lease { token: token.into(), until: t0() + Duration::minutes(15) }
}

fn chunk(id: &str, index: u32, text: &str, page: Option<u32>, vector: [f32; 3]) -> IndexedChunk {
    IndexedChunk {
        id: ChunkId::from_string(id),
        chunk: Chunk {
            index,
            text: text.into(),
            page,
            headings: vec!["Policies".into(), "Leave «annual»".into()],
            start: u64::from(index) as usize * 100,
            end: u64::from(index) as usize * 100 + text.chars().count(),
        },
        vector: vector.to_vec(),
    }
}

fn indexed(file: &KnowledgeFile) -> Event {
    Event {
        id: EventId::from_string(format!("evt_{}", file.id)),
        tenant_id: file.tenant_id.clone(),
        payload: EventPayload::KnowledgeFileIndexed {
            knowledge_base_id: file.knowledge_base_id.clone(),
            file_id: file.id.clone(),
            name: file.name.clone(),
            pages: Some(3),
            chunks: 3,
        },
        created_at: t0(),
    }
}

fn failed(file: &KnowledgeFile) -> Event {
    Event {
        id: EventId::from_string(format!("evt_f_{}", file.id)),
        tenant_id: file.tenant_id.clone(),
        payload: EventPayload::KnowledgeFileFailed {
            knowledge_base_id: file.knowledge_base_id.clone(),
            file_id: file.id.clone(),
            name: file.name.clone(),
            error: "the PDF is encrypted".into(),
        },
        created_at: t0(),
    }
}

fn scope(tenant: &str, bases: &[&str]) -> ChunkScope {
    ChunkScope {
        tenant: TenantId::from_string(format!("ten_{tenant}")),
        bases: bases.iter().map(|b| KnowledgeBaseId::from_string(*b)).collect(),
        files: Vec::new(),
    }
}

fn three() -> Vec<IndexedChunk> {
    vec![
        chunk("kbc_a", 0, "Employees accrue twenty days of annual leave.", Some(1), [1.0, 0.0, 0.0]),
        chunk("kbc_b", 1, "Expense reports are due within thirty days.", Some(2), [0.0, 1.0, 0.0]),
        chunk("kbc_c", 2, "The office closes at six on Fridays.", Some(3), [0.0, 0.0, 1.0]),
    ]
}

/// A base with one queued file, claimed: the store, the file as claimed and its lease.
async fn claimed_file(db: &Database) -> (KnowledgeStore, KnowledgeFile, Lease) {
    let (store, _) = setup(db).await;
    let handbook = base("kb_1", "1", "Handbook");
    assert!(store.create_base(&handbook).await.unwrap());
    assert_eq!(store.add_file(&file("kbf_1", &handbook, "a", 100)).await.unwrap(), FileAdded::Added);
    let lease = lease("lease_1");
    let claimed = store.claim(&lease, t0(), 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].claims, 1);
    assert_eq!(claimed[0].file.status, FileStatus::Processing);
    assert_eq!(claimed[0].chunking, ChunkLimits { max_tokens: 300, overlap_tokens: 30 });
    assert!(store.claim(&self::lease("lease_2"), t0(), 10).await.unwrap().is_empty(), "held");
    (store, claimed[0].file.clone(), lease)
}

async fn a_queued_file_is_claimed_once_indexed_whole_and_searchable(db: Database) {
    let (store, file, lease) = claimed_file(&db).await;
    assert!(store.set_progress(&file.id, &lease, 0.5, t0()).await.unwrap());
    let tenant = file.tenant_id.clone();
    let seen = store.get_file(&tenant, &file.knowledge_base_id, &file.id).await.unwrap().unwrap();
    assert_eq!((seen.status, seen.progress), (FileStatus::Processing, 0.5));
    assert!(store.nearest(&scope("1", &["kb_1"]), MODEL, &[1.0, 0.0, 0.0], 5).await.unwrap().is_empty());

    assert!(store.index_file(&file, &lease, MODEL, Some(3), &three(), &indexed(&file), t0()).await.unwrap());
    let seen = store.get_file(&tenant, &file.knowledge_base_id, &file.id).await.unwrap().unwrap();
    assert_eq!((seen.status, seen.chunks, seen.pages, seen.progress), (FileStatus::Indexed, 3, Some(3), 1.0));
    assert!(store.claim(&self::lease("lease_2"), t0(), 10).await.unwrap().is_empty(), "done");

    let (listed, total) = store.list_chunks(&tenant, &file.id, 1, 5).await.unwrap();
    assert_eq!(total, 3);
    assert_eq!(listed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["kbc_b", "kbc_c"]);
    assert_eq!(listed[0].headings, ["Policies", "Leave «annual»"]);
    assert_eq!((listed[0].page, listed[0].index, listed[0].start), (Some(2), 1, 100));

    let nearest = store.nearest(&scope("1", &["kb_1"]), MODEL, &[0.0, 0.8, 0.6], 2).await.unwrap();
    assert_eq!(nearest.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["kbc_b", "kbc_c"]);
    assert!((nearest[0].1 - 0.8).abs() < 1e-6);
    assert!(store.nearest(&scope("1", &["kb_1"]), "other:3", &[1.0, 0.0, 0.0], 5).await.unwrap().is_empty());
    let mut only = scope("1", &["kb_1"]);
    only.files = vec![KnowledgeFileId::from_string("kbf_other")];
    assert!(store.nearest(&only, MODEL, &[1.0, 0.0, 0.0], 5).await.unwrap().is_empty());

    let lexical =
        store.lexical(&scope("1", &["kb_1"]), &["expense".into(), "reports".into()], 5).await.unwrap();
    assert_eq!(lexical, [ChunkId::from_string("kbc_b")]);
    let found = store.get_chunks(&tenant, &lexical).await.unwrap();
    assert_eq!(
        (found[0].file_name.as_str(), found[0].chunk.text.as_str()),
        ("kbf_1.pdf", "Expense reports are due within thirty days.")
    );

    let events = EventStore::new(db.clone()).recent(&tenant, 10).await.unwrap();
    assert_eq!(events[0].event_type(), EventType::KnowledgeFileIndexed);
}

async fn a_failed_or_deleted_file_leaves_no_chunk_and_a_stale_lease_writes_nothing(db: Database) {
    let (store, file, lease) = claimed_file(&db).await;
    let tenant = file.tenant_id.clone();
    let stale = self::lease("lease_old");
    assert!(!store.index_file(&file, &stale, MODEL, None, &three(), &indexed(&file), t0()).await.unwrap());
    assert!(!store.set_progress(&file.id, &stale, 0.3, t0()).await.unwrap());
    assert!(!store.fail_file(&file, Some(stale), "x", &failed(&file), t0()).await.unwrap());
    assert_eq!(store.list_chunks(&tenant, &file.id, 0, 10).await.unwrap().1, 0);

    assert!(
        store
            .fail_file(&file, Some(lease.clone()), "the PDF is encrypted", &failed(&file), t0())
            .await
            .unwrap()
    );
    let seen = store.get_file(&tenant, &file.knowledge_base_id, &file.id).await.unwrap().unwrap();
    assert_eq!((seen.status, seen.error.as_deref()), (FileStatus::Failed, Some("the PDF is encrypted")));
    assert!(
        !store.index_file(&file, &lease, MODEL, None, &three(), &indexed(&file), t0()).await.unwrap(),
        "failed is final"
    );
    let events = EventStore::new(db.clone()).recent(&tenant, 10).await.unwrap();
    assert_eq!(events[0].event_type(), EventType::KnowledgeFileFailed);

    // Indexed, searched (the vectors are now cached), then deleted: nothing is found after.
    let handbook = base("kb_1", "1", "Handbook");
    assert_eq!(
        store.add_file(&super::knowledge::file("kbf_2", &handbook, "b", 10)).await.unwrap(),
        FileAdded::Added
    );
    let second = store.claim(&self::lease("lease_3"), t0(), 10).await.unwrap().remove(0);
    assert!(
        store
            .index_file(&second.file, &second.lease, MODEL, None, &three(), &indexed(&second.file), t0())
            .await
            .unwrap()
    );
    assert_eq!(store.nearest(&scope("1", &["kb_1"]), MODEL, &[1.0, 0.0, 0.0], 5).await.unwrap().len(), 3);
    assert!(store.delete_file(&tenant, &handbook.id, &second.file.id).await.unwrap());
    assert!(store.nearest(&scope("1", &["kb_1"]), MODEL, &[1.0, 0.0, 0.0], 5).await.unwrap().is_empty());
    assert!(store.lexical(&scope("1", &["kb_1"]), &["expense".into()], 5).await.unwrap().is_empty());
    assert!(store.get_chunks(&tenant, &[ChunkId::from_string("kbc_a")]).await.unwrap().is_empty());
}

async fn files_of_another_model_are_queued_again_and_keep_their_chunks_meanwhile(db: Database) {
    let (store, file, lease) = claimed_file(&db).await;
    assert!(store.index_file(&file, &lease, MODEL, None, &three(), &indexed(&file), t0()).await.unwrap());
    assert_eq!(store.requeue(MODEL, false, t0()).await.unwrap(), 0, "same model");
    assert_eq!(store.requeue("new:3", false, t0()).await.unwrap(), 1);
    let tenant = file.tenant_id.clone();
    let seen = store.get_file(&tenant, &file.knowledge_base_id, &file.id).await.unwrap().unwrap();
    assert_eq!(seen.status, FileStatus::Queued);
    assert_eq!(store.nearest(&scope("1", &["kb_1"]), MODEL, &[1.0, 0.0, 0.0], 5).await.unwrap().len(), 3);
    let again = store.claim(&self::lease("lease_9"), t0(), 10).await.unwrap();
    assert_eq!((again.len(), again[0].claims), (1, 1), "claims count from the requeue");
    assert_eq!(store.requeue(MODEL, true, t0()).await.unwrap(), 0, "processing files are not indexed ones");
}

async fn another_tenants_chunks_are_never_found(db: Database) {
    let (store, file, lease) = claimed_file(&db).await;
    assert!(store.index_file(&file, &lease, MODEL, None, &three(), &indexed(&file), t0()).await.unwrap());
    // Tenant 2 names tenant 1's base: nothing, by vector, by words or by id.
    assert!(store.nearest(&scope("2", &["kb_1"]), MODEL, &[1.0, 0.0, 0.0], 5).await.unwrap().is_empty());
    assert!(store.lexical(&scope("2", &["kb_1"]), &["expense".into()], 5).await.unwrap().is_empty());
    let other = TenantId::from_string("ten_2");
    assert!(store.get_chunks(&other, &[ChunkId::from_string("kbc_a")]).await.unwrap().is_empty());
    assert_eq!(store.list_chunks(&other, &file.id, 0, 10).await.unwrap().1, 0);
}

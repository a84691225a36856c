#![allow(clippy::unwrap_used)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, TimeZone, Utc};

use super::upload::RECOGNITION_BYTES;
use super::*;
use crate::events::EventPayload;
use crate::ids::MockIdGenerator;
use crate::knowledge::FILE_PART_BYTES;
use crate::knowledge::document::{MediaType, ParseError, ParsedDocument, Section};
use crate::knowledge::ingestion::{Ingestion, IngestionSettings};
use crate::knowledge::model::{FileStatus, StorageQuota};
use crate::knowledge::ports::{
    ContentDigest, FileAdded, IngestionItem, MockDocumentParser, MockFileStore, MockKnowledgeIndex,
    MockKnowledgeRepository,
};
use crate::memory::{EmbeddingModel, MockEmbedder};
use crate::tenancy::{Plan, Role};
use crate::time::MockClock;
use crate::tokens::MockTokenCounter;
use crate::work::{Claimed, Lease, MockLeaseQueue, Outcome, WorkKind};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap()
}

fn caller(role: Role) -> Principal {
    Principal::test(role)
}

fn base() -> KnowledgeBase {
    KnowledgeBase {
        id: KnowledgeBaseId::from_string("kb_1"),
        tenant_id: TenantId::from_string("ten_1"),
        name: "Handbook".into(),
        description: None,
        chunking: ChunkLimits::default(),
        file_count: 0,
        bytes: 0,
        created_at: t0(),
        updated_at: t0(),
    }
}

fn file(status: FileStatus) -> KnowledgeFile {
    KnowledgeFile {
        id: KnowledgeFileId::from_string("kbf_9"),
        tenant_id: TenantId::from_string("ten_1"),
        knowledge_base_id: KnowledgeBaseId::from_string("kb_1"),
        name: "notes.txt".into(),
        media_type: MediaType::Text,
        bytes: 11,
        sha256: "abc".into(),
        status,
        error: None,
        pages: None,
        chunks: 0,
        progress: 0.0,
        created_at: t0(),
        updated_at: t0(),
    }
}

/// A digest that is the byte count, so tests can tell what was fed.
struct Counting(usize);

impl ContentDigest for Counting {
    fn update(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }

    fn finish(self: Box<Self>) -> String {
        format!("fed{}", self.0)
    }
}

struct Digests;

impl DigestFactory for Digests {
    fn sha256(&self) -> Box<dyn ContentDigest> {
        Box::new(Counting(0))
    }
}

struct Mocks {
    repository: MockKnowledgeRepository,
    index: MockKnowledgeIndex,
    files: MockFileStore,
    parser: MockDocumentParser,
    embedder: MockEmbedder,
}

impl Mocks {
    fn new() -> Self {
        let mut embedder = MockEmbedder::new();
        embedder.expect_model().return_const(EmbeddingModel {
            provider: "test".into(),
            id: "test:2".into(),
            dimension: 2,
        });
        Self {
            repository: MockKnowledgeRepository::new(),
            index: MockKnowledgeIndex::new(),
            files: MockFileStore::new(),
            parser: MockDocumentParser::new(),
            embedder,
        }
    }

    fn with_base(mut self, files_used: u64, bytes_used: u64) -> Self {
        self.repository.expect_get_base().returning(|_, _| Ok(Some(base())));
        self.repository.expect_usage().returning(move |_| Ok((files_used, bytes_used)));
        self
    }

    fn deps(self) -> KnowledgeDeps {
        let mut ids = MockIdGenerator::new();
        let n = AtomicU64::new(0);
        ids.expect_generate().returning(move |p| format!("{p}_{}", n.fetch_add(1, Ordering::SeqCst)));
        let mut clock = MockClock::new();
        clock.expect_now().returning(t0);
        KnowledgeDeps {
            repository: Arc::new(self.repository),
            index: Arc::new(self.index),
            files: Arc::new(self.files),
            parser: Arc::new(self.parser),
            digests: Arc::new(Digests),
            embedder: Arc::new(self.embedder),
            ids: Arc::new(ids),
            clock: Arc::new(clock),
        }
    }

    fn service(self, settings: KnowledgeSettings) -> KnowledgeService {
        KnowledgeService::new(self.deps(), settings)
    }
}

#[tokio::test]
async fn an_upload_is_stored_in_parts_as_it_streams_and_recorded_queued() {
    let mut m = Mocks::new().with_base(0, 0);
    m.parser.expect_recognise().times(1).returning(|_, head| {
        assert_eq!(head.len(), RECOGNITION_BYTES);
        Ok(MediaType::Text)
    });
    let parts = Arc::new(Mutex::new(Vec::new()));
    let seen = parts.clone();
    m.files.expect_put_part().returning(move |_, _, index, bytes| {
        seen.lock().unwrap().push((index, bytes.len()));
        Ok(())
    });
    m.files.expect_delete().never();
    m.repository.expect_add_file().times(1).returning(|f| {
        assert_eq!((f.status, f.bytes, f.sha256.as_str()), (FileStatus::Queued, 2_500_000, "fed2500000"));
        Ok(FileAdded::Added)
    });
    let service = m.service(KnowledgeSettings::default());
    let mut upload = service.begin_upload(&caller(Role::Member), &base().id, "dir/notes.txt").await.unwrap();
    assert_eq!(upload.name(), "notes.txt");
    for _ in 0..25 {
        upload.push(&[b'a'; 100_000]).await.unwrap();
    }
    let done = upload.finish().await.unwrap();
    assert!(!done.duplicate);
    assert_eq!(done.file.media_type, MediaType::Text);
    // Two whole parts while streaming, the rest at the end: never more than a part held.
    assert_eq!(
        *parts.lock().unwrap(),
        [(0, FILE_PART_BYTES), (1, FILE_PART_BYTES), (2, 2_500_000 - 2 * FILE_PART_BYTES)]
    );
}

#[tokio::test]
async fn a_duplicate_answers_the_existing_file_and_drops_its_parts() {
    let mut m = Mocks::new().with_base(1, 11);
    m.parser.expect_recognise().returning(|_, _| Ok(MediaType::Text));
    m.files.expect_put_part().times(1).returning(|_, _, _, _| Ok(()));
    m.files.expect_delete().times(1).returning(|_, _| Ok(()));
    m.repository.expect_add_file().returning(|_| Ok(FileAdded::Duplicate(file(FileStatus::Indexed))));
    let service = m.service(KnowledgeSettings::default());
    let mut upload = service.begin_upload(&caller(Role::Member), &base().id, "again.txt").await.unwrap();
    upload.push(b"hello world").await.unwrap();
    let done = upload.finish().await.unwrap();
    assert!(done.duplicate);
    assert_eq!(done.file.id.as_str(), "kbf_9");
}

#[tokio::test]
async fn a_file_past_the_limit_is_refused_and_what_it_stored_dropped() {
    let mut m = Mocks::new().with_base(0, 0);
    m.parser.expect_recognise().returning(|_, _| Ok(MediaType::Text));
    m.files.expect_put_part().returning(|_, _, _, _| Ok(()));
    m.files.expect_delete().times(1).returning(|_, _| Ok(()));
    m.repository.expect_add_file().never();
    let settings =
        KnowledgeSettings { max_file_bytes: (FILE_PART_BYTES + 10) as u64, ..KnowledgeSettings::default() };
    let service = m.service(settings);
    let mut upload = service.begin_upload(&caller(Role::Member), &base().id, "big.txt").await.unwrap();
    upload.push(&vec![b'a'; FILE_PART_BYTES]).await.unwrap();
    let err = upload.push(&[b'a'; 11]).await.unwrap_err();
    assert!(
        matches!(err, KnowledgeError::FileTooLarge { limit, .. } if limit == (FILE_PART_BYTES + 10) as u64)
    );
}

#[tokio::test]
async fn an_unrecognised_file_is_refused_before_anything_is_stored() {
    let mut m = Mocks::new().with_base(0, 0);
    m.parser.expect_recognise().returning(|_, _| Err(ParseError::Unsupported("an executable".into())));
    m.files.expect_put_part().never();
    m.files.expect_delete().never();
    let service = m.service(KnowledgeSettings::default());
    let mut upload = service.begin_upload(&caller(Role::Member), &base().id, "tool.txt").await.unwrap();
    let err = upload.push(&[0x7f; RECOGNITION_BYTES]).await.unwrap_err();
    assert!(matches!(err, KnowledgeError::UnsupportedType { ref name, .. } if name == "tool.txt"), "{err}");
}

#[tokio::test]
async fn the_plans_file_count_and_bytes_are_quotas() {
    let quota = StorageQuota::of(Plan::Starter);
    let m = Mocks::new().with_base(quota.files, 0);
    let err =
        m.service(KnowledgeSettings::default()).begin_upload(&caller(Role::Owner), &base().id, "a.txt").await;
    assert!(matches!(err.unwrap_err(), KnowledgeError::QuotaExceeded(m) if m.contains("200 files")));

    let mut m = Mocks::new().with_base(0, quota.bytes - 5);
    m.parser.expect_recognise().returning(|_, _| Ok(MediaType::Text));
    m.repository.expect_add_file().never();
    let service = m.service(KnowledgeSettings::default());
    let mut upload = service.begin_upload(&caller(Role::Owner), &base().id, "a.txt").await.unwrap();
    upload.push(b"six b.").await.unwrap();
    assert!(matches!(upload.finish().await.unwrap_err(), KnowledgeError::QuotaExceeded(_)));
}

#[tokio::test]
async fn viewers_read_but_do_not_upload_and_names_are_checked() {
    let m = Mocks::new().with_base(0, 0);
    let service = m.service(KnowledgeSettings::default());
    let err = service.begin_upload(&caller(Role::Viewer), &base().id, "a.txt").await.unwrap_err();
    assert!(matches!(err, KnowledgeError::Forbidden(_)));
    let err = service.begin_upload(&caller(Role::Member), &base().id, "dir/").await.unwrap_err();
    assert!(matches!(err, KnowledgeError::Invalid(_)));
}

fn claimed() -> Claimed<IngestionItem> {
    Claimed {
        item: IngestionItem {
            file: file(FileStatus::Processing),
            chunking: ChunkLimits { max_tokens: 64, overlap_tokens: 0 },
        },
        claims: 1,
        lease: Lease { token: "lease_1".into(), until: t0() },
    }
}

fn ingestion(mut m: Mocks) -> Ingestion {
    m.files.expect_get_part().returning(|_, _, index| Ok((index == 0).then(|| b"hello world".to_vec())));
    let mut tokens = MockTokenCounter::new();
    tokens.expect_count().returning(|t| t.split_whitespace().count() as u64);
    let settings = IngestionSettings { embed_batch: 2, ..IngestionSettings::default() };
    Ingestion::new(m.deps(), Arc::new(MockLeaseQueue::new()), Arc::new(tokens), settings)
}

#[tokio::test]
async fn a_file_that_cannot_be_read_fails_with_its_reason_and_indexes_nothing() {
    let mut m = Mocks::new();
    m.parser.expect_parse().returning(|_, _| Err(ParseError::Encrypted));
    m.index.expect_index_file().never();
    m.index.expect_fail_file().times(1).returning(|_, lease, error, event, _| {
        assert_eq!(lease.unwrap().token, "lease_1");
        assert!(error.contains("encrypted"), "{error}");
        assert!(matches!(&event.payload, EventPayload::KnowledgeFileFailed { error: e, .. } if e == error));
        Ok(true)
    });
    let ran = ingestion(m).run(claimed(), &|| true).await.unwrap();
    assert_eq!(ran.outcome, Outcome::Failed);
}

#[tokio::test]
async fn a_file_is_cut_embedded_in_batches_and_indexed_whole() {
    let mut m = Mocks::new();
    let sentences: Vec<String> = (0..5).map(|i| format!("{} end{i}.", "word ".repeat(40))).collect();
    m.parser.expect_parse().returning(move |_, _| {
        Ok(ParsedDocument {
            pages: Some(1),
            sections: vec![Section {
                page: Some(1),
                headings: vec!["Intro".into()],
                blocks: sentences.clone(),
            }],
        })
    });
    let batches = Arc::new(AtomicU64::new(0));
    let counted = batches.clone();
    m.embedder.expect_embed().returning(move |texts| {
        assert!(texts.len() <= 2);
        counted.fetch_add(1, Ordering::SeqCst);
        Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect())
    });
    let progress = Arc::new(Mutex::new(Vec::new()));
    let seen = progress.clone();
    m.index.expect_set_progress().returning(move |_, _, p, _| {
        seen.lock().unwrap().push(p);
        Ok(true)
    });
    m.index.expect_index_file().times(1).returning(|f, _, model, pages, chunks, event, _| {
        assert_eq!((f.id.as_str(), model, pages), ("kbf_9", "test:2", Some(1)));
        assert_eq!(chunks.len(), 5);
        assert!(chunks.iter().all(|c| c.chunk.page == Some(1) && c.chunk.headings == ["Intro"]));
        assert!(matches!(
            event.payload,
            EventPayload::KnowledgeFileIndexed { chunks: 5, pages: Some(1), .. }
        ));
        Ok(true)
    });
    let ran = ingestion(m).run(claimed(), &|| true).await.unwrap();
    assert_eq!(ran.outcome, Outcome::Done);
    assert_eq!(batches.load(Ordering::SeqCst), 3);
    let progress = progress.lock().unwrap();
    assert!(progress.windows(2).all(|w| w[0] < w[1]) && progress.iter().all(|p| *p < 1.0), "{progress:?}");
}

#[tokio::test]
async fn a_worker_that_lost_its_lease_or_is_stopping_writes_nothing() {
    let mut m = Mocks::new();
    m.parser.expect_parse().returning(|_, _| {
        Ok(ParsedDocument {
            pages: None,
            sections: vec![Section { page: None, headings: vec![], blocks: vec!["some text here".into()] }],
        })
    });
    m.index.expect_set_progress().returning(|_, _, _, _| Ok(false));
    m.index.expect_index_file().never();
    m.embedder.expect_embed().never();
    assert_eq!(ingestion(m).run(claimed(), &|| true).await.unwrap().outcome, Outcome::LostLease);

    let mut m = Mocks::new();
    m.parser.expect_parse().returning(|_, _| {
        Ok(ParsedDocument {
            pages: None,
            sections: vec![Section { page: None, headings: vec![], blocks: vec!["some text here".into()] }],
        })
    });
    m.index.expect_set_progress().returning(|_, _, _, _| Ok(true));
    m.index.expect_index_file().never();
    m.embedder.expect_embed().never();
    assert_eq!(ingestion(m).run(claimed(), &|| false).await.unwrap().outcome, Outcome::Released);
}

//! What knowledge bases need from the outside world.

use std::sync::Arc;

use async_trait::async_trait;

use chrono::{DateTime, Utc};

use super::chunking::{Chunk, ChunkLimits};
use super::document::{MediaType, ParseError, ParsedDocument};
use super::model::{KnowledgeBase, KnowledgeChunk, KnowledgeFile};
use crate::events::Event;
use crate::ids::{ChunkId, KnowledgeBaseId, KnowledgeFileId, TenantId};
use crate::work::Lease;

/// Reads the files knowledge bases accept.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait DocumentParser: Send + Sync {
    /// The type of a file from its first bytes (at least the first 4 KiB, or all of a smaller
    /// file), checked against the extension of its name.
    ///
    /// # Errors
    /// [`ParseError::Unsupported`] when the content is none of the types, or not the type its
    /// name says.
    fn recognise(&self, name: &str, head: &[u8]) -> Result<MediaType, ParseError>;

    /// The text of a file of type `media_type`, within the parser's limits. Runs off the async
    /// runtime: a slow or hostile file holds no request's thread.
    ///
    /// # Errors
    /// See [`ParseError`].
    async fn parse(&self, media_type: MediaType, bytes: Arc<[u8]>) -> Result<ParsedDocument, ParseError>;
}

/// What adding a file came to.
#[derive(Debug, Clone, PartialEq)]
pub enum FileAdded {
    /// Stored as a new file.
    Added,
    /// The base already holds a file with these bytes (the same SHA-256): that one.
    Duplicate(KnowledgeFile),
}

/// Knowledge bases and their files' records, always within a tenant. Deleting a base deletes
/// its files (their records, contents and chunks) in the same transaction.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait KnowledgeRepository: Send + Sync {
    /// Stores a new base; `false` when the tenant has one of that name.
    async fn create_base(&self, base: &KnowledgeBase) -> anyhow::Result<bool>;

    /// The tenant's base with this id, with its file count and bytes.
    async fn get_base(
        &self,
        tenant: &TenantId,
        id: &KnowledgeBaseId,
    ) -> anyhow::Result<Option<KnowledgeBase>>;

    /// The tenant's bases, oldest first, each with its file count and bytes.
    async fn list_bases(&self, tenant: &TenantId) -> anyhow::Result<Vec<KnowledgeBase>>;

    /// Saves a base's name, description and chunking; `None` when it is gone, `Some(false)`
    /// when another base of the tenant has the name.
    async fn update_base(&self, base: &KnowledgeBase) -> anyhow::Result<Option<bool>>;

    /// Deletes a base with its files, their contents and chunks; `false` when absent.
    async fn delete_base(&self, tenant: &TenantId, id: &KnowledgeBaseId) -> anyhow::Result<bool>;

    /// Records a file whose content is stored, unless the base holds one with the same
    /// SHA-256 (then that one; concurrent uploads of the same bytes record one file).
    async fn add_file(&self, file: &KnowledgeFile) -> anyhow::Result<FileAdded>;

    /// A file of the tenant's base.
    async fn get_file(
        &self,
        tenant: &TenantId,
        base: &KnowledgeBaseId,
        id: &KnowledgeFileId,
    ) -> anyhow::Result<Option<KnowledgeFile>>;

    /// The files of the tenant's base, oldest first.
    async fn list_files(
        &self,
        tenant: &TenantId,
        base: &KnowledgeBaseId,
    ) -> anyhow::Result<Vec<KnowledgeFile>>;

    /// Deletes a file with its content and chunks; `false` when absent.
    async fn delete_file(
        &self,
        tenant: &TenantId,
        base: &KnowledgeBaseId,
        id: &KnowledgeFileId,
    ) -> anyhow::Result<bool>;

    /// The tenant's files and their bytes, in all bases: what the plan's quotas count.
    async fn usage(&self, tenant: &TenantId) -> anyhow::Result<(u64, u64)>;
}

/// Where the original bytes of files are kept, so that every instance can read them: written
/// and read in parts of at most [`FILE_PART_BYTES`], so that neither an upload nor a download
/// holds a whole file in memory on the way. The database adapter keeps them in a table; an
/// S3-compatible adapter can follow without touching the domain.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait FileStore: Send + Sync {
    /// Stores part `index` (from 0) of a file's content.
    async fn put_part(
        &self,
        tenant: &TenantId,
        file: &KnowledgeFileId,
        index: u32,
        bytes: &[u8],
    ) -> anyhow::Result<()>;

    /// Part `index` of a file's content; `None` past its last part.
    async fn get_part(
        &self,
        tenant: &TenantId,
        file: &KnowledgeFileId,
        index: u32,
    ) -> anyhow::Result<Option<Vec<u8>>>;

    /// Removes the parts of uploads that never finished (no file row holds them) written
    /// before `written_before`; how many.
    async fn sweep_orphans(&self, written_before: DateTime<Utc>) -> anyhow::Result<u64>;

    /// Deletes a file's content (an upload given up, a duplicate).
    async fn delete(&self, tenant: &TenantId, file: &KnowledgeFileId) -> anyhow::Result<()>;
}

/// Most bytes of one part of a stored file.
pub const FILE_PART_BYTES: usize = 1024 * 1024;

/// A running SHA-256 of an upload, fed as its bytes stream in.
pub trait ContentDigest: Send {
    /// Feeds the next bytes.
    fn update(&mut self, bytes: &[u8]);

    /// The digest of everything fed, lower-case hex.
    fn finish(self: Box<Self>) -> String;
}

/// Starts [`ContentDigest`]s (the crypto adapter implements it).
pub trait DigestFactory: Send + Sync {
    /// A new, empty SHA-256.
    fn sha256(&self) -> Box<dyn ContentDigest>;
}

/// A file a worker took for ingestion, with how its base cuts files.
#[derive(Debug, Clone, PartialEq)]
pub struct IngestionItem {
    /// The file, as claimed (status `processing`).
    pub file: KnowledgeFile,
    /// Its base's chunking.
    pub chunking: ChunkLimits,
}

/// A chunk ready to be indexed: what chunking made of it, its id and its vector.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedChunk {
    /// Its id.
    pub id: ChunkId,
    /// The chunk.
    pub chunk: Chunk,
    /// Its embedding.
    pub vector: Vec<f32>,
}

/// The scope of a knowledge search: bases of one tenant, optionally some of their files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkScope {
    /// The tenant.
    pub tenant: TenantId,
    /// Its bases searched (at least one).
    pub bases: Vec<KnowledgeBaseId>,
    /// Only these files, when not empty.
    pub files: Vec<KnowledgeFileId>,
}

/// A chunk a search found, with its file's name.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundChunk {
    /// The chunk.
    pub chunk: KnowledgeChunk,
    /// Its file's name.
    pub file_name: String,
}

/// The chunks of indexed files and the ingestion that makes them. A file's chunks, vectors
/// and full text are written in one transaction with its `indexed` status: a file is
/// searchable whole or not at all.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait KnowledgeIndex: Send + Sync {
    /// Records the progress (0–1) of a file's ingestion, while `lease` holds it; `false` when
    /// it no longer does.
    async fn set_progress(
        &self,
        file: &KnowledgeFileId,
        lease: &Lease,
        progress: f64,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool>;

    /// Replaces a file's chunks with `chunks` (embedded by `model`), marks it `indexed` with
    /// its page count and records `event`, in one transaction, while `lease` holds it; `false`
    /// when it no longer does (nothing is written then).
    #[allow(clippy::too_many_arguments)]
    async fn index_file(
        &self,
        file: &KnowledgeFile,
        lease: &Lease,
        model: &str,
        pages: Option<u32>,
        chunks: &[IndexedChunk],
        event: &Event,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool>;

    /// Marks a file `failed` with `error`, removes its chunks and records `event`, while
    /// `lease` holds it (`None`: whoever holds it, as when giving up); `false` when it no
    /// longer does.
    async fn fail_file(
        &self,
        file: &KnowledgeFile,
        lease: Option<Lease>,
        error: &str,
        event: &Event,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool>;

    /// Puts back in the queue every indexed file whose chunks were embedded by another model
    /// than `model` (all of them when `all`), for a new ingestion: how many. Their chunks stay
    /// searchable until the new ones replace them.
    async fn requeue(&self, model: &str, all: bool, now: DateTime<Utc>) -> anyhow::Result<u64>;

    /// A file's chunks in order, `skip` and `limit` applied, and how many it has.
    async fn list_chunks(
        &self,
        tenant: &TenantId,
        file: &KnowledgeFileId,
        skip: u64,
        limit: u64,
    ) -> anyhow::Result<(Vec<KnowledgeChunk>, u64)>;

    /// The ids of the `limit` chunks of `scope` nearest to `query` (embedded by `model`),
    /// nearest first, with their cosine similarity.
    async fn nearest(
        &self,
        scope: &ChunkScope,
        model: &str,
        query: &[f32],
        limit: usize,
    ) -> anyhow::Result<Vec<(ChunkId, f32)>>;

    /// The ids of the `limit` chunks of `scope` whose text best matches `terms` (any of
    /// them), best first.
    async fn lexical(
        &self,
        scope: &ChunkScope,
        terms: &[String],
        limit: usize,
    ) -> anyhow::Result<Vec<ChunkId>>;

    /// The chunks of the tenant with these ids, with their files' names (in no order; absent
    /// ids are left out).
    async fn get_chunks(&self, tenant: &TenantId, ids: &[ChunkId]) -> anyhow::Result<Vec<FoundChunk>>;
}

//! What knowledge bases need from the outside world.

use std::sync::Arc;

use async_trait::async_trait;

use super::document::{MediaType, ParseError, ParsedDocument};
use super::model::{KnowledgeBase, KnowledgeFile};
use crate::ids::{KnowledgeBaseId, KnowledgeFileId, TenantId};

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

    /// Deletes a file's content (an upload given up, a duplicate).
    async fn delete(&self, tenant: &TenantId, file: &KnowledgeFileId) -> anyhow::Result<()>;
}

/// Most bytes of one part of a stored file.
pub const FILE_PART_BYTES: usize = 1024 * 1024;

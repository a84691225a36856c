//! The knowledge service: bases, their files and chunks, uploads and search. The HTTP routes,
//! the ingestion worker ([`super::ingestion`]) and agents go through it.
//!
//! This file holds the service, its settings and errors, and the bases' and files' CRUD;
//! uploads and search are in the modules below it.

use std::sync::Arc;

use super::chunking::ChunkLimits;
use super::model::{KnowledgeBase, KnowledgeChunk, KnowledgeFile};
use super::ports::{DigestFactory, DocumentParser, FileStore, KnowledgeIndex, KnowledgeRepository};
use crate::ids::{IdGenerator, KnowledgeBaseId, KnowledgeFileId, TenantId};
use crate::memory::EmbedError;
use crate::memory::Embedder;
use crate::memory::ranking::{DEFAULT_MIN_SCORE, RankingSettings};
use crate::patch::Patch;
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::validation::ValidationErrors;

mod search;
mod upload;

pub use search::{KnowledgeHit, KnowledgeQuery};
pub use upload::{Upload, UploadedFile};

/// Why a knowledge operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    /// The caller lacks the right.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// Invalid input.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No such base in the caller's tenant.
    #[error("no such knowledge base")]
    BaseNotFound,
    /// No such file in the base.
    #[error("no such file")]
    FileNotFound,
    /// Another base of the tenant has the name.
    #[error("a knowledge base named {0:?} exists already")]
    NameTaken(String),
    /// A file is larger than the limit.
    #[error("{name} is larger than the limit of {limit} bytes")]
    FileTooLarge {
        /// The file's name.
        name: String,
        /// The limit.
        limit: u64,
    },
    /// A file is of no type knowledge bases read, or not of the type its name says.
    #[error("{name}: {reason}")]
    UnsupportedType {
        /// The file's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The tenant's plan allows no more files or bytes.
    #[error("{0}")]
    QuotaExceeded(String),
    /// The embedding model failed.
    #[error(transparent)]
    Embedding(#[from] EmbedError),
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// Settings of knowledge bases.
#[derive(Debug, Clone)]
pub struct KnowledgeSettings {
    /// Most bytes of one uploaded file.
    pub max_file_bytes: u64,
    /// How scores are made: memory's ranking, without importance or recency (a document's
    /// chunks are all as important and as recent as the document).
    pub ranking: RankingSettings,
    /// Score under which a search leaves a chunk out.
    pub min_score: f64,
    /// Candidates each retriever contributes before fusion.
    pub candidates: usize,
}

impl Default for KnowledgeSettings {
    fn default() -> Self {
        Self {
            max_file_bytes: 20 * 1024 * 1024,
            ranking: RankingSettings {
                importance_weight: 0.0,
                recency_weight: 0.0,
                ..RankingSettings::default()
            },
            min_score: DEFAULT_MIN_SCORE,
            candidates: 100,
        }
    }
}

/// What the knowledge service needs.
#[derive(Clone)]
pub struct KnowledgeDeps {
    /// Bases and files.
    pub repository: Arc<dyn KnowledgeRepository>,
    /// Chunks and ingestion.
    pub index: Arc<dyn KnowledgeIndex>,
    /// Original bytes.
    pub files: Arc<dyn FileStore>,
    /// File types and their text.
    pub parser: Arc<dyn DocumentParser>,
    /// SHA-256 of uploads.
    pub digests: Arc<dyn DigestFactory>,
    /// The embedding model (memory's).
    pub embedder: Arc<dyn Embedder>,
    /// Ids.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for KnowledgeDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnowledgeDeps").finish_non_exhaustive()
    }
}

/// A validated new knowledge base.
#[derive(Debug, Clone, PartialEq)]
pub struct NewKnowledgeBase {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: Option<String>,
    /// How its files are cut.
    pub chunking: ChunkLimits,
}

/// A validated change of a knowledge base.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BaseChanges {
    /// A new name.
    pub name: Option<String>,
    /// A new description, or none.
    pub description: Patch<String>,
    /// New chunking, for the files ingested from then on.
    pub chunking: Option<ChunkLimits>,
}

/// Knowledge bases, files, uploads and search.
#[derive(Clone)]
pub struct KnowledgeService {
    pub(super) deps: KnowledgeDeps,
    pub(super) settings: KnowledgeSettings,
}

impl std::fmt::Debug for KnowledgeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnowledgeService").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl KnowledgeService {
    /// A service over `deps`.
    pub fn new(deps: KnowledgeDeps, settings: KnowledgeSettings) -> Self {
        Self { deps, settings }
    }

    /// Its settings.
    pub fn settings(&self) -> &KnowledgeSettings {
        &self.settings
    }

    /// Creates a base.
    ///
    /// # Errors
    /// [`KnowledgeError::NameTaken`], `Forbidden`, storage errors.
    pub async fn create_base(
        &self,
        caller: &Principal,
        new: NewKnowledgeBase,
    ) -> Result<KnowledgeBase, KnowledgeError> {
        caller.require(Permission::KnowledgeWrite)?;
        let now = self.deps.clock.now();
        let base = KnowledgeBase {
            id: KnowledgeBaseId::generate(self.deps.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            name: new.name,
            description: new.description,
            chunking: new.chunking,
            file_count: 0,
            bytes: 0,
            created_at: now,
            updated_at: now,
        };
        if !self.deps.repository.create_base(&base).await? {
            return Err(KnowledgeError::NameTaken(base.name));
        }
        Ok(base)
    }

    /// The caller's bases, oldest first.
    ///
    /// # Errors
    /// `Forbidden`, storage errors.
    pub async fn list_bases(&self, caller: &Principal) -> Result<Vec<KnowledgeBase>, KnowledgeError> {
        caller.require(Permission::KnowledgeRead)?;
        Ok(self.deps.repository.list_bases(&caller.tenant_id).await?)
    }

    /// Removes the parts of uploads that never finished (cut off by a crash: no file row came)
    /// once they are a day old, far past any upload still writing; how many.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn sweep_unfinished_uploads(&self) -> anyhow::Result<u64> {
        let cutoff = self.deps.clock.now() - chrono::Duration::days(1);
        self.deps.files.sweep_orphans(cutoff).await
    }

    /// A tenant's bases, on its behalf (an agent's settings name some of them).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn bases_of(&self, tenant: &TenantId) -> anyhow::Result<Vec<KnowledgeBase>> {
        self.deps.repository.list_bases(tenant).await
    }

    /// One of the caller's bases.
    ///
    /// # Errors
    /// [`KnowledgeError::BaseNotFound`], `Forbidden`, storage errors.
    pub async fn get_base(
        &self,
        caller: &Principal,
        id: &KnowledgeBaseId,
    ) -> Result<KnowledgeBase, KnowledgeError> {
        caller.require(Permission::KnowledgeRead)?;
        self.base_of(&caller.tenant_id, id).await
    }

    pub(super) async fn base_of(
        &self,
        tenant: &TenantId,
        id: &KnowledgeBaseId,
    ) -> Result<KnowledgeBase, KnowledgeError> {
        self.deps.repository.get_base(tenant, id).await?.ok_or(KnowledgeError::BaseNotFound)
    }

    /// Changes a base's name, description or chunking (files already indexed keep their
    /// chunks until they are ingested again).
    ///
    /// # Errors
    /// [`KnowledgeError::BaseNotFound`], [`KnowledgeError::NameTaken`], `Forbidden`, storage
    /// errors.
    pub async fn update_base(
        &self,
        caller: &Principal,
        id: &KnowledgeBaseId,
        changes: BaseChanges,
    ) -> Result<KnowledgeBase, KnowledgeError> {
        caller.require(Permission::KnowledgeWrite)?;
        let mut base = self.base_of(&caller.tenant_id, id).await?;
        let mut changed = false;
        if let Some(name) = changes.name.filter(|n| *n != base.name) {
            base.name = name;
            changed = true;
        }
        if changes.description.is_present() {
            let description = changes.description.apply_to(base.description.clone());
            changed |= description != base.description;
            base.description = description;
        }
        if let Some(chunking) = changes.chunking.filter(|c| *c != base.chunking) {
            base.chunking = chunking;
            changed = true;
        }
        if !changed {
            return Ok(base);
        }
        base.updated_at = self.deps.clock.now();
        match self.deps.repository.update_base(&base).await? {
            None => Err(KnowledgeError::BaseNotFound),
            Some(false) => Err(KnowledgeError::NameTaken(base.name)),
            Some(true) => Ok(base),
        }
    }

    /// Deletes a base with its files, chunks and vectors.
    ///
    /// # Errors
    /// [`KnowledgeError::BaseNotFound`], `Forbidden`, storage errors.
    pub async fn delete_base(&self, caller: &Principal, id: &KnowledgeBaseId) -> Result<(), KnowledgeError> {
        caller.require(Permission::KnowledgeWrite)?;
        if self.deps.repository.delete_base(&caller.tenant_id, id).await? {
            Ok(())
        } else {
            Err(KnowledgeError::BaseNotFound)
        }
    }

    /// The files of one of the caller's bases, oldest first.
    ///
    /// # Errors
    /// [`KnowledgeError::BaseNotFound`], `Forbidden`, storage errors.
    pub async fn list_files(
        &self,
        caller: &Principal,
        base: &KnowledgeBaseId,
    ) -> Result<Vec<KnowledgeFile>, KnowledgeError> {
        caller.require(Permission::KnowledgeRead)?;
        self.base_of(&caller.tenant_id, base).await?;
        Ok(self.deps.repository.list_files(&caller.tenant_id, base).await?)
    }

    /// One file of one of the caller's bases.
    ///
    /// # Errors
    /// [`KnowledgeError::FileNotFound`], `Forbidden`, storage errors.
    pub async fn get_file(
        &self,
        caller: &Principal,
        base: &KnowledgeBaseId,
        id: &KnowledgeFileId,
    ) -> Result<KnowledgeFile, KnowledgeError> {
        caller.require(Permission::KnowledgeRead)?;
        self.deps.repository.get_file(&caller.tenant_id, base, id).await?.ok_or(KnowledgeError::FileNotFound)
    }

    /// Part `index` of a file's original bytes (parts of at most
    /// [`super::FILE_PART_BYTES`]), `None`
    /// past the last: a download streams them one by one. The caller checked the file with
    /// [`KnowledgeService::get_file`] first.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn content_part(
        &self,
        file: &KnowledgeFile,
        index: u32,
    ) -> Result<Option<Vec<u8>>, KnowledgeError> {
        Ok(self.deps.files.get_part(&file.tenant_id, &file.id, index).await?)
    }

    /// A file's chunks in order (`skip`, `limit`), and how many it has.
    ///
    /// # Errors
    /// [`KnowledgeError::FileNotFound`], `Forbidden`, storage errors.
    pub async fn list_chunks(
        &self,
        caller: &Principal,
        base: &KnowledgeBaseId,
        file: &KnowledgeFileId,
        skip: u64,
        limit: u64,
    ) -> Result<(Vec<KnowledgeChunk>, u64), KnowledgeError> {
        let file = self.get_file(caller, base, file).await?;
        Ok(self.deps.index.list_chunks(&caller.tenant_id, &file.id, skip, limit).await?)
    }

    /// Deletes a file with its content, chunks and vectors.
    ///
    /// # Errors
    /// [`KnowledgeError::FileNotFound`], `Forbidden`, storage errors.
    pub async fn delete_file(
        &self,
        caller: &Principal,
        base: &KnowledgeBaseId,
        id: &KnowledgeFileId,
    ) -> Result<(), KnowledgeError> {
        caller.require(Permission::KnowledgeWrite)?;
        if self.deps.repository.delete_file(&caller.tenant_id, base, id).await? {
            Ok(())
        } else {
            Err(KnowledgeError::FileNotFound)
        }
    }

    /// Puts every indexed file embedded by another model than the current one (every indexed
    /// file when `all`) back in the ingestion queue: how many (`agentry knowledge reindex`).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn reindex(&self, all: bool) -> Result<u64, KnowledgeError> {
        let model = self.deps.embedder.model().id.clone();
        Ok(self.deps.index.requeue(&model, all, self.deps.clock.now()).await?)
    }
}

#[cfg(test)]
mod tests;

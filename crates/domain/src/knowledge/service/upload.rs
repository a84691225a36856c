//! Uploads: a file's bytes stream in, are hashed and stored part by part as they come (never
//! whole in memory), its type is recognised from its first bytes, and at its end it is
//! recorded and queued for ingestion — or, when the base holds the same bytes already, the
//! existing file is answered and the parts are dropped.

use super::{KnowledgeError, KnowledgeService};
use crate::ids::KnowledgeFileId;
use crate::knowledge::document::MediaType;
use crate::knowledge::model::{FileStatus, KnowledgeBase, KnowledgeFile, StorageQuota, file_name};
use crate::knowledge::ports::{ContentDigest, FILE_PART_BYTES, FileAdded};
use crate::tenancy::{Permission, Principal};
use crate::validation::ValidationErrors;

/// Bytes of a file's start its type is recognised from.
pub const RECOGNITION_BYTES: usize = 4096;

/// What an upload came to.
#[derive(Debug, Clone, PartialEq)]
pub struct UploadedFile {
    /// The file: new and queued, or the one the base held with the same bytes.
    pub file: KnowledgeFile,
    /// Whether the base held the same bytes already.
    pub duplicate: bool,
}

/// One file being uploaded: feed it with [`Upload::push`], end it with [`Upload::finish`], or
/// give it up with [`Upload::abort`] (every error of `push` and `finish` has done so already).
pub struct Upload {
    service: KnowledgeService,
    base: KnowledgeBase,
    quota: StorageQuota,
    id: KnowledgeFileId,
    name: String,
    digest: Box<dyn ContentDigest>,
    /// Bytes not yet stored: less than one part.
    pending: Vec<u8>,
    /// The first bytes, until the type is known.
    head: Vec<u8>,
    media_type: Option<MediaType>,
    bytes: u64,
    parts: u32,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl KnowledgeService {
    /// Begins the upload of a file named `raw_name` into one of the caller's bases, once the
    /// plan leaves room for one more file.
    ///
    /// # Errors
    /// [`KnowledgeError::BaseNotFound`], [`KnowledgeError::Invalid`] (the name),
    /// [`KnowledgeError::QuotaExceeded`], `Forbidden`, storage errors.
    pub async fn begin_upload(
        &self,
        caller: &Principal,
        base: &crate::ids::KnowledgeBaseId,
        raw_name: &str,
    ) -> Result<Upload, KnowledgeError> {
        caller.require(Permission::KnowledgeWrite)?;
        let base = self.base_of(&caller.tenant_id, base).await?;
        let name = file_name(raw_name).map_err(ValidationErrors::one)?;
        let quota = StorageQuota::of(caller.plan);
        let (files, _) = self.deps.repository.usage(&caller.tenant_id).await?;
        if files >= quota.files {
            return Err(KnowledgeError::QuotaExceeded(format!(
                "the {} plan keeps at most {} files in knowledge bases",
                caller.plan, quota.files
            )));
        }
        Ok(Upload {
            service: self.clone(),
            base,
            quota,
            id: KnowledgeFileId::generate(self.deps.ids.as_ref()),
            name,
            digest: self.deps.digests.sha256(),
            pending: Vec::new(),
            head: Vec::new(),
            media_type: None,
            bytes: 0,
            parts: 0,
        })
    }
}

impl Upload {
    /// The file's name, as it is kept.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Takes the next bytes of the file: stores every whole part, and recognises the type once
    /// its first [`RECOGNITION_BYTES`] are in.
    ///
    /// # Errors
    /// [`KnowledgeError::FileTooLarge`], [`KnowledgeError::UnsupportedType`], storage errors;
    /// the upload is given up then.
    pub async fn push(&mut self, bytes: &[u8]) -> Result<(), KnowledgeError> {
        let result = self.take(bytes).await;
        if result.is_err() {
            self.discard().await;
        }
        result
    }

    async fn take(&mut self, bytes: &[u8]) -> Result<(), KnowledgeError> {
        self.bytes += bytes.len() as u64;
        let limit = self.service.settings.max_file_bytes;
        if self.bytes > limit {
            return Err(KnowledgeError::FileTooLarge { name: self.name.clone(), limit });
        }
        self.digest.update(bytes);
        if self.media_type.is_none() {
            let wanted = RECOGNITION_BYTES.saturating_sub(self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..wanted]);
            if self.head.len() >= RECOGNITION_BYTES {
                self.recognise()?;
            }
        }
        self.pending.extend_from_slice(bytes);
        while self.pending.len() >= FILE_PART_BYTES {
            let rest = self.pending.split_off(FILE_PART_BYTES);
            let part = std::mem::replace(&mut self.pending, rest);
            self.store(&part).await?;
        }
        Ok(())
    }

    fn recognise(&mut self) -> Result<(), KnowledgeError> {
        let media_type = self.service.deps.parser.recognise(&self.name, &self.head).map_err(|e| {
            KnowledgeError::UnsupportedType { name: self.name.clone(), reason: e.to_string() }
        })?;
        self.media_type = Some(media_type);
        self.head = Vec::new();
        Ok(())
    }

    async fn store(&mut self, part: &[u8]) -> Result<(), KnowledgeError> {
        let d = &self.service.deps;
        d.files.put_part(&self.base.tenant_id, &self.id, self.parts, part).await?;
        self.parts += 1;
        Ok(())
    }

    /// Ends the upload: stores the last part and records the file, queued for ingestion —
    /// or answers the base's file with the same bytes.
    ///
    /// # Errors
    /// [`KnowledgeError::UnsupportedType`], [`KnowledgeError::QuotaExceeded`] (the plan's
    /// bytes), storage errors; the upload is given up then.
    pub async fn finish(mut self) -> Result<UploadedFile, KnowledgeError> {
        match self.complete().await {
            Ok(uploaded) => Ok(uploaded),
            Err(e) => {
                self.discard().await;
                Err(e)
            }
        }
    }

    async fn complete(&mut self) -> Result<UploadedFile, KnowledgeError> {
        if self.media_type.is_none() {
            self.recognise()?;
        }
        let Some(media_type) = self.media_type else {
            unreachable!("recognised above");
        };
        let d = self.service.deps.clone();
        let (_, used) = d.repository.usage(&self.base.tenant_id).await?;
        if used + self.bytes > self.quota.bytes {
            return Err(KnowledgeError::QuotaExceeded(format!(
                "the plan keeps at most {} bytes of files in knowledge bases ({} are used; this file has {})",
                self.quota.bytes, used, self.bytes
            )));
        }
        if !self.pending.is_empty() {
            let last = std::mem::take(&mut self.pending);
            self.store(&last).await?;
        }
        let digest = std::mem::replace(&mut self.digest, d.digests.sha256());
        let now = d.clock.now();
        let file = KnowledgeFile {
            id: self.id.clone(),
            tenant_id: self.base.tenant_id.clone(),
            knowledge_base_id: self.base.id.clone(),
            name: self.name.clone(),
            media_type,
            bytes: self.bytes,
            sha256: digest.finish(),
            status: FileStatus::Queued,
            error: None,
            pages: None,
            chunks: 0,
            progress: 0.0,
            created_at: now,
            updated_at: now,
        };
        match d.repository.add_file(&file).await? {
            FileAdded::Added => {
                // The parts are the recorded file's now: nothing left to drop.
                self.parts = 0;
                Ok(UploadedFile { file, duplicate: false })
            }
            FileAdded::Duplicate(existing) => {
                self.discard().await;
                Ok(UploadedFile { file: existing, duplicate: true })
            }
        }
    }

    /// Gives the upload up: drops what it stored.
    pub async fn abort(mut self) {
        self.discard().await;
    }

    async fn discard(&mut self) {
        if self.parts == 0 {
            return;
        }
        let d = &self.service.deps;
        if let Err(e) = d.files.delete(&self.base.tenant_id, &self.id).await {
            tracing::warn!(file = %self.id, error = ?e, "dropping the parts of an upload given up failed");
        }
        self.parts = 0;
    }
}

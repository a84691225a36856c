//! Knowledge bases and their files, as stored and as a request may set them, validated.

use chrono::{DateTime, Utc};

use super::chunking::{ChunkLimits, MAX_CHUNK_TOKENS, MIN_CHUNK_TOKENS};
use super::document::MediaType;
use crate::ids::{ChunkId, KnowledgeBaseId, KnowledgeFileId, TenantId};
use crate::tenancy::Plan;
use crate::validation::{FieldError, FieldErrorKind, TextKind, check_length, check_long_text, check_text};

/// Most characters of a knowledge base's name.
pub const MAX_NAME_CHARS: usize = 100;
/// Most characters of its description.
pub const MAX_DESCRIPTION_CHARS: usize = 2_000;
/// Most characters of a file's name (after any directory part is dropped).
pub const MAX_FILE_NAME_CHARS: usize = 255;

/// A knowledge base: a named set of files that agents search and cite.
#[derive(Debug, Clone, PartialEq)]
pub struct KnowledgeBase {
    /// Its id (`kb_…`).
    pub id: KnowledgeBaseId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// Unique in the tenant.
    pub name: String,
    /// What it holds, for people and for agents choosing it.
    pub description: Option<String>,
    /// How its files are cut.
    pub chunking: ChunkLimits,
    /// Files in it (every status).
    pub file_count: u64,
    /// Bytes of its files' originals.
    pub bytes: u64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

crate::string_enum! {
    /// Where a file is in its ingestion.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum FileStatus {
        /// Stored, waiting for a worker.
        Queued => "queued",
        /// A worker is parsing, cutting and embedding it.
        Processing => "processing",
        /// Searchable, whole.
        Indexed => "indexed",
        /// Cannot be read; `error` says why. Nothing of it is searchable.
        Failed => "failed",
    }
}

/// A file in a knowledge base.
#[derive(Debug, Clone, PartialEq)]
pub struct KnowledgeFile {
    /// Its id (`kbf_…`).
    pub id: KnowledgeFileId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// Its knowledge base.
    pub knowledge_base_id: KnowledgeBaseId,
    /// The name it was uploaded with, without any directory.
    pub name: String,
    /// Its type, recognised from its content.
    pub media_type: MediaType,
    /// Size of the original.
    pub bytes: u64,
    /// SHA-256 of the original, lower-case hex: a second upload of the same bytes into the
    /// same base is the same file.
    pub sha256: String,
    /// Where its ingestion is.
    pub status: FileStatus,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// Pages, for paged formats, once parsed.
    pub pages: Option<u32>,
    /// Chunks, once cut.
    pub chunks: u32,
    /// 0–1: how much of its ingestion is done.
    pub progress: f64,
    /// When it was uploaded.
    pub created_at: DateTime<Utc>,
    /// When its status last changed.
    pub updated_at: DateTime<Utc>,
}

/// One chunk of an indexed file, as listed and cited.
#[derive(Debug, Clone, PartialEq)]
pub struct KnowledgeChunk {
    /// Its id (`kbc_…`).
    pub id: ChunkId,
    /// Its file.
    pub file_id: KnowledgeFileId,
    /// Its file's knowledge base.
    pub knowledge_base_id: KnowledgeBaseId,
    /// Its place in the file, from 0.
    pub index: u32,
    /// Its text.
    pub text: String,
    /// The page it is on, for paged formats.
    pub page: Option<u32>,
    /// The headings it sits under, outermost first.
    pub headings: Vec<String>,
    /// Character offsets of its text in the file's text.
    pub start: u64,
    /// Offset just past its last character.
    pub end: u64,
}

/// What a plan lets a tenant keep in all its knowledge bases together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageQuota {
    /// Most files.
    pub files: u64,
    /// Most bytes of originals.
    pub bytes: u64,
}

impl StorageQuota {
    /// The quota of `plan`: Starter 200 files and 200 MiB, Pro 5,000 files and 5 GiB,
    /// Enterprise 100,000 files and 100 GiB.
    pub fn of(plan: Plan) -> Self {
        const MIB: u64 = 1024 * 1024;
        match plan {
            Plan::Starter => Self { files: 200, bytes: 200 * MIB },
            Plan::Pro => Self { files: 5_000, bytes: 5 * 1024 * MIB },
            Plan::Enterprise => Self { files: 100_000, bytes: 100 * 1024 * MIB },
        }
    }
}

/// A knowledge base's name: 1–100 characters, one line.
///
/// # Errors
/// A field error on `name`.
pub fn base_name(raw: &str) -> Result<String, FieldError> {
    // The limit holds for the name as sent, before it is trimmed.
    check_length(raw, 1, MAX_NAME_CHARS, "name")?;
    let name = raw.trim();
    check_text(name, "name", TextKind::SingleLine)?;
    check_length(name, 1, MAX_NAME_CHARS, "name")?;
    Ok(name.to_owned())
}

/// A knowledge base's description: up to 2,000 characters.
///
/// # Errors
/// A field error on `description`.
pub fn description(raw: &str) -> Result<String, FieldError> {
    check_long_text(raw, 0, MAX_DESCRIPTION_CHARS, "description")?;
    Ok(raw.to_owned())
}

/// Chunking limits a request sets: `max_tokens` 64–2048, `overlap_tokens` 0–max/2.
///
/// # Errors
/// A field error on `chunking.max_tokens` or `chunking.overlap_tokens`.
pub fn chunk_limits(max_tokens: Option<i64>, overlap_tokens: Option<i64>) -> Result<ChunkLimits, FieldError> {
    let default = ChunkLimits::default();
    let max = match max_tokens {
        None => default.max_tokens,
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| (MIN_CHUNK_TOKENS..=MAX_CHUNK_TOKENS).contains(n))
            .ok_or_else(|| {
                FieldError::new(
                    "chunking.max_tokens",
                    FieldErrorKind::OutOfRange,
                    format!("chunking.max_tokens must be from {MIN_CHUNK_TOKENS} to {MAX_CHUNK_TOKENS}"),
                )
            })?,
    };
    let overlap = match overlap_tokens {
        None => default.overlap_tokens.min(max / 2),
        Some(n) => u32::try_from(n).ok().filter(|n| *n <= max / 2).ok_or_else(|| {
            FieldError::new(
                "chunking.overlap_tokens",
                FieldErrorKind::OutOfRange,
                format!("chunking.overlap_tokens must be from 0 to {} (half of max_tokens)", max / 2),
            )
        })?,
    };
    Ok(ChunkLimits { max_tokens: max, overlap_tokens: overlap })
}

/// The name a file is kept under: what follows the last `/` or `\` of the name it was
/// uploaded with (browsers on some systems send a whole path), trimmed; 1–255 characters
/// without control characters.
///
/// # Errors
/// A field error on `file`.
pub fn file_name(raw: &str) -> Result<String, FieldError> {
    let name = raw.rsplit(['/', '\\']).next().unwrap_or(raw).trim();
    check_text(name, "file", TextKind::SingleLine)?;
    if name.is_empty() || name == "." || name == ".." {
        return Err(FieldError::new("file", FieldErrorKind::TooShort, "each file part needs a file name"));
    }
    check_length(name, 1, MAX_FILE_NAME_CHARS, "file")?;
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunking_limits_default_and_bound() {
        assert_eq!(chunk_limits(None, None).unwrap(), ChunkLimits { max_tokens: 400, overlap_tokens: 50 });
        assert_eq!(chunk_limits(Some(64), None).unwrap(), ChunkLimits { max_tokens: 64, overlap_tokens: 32 });
        assert_eq!(chunk_limits(Some(2048), Some(1024)).unwrap().overlap_tokens, 1024);
        for (max, overlap, field) in [
            (Some(63), None, "chunking.max_tokens"),
            (Some(2049), None, "chunking.max_tokens"),
            (Some(-1), None, "chunking.max_tokens"),
            (Some(100), Some(51), "chunking.overlap_tokens"),
            (None, Some(-1), "chunking.overlap_tokens"),
        ] {
            assert_eq!(chunk_limits(max, overlap).unwrap_err().field, field, "{max:?} {overlap:?}");
        }
    }

    #[test]
    fn file_names_lose_their_directories_and_must_be_names() {
        assert_eq!(file_name("C:\\Users\\ada\\report.pdf").unwrap(), "report.pdf");
        assert_eq!(file_name("../../etc/passwd").unwrap(), "passwd");
        assert_eq!(file_name(" notes.md ").unwrap(), "notes.md");
        for bad in ["", "dir/", "..", "a\u{0}b.txt", &"x".repeat(256)] {
            assert!(file_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn base_names_are_one_line_of_up_to_a_hundred_characters() {
        assert_eq!(base_name("  Handbook ").unwrap(), "Handbook");
        assert!(base_name("").is_err());
        assert!(base_name("a\nb").is_err());
        assert!(base_name(&"n".repeat(101)).is_err());
        assert!(description(&"d".repeat(2_001)).is_err());
        assert_eq!(description("line one\nline two").unwrap(), "line one\nline two");
    }
}

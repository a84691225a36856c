//! Knowledge bases: files a tenant uploads (PDF, Word, HTML, Markdown, text, CSV), parsed into
//! sections, cut into chunks that keep their page and headings, and searched with memory's
//! ranking so that agents can cite them.
//!
//! - [`model`]: knowledge bases and their files, and the validation of what a request sets;
//! - [`document`]: file types, parsed documents and why parsing fails;
//! - [`chunking`]: sections cut on structure first, then size, with overlap;
//! - [`ports`]: the [`DocumentParser`] (the `agentry-documents` crate implements it),
//!   [`KnowledgeRepository`], [`KnowledgeIndex`] and [`FileStore`] ports (the store implements
//!   them) and the [`DigestFactory`] (the crypto adapter);
//! - [`service`]: bases, files, uploads and search, as callers use them;
//! - [`ingestion`]: parse, chunk, embed and index, as durable work.

pub mod chunking;
pub mod document;
pub mod ingestion;
pub mod model;
mod ports;
pub mod service;

pub use document::{MediaType, ParseError, ParseLimits, ParsedDocument, Section};
pub use ingestion::{Ingestion, IngestionSettings};
pub use model::{FileStatus, KnowledgeBase, KnowledgeChunk, KnowledgeFile, StorageQuota};
pub use ports::{
    ChunkScope, ContentDigest, DigestFactory, DocumentParser, FILE_PART_BYTES, FileAdded, FileStore,
    FoundChunk, IndexedChunk, IngestionItem, KnowledgeIndex, KnowledgeRepository,
};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockDocumentParser, MockFileStore, MockKnowledgeIndex, MockKnowledgeRepository};
pub use service::{
    BaseChanges, KnowledgeDeps, KnowledgeError, KnowledgeHit, KnowledgeQuery, KnowledgeService,
    KnowledgeSettings, NewKnowledgeBase, Upload, UploadedFile,
};

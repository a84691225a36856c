//! Knowledge bases: files a tenant uploads (PDF, Word, HTML, Markdown, text, CSV), parsed into
//! sections, cut into chunks that keep their page and headings, and searched with memory's
//! ranking so that agents can cite them.
//!
//! - [`model`]: knowledge bases and their files, and the validation of what a request sets;
//! - [`document`]: file types, parsed documents and why parsing fails;
//! - [`chunking`]: sections cut on structure first, then size, with overlap;
//! - [`ports`]: the [`DocumentParser`] (the `agentry-documents` crate implements it),
//!   [`KnowledgeRepository`] and [`FileStore`] ports (the store implements both).

pub mod chunking;
pub mod document;
pub mod model;
mod ports;

pub use document::{MediaType, ParseError, ParseLimits, ParsedDocument, Section};
pub use model::{FileStatus, KnowledgeBase, KnowledgeFile};
pub use ports::{DocumentParser, FILE_PART_BYTES, FileAdded, FileStore, KnowledgeRepository};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockDocumentParser, MockFileStore, MockKnowledgeRepository};

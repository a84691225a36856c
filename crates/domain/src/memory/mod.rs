//! Memory: what agents and tenants remember, and how it is found again.
//!
//! - [`model`]: entries, documents, filters, and the validation of what a request may set;
//! - [`embedding`]: the [`Embedder`] port (a sentence-embedding model);
//! - [`ranking`]: hybrid ranking (reciprocal rank fusion, importance, recency), pure;
//! - [`chunking`]: documents cut into chunks on sentence boundaries;
//! - [`ports`]: the [`MemoryRepository`] port;
//! - [`service`]: [`MemoryService`], used by both HTTP variants, chat (as its
//!   [`MemoryRecall`](crate::agents::MemoryRecall)) and workflow steps.

pub mod chunking;
mod embedding;
pub mod model;
mod ports;
pub mod ranking;
mod service;

#[cfg(any(test, feature = "mock"))]
pub use embedding::MockEmbedder;
pub use embedding::{EmbedError, Embedder, EmbeddingModel, dot, normalize};
pub use model::{EmbeddedEntry, Embedding, Facets, MemoryDocument, MemoryEntry, MemoryFilter, MemoryType};
#[cfg(any(test, feature = "mock"))]
pub use ports::MockMemoryRepository;
pub use ports::{MemoryRepository, Merge};
pub use service::{
    ConsolidationReport, DocumentSummary, Expiry, MemoryError, MemoryService, MemoryServiceDeps,
    MemorySettings, NewDocument, NewMemory, SearchHit, SearchMode, SearchQuery, SearchResults, enough_terms,
    lexical_terms, matched_terms,
};

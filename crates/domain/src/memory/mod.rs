//! Memory: what agents and tenants remember, and how it is found again.
//!
//! - [`model`]: entries, documents, filters, and the validation of what a request may set;
//! - [`embedding`]: the [`Embedder`] port (a sentence-embedding model);
//! - [`ranking`]: hybrid ranking (reciprocal rank fusion, importance, recency), pure;
//! - [`chunking`]: documents cut into chunks on sentence boundaries;
//! - [`ports`]: the [`MemoryRepository`] and [`AgentDirectory`] ports;
//! - [`service`]: [`MemoryService`], used by both HTTP variants, chat (which recalls through
//!   it) and workflow steps.
//!
//! Memory does not know the agents module: agents keep a list of memory types and recall
//! through the memory service, so the dependency points from agents to memory only.

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
pub use ports::{AgentDirectory, MemoryRepository, Merge};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockAgentDirectory, MockMemoryRepository};
pub use service::{
    ConsolidationReport, DocumentSummary, Expiry, MemoryError, MemoryService, MemoryServiceDeps,
    MemorySettings, NewDocument, NewMemory, SearchHit, SearchMode, SearchQuery, SearchResults, enough_terms,
    lexical_terms, matched_terms,
};

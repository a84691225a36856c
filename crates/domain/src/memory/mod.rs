//! Memory: what agents and tenants remember, and how it is found again.
//!
//! - [`model`]: entries, documents, filters, and the validation of what a request may set;
//! - [`embedding`]: the model an embedding was made with, embedding errors, vector arithmetic;
//! - [`ranking`]: hybrid ranking (calibrated similarity, lexical coverage, importance, recency),
//!   pure and generic over the id;
//! - [`chunking`]: documents cut into chunks on sentence boundaries;
//! - [`learning`]: facts found in conversations (the rule extractor) and the decision of what
//!   each changes (add, update, invalidate, nothing), a model's answer validated first;
//! - [`ports`]: the [`MemoryRepository`], [`Embedder`] (a sentence-embedding model) and
//!   [`AgentDirectory`] ports;
//! - [`service`]: [`MemoryService`], used by both HTTP variants, chat (which recalls through
//!   it) and workflow steps: entries' CRUD in `service.rs`, search and recall, documents and
//!   consolidation each in a file of their own below it.
//!
//! Memory does not know the agents module: agents keep a list of memory types and recall
//! through the memory service, so the dependency points from agents to memory only.

pub mod chunking;
mod embedding;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod learning;
pub mod model;
mod ports;
pub mod ranking;
mod service;

pub use embedding::{EmbedError, EmbeddingModel, dot, normalize};
pub use model::{
    EmbeddedEntry, Embedding, Facets, MemoryDocument, MemoryEntry, MemoryFilter, MemoryType, Validity,
};
pub use ports::{AgentDirectory, Embedder, MemoryRepository, Merge};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockAgentDirectory, MockEmbedder, MockMemoryRepository};
pub use service::{
    ConsolidationReport, DocumentSummary, ExchangeText, Expiry, MemoryError, MemoryService,
    MemoryServiceDeps, MemorySettings, NewDocument, NewMemory, RuleExchange, SearchHit, SearchMode,
    SearchQuery, SearchResults, enough_terms, identifiers, lexical_coverage, lexical_terms, matched_terms,
};

//! Agentry's sentence embedders, implementing the domain's [`Embedder`] port:
//! - [`MiniLmEmbedder`]: all-MiniLM-L6-v2 (384 dimensions) run in process on the CPU with candle,
//!   from a directory that `scripts/fetch-model.sh` fills;
//! - [`OpenAiEmbedder`]: any OpenAI-compatible `POST /v1/embeddings` server;
//! - [`HashingEmbedder`]: a deterministic lexical fallback (feature hashing of words, word pairs
//!   and character trigrams) that needs no model at all;
//!
//! and two decorators of any of them:
//! - [`BatchingEmbedder`]: the texts of concurrent calls embedded together, in batches;
//! - [`CachedEmbedder`]: the vectors of recent search queries kept, so a repeated query skips
//!   the model.
//!
//! [`Embedder`]: agentry_domain::memory::Embedder

mod batching;
mod cache;
mod hashing;
mod minilm;
mod openai;

pub use batching::{BatchSettings, BatchingEmbedder};
pub use cache::{CachedEmbedder, MAX_CACHED_QUERY_BYTES};
pub use hashing::HashingEmbedder;
pub use minilm::{MiniLmEmbedder, MiniLmSettings};
pub use openai::{DEFAULT_OPENAI_DIMENSION, OpenAiEmbedder, OpenAiEmbedderSettings};

//! What the memory service needs from the outside world: storage, the embedding model, and
//! the agents entries may belong to.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::embedding::{EmbedError, EmbeddingModel};
use super::learning::{Learned, MemoryVersion};
use super::model::{EmbeddedEntry, MemoryDocument, MemoryEntry, MemoryFilter, MemoryType, Validity};
use crate::events::Event;
use crate::ids::{AgentId, DocumentId, MemoryId, MessageId, TenantId};
use crate::pagination::Page;

/// One merge of consolidation: `kept` absorbs `absorbed`, which are deleted.
#[derive(Debug, Clone, PartialEq)]
pub struct Merge {
    /// The surviving entry, with its tags unioned and access counts summed.
    pub kept: MemoryEntry,
    /// The entries merged into it.
    pub absorbed: Vec<MemoryId>,
}

/// Memory entries, documents and their embeddings, always within a tenant.
///
/// Every change also advances the tenant's memory version in the same transaction, so that
/// each instance's cache of vectors (behind [`MemoryRepository::nearest`]) notices changes
/// made by any instance before its next search.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait MemoryRepository: Send + Sync {
    /// Stores new entries, and the documents they are chunks of, in one transaction. Fails
    /// (storing nothing) when an entry's agent no longer exists.
    async fn insert(&self, entries: &[EmbeddedEntry], documents: &[MemoryDocument]) -> anyhow::Result<()>;

    /// Stores an entry that has a key: when the tenant has one with the same `(memory_type,
    /// key)`, that one is updated in place (its id, `created_at` and `access_count` kept);
    /// returns the stored entry. Concurrent upserts of one key leave exactly one entry.
    async fn upsert_keyed(&self, entry: &EmbeddedEntry) -> anyhow::Result<MemoryEntry>;

    /// The tenant's entry with this id (expired ones too: the service decides).
    async fn get(&self, tenant: &TenantId, id: &MemoryId) -> anyhow::Result<Option<MemoryEntry>>;

    /// The tenant's entries with these ids that still exist, in no particular order.
    async fn get_many(&self, tenant: &TenantId, ids: &[MemoryId]) -> anyhow::Result<Vec<MemoryEntry>>;

    /// A page of the tenant's unexpired entries, oldest first, optionally of one agent, one
    /// type and carrying one tag, valid as `validity` asks, and their total.
    #[allow(clippy::too_many_arguments)]
    async fn list(
        &self,
        tenant: &TenantId,
        agent: Option<AgentId>,
        memory_type: Option<MemoryType>,
        tag: Option<String>,
        validity: Validity,
        now: DateTime<Utc>,
        page: Page,
    ) -> anyhow::Result<(Vec<MemoryEntry>, u64)>;

    /// Deletes one entry; `false` when absent.
    async fn delete(&self, tenant: &TenantId, id: &MemoryId) -> anyhow::Result<bool>;

    /// Deletes a document and all its chunks; `false` when absent.
    async fn delete_document(&self, tenant: &TenantId, id: &DocumentId) -> anyhow::Result<bool>;

    /// The `limit` entries passing `filter` whose vectors of model `model_id` are nearest to
    /// `query` (a unit vector), best first, with their cosine similarity. Exact: every vector
    /// of the scope is compared.
    async fn nearest(
        &self,
        tenant: &TenantId,
        model_id: &str,
        query: &[f32],
        filter: &MemoryFilter,
        now: DateTime<Utc>,
        limit: usize,
    ) -> anyhow::Result<Vec<(MemoryId, f32)>>;

    /// Up to `limit` unexpired entries of the scope (`filter`'s agent and types) that contain
    /// any of `terms`, best lexical match first (bm25 on SQLite, `ts_rank_cd` on PostgreSQL).
    /// Tag and metadata filters are the caller's to apply.
    async fn lexical(
        &self,
        tenant: &TenantId,
        terms: &[String],
        filter: &MemoryFilter,
        now: DateTime<Utc>,
        limit: usize,
    ) -> anyhow::Result<Vec<MemoryId>>;

    /// How many entries with vectors of `model_id` pass `filter` (the cache's count, no scan).
    async fn vector_count(
        &self,
        tenant: &TenantId,
        model_id: &str,
        filter: &MemoryFilter,
        now: DateTime<Utc>,
    ) -> anyhow::Result<usize>;

    /// Adds one to the access count of each of these entries, in one statement.
    async fn touch(&self, tenant: &TenantId, ids: &[MemoryId]) -> anyhow::Result<()>;

    /// Every unexpired, non-document entry of an agent with its vector of `model_id`.
    async fn agent_vectors(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        model_id: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Vec<(MemoryEntry, Vec<f32>)>>;

    /// Up to `limit` of an agent's current semantic facts on `topic` (their `metadata.topic`),
    /// unexpired and not invalidated, oldest first: what a new fact on that topic replaces.
    /// Found by an index, without a vector search.
    async fn on_topic(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        topic: &str,
        now: DateTime<Utc>,
        limit: usize,
    ) -> anyhow::Result<Vec<MemoryEntry>>;

    /// Applies what learning from one exchange decided (`learned`), in one transaction with its
    /// history versions, its events and the exchange's receipt: `false`, changing nothing,
    /// when that exchange was applied already. A reworded or invalidated fact changes only
    /// while it still holds and is the agent's.
    async fn learn(&self, learned: &Learned) -> anyhow::Result<bool>;

    /// Applies what learning from several exchanges decided, in order and in one transaction,
    /// each as [`MemoryRepository::learn`] applies one: whether each was applied.
    async fn learn_all(&self, learned: &[Learned]) -> anyhow::Result<Vec<bool>>;

    /// Of these exchanges (a tenant's user message each), the ones learned from already.
    async fn learned_already(&self, exchanges: &[(TenantId, MessageId)]) -> anyhow::Result<Vec<MessageId>>;

    /// The recorded versions of the tenant's entry, oldest first; none when nothing was
    /// recorded (the entry is as it was written).
    async fn history(&self, tenant: &TenantId, id: &MemoryId) -> anyhow::Result<Vec<MemoryVersion>>;

    /// Applies consolidation's merges and stores its event, in one transaction.
    async fn consolidate(&self, tenant: &TenantId, merges: &[Merge], event: &Event) -> anyhow::Result<()>;

    /// Up to `limit` entries (of any tenant) whose embedding is not of `model_id` (or not of
    /// the store's dimension), with their content: the work list of `agentry memory reindex`.
    async fn stale_embeddings(
        &self,
        model_id: &str,
        limit: usize,
    ) -> anyhow::Result<Vec<(TenantId, MemoryId, String)>>;

    /// Replaces the embeddings of these entries.
    async fn set_embeddings(
        &self,
        updates: &[(TenantId, MemoryId, super::model::Embedding)],
    ) -> anyhow::Result<()>;
}

/// A sentence-embedding model.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait Embedder: Send + Sync {
    /// The model, the same for every call.
    fn model(&self) -> &EmbeddingModel;

    /// One L2-normalised vector of [`EmbeddingModel::dimension`] values per text, in order.
    /// An empty text gets a zero vector.
    ///
    /// # Errors
    /// See [`EmbedError`].
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// [`Embedder::embed`] for work nobody waits on (facts learned from a conversation, after
    /// it): an implementation may let it wait while calls somebody waits on are served, so
    /// that under load it takes the model's spare time.
    ///
    /// # Errors
    /// See [`EmbedError`].
    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(texts).await
    }

    /// The vector of a search query: what [`Embedder::embed`] makes of `text` alone. Search
    /// asks through this method rather than `embed` so that an implementation may treat
    /// queries apart from stored texts: the same question comes back again and again and is
    /// worth remembering, a stored text is embedded once.
    ///
    /// # Errors
    /// See [`EmbedError`]; [`EmbedError::Model`] when the model answered no vector.
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        self.embed(&[text.to_owned()]).await?.pop().ok_or_else(|| EmbedError::Model("no vector".into()))
    }
}

/// The agents memory may belong to. The agents module makes every agent repository one: memory
/// asks only this, so it does not depend on the agents module, which depends on memory.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait AgentDirectory: Send + Sync {
    /// Whether `agent` is an agent of `tenant` (an agent of another tenant is not).
    async fn agent_exists(&self, tenant: &TenantId, agent: &AgentId) -> anyhow::Result<bool>;
}

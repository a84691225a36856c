//! The memory service: add, search, list and delete entries, documents, consolidation, and
//! the recall chat uses. Both HTTP variants, chat and workflow steps go through it.
//!
//! This file holds the service, its settings and errors, and the entries' CRUD; search
//! (with recall), documents and consolidation are in the modules below it.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value};

use super::chunking::ChunkSettings;
use super::embedding::EmbedError;
use super::model::{
    DEFAULT_IMPORTANCE, DEFAULT_SOURCE, EmbeddedEntry, Embedding, MAX_CONTENT_CHARS, MemoryEntry,
    MemoryOrigin, MemoryType, Validity,
};
use super::ports::{AgentDirectory, Embedder, MemoryRepository};
use super::ranking::RankingSettings;
use crate::ids::{AgentId, IdGenerator, MemoryId, SessionId, TenantId};
use crate::pagination::Page;
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::tokens::TokenCounter;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors};

mod consolidation;
mod documents;
mod learning;
mod rule_learning;
mod search;

pub use consolidation::ConsolidationReport;
pub use documents::{DocumentSummary, NewDocument};
pub use learning::ExchangeText;
pub use rule_learning::RuleExchange;
pub use search::{
    SearchHit, SearchMode, SearchQuery, SearchResults, enough_terms, identifiers, lexical_coverage,
    lexical_terms, matched_terms,
};

/// Why a memory operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The caller lacks the right.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// Invalid input.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No such entry or document in the caller's tenant.
    #[error("no such memory")]
    NotFound,
    /// The `agent_id` names no agent of the caller's tenant.
    #[error("no such agent")]
    AgentNotFound,
    /// The embedding model failed; nothing was stored.
    #[error(transparent)]
    Embedding(#[from] EmbedError),
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// When an entry expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// At this instant.
    At(DateTime<Utc>),
    /// This long after it is written.
    After(Duration),
    /// At this instant or this long after it is written, whichever comes first.
    Earliest(DateTime<Utc>, Duration),
}

/// A validated new entry.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    /// The agent whose memory it is; absent: the tenant's.
    pub agent_id: Option<AgentId>,
    /// Its type.
    pub memory_type: MemoryType,
    /// A key: with one, the entry replaces the tenant's entry of the same type and key.
    pub key: Option<String>,
    /// The text.
    pub content: String,
    /// Where it came from; default `api`.
    pub source: Option<String>,
    /// Free-form object.
    pub metadata: Map<String, Value>,
    /// Labels.
    pub tags: Vec<String>,
    /// 0–1; default 0.5.
    pub importance: Option<f64>,
    /// When it expires, if ever.
    pub expiry: Option<Expiry>,
    /// What writes it.
    pub origin: MemoryOrigin,
}

/// Settings of memory.
#[derive(Debug, Clone)]
pub struct MemorySettings {
    /// How scores are made.
    pub ranking: RankingSettings,
    /// How documents are cut.
    pub chunks: ChunkSettings,
    /// Candidates each retriever contributes before fusion (at least what a page needs).
    pub candidates: usize,
    /// Memories recalled into a chat prompt at most.
    pub recall_top_k: usize,
    /// Most tokens of recalled memories in a chat prompt.
    pub recall_token_budget: u64,
    /// Similarity at or above which consolidation merges two entries.
    pub consolidation_threshold: f32,
    /// Score under which a memory is not recalled into a chat prompt.
    pub recall_min_score: f64,
}

impl Default for MemorySettings {
    fn default() -> Self {
        Self {
            ranking: RankingSettings::default(),
            chunks: ChunkSettings::default(),
            candidates: 100,
            recall_top_k: 5,
            recall_token_budget: 1000,
            consolidation_threshold: 0.92,
            recall_min_score: super::ranking::DEFAULT_MIN_SCORE,
        }
    }
}

/// The ports memory uses.
#[derive(Clone)]
pub struct MemoryServiceDeps {
    /// Entries and documents.
    pub memories: Arc<dyn MemoryRepository>,
    /// Agents, to check an `agent_id` belongs to the caller's tenant.
    pub agents: Arc<dyn AgentDirectory>,
    /// The embedding model.
    pub embedder: Arc<dyn Embedder>,
    /// Token counting, for chunks and the recall budget.
    pub tokens: Arc<dyn TokenCounter>,
    /// Identifiers.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for MemoryServiceDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemoryServiceDeps { .. }")
    }
}

/// The memory service.
#[derive(Clone)]
pub struct MemoryService {
    deps: MemoryServiceDeps,
    settings: MemorySettings,
}

impl std::fmt::Debug for MemoryService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryService").field("model", &self.deps.embedder.model().id).finish_non_exhaustive()
    }
}

impl MemoryService {
    /// A service over `deps` with `settings`.
    pub fn new(deps: MemoryServiceDeps, settings: MemorySettings) -> Self {
        Self { deps, settings }
    }

    /// The embedding model in use.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.deps.embedder
    }

    async fn require_agent(&self, tenant: &TenantId, agent: Option<&AgentId>) -> Result<(), MemoryError> {
        if let Some(agent) = agent
            && !self.deps.agents.agent_exists(tenant, agent).await?
        {
            return Err(MemoryError::AgentNotFound);
        }
        Ok(())
    }

    /// The embeddings of `texts`, in order; none asked for costs no call.
    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Embedding>, MemoryError> {
        self.embed_as(texts, false).await
    }

    /// [`Self::embed`] for work nobody waits on ([`Embedder::embed_background`]).
    async fn embed_in_background(&self, texts: Vec<String>) -> Result<Vec<Embedding>, MemoryError> {
        self.embed_as(texts, true).await
    }

    async fn embed_as(&self, texts: Vec<String>, background: bool) -> Result<Vec<Embedding>, MemoryError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let embedder = &self.deps.embedder;
        let vectors = if background {
            embedder.embed_background(&texts).await?
        } else {
            embedder.embed(&texts).await?
        };
        if vectors.len() != texts.len() {
            return Err(
                EmbedError::Model(format!("{} vectors for {} texts", vectors.len(), texts.len())).into()
            );
        }
        let model_id = &self.deps.embedder.model().id;
        Ok(vectors.into_iter().map(|vector| Embedding { model_id: model_id.clone(), vector }).collect())
    }

    async fn embed_one(&self, text: &str) -> Result<Embedding, MemoryError> {
        self.embed(vec![text.to_owned()])
            .await?
            .pop()
            .ok_or_else(|| EmbedError::Model("no vector".into()).into())
    }

    fn entry(&self, tenant: &TenantId, new: NewMemory, now: DateTime<Utc>) -> MemoryEntry {
        MemoryEntry {
            id: MemoryId::generate(self.deps.ids.as_ref()),
            tenant_id: tenant.clone(),
            agent_id: new.agent_id,
            document_id: None,
            memory_type: new.memory_type,
            key: new.key,
            content: new.content,
            source: new.source.unwrap_or_else(|| DEFAULT_SOURCE.to_owned()),
            metadata: new.metadata,
            tags: new.tags,
            importance: new.importance.unwrap_or(DEFAULT_IMPORTANCE),
            access_count: 0,
            created_at: now,
            updated_at: now,
            expires_at: new.expiry.map(|e| match e {
                Expiry::At(t) => t,
                Expiry::After(d) => now + d,
                Expiry::Earliest(t, d) => t.min(now + d),
            }),
            valid_from: now,
            invalid_at: None,
            superseded_by: None,
            origin: new.origin,
            source_message_ids: Vec::new(),
        }
    }

    /// Adds an entry; with a key, replaces the tenant's entry of the same type and key
    /// (keeping its id).
    ///
    /// # Errors
    /// [`MemoryError::AgentNotFound`], [`MemoryError::Forbidden`], [`MemoryError::Embedding`].
    pub async fn add(&self, caller: &Principal, new: NewMemory) -> Result<MemoryEntry, MemoryError> {
        self.put(caller, new).await.map(|(entry, _)| entry)
    }

    /// Like [`MemoryService::add`], and says whether the entry is new (`false`: an entry of the
    /// same type and key was replaced, keeping its id).
    ///
    /// # Errors
    /// As [`MemoryService::add`].
    pub async fn put(&self, caller: &Principal, new: NewMemory) -> Result<(MemoryEntry, bool), MemoryError> {
        caller.require(Permission::MemoryWrite)?;
        self.require_agent(&caller.tenant_id, new.agent_id.as_ref()).await?;
        let now = self.deps.clock.now();
        let entry = self.entry(&caller.tenant_id, new, now);
        if entry.is_expired(now) {
            // It could never be read: refused, as an API key's past expiry is.
            return Err(ValidationErrors::one(FieldError::new(
                "expires_at",
                FieldErrorKind::OutOfRange,
                "expires_at must be in the future",
            ))
            .into());
        }
        let embedding = self.embed_one(&entry.content).await?;
        let embedded = EmbeddedEntry { entry, embedding };
        if embedded.entry.key.is_some() {
            let stored = self.deps.memories.upsert_keyed(&embedded).await?;
            let created = stored.id == embedded.entry.id;
            return Ok((stored, created));
        }
        if let Err(e) = self.deps.memories.insert(std::slice::from_ref(&embedded), &[]).await {
            // A failed foreign key: the agent was deleted meanwhile.
            self.require_agent(&caller.tenant_id, embedded.entry.agent_id.as_ref()).await?;
            return Err(e.into());
        }
        Ok((embedded.entry, true))
    }

    /// One unexpired entry of the caller's tenant.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::Forbidden`].
    pub async fn get(&self, caller: &Principal, id: &MemoryId) -> Result<MemoryEntry, MemoryError> {
        caller.require(Permission::MemoryRead)?;
        let now = self.deps.clock.now();
        self.deps
            .memories
            .get(&caller.tenant_id, id)
            .await?
            .filter(|e| !e.is_expired(now))
            .ok_or(MemoryError::NotFound)
    }

    /// Deletes an entry.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::Forbidden`].
    pub async fn delete(&self, caller: &Principal, id: &MemoryId) -> Result<(), MemoryError> {
        caller.require(Permission::MemoryWrite)?;
        if self.deps.memories.delete(&caller.tenant_id, id).await? {
            Ok(())
        } else {
            Err(MemoryError::NotFound)
        }
    }

    /// A page of unexpired entries, optionally of one agent and type and carrying one tag,
    /// those that hold now unless `validity` asks otherwise, oldest first.
    ///
    /// # Errors
    /// [`MemoryError::AgentNotFound`], [`MemoryError::Forbidden`].
    pub async fn list(
        &self,
        caller: &Principal,
        agent: Option<AgentId>,
        memory_type: Option<MemoryType>,
        tag: Option<String>,
        validity: Validity,
        page: Page,
    ) -> Result<(Vec<MemoryEntry>, u64), MemoryError> {
        caller.require(Permission::MemoryRead)?;
        self.require_agent(&caller.tenant_id, agent.as_ref()).await?;
        let now = self.deps.clock.now();
        Ok(self.deps.memories.list(&caller.tenant_id, agent, memory_type, tag, validity, now, page).await?)
    }

    /// Re-embeds up to `batch` entries made with another model than the current one; the
    /// number re-embedded (0 when none is left).
    ///
    /// # Errors
    /// [`MemoryError::Embedding`], storage errors.
    pub async fn reindex_batch(&self, batch: usize) -> Result<usize, MemoryError> {
        let model = self.deps.embedder.model().id.clone();
        let stale = self.deps.memories.stale_embeddings(&model, batch).await?;
        if stale.is_empty() {
            return Ok(0);
        }
        let embeddings = self.embed(stale.iter().map(|(_, _, c)| c.clone()).collect()).await?;
        let updates: Vec<_> =
            stale.into_iter().zip(embeddings).map(|((tenant, id, _), e)| (tenant, id, e)).collect();
        self.deps.memories.set_embeddings(&updates).await?;
        Ok(updates.len())
    }

    /// Stores the episodic memory of a chat exchange under `id`, unless an entry with that id
    /// exists already (the exchange's event was handed over again): `true` when it stored it.
    ///
    /// # Errors
    /// [`MemoryError::Embedding`], or storage failing (the agent was deleted meanwhile).
    #[allow(clippy::too_many_arguments)] // the exchange's parts, each a plain value
    pub async fn record_episode(
        &self,
        id: MemoryId,
        tenant: &TenantId,
        agent: &AgentId,
        session: &SessionId,
        message: &str,
        reply: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, MemoryError> {
        if self.deps.memories.get(tenant, &id).await?.is_some() {
            return Ok(false);
        }
        let content: String =
            format!("User: {message}\nAssistant: {reply}").chars().take(MAX_CONTENT_CHARS).collect();
        let mut metadata = Map::new();
        metadata.insert("session_id".into(), Value::String(session.to_string()));
        let mut entry = self.entry(
            tenant,
            NewMemory {
                agent_id: Some(agent.clone()),
                memory_type: MemoryType::Episodic,
                key: None,
                content,
                source: Some("chat".into()),
                metadata,
                tags: Vec::new(),
                importance: None,
                expiry: None,
                origin: MemoryOrigin::Extraction,
            },
            at,
        );
        entry.id = id;
        let embedding = self.embed_one(&entry.content).await?;
        self.deps.memories.insert(&[EmbeddedEntry { entry, embedding }], &[]).await?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests;

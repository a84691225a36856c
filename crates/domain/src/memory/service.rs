//! The memory service: add, search, list and delete entries, documents, consolidation, and
//! the recall chat uses. Both HTTP variants, chat and workflow steps go through it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value};

use super::chunking::{ChunkSettings, chunk};
use super::embedding::{EmbedError, dot};
use super::model::{
    DEFAULT_IMPORTANCE, DEFAULT_SOURCE, EmbeddedEntry, Embedding, MAX_CONTENT_CHARS, MemoryDocument,
    MemoryEntry, MemoryFilter, MemoryType,
};
use super::ports::{AgentDirectory, Embedder, MemoryRepository, Merge};
use super::ranking::{RankingSettings, Scored, fuse, rank};
use crate::events::{Event, EventPayload};
use crate::ids::{AgentId, DocumentId, IdGenerator, MemoryId, SessionId, TenantId};
use crate::pagination::Page;
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::tokens::TokenCounter;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors};

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
}

/// A validated document to add.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDocument {
    /// Its title.
    pub title: String,
    /// Its text.
    pub content: String,
    /// Free-form object, copied onto each chunk.
    pub metadata: Map<String, Value>,
}

/// What adding a document stored.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentSummary {
    /// The document.
    pub document: MemoryDocument,
    /// The ids of its chunks, in order.
    pub chunk_ids: Vec<MemoryId>,
}

/// Which retrievers a search uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchMode {
    /// Vectors and full text, fused (the default).
    #[default]
    Hybrid,
    /// Vector similarity alone.
    Vector,
    /// Full text alone (bm25 / `ts_rank_cd`, every matching entry).
    Lexical,
}

/// A validated search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    /// The text to find memories for.
    pub text: String,
    /// Which entries are considered.
    pub filter: MemoryFilter,
    /// Results to skip.
    pub skip: usize,
    /// Results to return.
    pub limit: usize,
    /// Whether the returned entries' `access_count` goes up by one (Variant B).
    pub count_access: bool,
    /// Which retrievers to use.
    pub mode: SearchMode,
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The entry (with its access count after this search).
    pub entry: MemoryEntry,
    /// Its score and the parts it is made of.
    pub ranking: Scored,
}

/// A page of search results.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResults {
    /// Best first.
    pub hits: Vec<SearchHit>,
    /// How many entries the search ranked (the page is cut from these).
    pub total: usize,
}

/// What consolidation did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConsolidationReport {
    /// Entries compared.
    pub examined: u64,
    /// Entries merged into another and removed.
    pub merged: u64,
    /// Entries that absorbed at least one other.
    pub kept: u64,
    /// The similarity threshold used.
    pub threshold: f32,
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

/// Words too common to help a lexical search; the vector search sees them anyway.
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
    "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "she", "so", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "to", "us", "was", "we", "were", "what",
    "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your",
];

/// Most terms a lexical query uses.
const MAX_TERMS: usize = 32;

/// The terms a lexical search looks for: lower-cased words of letters and digits, without
/// stop words and repeats, at most 32.
pub fn lexical_terms(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .filter(|w| seen.insert(w.clone()))
        .take(MAX_TERMS)
        .collect()
}

/// A crude stem: a word without its last two letters when it has more than five, so that
/// `colours`/`colour` and `preferred`/`prefer` meet. Only decides whether a lexical match is
/// strong enough (see [`enough_terms`]); the databases' own stemmers rank.
fn stem(word: &str) -> &str {
    let n = word.chars().count();
    if n <= 5 {
        return word;
    }
    word.char_indices().nth(n - 2).map_or(word, |(i, _)| &word[..i])
}

/// How many of `terms` occur in `content`, a term counting when a word of the content and the
/// term share a stem.
pub fn matched_terms(content: &str, terms: &[String]) -> usize {
    let words: Vec<String> = content
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    terms
        .iter()
        .filter(|t| {
            words.iter().any(|w| {
                // Prefixes only between words of three letters or more: "s" of "client's"
                // is no stem of "shade".
                w == *t
                    || (w.chars().count() >= 3
                        && t.chars().count() >= 3
                        && (w.starts_with(stem(t)) || t.starts_with(stem(w))))
            })
        })
        .count()
}

/// Whether a lexical match covers enough of the query to count ("minimum should match"): one
/// term of a query of one or two, half of a longer query's terms. A single shared word such as
/// "client" in a question of three says little, and reciprocal rank fusion would otherwise let
/// it outweigh a far closer meaning (with k = 60, first and second place differ by 1.6 %).
pub fn enough_terms(matched: usize, terms: usize) -> bool {
    matched >= if terms <= 2 { 1 } else { terms.div_ceil(2) }
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

    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Embedding>, MemoryError> {
        let vectors = self.deps.embedder.embed(&texts).await?;
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

    /// A page of unexpired entries, optionally of one agent and type, oldest first.
    ///
    /// # Errors
    /// [`MemoryError::AgentNotFound`], [`MemoryError::Forbidden`].
    pub async fn list(
        &self,
        caller: &Principal,
        agent: Option<AgentId>,
        memory_type: Option<MemoryType>,
        page: Page,
    ) -> Result<(Vec<MemoryEntry>, u64), MemoryError> {
        caller.require(Permission::MemoryRead)?;
        self.require_agent(&caller.tenant_id, agent.as_ref()).await?;
        let now = self.deps.clock.now();
        Ok(self.deps.memories.list(&caller.tenant_id, agent, memory_type, now, page).await?)
    }

    /// Hybrid search: the nearest vectors and the best lexical matches, fused and ranked.
    ///
    /// # Errors
    /// [`MemoryError::AgentNotFound`], [`MemoryError::Forbidden`], [`MemoryError::Embedding`].
    pub async fn search(&self, caller: &Principal, query: SearchQuery) -> Result<SearchResults, MemoryError> {
        caller.require(Permission::MemoryRead)?;
        self.require_agent(&caller.tenant_id, query.filter.agent_id.as_ref()).await?;
        let mut results = self
            .rank(&caller.tenant_id, &query.text, &query.filter, query.skip + query.limit, query.mode)
            .await?;
        let total = results.len();
        let page: Vec<SearchHit> = results.drain(..).skip(query.skip).take(query.limit).collect();
        let mut hits = page;
        if query.count_access && !hits.is_empty() {
            let ids: Vec<MemoryId> = hits.iter().map(|h| h.entry.id.clone()).collect();
            self.deps.memories.touch(&caller.tenant_id, &ids).await?;
            for h in &mut hits {
                h.entry.access_count += 1;
            }
        }
        Ok(SearchResults { hits, total })
    }

    /// Every candidate of a search, ranked.
    async fn rank(
        &self,
        tenant: &TenantId,
        text: &str,
        filter: &MemoryFilter,
        wanted: usize,
        mode: SearchMode,
    ) -> Result<Vec<SearchHit>, MemoryError> {
        let d = &self.deps;
        let now = d.clock.now();
        let n = self.settings.candidates.max(wanted);
        let model = d.embedder.model().id.clone();
        let terms = lexical_terms(text);
        let nearest = if mode == SearchMode::Lexical {
            Vec::new()
        } else {
            let query = self.embed_one(text).await?.vector;
            d.memories.nearest(tenant, &model, &query, filter, now, n).await?
        };
        let lexical = if terms.is_empty() || mode == SearchMode::Vector {
            Vec::new()
        } else {
            d.memories.lexical(tenant, &terms, filter, now, n).await?
        };
        let mut ids: Vec<MemoryId> = nearest.iter().map(|(id, _)| id.clone()).collect();
        let known: HashSet<&MemoryId> = ids.iter().collect();
        let extra: Vec<MemoryId> = lexical.iter().filter(|id| !known.contains(id)).cloned().collect();
        ids.extend(extra);
        let entries: HashMap<MemoryId, MemoryEntry> = d
            .memories
            .get_many(tenant, &ids)
            .await?
            .into_iter()
            .filter(|e| filter.matches(&e.facets(), now))
            .map(|e| (e.id.clone(), e))
            .collect();
        let lexical: Vec<MemoryId> = lexical
            .into_iter()
            .filter(|id| {
                // Alone, the lexical ranking is what it is; fused, weak matches are left out.
                entries.get(id).is_some_and(|e| {
                    mode == SearchMode::Lexical
                        || enough_terms(matched_terms(&e.content, &terms), terms.len())
                })
            })
            .collect();
        let candidates = fuse(&nearest, &lexical, |id| entries.get(id).map(|e| (e.importance, e.updated_at)));
        let mut entries = entries;
        Ok(rank(candidates, &self.settings.ranking, now)
            .into_iter()
            .filter_map(|ranking| {
                entries.remove(&ranking.candidate.id).map(|entry| SearchHit { entry, ranking })
            })
            .collect())
    }

    /// Adds documents to an agent's memory: each is cut into chunks of about 256 tokens on
    /// sentence boundaries (identical chunks of a document stored once), embedded, and stored
    /// with the documents in one transaction.
    ///
    /// # Errors
    /// [`MemoryError::AgentNotFound`], [`MemoryError::Forbidden`], [`MemoryError::Embedding`].
    pub async fn add_documents(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        documents: Vec<NewDocument>,
    ) -> Result<Vec<DocumentSummary>, MemoryError> {
        caller.require(Permission::MemoryWrite)?;
        self.require_agent(&caller.tenant_id, Some(agent_id)).await?;
        let d = &self.deps;
        let now = d.clock.now();
        let mut entries = Vec::new();
        let mut summaries = Vec::new();
        for doc in documents {
            let id = DocumentId::generate(d.ids.as_ref());
            let chunks = chunk(&doc.content, self.settings.chunks, d.tokens.as_ref());
            let mut metadata = doc.metadata.clone();
            metadata.insert("title".into(), Value::String(doc.title.clone()));
            metadata.insert("document_id".into(), Value::String(id.to_string()));
            let mut chunk_ids = Vec::with_capacity(chunks.len());
            for (i, content) in chunks.into_iter().enumerate() {
                let mut metadata = metadata.clone();
                metadata.insert("chunk".into(), Value::from(i));
                let mut entry = self.entry(
                    &caller.tenant_id,
                    NewMemory {
                        agent_id: Some(agent_id.clone()),
                        memory_type: MemoryType::Semantic,
                        key: None,
                        content,
                        source: Some("document".into()),
                        metadata,
                        tags: Vec::new(),
                        importance: None,
                        expiry: None,
                    },
                    now,
                );
                entry.document_id = Some(id.clone());
                chunk_ids.push(entry.id.clone());
                entries.push(entry);
            }
            summaries.push(DocumentSummary {
                document: MemoryDocument {
                    id,
                    tenant_id: caller.tenant_id.clone(),
                    agent_id: agent_id.clone(),
                    title: doc.title,
                    metadata: doc.metadata,
                    chunk_count: chunk_ids.len() as u64,
                    created_at: now,
                },
                chunk_ids,
            });
        }
        let embeddings = self.embed(entries.iter().map(|e| e.content.clone()).collect()).await?;
        let embedded: Vec<EmbeddedEntry> = entries
            .into_iter()
            .zip(embeddings)
            .map(|(entry, embedding)| EmbeddedEntry { entry, embedding })
            .collect();
        let documents: Vec<MemoryDocument> = summaries.iter().map(|s| s.document.clone()).collect();
        if let Err(e) = d.memories.insert(&embedded, &documents).await {
            self.require_agent(&caller.tenant_id, Some(agent_id)).await?;
            return Err(e.into());
        }
        Ok(summaries)
    }

    /// Deletes a document and its chunks.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::Forbidden`].
    pub async fn delete_document(&self, caller: &Principal, id: &DocumentId) -> Result<(), MemoryError> {
        caller.require(Permission::MemoryWrite)?;
        if self.deps.memories.delete_document(&caller.tenant_id, id).await? {
            Ok(())
        } else {
            Err(MemoryError::NotFound)
        }
    }

    /// Merges an agent's near-duplicate entries (document chunks aside): the most important
    /// of a group is kept (then the most accessed, then the oldest), absorbs the others' tags
    /// and access counts, and the others are deleted; all in one transaction with the
    /// `memory.consolidated` event.
    ///
    /// # Errors
    /// [`MemoryError::AgentNotFound`], [`MemoryError::Forbidden`].
    pub async fn consolidate(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        threshold: Option<f32>,
    ) -> Result<ConsolidationReport, MemoryError> {
        caller.require(Permission::MemoryWrite)?;
        self.require_agent(&caller.tenant_id, Some(agent_id)).await?;
        let d = &self.deps;
        let now = d.clock.now();
        let threshold = threshold.unwrap_or(self.settings.consolidation_threshold);
        let model = d.embedder.model().id.clone();
        let rows = d.memories.agent_vectors(&caller.tenant_id, agent_id, &model, now).await?;
        let merges = plan_merges(rows.clone(), threshold, now);
        let merged: u64 = merges.iter().map(|m| m.absorbed.len() as u64).sum();
        let report =
            ConsolidationReport { examined: rows.len() as u64, merged, kept: merges.len() as u64, threshold };
        let event = Event::new(
            d.ids.as_ref(),
            &caller.tenant_id,
            EventPayload::MemoryConsolidated {
                agent_id: agent_id.clone(),
                examined: report.examined,
                merged: report.merged,
                kept: report.kept,
                threshold,
            },
            now,
        );
        d.memories.consolidate(&caller.tenant_id, &merges, &event).await?;
        Ok(report)
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
}

/// Greedy grouping for consolidation: entries in order of importance, access count, age;
/// each not yet absorbed absorbs every later one at least `threshold` similar to it.
fn plan_merges(mut rows: Vec<(MemoryEntry, Vec<f32>)>, threshold: f32, now: DateTime<Utc>) -> Vec<Merge> {
    rows.sort_by(|(a, _), (b, _)| {
        b.importance
            .partial_cmp(&a.importance)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(b.access_count.cmp(&a.access_count))
            .then(a.created_at.cmp(&b.created_at))
            .then(a.id.as_str().cmp(b.id.as_str()))
    });
    let mut absorbed = vec![false; rows.len()];
    let mut merges = Vec::new();
    for i in 0..rows.len() {
        if absorbed[i] {
            continue;
        }
        let mut group = Vec::new();
        for j in i + 1..rows.len() {
            if !absorbed[j] && dot(&rows[i].1, &rows[j].1) >= threshold {
                absorbed[j] = true;
                group.push(j);
            }
        }
        if group.is_empty() {
            continue;
        }
        let mut kept = rows[i].0.clone();
        for &j in &group {
            let other = &rows[j].0;
            for t in &other.tags {
                if !kept.tags.contains(t) {
                    kept.tags.push(t.clone());
                }
            }
            kept.access_count += other.access_count;
        }
        kept.updated_at = now;
        merges.push(Merge { kept, absorbed: group.iter().map(|&j| rows[j].0.id.clone()).collect() });
    }
    merges
}

impl MemoryService {
    /// What an agent remembers that bears on a chat message: the contents of its best semantic
    /// and episodic entries, most relevant first, within the recall budget.
    ///
    /// # Errors
    /// [`MemoryError::Embedding`], storage errors.
    pub async fn recall_for(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        message: &str,
    ) -> Result<Vec<String>, MemoryError> {
        let filter = MemoryFilter {
            agent_id: Some(agent.clone()),
            memory_types: vec![MemoryType::Semantic, MemoryType::Episodic],
            ..MemoryFilter::default()
        };
        let d = &self.deps;
        // Most agents remember nothing: no embedding, no search then.
        let model = d.embedder.model().id.clone();
        if d.memories.vector_count(tenant, &model, &filter, d.clock.now()).await? == 0 {
            return Ok(Vec::new());
        }
        let hits =
            self.rank(tenant, message, &filter, self.settings.recall_top_k, SearchMode::Hybrid).await?;
        let mut used = 0;
        let mut recalled = Vec::new();
        for hit in hits.into_iter().take(self.settings.recall_top_k) {
            let cost = d.tokens.count(&hit.entry.content) + 2;
            if used + cost > self.settings.recall_token_budget {
                continue;
            }
            used += cost;
            recalled.push(hit.entry.content);
        }
        Ok(recalled)
    }

    /// The episodic memory of a chat exchange, embedded, for the exchange to store in its
    /// transaction.
    ///
    /// # Errors
    /// [`MemoryError::Embedding`].
    pub async fn episode_of(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        session: &SessionId,
        message: &str,
        reply: &str,
        at: DateTime<Utc>,
    ) -> Result<EmbeddedEntry, MemoryError> {
        let content: String =
            format!("User: {message}\nAssistant: {reply}").chars().take(MAX_CONTENT_CHARS).collect();
        let mut metadata = Map::new();
        metadata.insert("session_id".into(), Value::String(session.to_string()));
        let entry = self.entry(
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
            },
            at,
        );
        let embedding = self.embed_one(&entry.content).await?;
        Ok(EmbeddedEntry { entry, embedding })
    }
}

#[cfg(test)]
mod tests;

//! Memory entries, both variants' shape, and Variant A's routes for them: add, list, get,
//! delete and scored search.

use agentry_domain::memory::ranking::DEFAULT_MIN_SCORE;
use agentry_domain::workflows::outputs::{MemoryEntryOutput, MemoryHit};

use agentry_domain::memory::Validity;
use agentry_domain::memory::model::MemoryOrigin;

use super::*;

/// A new memory (both variants). `memory_type` defaults to `semantic`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AddMemoryRequest {
    /// The agent whose memory it is (Variant A); absent: the tenant's.
    #[schema(extensions(("x-text" = json!("name"))))]
    pub agent_id: Option<String>,
    /// `semantic` (default), `episodic` or `procedural`.
    #[schema(schema_with = crate::schemas::memory_type_optional, example = "semantic")]
    pub memory_type: Option<String>,
    /// With a key, the tenant's entry of the same type and key is replaced (its id kept).
    #[schema(min_length = 1, max_length = 256, extensions(("x-text" = json!("one-line"))))]
    pub key: Option<String>,
    /// The text, 1–32,000 characters, not blank.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 32000,
        extensions(("x-text" = json!("message"))), example = "The customer's favourite colour is teal.")]
    pub content: Option<String>,
    /// Where it came from; default `api`.
    #[schema(min_length = 1, max_length = 100, extensions(("x-text" = json!("name"))))]
    pub source: Option<String>,
    /// Free-form object; search can filter on its top-level keys.
    #[schema(schema_with = crate::schemas::metadata_optional)]
    pub metadata: Option<Value>,
    /// Up to 50 labels of 1–64 characters.
    #[schema(schema_with = crate::schemas::tags_optional)]
    pub tags: Option<Vec<String>>,
    /// 0–1 (default 0.5); weighs into search ranking.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub importance_score: Option<f64>,
    /// When it expires (RFC 3339); expired entries never return.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<String>,
    /// Seconds until it expires (with `expires_at` too, the earlier applies).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 315360000)]
    pub ttl_seconds: Option<JsonInt>,
}

impl AddMemoryRequest {
    pub(crate) fn try_into_domain(self, with_agent: bool) -> Result<NewMemory, ValidationErrors> {
        let mut v = Validator::new();
        let agent = if with_agent {
            v.optional("agent_id", self.agent_id, agent_id)
        } else {
            // Variant B's entries are tenant-wide: an agent_id is checked as the document
            // describes it, then not used.
            let unused = self.agent_id.map(|raw| {
                if raw.trim().is_empty() {
                    Err(FieldError::new(
                        "agent_id",
                        FieldErrorKind::InvalidFormat,
                        "agent_id must not be blank",
                    ))
                } else {
                    agent_id(raw).map(|_| ())
                }
            });
            v.check("agent_id", unused.transpose().map(|_| None))
        };
        let memory_type = v.optional("memory_type", self.memory_type, memory_type);
        let key = v.optional("key", self.key, |k| memory::key(&k));
        let content = v.required("content", self.content, |c| memory::content(&c, "content"));
        let source = v.optional("source", self.source, |s| memory::source(&s));
        let (tags, metadata) = filters(&mut v, self.tags, self.metadata);
        let importance = v.optional("importance_score", self.importance_score, memory::importance);
        let at = v.optional("expires_at", self.expires_at, expires_at);
        let after = v.optional("ttl_seconds", self.ttl_seconds, ttl);
        let (agent_id, memory_type, key, content, source, tags, metadata, importance, at, after) =
            v.finish((agent, memory_type, key, content, source, tags, metadata, importance, at, after))?;
        Ok(NewMemory {
            agent_id,
            memory_type: memory_type.unwrap_or(MemoryType::Semantic),
            key,
            content,
            source,
            metadata: metadata.unwrap_or_default(),
            tags: tags.unwrap_or_default(),
            importance,
            // Both given: the first to come applies.
            expiry: match (at, after) {
                (Some(Expiry::At(t)), Some(Expiry::After(d))) => Some(Expiry::Earliest(t, d)),
                (at, after) => at.or(after),
            },
            origin: MemoryOrigin::Api,
        })
    }
}

/// A memory entry: the spec's Memory entry plus its agent, document and expiry.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryEntryResponse {
    /// Entry id (`mem_…`).
    pub id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// The agent whose memory it is, or null for a tenant-wide entry.
    pub agent_id: Option<String>,
    /// The document it is a chunk of, if any.
    pub document_id: Option<String>,
    /// `semantic`, `episodic` or `procedural`.
    pub memory_type: &'static str,
    /// Its key, if any.
    pub key: Option<String>,
    /// The text.
    pub content: String,
    /// Where it came from.
    pub source: String,
    /// Free-form object.
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// Labels.
    pub tags: Vec<String>,
    /// 0–1.
    pub importance_score: f64,
    /// How many searches returned it.
    pub access_count: u64,
    /// Creation time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// Last change.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
    /// Expiry, or null.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<DateTime<Utc>>,
    /// Since when it holds (its creation, unless learned otherwise).
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub valid_from: DateTime<Utc>,
    /// When a later fact contradicted it (it is kept, and found only with `include_invalid`
    /// or `as_of`), or null while it holds.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub invalid_at: Option<DateTime<Utc>>,
    /// The entry that replaced it, or null.
    pub superseded_by: Option<String>,
    /// What wrote it: `api`, `extraction` (learned from a conversation), `tool`,
    /// `consolidation` or `document`.
    #[schema(example = "api")]
    pub origin: &'static str,
    /// The chat messages it was learned from (empty for what a client wrote).
    pub source_message_ids: Vec<String>,
}

/// Made from the domain's view of an entry (what a `memory_add` step outputs too).
impl From<MemoryEntry> for MemoryEntryResponse {
    fn from(e: MemoryEntry) -> Self {
        let o = MemoryEntryOutput::from(e);
        Self {
            id: o.id,
            tenant_id: o.tenant_id,
            agent_id: o.agent_id,
            document_id: o.document_id,
            memory_type: o.memory_type,
            key: o.key,
            content: o.content,
            source: o.source,
            metadata: o.metadata,
            tags: o.tags,
            importance_score: o.importance_score,
            access_count: o.access_count,
            created_at: o.created_at,
            updated_at: o.updated_at,
            expires_at: o.expires_at,
            valid_from: o.valid_from,
            invalid_at: o.invalid_at,
            superseded_by: o.superseded_by,
            origin: o.origin,
            source_message_ids: o.source_message_ids,
        }
    }
}

/// Add a memory to an agent (or to the tenant, without `agent_id`).
#[utoipa::path(
    post, path = "/api/v1/memory", tag = "memory", operation_id = "addMemory",
    security(("bearer" = [])),
    request_body = AddMemoryRequest,
    responses(
        (status = 201, description = "Stored", body = MemoryEntryResponse),
        (status = 404, description = "`not_found`: no such agent in your tenant"),
        (status = 502, description = "`upstream_error`: the embedding provider failed"),
    )
)]
pub async fn add(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<AddMemoryRequest>,
) -> Result<Reply<MemoryEntryResponse>, ApiError> {
    let new = body.0.try_into_domain(true)?;
    let entry = state.memory.add(&caller, new).await?;
    Ok(Reply::created(entry.into()))
}

/// Query of the memory list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListMemoryQuery {
    /// Only this agent's memories.
    #[param(pattern = r"^[^\x00-\x1F\x7F-\x9F]*$")]
    pub agent_id: Option<String>,
    /// Only this type: `semantic`, `episodic` or `procedural`.
    #[param(schema_with = crate::schemas::memory_type_param)]
    pub memory_type: Option<String>,
    /// Only entries carrying this tag (1–64 characters).
    #[param(min_length = 1, max_length = 64, pattern = r"^[^\x00-\x1F\x7F-\x9F]*$")]
    pub tag: Option<String>,
    /// Page number, from 1 (default 1).
    #[param(minimum = 1, maximum = 4_294_967_295_i64)]
    pub page: Option<i64>,
    /// Items per page, 1–100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub per_page: Option<i64>,
    /// Invalidated entries (a later fact contradicted them) too; default false.
    pub include_invalid: Option<bool>,
    /// What held at this time (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    pub as_of: Option<String>,
}

/// A page of memories.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryList {
    /// The entries of this page, oldest first.
    pub memories: Vec<MemoryEntryResponse>,
    /// All matching entries.
    pub total: u64,
    /// This page.
    pub page: u32,
    /// Page size.
    pub per_page: u32,
}

/// List memories, optionally of one agent and type; expired ones are left out, and so are
/// invalidated ones unless `include_invalid` or `as_of` asks for them.
#[utoipa::path(
    get, path = "/api/v1/memory", tag = "memory", operation_id = "listMemory",
    security(("bearer" = [])), params(ListMemoryQuery),
    responses(
        (status = 200, description = "A page of memories", body = MemoryList),
        (status = 404, description = "`not_found`: no such agent in your tenant"),
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    query: QueryParams<ListMemoryQuery>,
) -> Result<Reply<MemoryList>, ApiError> {
    let (agent, memory_type, tag, validity, page) = query.0.try_into_domain()?;
    let (entries, total) = state.memory.list(&caller, agent, memory_type, tag, validity, page).await?;
    Ok(Reply::ok(MemoryList {
        memories: entries.into_iter().map(MemoryEntryResponse::from).collect(),
        total,
        page: page.page,
        per_page: page.per_page,
    }))
}

/// What a memory list asks for: the agent, the type, the tag, the validity and the page.
pub(crate) type ListFilters = (Option<AgentId>, Option<MemoryType>, Option<String>, Validity, Page);

impl ListMemoryQuery {
    /// The agent, type, tag, validity and page asked for.
    pub(crate) fn try_into_domain(self) -> Result<ListFilters, ValidationErrors> {
        let q = self;
        let mut v = Validator::new();
        let agent = v.optional("agent_id", q.agent_id, agent_id);
        let memory_type = v.optional("memory_type", q.memory_type, memory_type);
        let tag = v.optional("tag", q.tag, |t| {
            agentry_domain::validation::check_text(
                &t,
                "tag",
                agentry_domain::validation::TextKind::SingleLine,
            )?;
            agentry_domain::validation::check_length(&t, 1, memory::MAX_TAG_CHARS, "tag")?;
            Ok(t)
        });
        let page = v.check_nested(
            PageQuery { page: q.page, per_page: q.per_page }.try_into_domain().map_err(first_error),
        );
        let as_of = v.optional("as_of", q.as_of, as_of);
        let (agent, memory_type, tag, page, as_of) = v.finish((agent, memory_type, tag, page, as_of))?;
        let validity = Validity { include_invalid: q.include_invalid.unwrap_or(false), as_of };
        Ok((agent, memory_type, tag, validity, page))
    }
}

fn first_error(e: ValidationErrors) -> FieldError {
    e.0.into_iter()
        .next()
        .unwrap_or_else(|| FieldError::new("page", FieldErrorKind::OutOfRange, "out of range"))
}

pub(super) fn memory_id(raw: String, what: &str) -> Result<MemoryId, ApiError> {
    check_path_id(&raw, what)?;
    Ok(MemoryId::from_string(raw))
}

/// Read a memory.
#[utoipa::path(
    get, path = "/api/v1/memory/{memory_id}", tag = "memory", operation_id = "getMemory",
    security(("bearer" = [])),
    params(("memory_id" = String, Path, description = "Memory id")),
    responses(
        (status = 200, description = "The memory", body = MemoryEntryResponse),
        (status = 404, description = "`not_found`: no such memory in your tenant (or it expired)"),
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<MemoryEntryResponse>, ApiError> {
    let entry = state.memory.get(&caller, &memory_id(path.into_inner(), "memory_id")?).await?;
    Ok(Reply::ok(entry.into()))
}

/// One version of a memory's history.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryVersionResponse {
    /// From 1, in order.
    pub version: u32,
    /// The text of this version.
    pub content: String,
    /// `added`, `updated` or `invalidated`.
    #[schema(example = "added")]
    pub change: &'static str,
    /// Why, when something said so (the statement that replaced it).
    pub reason: Option<String>,
    /// The chat messages the change came from.
    pub source_message_ids: Vec<String>,
    /// When.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub at: DateTime<Utc>,
}

impl From<agentry_domain::memory::learning::MemoryVersion> for MemoryVersionResponse {
    fn from(v: agentry_domain::memory::learning::MemoryVersion) -> Self {
        Self {
            version: v.version,
            content: v.content,
            change: v.change.as_str(),
            reason: v.reason,
            source_message_ids: v.source_message_ids.into_iter().map(|m| m.into_string()).collect(),
            at: v.at,
        }
    }
}

/// A memory's history: each version with what changed it and the chat messages it came from.
#[utoipa::path(
    get, path = "/api/v1/memory/{memory_id}/history", tag = "memory", operation_id = "getMemoryHistory",
    security(("bearer" = [])),
    params(("memory_id" = String, Path, description = "Memory id")),
    responses(
        (status = 200, description = "Its versions, oldest first", body = [MemoryVersionResponse]),
        (status = 404, description = "`not_found`: no such memory in your tenant"),
    )
)]
pub async fn history(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<Vec<MemoryVersionResponse>>, ApiError> {
    let versions = state.memory.history(&caller, &memory_id(path.into_inner(), "memory_id")?).await?;
    Ok(Reply::ok(versions.into_iter().map(Into::into).collect()))
}

/// Delete a memory.
#[utoipa::path(
    delete, path = "/api/v1/memory/{memory_id}", tag = "memory", operation_id = "deleteMemory",
    security(("bearer" = [])),
    params(("memory_id" = String, Path, description = "Memory id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not_found`: no such memory in your tenant"),
    )
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.memory.delete(&caller, &memory_id(path.into_inner(), "memory_id")?).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// A Variant A search.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SearchMemoryRequest {
    /// Only this agent's memories; absent: the whole tenant's.
    #[schema(extensions(("x-text" = json!("name"))))]
    pub agent_id: Option<String>,
    /// Only this type.
    #[schema(schema_with = crate::schemas::memory_type_optional, example = "semantic")]
    pub memory_type: Option<String>,
    /// What to find memories for: 1–32,000 characters, not blank.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 32000,
        extensions(("x-text" = json!("message"))), example = "what colour does the client like?")]
    pub query: Option<String>,
    /// Results, 1–100 (default 5).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 100)]
    pub top_k: Option<JsonInt>,
    /// Only entries carrying all of these tags.
    #[schema(schema_with = crate::schemas::tags_optional)]
    pub tags: Option<Vec<String>>,
    /// Only entries whose metadata has each of these keys with an equal value.
    #[schema(schema_with = crate::schemas::metadata_optional)]
    pub metadata: Option<Value>,
    /// `hybrid` (default: vectors and full text combined), `vector` or `lexical` alone.
    #[schema(schema_with = crate::schemas::search_mode_optional, example = "hybrid")]
    pub mode: Option<String>,
    /// Results scoring under this are left out, 0–1 (default 0.34: what an unrelated entry
    /// scores at most, mostly; 0 returns every candidate).
    #[schema(minimum = 0, maximum = 1, example = 0.34)]
    pub min_score: Option<f64>,
    /// Contradicted (invalidated) entries too; default false: only what holds now.
    pub include_invalid: Option<bool>,
    /// Only what held at this instant (RFC 3339), whether or not it still holds.
    #[schema(value_type = Option<String>, format = DateTime, example = "2026-11-01T00:00:00Z")]
    pub as_of: Option<String>,
}

impl SearchMemoryRequest {
    pub(crate) fn try_into_domain(self) -> Result<SearchQuery, ValidationErrors> {
        let b = self;
        let mut v = Validator::new();
        let text = v.required("query", b.query, |q| memory::content(&q, "query"));
        let top_k = v.optional("top_k", b.top_k, |n| bounded("top_k", n, 1, 100));
        let mode = v.optional("mode", b.mode, search_mode);
        let min_score = v.optional("min_score", b.min_score, min_score);
        let filter = search_filter(
            &mut v,
            b.agent_id,
            b.memory_type,
            (b.tags, b.metadata),
            (b.include_invalid, b.as_of),
        );
        let (text, top_k, mode, min_score, filter) = v.finish((text, top_k, mode, min_score, filter))?;
        Ok(SearchQuery {
            text,
            filter,
            skip: 0,
            limit: top_k.unwrap_or(5),
            count_access: false,
            mode: mode.unwrap_or_default(),
            min_score: min_score.unwrap_or(DEFAULT_MIN_SCORE),
        })
    }
}

/// A `min_score`: from 0 to 1.
pub(crate) fn min_score(raw: f64) -> Result<f64, FieldError> {
    if (0.0..=1.0).contains(&raw) {
        Ok(raw)
    } else {
        Err(FieldError::new("min_score", FieldErrorKind::OutOfRange, "min_score must be from 0 to 1"))
    }
}

fn search_mode(raw: String) -> Result<SearchMode, FieldError> {
    match raw.as_str() {
        "hybrid" => Ok(SearchMode::Hybrid),
        "vector" => Ok(SearchMode::Vector),
        "lexical" => Ok(SearchMode::Lexical),
        _ => Err(FieldError::new(
            "mode",
            FieldErrorKind::InvalidValue,
            "mode must be hybrid, vector or lexical",
        )),
    }
}

pub(super) fn search_filter(
    v: &mut Validator,
    agent: Option<String>,
    memory_type_raw: Option<String>,
    (tags, metadata): (Option<Vec<String>>, Option<Value>),
    (include_invalid, as_of_raw): (Option<bool>, Option<String>),
) -> Checked<MemoryFilter> {
    let agent = v.optional("agent_id", agent, agent_id);
    let memory_type = v.optional("memory_type", memory_type_raw, memory_type);
    let (tags, metadata) = filters(v, tags, metadata);
    let as_of = v.optional("as_of", as_of_raw, as_of);
    v.combine(
        (agent, memory_type, tags, metadata, as_of),
        |(agent_id, memory_type, tags, metadata, as_of)| MemoryFilter {
            agent_id,
            memory_types: memory_type.into_iter().collect(),
            tags: tags.unwrap_or_default(),
            metadata: metadata.unwrap_or_default(),
            include_invalid: include_invalid.unwrap_or(false),
            as_of,
        },
    )
}

/// An `as_of`: an RFC 3339 time.
fn as_of(raw: String) -> Result<DateTime<Utc>, FieldError> {
    DateTime::parse_from_rfc3339(raw.trim()).map(|t| t.with_timezone(&Utc)).map_err(|_| {
        FieldError::new(
            "as_of",
            FieldErrorKind::InvalidFormat,
            "as_of must be an RFC 3339 time, e.g. 2026-11-01T00:00:00Z",
        )
    })
}

/// How a search result's score was made.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScoreExplanation {
    /// Cosine similarity of its embedding to the query's, when the vector search found it.
    pub similarity: Option<f32>,
    /// Its place (from 1) among the nearest vectors.
    pub vector_rank: Option<usize>,
    /// Its place (from 1) in the lexical (full-text) ranking.
    pub lexical_rank: Option<usize>,
    /// The similarity calibrated to 0–1: 0 at the embedder's floor (unrelated texts), 1 at its
    /// ceiling (the same meaning).
    pub semantic: f64,
    /// The share of the query's terms the entry contains, when that match counts (half the
    /// terms of a longer query), 0–1.
    pub lexical: f64,
    /// Meaning and words combined, 0–1: semantic + (1 − semantic) · 0.4 · lexical (`vector`
    /// mode: semantic; `lexical` mode: lexical).
    pub relevance: f64,
    /// Its importance, 0–1.
    pub importance: f64,
    /// Recency, 0–1: halves with each half-life since its last change.
    pub recency: f64,
}

/// A Variant A search result: the spec's hit (`id, content, score, metadata`) and more.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemorySearchHit {
    /// Entry id.
    pub id: String,
    /// The text.
    pub content: String,
    /// 0–1, higher is better: relevance × (0.8 + 0.1 × importance + 0.1 × recency); comparable
    /// across queries (docs/memory.md, Ranking).
    pub score: f64,
    /// Free-form object.
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// Its type.
    pub memory_type: &'static str,
    /// Its agent, or null.
    pub agent_id: Option<String>,
    /// Labels.
    pub tags: Vec<String>,
    /// The parts of the score.
    pub explanation: ScoreExplanation,
}

/// Made from the domain's view of a hit (what a `memory_search` step outputs too).
impl From<SearchHit> for MemorySearchHit {
    fn from(h: SearchHit) -> Self {
        let o = MemoryHit::from(h);
        let x = o.explanation;
        Self {
            explanation: ScoreExplanation {
                similarity: x.similarity,
                vector_rank: x.vector_rank,
                lexical_rank: x.lexical_rank,
                semantic: x.semantic,
                lexical: x.lexical,
                relevance: x.relevance,
                importance: x.importance,
                recency: x.recency,
            },
            score: o.score,
            id: o.id,
            content: o.content,
            metadata: o.metadata,
            memory_type: o.memory_type,
            agent_id: o.agent_id,
            tags: o.tags,
        }
    }
}

/// Search results, best first.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemorySearchResponse {
    /// Best first.
    pub results: Vec<MemorySearchHit>,
}

/// Hybrid search of memories: vector similarity and full-text matches fused, weighed with
/// importance and recency.
#[utoipa::path(
    post, path = "/api/v1/memory/search", tag = "memory", operation_id = "searchMemory",
    security(("bearer" = [])),
    request_body = SearchMemoryRequest,
    responses(
        (status = 200, description = "Results, best first", body = MemorySearchResponse),
        (status = 404, description = "`not_found`: no such agent in your tenant"),
        (status = 502, description = "`upstream_error`: the embedding provider failed"),
    )
)]
pub async fn search(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<SearchMemoryRequest>,
) -> Result<Reply<MemorySearchResponse>, ApiError> {
    let query = body.0.try_into_domain()?;
    let results = state.memory.search(&caller, query).await?;
    Ok(Reply::ok(MemorySearchResponse {
        results: results.hits.into_iter().map(MemorySearchHit::from).collect(),
    }))
}

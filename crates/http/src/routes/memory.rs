//! Memory, in both of the spec's variants over one model: Variant A under `/memory` (an
//! agent's memories, documents, scored search, consolidation) and Variant B under
//! `/memory-stores/entries` (a tenant's keyed entries, paged search that counts access).

use actix_web::{HttpResponse, web};
use agentry_domain::ids::{AgentId, DocumentId, MemoryId};
use agentry_domain::memory::model::{self as memory, MemoryType};
use agentry_domain::memory::{
    ConsolidationReport, DocumentSummary, Expiry, MemoryEntry, MemoryFilter, NewDocument, NewMemory,
    SearchHit, SearchMode, SearchQuery,
};
use agentry_domain::validation::{
    Checked, FieldError, FieldErrorKind, ValidationErrors, Validator, check_path_id,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, JsonInt, QueryParams};
use crate::reply::{Reply, timestamp};
use crate::routes::agents::PageQuery;

/// Registers the routes of this module under the current scope. Static segments come before
/// `{memory_id}`, so `search` or `documents` is never taken for an id.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/memory").route(web::get().to(list)).route(web::post().to(add)))
        .service(web::resource("/memory/search").route(web::post().to(search)))
        .service(web::resource("/memory/consolidate").route(web::post().to(consolidate)))
        .service(web::resource("/memory/documents").route(web::post().to(add_documents)))
        .service(web::resource("/memory/documents/{document_id}").route(web::delete().to(delete_document)))
        .service(
            web::resource("/memory/{memory_id}").route(web::get().to(get)).route(web::delete().to(delete)),
        )
        .service(web::resource("/memory-stores/entries").route(web::post().to(store_upsert)))
        .service(web::resource("/memory-stores/entries/search").route(web::post().to(store_search)))
        .service(
            web::resource("/memory-stores/entries/{entry_id}")
                .route(web::get().to(store_get))
                .route(web::delete().to(store_delete)),
        );
}

/// Most documents in one request.
pub const MAX_DOCUMENTS: usize = 100;
/// Most characters of one document (the 1 MiB body limit applies to the whole request); a
/// longer text is sent as several documents.
pub const MAX_DOCUMENT_CHARS: usize = 100_000;
/// Most characters of a document title.
pub const MAX_TITLE_CHARS: usize = 500;
/// Most results a search may skip.
pub const MAX_SKIP: i64 = 1_000;
/// Longest time to live, in seconds (ten years).
pub const MAX_TTL_SECONDS: i64 = 315_360_000;

fn agent_id(raw: String) -> Result<AgentId, FieldError> {
    check_path_id(&raw, "agent_id")?;
    Ok(AgentId::from_string(raw))
}

fn memory_type(raw: String) -> Result<MemoryType, FieldError> {
    raw.parse::<MemoryType>().map_err(|e| e.for_field("memory_type"))
}

fn bounded(field: &str, n: JsonInt, min: i64, max: i64) -> Result<usize, FieldError> {
    if (min..=max).contains(&n.0) {
        usize::try_from(n.0).map_err(|_| FieldError::new(field, FieldErrorKind::OutOfRange, "out of range"))
    } else {
        Err(FieldError::new(
            field,
            FieldErrorKind::OutOfRange,
            format!("{field} must be from {min} to {max}"),
        ))
    }
}

fn ttl(n: JsonInt) -> Result<Expiry, FieldError> {
    let secs = bounded("ttl_seconds", n, 1, MAX_TTL_SECONDS)?;
    Ok(Expiry::After(chrono::Duration::seconds(i64::try_from(secs).unwrap_or(MAX_TTL_SECONDS))))
}

fn expires_at(raw: String) -> Result<Expiry, FieldError> {
    DateTime::parse_from_rfc3339(&raw).map(|t| Expiry::At(t.with_timezone(&Utc))).map_err(|_| {
        FieldError::new(
            "expires_at",
            FieldErrorKind::InvalidFormat,
            "expires_at must be an RFC 3339 timestamp",
        )
    })
}

type CheckedTags = Checked<Option<Vec<String>>>;
type CheckedMetadata = Checked<Option<Map<String, Value>>>;

fn filters(
    v: &mut Validator,
    tags: Option<Vec<String>>,
    metadata: Option<Value>,
) -> (CheckedTags, CheckedMetadata) {
    let tags = v.optional("tags", tags, |t| memory::tags(&t));
    let metadata = v.optional("metadata", metadata, |m| memory::metadata(m, "metadata"));
    (tags, metadata)
}

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
    fn try_into_domain(self, with_agent: bool) -> Result<NewMemory, ValidationErrors> {
        let mut v = Validator::new();
        let agent = if with_agent {
            v.optional("agent_id", self.agent_id, agent_id)
        } else {
            v.check("agent_id", Ok(None))
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
}

impl From<MemoryEntry> for MemoryEntryResponse {
    fn from(e: MemoryEntry) -> Self {
        Self {
            id: e.id.into_string(),
            tenant_id: e.tenant_id.into_string(),
            agent_id: e.agent_id.map(AgentId::into_string),
            document_id: e.document_id.map(DocumentId::into_string),
            memory_type: e.memory_type.as_str(),
            key: e.key,
            content: e.content,
            source: e.source,
            metadata: e.metadata,
            tags: e.tags,
            importance_score: e.importance,
            access_count: e.access_count,
            created_at: e.created_at,
            updated_at: e.updated_at,
            expires_at: e.expires_at,
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
    /// Page number, from 1 (default 1).
    #[param(minimum = 1, maximum = 4_294_967_295_i64)]
    pub page: Option<i64>,
    /// Items per page, 1–100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub per_page: Option<i64>,
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

/// List memories, optionally of one agent and type; expired ones are left out.
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
    let q = query.0;
    let mut v = Validator::new();
    let agent = v.optional("agent_id", q.agent_id, agent_id);
    let memory_type = v.optional("memory_type", q.memory_type, memory_type);
    let page = v.check_nested(
        PageQuery { page: q.page, per_page: q.per_page }.try_into_domain().map_err(first_error),
    );
    let (agent, memory_type, page) = v.finish((agent, memory_type, page))?;
    let (entries, total) = state.memory.list(&caller, agent, memory_type, page).await?;
    Ok(Reply::ok(MemoryList {
        memories: entries.into_iter().map(MemoryEntryResponse::from).collect(),
        total,
        page: page.page,
        per_page: page.per_page,
    }))
}

fn first_error(e: ValidationErrors) -> FieldError {
    e.0.into_iter()
        .next()
        .unwrap_or_else(|| FieldError::new("page", FieldErrorKind::OutOfRange, "out of range"))
}

fn memory_id(raw: String, what: &str) -> Result<MemoryId, ApiError> {
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
    /// `hybrid` (default: vectors and full text fused), `vector` or `lexical` alone.
    #[schema(schema_with = crate::schemas::search_mode_optional, example = "hybrid")]
    pub mode: Option<String>,
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

fn search_filter(
    v: &mut Validator,
    agent: Option<String>,
    memory_type_raw: Option<String>,
    tags: Option<Vec<String>>,
    metadata: Option<Value>,
) -> Checked<MemoryFilter> {
    let agent = v.optional("agent_id", agent, agent_id);
    let memory_type = v.optional("memory_type", memory_type_raw, memory_type);
    let (tags, metadata) = filters(v, tags, metadata);
    v.combine((agent, memory_type, tags, metadata), |(agent_id, memory_type, tags, metadata)| MemoryFilter {
        agent_id,
        memory_types: memory_type.into_iter().collect(),
        tags: tags.unwrap_or_default(),
        metadata: metadata.unwrap_or_default(),
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
    /// The two rankings fused (reciprocal rank fusion, k = 60), 0–1.
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
    /// 0–1, higher is better: 0.8 × relevance + 0.1 × importance + 0.1 × recency.
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

impl From<SearchHit> for MemorySearchHit {
    fn from(h: SearchHit) -> Self {
        let r = h.ranking;
        Self {
            explanation: ScoreExplanation {
                similarity: r.candidate.similarity,
                vector_rank: r.candidate.vector_rank,
                lexical_rank: r.candidate.lexical_rank,
                relevance: r.relevance,
                importance: r.candidate.importance,
                recency: r.recency,
            },
            score: r.score,
            id: h.entry.id.into_string(),
            content: h.entry.content,
            metadata: h.entry.metadata,
            memory_type: h.entry.memory_type.as_str(),
            agent_id: h.entry.agent_id.map(AgentId::into_string),
            tags: h.entry.tags,
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
    let b = body.0;
    let mut v = Validator::new();
    let text = v.required("query", b.query, |q| memory::content(&q, "query"));
    let top_k = v.optional("top_k", b.top_k, |n| bounded("top_k", n, 1, 100));
    let mode = v.optional("mode", b.mode, search_mode);
    let filter = search_filter(&mut v, b.agent_id, b.memory_type, b.tags, b.metadata);
    let (text, top_k, mode, filter) = v.finish((text, top_k, mode, filter))?;
    let query = SearchQuery {
        text,
        filter,
        skip: 0,
        limit: top_k.unwrap_or(5),
        count_access: false,
        mode: mode.unwrap_or_default(),
    };
    let results = state.memory.search(&caller, query).await?;
    Ok(Reply::ok(MemorySearchResponse {
        results: results.hits.into_iter().map(MemorySearchHit::from).collect(),
    }))
}

/// A document to add.
#[derive(Debug, Deserialize, ToSchema)]
pub struct DocumentRequest {
    /// Title, 1–500 characters.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 500, extensions(("x-text" = json!("name"))))]
    pub title: Option<String>,
    /// The text; cut into chunks of about 256 tokens.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 100000,
        extensions(("x-text" = json!("message"))))]
    pub content: Option<String>,
    /// Free-form object, copied onto each chunk.
    #[schema(schema_with = crate::schemas::metadata_optional)]
    pub metadata: Option<Value>,
}

/// Documents to add to an agent's memory.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AddDocumentsRequest {
    /// The agent.
    #[schema(required = true, value_type = String, extensions(("x-text" = json!("name"))))]
    pub agent_id: Option<String>,
    /// 1–100 documents.
    #[schema(required = true, min_items = 1, max_items = 100)]
    pub documents: Option<Vec<DocumentRequest>>,
}

/// A stored document.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentResponse {
    /// Document id (`doc_…`).
    pub id: String,
    /// Its title.
    pub title: String,
    /// How many chunks it was stored as.
    pub chunks: u64,
    /// The chunks' memory ids, in order.
    pub chunk_ids: Vec<String>,
}

/// What adding documents stored.
#[derive(Debug, Serialize, ToSchema)]
pub struct AddDocumentsResponse {
    /// The agent.
    pub agent_id: String,
    /// The documents, in request order.
    pub documents: Vec<DocumentResponse>,
}

impl From<DocumentSummary> for DocumentResponse {
    fn from(s: DocumentSummary) -> Self {
        Self {
            id: s.document.id.into_string(),
            title: s.document.title,
            chunks: s.document.chunk_count,
            chunk_ids: s.chunk_ids.into_iter().map(MemoryId::into_string).collect(),
        }
    }
}

fn document(i: usize, d: DocumentRequest, v: &mut Validator) -> Checked<NewDocument> {
    let field = |f: &str| format!("documents[{i}].{f}");
    let title = v.required(&field("title"), d.title, |t| {
        agentry_domain::validation::check_text(
            &t,
            &field("title"),
            agentry_domain::validation::TextKind::SingleLine,
        )?;
        agentry_domain::validation::check_length(t.trim(), 1, MAX_TITLE_CHARS, &field("title"))?;
        Ok(t.trim().to_owned())
    });
    let content = v.required(&field("content"), d.content, |c| {
        agentry_domain::validation::check_long_text(&c, 1, MAX_DOCUMENT_CHARS, &field("content"))?;
        if c.trim().is_empty() {
            return Err(FieldError::new(
                field("content"),
                FieldErrorKind::TooShort,
                "content must not be empty",
            ));
        }
        Ok(c)
    });
    let metadata = v.optional(&field("metadata"), d.metadata, |m| memory::metadata(m, &field("metadata")));
    v.combine((title, content, metadata), |(title, content, metadata)| NewDocument {
        title,
        content,
        metadata: metadata.unwrap_or_default(),
    })
}

/// Add documents to an agent's memory: each is cut into chunks of about 256 tokens on
/// sentence boundaries (with overlap; identical chunks stored once), embedded and stored, all
/// documents at once or none.
#[utoipa::path(
    post, path = "/api/v1/memory/documents", tag = "memory", operation_id = "addMemoryDocuments",
    security(("bearer" = [])),
    request_body = AddDocumentsRequest,
    responses(
        (status = 201, description = "Stored", body = AddDocumentsResponse),
        (status = 404, description = "`not_found`: no such agent in your tenant"),
        (status = 502, description = "`upstream_error`: the embedding provider failed"),
    )
)]
pub async fn add_documents(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<AddDocumentsRequest>,
) -> Result<Reply<AddDocumentsResponse>, ApiError> {
    let b = body.0;
    let mut v = Validator::new();
    let agent = v.required("agent_id", b.agent_id, agent_id);
    let mut docs = Vec::new();
    match b.documents {
        None => v.push(FieldError::missing("documents")),
        Some(list) if list.is_empty() => {
            v.push(FieldError::new("documents", FieldErrorKind::TooShort, "give at least one document"));
        }
        Some(list) if list.len() > MAX_DOCUMENTS => v.push(FieldError::new(
            "documents",
            FieldErrorKind::TooLong,
            format!("at most {MAX_DOCUMENTS} documents per request"),
        )),
        Some(list) => {
            docs = list.into_iter().enumerate().map(|(i, d)| document(i, d, &mut v)).collect();
        }
    }
    let docs = v.all(docs);
    let (agent, docs) = v.finish((agent, docs))?;
    let stored = state.memory.add_documents(&caller, &agent, docs).await?;
    Ok(Reply::created(AddDocumentsResponse {
        agent_id: agent.into_string(),
        documents: stored.into_iter().map(DocumentResponse::from).collect(),
    }))
}

/// Delete a document and all its chunks.
#[utoipa::path(
    delete, path = "/api/v1/memory/documents/{document_id}", tag = "memory", operation_id = "deleteMemoryDocument",
    security(("bearer" = [])),
    params(("document_id" = String, Path, description = "Document id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not_found`: no such document in your tenant"),
    )
)]
pub async fn delete_document(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let raw = path.into_inner();
    check_path_id(&raw, "document_id")?;
    state.memory.delete_document(&caller, &DocumentId::from_string(raw)).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// A consolidation request.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ConsolidateRequest {
    /// The agent whose memories are consolidated.
    #[schema(required = true, value_type = String, extensions(("x-text" = json!("name"))))]
    pub agent_id: Option<String>,
    /// Cosine similarity at or above which two memories merge, 0.5–1 (default 0.92).
    #[schema(minimum = 0.5, maximum = 1.0)]
    pub threshold: Option<f64>,
}

/// What consolidation did.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConsolidateResponse {
    /// The agent.
    pub agent_id: String,
    /// Memories compared (document chunks are left alone).
    pub examined: u64,
    /// Memories merged into another and removed.
    pub merged: u64,
    /// Memories that absorbed at least one other.
    pub kept: u64,
    /// The threshold used.
    pub threshold: f32,
}

/// Merge an agent's near-duplicate memories: the most important of each group is kept, takes
/// the others' tags and access counts, and the others are removed; `memory.consolidated` is
/// emitted with the counts.
#[utoipa::path(
    post, path = "/api/v1/memory/consolidate", tag = "memory", operation_id = "consolidateMemory",
    security(("bearer" = [])),
    request_body = ConsolidateRequest,
    responses(
        (status = 200, description = "Done", body = ConsolidateResponse),
        (status = 404, description = "`not_found`: no such agent in your tenant"),
    )
)]
pub async fn consolidate(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<ConsolidateRequest>,
) -> Result<Reply<ConsolidateResponse>, ApiError> {
    let b = body.0;
    let mut v = Validator::new();
    let agent = v.required("agent_id", b.agent_id, agent_id);
    let threshold = v.optional("threshold", b.threshold, |t| {
        if (0.5..=1.0).contains(&t) {
            #[allow(clippy::cast_possible_truncation)]
            Ok(t as f32)
        } else {
            Err(FieldError::new("threshold", FieldErrorKind::OutOfRange, "threshold must be from 0.5 to 1"))
        }
    });
    let (agent, threshold) = v.finish((agent, threshold))?;
    let report: ConsolidationReport = state.memory.consolidate(&caller, &agent, threshold).await?;
    Ok(Reply::ok(ConsolidateResponse {
        agent_id: agent.into_string(),
        examined: report.examined,
        merged: report.merged,
        kept: report.kept,
        threshold: report.threshold,
    }))
}

/// Store an entry (Variant B): the same `(memory_type, key)` in a tenant replaces the entry
/// and keeps its id (200); a new one is 201.
#[utoipa::path(
    post, path = "/api/v1/memory-stores/entries", tag = "memory", operation_id = "upsertMemoryEntry",
    security(("bearer" = [])),
    request_body = AddMemoryRequest,
    responses(
        (status = 201, description = "Created", body = MemoryEntryResponse),
        (status = 200, description = "Replaced the entry of the same type and key", body = MemoryEntryResponse),
        (status = 502, description = "`upstream_error`: the embedding provider failed"),
    )
)]
pub async fn store_upsert(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<AddMemoryRequest>,
) -> Result<Reply<MemoryEntryResponse>, ApiError> {
    let new = body.0.try_into_domain(false)?;
    let (entry, created) = state.memory.put(&caller, new).await?;
    if created { Ok(Reply::created(entry.into())) } else { Ok(Reply::ok(entry.into())) }
}

/// A Variant B search.
#[derive(Debug, Deserialize, ToSchema)]
pub struct StoreSearchRequest {
    /// Only this type.
    #[schema(schema_with = crate::schemas::memory_type_optional, example = "semantic")]
    pub memory_type: Option<String>,
    /// What to find entries for: 1–32,000 characters, not blank.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 32000,
        extensions(("x-text" = json!("message"))))]
    pub query: Option<String>,
    /// Results, 1–100 (default 20).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 100)]
    pub limit: Option<JsonInt>,
    /// Results to skip, 0–1,000 (default 0).
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 1000)]
    pub skip: Option<JsonInt>,
    /// Only entries carrying all of these tags.
    #[schema(schema_with = crate::schemas::tags_optional)]
    pub tags: Option<Vec<String>>,
    /// Only entries whose metadata has each of these keys with an equal value.
    #[schema(schema_with = crate::schemas::metadata_optional)]
    pub metadata: Option<Value>,
}

/// A Variant B search result: the spec's hit (`id, content, key, metadata`) and more.
#[derive(Debug, Serialize, ToSchema)]
pub struct StoreSearchHit {
    /// Entry id.
    pub id: String,
    /// The text.
    pub content: String,
    /// Its key, if any.
    pub key: Option<String>,
    /// Free-form object.
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// Its type.
    pub memory_type: &'static str,
    /// Labels.
    pub tags: Vec<String>,
    /// 0–1.
    pub importance_score: f64,
    /// Searches that returned it, this one included.
    pub access_count: u64,
    /// 0–1, higher is better.
    pub score: f64,
}

/// A page of Variant B search results.
#[derive(Debug, Serialize, ToSchema)]
pub struct StoreSearchResponse {
    /// Best first.
    pub entries: Vec<StoreSearchHit>,
    /// Entries the search ranked (the pages are cut from these).
    pub total: usize,
    /// Skipped.
    pub skip: usize,
    /// Page size.
    pub limit: usize,
}

/// Search the tenant's entries (Variant B); each returned entry's `access_count` goes up by one.
#[utoipa::path(
    post, path = "/api/v1/memory-stores/entries/search", tag = "memory", operation_id = "searchMemoryEntries",
    security(("bearer" = [])),
    request_body = StoreSearchRequest,
    responses(
        (status = 200, description = "A page of results, best first", body = StoreSearchResponse),
        (status = 502, description = "`upstream_error`: the embedding provider failed"),
    )
)]
pub async fn store_search(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<StoreSearchRequest>,
) -> Result<Reply<StoreSearchResponse>, ApiError> {
    let b = body.0;
    let mut v = Validator::new();
    let text = v.required("query", b.query, |q| memory::content(&q, "query"));
    let limit = v.optional("limit", b.limit, |n| bounded("limit", n, 1, 100));
    let skip = v.optional("skip", b.skip, |n| bounded("skip", n, 0, MAX_SKIP));
    let filter = search_filter(&mut v, None, b.memory_type, b.tags, b.metadata);
    let (text, limit, skip, filter) = v.finish((text, limit, skip, filter))?;
    let (limit, skip) = (limit.unwrap_or(20), skip.unwrap_or(0));
    let query = SearchQuery { text, filter, skip, limit, count_access: true, mode: SearchMode::Hybrid };
    let results = state.memory.search(&caller, query).await?;
    Ok(Reply::ok(StoreSearchResponse {
        entries: results
            .hits
            .into_iter()
            .map(|h| StoreSearchHit {
                score: h.ranking.score,
                id: h.entry.id.into_string(),
                content: h.entry.content,
                key: h.entry.key,
                metadata: h.entry.metadata,
                memory_type: h.entry.memory_type.as_str(),
                tags: h.entry.tags,
                importance_score: h.entry.importance,
                access_count: h.entry.access_count,
            })
            .collect(),
        total: results.total,
        skip,
        limit,
    }))
}

/// Read an entry (Variant B).
#[utoipa::path(
    get, path = "/api/v1/memory-stores/entries/{entry_id}", tag = "memory", operation_id = "getMemoryEntry",
    security(("bearer" = [])),
    params(("entry_id" = String, Path, description = "Entry id")),
    responses(
        (status = 200, description = "The entry", body = MemoryEntryResponse),
        (status = 404, description = "`not_found`: no such entry in your tenant (or it expired)"),
    )
)]
pub async fn store_get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<MemoryEntryResponse>, ApiError> {
    let entry = state.memory.get(&caller, &memory_id(path.into_inner(), "entry_id")?).await?;
    Ok(Reply::ok(entry.into()))
}

/// Delete an entry (Variant B).
#[utoipa::path(
    delete, path = "/api/v1/memory-stores/entries/{entry_id}", tag = "memory", operation_id = "deleteMemoryEntry",
    security(("bearer" = [])),
    params(("entry_id" = String, Path, description = "Entry id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not_found`: no such entry in your tenant"),
    )
)]
pub async fn store_delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.memory.delete(&caller, &memory_id(path.into_inner(), "entry_id")?).await?;
    Ok(HttpResponse::NoContent().finish())
}

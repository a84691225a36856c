//! `/knowledge-bases` and `/knowledge/search`: knowledge bases, their files (uploaded as
//! `multipart/form-data`, [`files`]) and search over them (PRODUCT.md §15).

use actix_web::web;
use agentry_domain::ids::{KnowledgeBaseId, KnowledgeFileId};
use agentry_domain::knowledge::chunking::ChunkLimits;
use agentry_domain::knowledge::model::{base_name, chunk_limits, description};
use agentry_domain::knowledge::{BaseChanges, KnowledgeBase, KnowledgeHit, KnowledgeQuery, NewKnowledgeBase};
use agentry_domain::memory::model::content;
use agentry_domain::patch::Patch;
use agentry_domain::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator, check_path_id};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{not_null, nullable};
use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, JsonInt};
use crate::reply::{Reply, timestamp};

pub mod files;

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/knowledge-bases").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            web::resource("/knowledge-bases/{knowledge_base_id}")
                .route(web::get().to(get))
                .route(web::patch().to(update))
                .route(web::delete().to(delete)),
        )
        .service(
            web::resource("/knowledge-bases/{knowledge_base_id}/search").route(web::post().to(search_base)),
        )
        .service(web::resource("/knowledge/search").route(web::post().to(search)));
    files::configure(cfg);
}

/// Most bases one search names.
pub const MAX_SEARCH_BASES: usize = 20;
/// Most files one search names.
pub const MAX_SEARCH_FILES: usize = 100;
/// Most characters of a search query.
pub const MAX_QUERY_CHARS: usize = 4_000;

/// A knowledge base id from a path or a body.
pub(crate) fn base_id(raw: String, field: &str) -> Result<KnowledgeBaseId, FieldError> {
    check_path_id(&raw, field)?;
    Ok(KnowledgeBaseId::from_string(raw))
}

/// A file id from a path or a body.
pub(crate) fn file_id(raw: String, field: &str) -> Result<KnowledgeFileId, FieldError> {
    check_path_id(&raw, field)?;
    Ok(KnowledgeFileId::from_string(raw))
}

fn text(field: &str, raw: Value) -> Result<String, FieldError> {
    match raw {
        Value::String(s) => Ok(s),
        _ => Err(FieldError::new(field, FieldErrorKind::InvalidType, format!("{field} must be a string"))),
    }
}

/// A list of ids, as the document describes it: one-line strings, at most `max`.
fn id_list_schema(min: usize, max: usize, nullable: bool) -> utoipa::openapi::schema::ArrayBuilder {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, SchemaType, Type};
    let item = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(128))
        .pattern(Some(crate::schemas::ONE_LINE));
    let kind = if nullable {
        SchemaType::from_iter([Type::Array, Type::Null])
    } else {
        SchemaType::new(Type::Array)
    };
    ArrayBuilder::new().schema_type(kind).items(item).min_items(Some(min)).max_items(Some(max))
}

fn file_ids_schema() -> utoipa::openapi::schema::ArrayBuilder {
    id_list_schema(0, MAX_SEARCH_FILES, true)
}

fn base_ids_schema() -> utoipa::openapi::schema::ArrayBuilder {
    id_list_schema(1, MAX_SEARCH_BASES, false)
}

fn ids<T>(
    field: &str,
    raw: Value,
    max: usize,
    parse: fn(String, &str) -> Result<T, FieldError>,
) -> Result<Vec<T>, FieldError> {
    let wrong =
        || FieldError::new(field, FieldErrorKind::InvalidType, format!("{field} must be a list of ids"));
    let Value::Array(items) = raw else { return Err(wrong()) };
    if items.len() > max {
        return Err(FieldError::new(
            field,
            FieldErrorKind::TooLong,
            format!("{field} may name at most {max}"),
        ));
    }
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    let mut seen = std::collections::HashSet::new();
    for item in items {
        let Value::String(id) = item else { return Err(wrong()) };
        if id.is_empty() || id.chars().count() > 128 {
            return Err(FieldError::new(
                field,
                FieldErrorKind::InvalidValue,
                format!("{field} holds an id that is empty or longer than 128 characters"),
            ));
        }
        if seen.insert(id.clone()) {
            out.push(parse(id, field)?);
        }
    }
    Ok(out)
}

/// How a base cuts its files.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChunkingRequest {
    /// Most tokens of a chunk, 64–2048 (default 400).
    #[schema(value_type = Option<i64>, minimum = 64, maximum = 2048)]
    pub max_tokens: Option<JsonInt>,
    /// Tokens repeated from the end of a chunk at the start of the next, 0 to half of
    /// `max_tokens` (default 50).
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 1024)]
    pub overlap_tokens: Option<JsonInt>,
}

impl ChunkingRequest {
    fn limits(self) -> Result<ChunkLimits, FieldError> {
        chunk_limits(self.max_tokens.map(|n| n.0), self.overlap_tokens.map(|n| n.0))
    }
}

/// A knowledge base to create. A field it does not know is refused.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKnowledgeBaseRequest {
    /// 1–100 characters on one line, unique in the tenant.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 100,
        extensions(("x-text" = json!("name"))), example = "Employee handbook")]
    pub name: Option<Value>,
    /// What it holds, up to 2,000 characters.
    #[schema(value_type = Option<String>, max_length = 2000, extensions(("x-text" = json!("long-text"))))]
    pub description: Option<Value>,
    /// How its files are cut.
    pub chunking: Option<ChunkingRequest>,
}

/// Changes to a base: absent fields stay. New chunking applies to files ingested from then on.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateKnowledgeBaseRequest {
    /// A new name (never null).
    #[schema(value_type = String, required = false, min_length = 1, max_length = 100,
        extensions(("x-text" = json!("name"))))]
    #[serde(default)]
    pub name: Patch<Value>,
    /// A new description; null clears it.
    #[schema(value_type = Option<String>, max_length = 2000, extensions(("x-text" = json!("long-text"))))]
    #[serde(default)]
    pub description: Patch<Value>,
    /// New chunking.
    pub chunking: Option<ChunkingRequest>,
}

impl CreateKnowledgeBaseRequest {
    pub(crate) fn try_into_domain(self) -> Result<NewKnowledgeBase, ValidationErrors> {
        let mut v = Validator::new();
        let name = v.required("name", self.name, |n| base_name(&text("name", n)?));
        let description = v.optional("description", self.description.filter(|d| !d.is_null()), |d| {
            description(&text("description", d)?)
        });
        let chunking = v.check_nested(self.chunking.unwrap_or_default().limits());
        let (name, description, chunking) = v.finish((name, description, chunking))?;
        Ok(NewKnowledgeBase { name, description, chunking })
    }
}

impl UpdateKnowledgeBaseRequest {
    fn try_into_domain(self) -> Result<BaseChanges, ValidationErrors> {
        let mut v = Validator::new();
        let name = not_null(&mut v, "name", self.name, |n| base_name(&text("name", n)?));
        let description =
            nullable(&mut v, "description", self.description, |d| description(&text("description", d)?));
        let chunking = v.check_nested(self.chunking.map(ChunkingRequest::limits).transpose());
        let (name, description, chunking) = v.finish((name, description, chunking))?;
        Ok(BaseChanges { name, description, chunking })
    }
}

/// How a base cuts its files.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChunkingResponse {
    /// Most tokens of a chunk.
    pub max_tokens: u32,
    /// Tokens repeated at the start of the next chunk.
    pub overlap_tokens: u32,
}

/// A knowledge base.
#[derive(Debug, Serialize, ToSchema)]
pub struct KnowledgeBaseResponse {
    /// Its id (`kb_…`).
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it holds.
    pub description: Option<String>,
    /// How its files are cut.
    pub chunking: ChunkingResponse,
    /// Its files, of every status.
    pub file_count: u64,
    /// Bytes of their originals.
    pub bytes: u64,
    /// Creation time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// Last change.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
}

impl From<KnowledgeBase> for KnowledgeBaseResponse {
    fn from(b: KnowledgeBase) -> Self {
        Self {
            id: b.id.into_string(),
            name: b.name,
            description: b.description,
            chunking: ChunkingResponse {
                max_tokens: b.chunking.max_tokens,
                overlap_tokens: b.chunking.overlap_tokens,
            },
            file_count: b.file_count,
            bytes: b.bytes,
            created_at: b.created_at,
            updated_at: b.updated_at,
        }
    }
}

/// The tenant's knowledge bases.
#[derive(Debug, Serialize, ToSchema)]
pub struct KnowledgeBaseList {
    /// Oldest first.
    pub items: Vec<KnowledgeBaseResponse>,
}

/// The tenant's knowledge bases. Needs `knowledge:read`.
#[utoipa::path(
    get, path = "/api/v1/knowledge-bases", tag = "knowledge", operation_id = "listKnowledgeBases",
    security(("bearer" = [])),
    responses((status = 200, description = "The bases, oldest first", body = KnowledgeBaseList))
)]
pub async fn list(state: web::Data<AppState>, caller: Caller) -> Result<Reply<KnowledgeBaseList>, ApiError> {
    let items = state.knowledge.list_bases(&caller).await?;
    Ok(Reply::ok(KnowledgeBaseList { items: items.into_iter().map(Into::into).collect() }))
}

/// Create a knowledge base. Needs `knowledge:write`.
#[utoipa::path(
    post, path = "/api/v1/knowledge-bases", tag = "knowledge", operation_id = "createKnowledgeBase",
    security(("bearer" = [])),
    request_body = CreateKnowledgeBaseRequest,
    responses(
        (status = 201, description = "The base", body = KnowledgeBaseResponse),
        (status = 409, description = "`conflict`: the tenant has a base of this name"),
        (status = 422, description = "`validation_error`: a field"),
    )
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<CreateKnowledgeBaseRequest>,
) -> Result<Reply<KnowledgeBaseResponse>, ApiError> {
    let new = body.0.try_into_domain()?;
    Ok(Reply::created(state.knowledge.create_base(&caller, new).await?.into()))
}

/// One knowledge base.
#[utoipa::path(
    get, path = "/api/v1/knowledge-bases/{knowledge_base_id}", tag = "knowledge", operation_id = "getKnowledgeBase",
    security(("bearer" = [])),
    params(("knowledge_base_id" = String, Path, description = "Knowledge base id")),
    responses(
        (status = 200, description = "The base", body = KnowledgeBaseResponse),
        (status = 404, description = "`not_found`: no such base in your tenant"),
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<KnowledgeBaseResponse>, ApiError> {
    let id = base_id(path.into_inner(), "knowledge_base_id")?;
    Ok(Reply::ok(state.knowledge.get_base(&caller, &id).await?.into()))
}

/// Change a knowledge base's name, description or chunking.
#[utoipa::path(
    patch, path = "/api/v1/knowledge-bases/{knowledge_base_id}", tag = "knowledge", operation_id = "updateKnowledgeBase",
    security(("bearer" = [])),
    params(("knowledge_base_id" = String, Path, description = "Knowledge base id")),
    request_body = UpdateKnowledgeBaseRequest,
    responses(
        (status = 200, description = "The base after the change", body = KnowledgeBaseResponse),
        (status = 404, description = "`not_found`: no such base in your tenant"),
        (status = 409, description = "`conflict`: the tenant has another base of this name"),
    )
)]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<UpdateKnowledgeBaseRequest>,
) -> Result<Reply<KnowledgeBaseResponse>, ApiError> {
    let id = base_id(path.into_inner(), "knowledge_base_id")?;
    let changes = body.0.try_into_domain()?;
    Ok(Reply::ok(state.knowledge.update_base(&caller, &id, changes).await?.into()))
}

/// Delete a knowledge base with its files, chunks and vectors.
#[utoipa::path(
    delete, path = "/api/v1/knowledge-bases/{knowledge_base_id}", tag = "knowledge", operation_id = "deleteKnowledgeBase",
    security(("bearer" = [])),
    params(("knowledge_base_id" = String, Path, description = "Knowledge base id")),
    responses(
        (status = 204, description = "Deleted, with everything in it"),
        (status = 404, description = "`not_found`: no such base in your tenant"),
    )
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<actix_web::HttpResponse, ApiError> {
    let id = base_id(path.into_inner(), "knowledge_base_id")?;
    state.knowledge.delete_base(&caller, &id).await?;
    Ok(actix_web::HttpResponse::NoContent().finish())
}

/// A search of one base.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchBaseRequest {
    /// What to find: 1–4,000 characters, not blank.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 4000,
        extensions(("x-text" = json!("message"))), example = "how many days off do I get")]
    pub query: Option<Value>,
    /// Results, 1–50 (default 5).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 50)]
    pub top_k: Option<JsonInt>,
    /// Only these files of the base (up to 100 ids).
    #[schema(schema_with = file_ids_schema)]
    pub file_ids: Option<Value>,
    /// Results scoring under this are left out, 0–1 (default 0.34; 0 keeps every candidate).
    #[schema(minimum = 0, maximum = 1, example = 0.34)]
    pub min_score: Option<f64>,
}

/// A search across bases.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// What to find: 1–4,000 characters, not blank.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 4000,
        extensions(("x-text" = json!("message"))))]
    pub query: Option<Value>,
    /// The bases searched: 1–20 of your tenant's.
    #[schema(required = true, schema_with = base_ids_schema)]
    pub knowledge_base_ids: Option<Value>,
    /// Results, 1–50 (default 5).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 50)]
    pub top_k: Option<JsonInt>,
    /// Results scoring under this are left out, 0–1 (default 0.34).
    #[schema(minimum = 0, maximum = 1)]
    pub min_score: Option<f64>,
}

impl SearchRequest {
    /// The search, validated (the route's body, and the `/mcp` tool's arguments).
    pub(crate) fn try_into_domain(self) -> Result<KnowledgeQuery, ValidationErrors> {
        let b = self;
        let mut v = Validator::new();
        let text = v.required("query", b.query, query_text);
        let bases = v.required("knowledge_base_ids", b.knowledge_base_ids, |raw| {
            let bases = ids("knowledge_base_ids", raw, MAX_SEARCH_BASES, base_id)?;
            if bases.is_empty() {
                return Err(FieldError::new(
                    "knowledge_base_ids",
                    FieldErrorKind::TooShort,
                    "knowledge_base_ids must name at least one base",
                ));
            }
            Ok(bases)
        });
        let top = v.optional("top_k", b.top_k, top_k);
        let min_score = v.optional("min_score", b.min_score, super::memory::entries::min_score);
        let (text, bases, top, min_score) = v.finish((text, bases, top, min_score))?;
        Ok(KnowledgeQuery { text, bases, files: Vec::new(), top_k: top.unwrap_or(5), min_score })
    }
}

/// One chunk a search found, and why it ranks where it does.
#[derive(Debug, Serialize, ToSchema)]
pub struct KnowledgeSearchHit {
    /// The chunk (`kbc_…`).
    pub chunk_id: String,
    /// Its base.
    pub knowledge_base_id: String,
    /// Its file.
    pub file_id: String,
    /// The file's name.
    pub file_name: String,
    /// The page, for paged formats.
    pub page: Option<u32>,
    /// The headings it sits under, outermost first.
    pub headings: Vec<String>,
    /// Its text.
    pub text: String,
    /// 0–1, higher is better: the same scale as memory search.
    pub score: f64,
    /// Its place among the nearest vectors (from 1), if the vector search found it.
    pub vector_rank: Option<usize>,
    /// Its place in the full-text ranking (from 1), if the word search found it.
    pub lexical_rank: Option<usize>,
}

impl From<KnowledgeHit> for KnowledgeSearchHit {
    fn from(h: KnowledgeHit) -> Self {
        Self {
            chunk_id: h.chunk.id.into_string(),
            knowledge_base_id: h.chunk.knowledge_base_id.into_string(),
            file_id: h.chunk.file_id.into_string(),
            file_name: h.file_name,
            page: h.chunk.page,
            headings: h.chunk.headings,
            text: h.chunk.text,
            score: h.ranking.score,
            vector_rank: h.ranking.candidate.vector_rank,
            lexical_rank: h.ranking.candidate.lexical_rank,
        }
    }
}

/// What a search found.
#[derive(Debug, Serialize, ToSchema)]
pub struct KnowledgeSearchResponse {
    /// Best first.
    pub results: Vec<KnowledgeSearchHit>,
}

fn top_k(n: JsonInt) -> Result<usize, FieldError> {
    match usize::try_from(n.0) {
        Ok(k) if (1..=50).contains(&k) => Ok(k),
        _ => Err(FieldError::new("top_k", FieldErrorKind::OutOfRange, "top_k must be from 1 to 50")),
    }
}

fn query_text(raw: Value) -> Result<String, FieldError> {
    let text = content(&text("query", raw)?, "query")?;
    if text.chars().count() > MAX_QUERY_CHARS {
        return Err(FieldError::new(
            "query",
            FieldErrorKind::TooLong,
            format!("query must be at most {MAX_QUERY_CHARS} characters"),
        ));
    }
    Ok(text)
}

/// Search one knowledge base: its chunks nearest in meaning and best matching in words,
/// scored as memory search is. Needs `knowledge:read`.
#[utoipa::path(
    post, path = "/api/v1/knowledge-bases/{knowledge_base_id}/search", tag = "knowledge", operation_id = "searchKnowledgeBase",
    security(("bearer" = [])),
    params(("knowledge_base_id" = String, Path, description = "Knowledge base id")),
    request_body = SearchBaseRequest,
    responses(
        (status = 200, description = "The best chunks, best first", body = KnowledgeSearchResponse),
        (status = 404, description = "`not_found`: no such base in your tenant"),
        (status = 502, description = "`upstream_error`: the embedding provider failed"),
    )
)]
pub async fn search_base(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<SearchBaseRequest>,
) -> Result<Reply<KnowledgeSearchResponse>, ApiError> {
    let base = base_id(path.into_inner(), "knowledge_base_id")?;
    let b = body.0;
    let mut v = Validator::new();
    let text = v.required("query", b.query, query_text);
    let top = v.optional("top_k", b.top_k, top_k);
    let files = v.optional("file_ids", b.file_ids, |f| ids("file_ids", f, MAX_SEARCH_FILES, file_id));
    let min_score = v.optional("min_score", b.min_score, super::memory::entries::min_score);
    let (text, top, files, min_score) = v.finish((text, top, files, min_score))?;
    let query = KnowledgeQuery {
        text,
        bases: vec![base],
        files: files.unwrap_or_default(),
        top_k: top.unwrap_or(5),
        min_score,
    };
    let hits = state.knowledge.search(&caller, query).await?;
    Ok(Reply::ok(KnowledgeSearchResponse { results: hits.into_iter().map(Into::into).collect() }))
}

/// Search several knowledge bases at once. Needs `knowledge:read`.
#[utoipa::path(
    post, path = "/api/v1/knowledge/search", tag = "knowledge", operation_id = "searchKnowledge",
    security(("bearer" = [])),
    request_body = SearchRequest,
    responses(
        (status = 200, description = "The best chunks of all the bases, best first", body = KnowledgeSearchResponse),
        (status = 404, description = "`not_found`: a base is not in your tenant"),
        (status = 502, description = "`upstream_error`: the embedding provider failed"),
    )
)]
pub async fn search(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<SearchRequest>,
) -> Result<Reply<KnowledgeSearchResponse>, ApiError> {
    let query = body.0.try_into_domain()?;
    let hits = state.knowledge.search(&caller, query).await?;
    Ok(Reply::ok(KnowledgeSearchResponse { results: hits.into_iter().map(Into::into).collect() }))
}

//! Variant B: a tenant's keyed entries under `/memory-stores/entries`, upserted, searched by
//! page (counting access), read and deleted.

use agentry_domain::memory::ranking::DEFAULT_MIN_SCORE;

use super::*;

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
    /// Results scoring under this are left out, 0–1 (default 0.34; 0 returns every candidate).
    #[schema(minimum = 0, maximum = 1, example = 0.34)]
    pub min_score: Option<f64>,
    /// Contradicted (invalidated) entries too; default false: only what holds now.
    pub include_invalid: Option<bool>,
    /// Only what held at this instant (RFC 3339), whether or not it still holds.
    #[schema(value_type = Option<String>, format = DateTime, example = "2026-11-01T00:00:00Z")]
    pub as_of: Option<String>,
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
    let min_score = v.optional("min_score", b.min_score, entries::min_score);
    let filter =
        search_filter(&mut v, None, b.memory_type, (b.tags, b.metadata), (b.include_invalid, b.as_of));
    let (text, limit, skip, min_score, filter) = v.finish((text, limit, skip, min_score, filter))?;
    let (limit, skip) = (limit.unwrap_or(20), skip.unwrap_or(0));
    let query = SearchQuery {
        text,
        filter,
        skip,
        limit,
        count_access: true,
        mode: SearchMode::Hybrid,
        min_score: min_score.unwrap_or(DEFAULT_MIN_SCORE),
    };
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

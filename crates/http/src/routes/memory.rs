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
use agentry_domain::pagination::Page;
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

mod documents;
pub(crate) mod entries;
mod stores;

pub use documents::*;
pub use entries::*;
pub use stores::*;

/// Registers the routes of this module under the current scope. Static segments come before
/// `{memory_id}`, so `search` or `documents` is never taken for an id.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/memory").route(web::get().to(list)).route(web::post().to(add)))
        .service(web::resource("/memory/search").route(web::post().to(search)))
        .service(web::resource("/memory/consolidate").route(web::post().to(consolidate)))
        .service(web::resource("/memory/documents").route(web::post().to(add_documents)))
        .service(web::resource("/memory/documents/{document_id}").route(web::delete().to(delete_document)))
        .service(web::resource("/memory/{memory_id}/history").route(web::get().to(history)))
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

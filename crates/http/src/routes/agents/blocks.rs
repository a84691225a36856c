//! `/agents/{agent_id}/memory-blocks`: an agent's core memory blocks (always in its context),
//! set whole by its owners, and each block's versions.

use actix_web::{HttpResponse, web};
use agentry_domain::agents::{BlockInput, BlockVersion, MemoryBlock};
use agentry_domain::validation::{FieldError, FieldErrorKind, ValidationErrors};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::agent_id;
use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, JsonInt};
use crate::reply::{Reply, timestamp};

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/agents/{agent_id}/memory-blocks").route(web::get().to(list)))
        .service(
            web::resource("/agents/{agent_id}/memory-blocks/{label}")
                .route(web::put().to(put))
                .route(web::delete().to(delete)),
        )
        .service(
            web::resource("/agents/{agent_id}/memory-blocks/{label}/history").route(web::get().to(history)),
        );
}

/// A block as its owner sets it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutBlockRequest {
    /// Its text, up to its limit; tabs and line breaks allowed.
    #[schema(required = true, value_type = String, extensions(("x-text" = json!("long-text"))), example = "Ada, a chemist in Porto.")]
    pub value: Option<String>,
    /// What it is for, as the agent is told; up to 500 characters.
    #[schema(max_length = 500, extensions(("x-text" = json!("long-text"))))]
    pub description: Option<String>,
    /// Most characters of its value, 1–20,000 (default 2,000).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 20000)]
    pub limit: Option<JsonInt>,
}

impl PutBlockRequest {
    /// The block's input; its limits are checked by the service.
    ///
    /// # Errors
    /// No value, or a limit that is no count of characters.
    pub(crate) fn try_into_domain(self) -> Result<BlockInput, ValidationErrors> {
        let value = self.value.ok_or_else(|| {
            ValidationErrors(vec![FieldError::new(
                "value",
                FieldErrorKind::MissingRequiredField,
                "value is required",
            )])
        })?;
        // Past what a u32 holds is out of range as 0 is: the service's check names it.
        let limit = self.limit.map(|n| u32::try_from(n.0).unwrap_or(0));
        Ok(BlockInput { value, description: self.description, limit })
    }
}

/// A core memory block.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryBlockResponse {
    /// Its label.
    pub label: String,
    /// Its text.
    pub value: String,
    /// What it is for, or null.
    pub description: Option<String>,
    /// Most characters of its value.
    pub limit: u32,
    /// Characters it holds.
    pub chars: usize,
    /// Its version, from 1.
    pub version: u32,
    /// When it was first set.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// Its last change.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
}

impl From<MemoryBlock> for MemoryBlockResponse {
    fn from(b: MemoryBlock) -> Self {
        Self {
            chars: b.value.chars().count(),
            label: b.label,
            value: b.value,
            description: b.description,
            limit: b.limit,
            version: b.version,
            created_at: b.created_at,
            updated_at: b.updated_at,
        }
    }
}

/// An agent's blocks.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryBlockList {
    /// By label.
    pub blocks: Vec<MemoryBlockResponse>,
}

/// One version of a block.
#[derive(Debug, Serialize, ToSchema)]
pub struct BlockVersionResponse {
    /// From 1, in order.
    pub version: u32,
    /// The text after the change (empty for a deletion).
    pub value: String,
    /// `set`, `appended`, `replaced` or `deleted`.
    #[schema(example = "appended")]
    pub change: &'static str,
    /// `api` (a user or key) or `agent` (the `core_memory` tool).
    pub actor: &'static str,
    /// When.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub at: DateTime<Utc>,
}

impl From<BlockVersion> for BlockVersionResponse {
    fn from(v: BlockVersion) -> Self {
        Self {
            version: v.version,
            value: v.value,
            change: v.change.as_str(),
            actor: v.actor.as_str(),
            at: v.at,
        }
    }
}

/// List an agent's core memory blocks.
#[utoipa::path(
    get, path = "/api/v1/agents/{agent_id}/memory-blocks", tag = "agents", operation_id = "listMemoryBlocks",
    security(("bearer" = [])),
    params(("agent_id" = String, Path, description = "Agent id")),
    responses(
        (status = 200, description = "The agent's blocks", body = MemoryBlockList),
        (status = 404, description = "`not_found`: no such agent in your tenant"),
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<MemoryBlockList>, ApiError> {
    let blocks = state.blocks.list(&caller, &agent_id(path.into_inner())?).await?;
    Ok(Reply::ok(MemoryBlockList { blocks: blocks.into_iter().map(Into::into).collect() }))
}

/// Set a core memory block whole, creating it (at most 20 per agent); every change is a
/// version.
#[utoipa::path(
    put, path = "/api/v1/agents/{agent_id}/memory-blocks/{label}", tag = "agents", operation_id = "putMemoryBlock",
    security(("bearer" = [])),
    params(
        ("agent_id" = String, Path, description = "Agent id"),
        ("label" = String, Path, description = "1–64 lowercase letters, digits or _", pattern = "^[a-z0-9_]{1,64}$"),
    ),
    request_body = PutBlockRequest,
    responses(
        (status = 200, description = "The changed block", body = MemoryBlockResponse),
        (status = 201, description = "The new block", body = MemoryBlockResponse),
        (status = 404, description = "`not_found`: no such agent in your tenant"),
        (status = 409, description = "`conflict`: the block kept changing meanwhile; try again"),
        (status = 422, description = "`validation_error`: a bad label, a value past the limit, more than 20 blocks"),
    )
)]
pub async fn put(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    body: JsonBody<PutBlockRequest>,
) -> Result<Reply<MemoryBlockResponse>, ApiError> {
    let (agent, label) = path.into_inner();
    let agent = agent_id(agent)?;
    let input = body.0.try_into_domain()?;
    let (block, created) = state.blocks.put(&caller, &agent, &label, input).await?;
    Ok(if created { Reply::created(block.into()) } else { Reply::ok(block.into()) })
}

/// Delete a core memory block (its history stays).
#[utoipa::path(
    delete, path = "/api/v1/agents/{agent_id}/memory-blocks/{label}", tag = "agents", operation_id = "deleteMemoryBlock",
    security(("bearer" = [])),
    params(("agent_id" = String, Path, description = "Agent id"), ("label" = String, Path, description = "The block's label")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not_found`: no such agent or block"),
        (status = 409, description = "`conflict`: the block kept changing meanwhile; try again"),
    )
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (agent, label) = path.into_inner();
    state.blocks.delete(&caller, &agent_id(agent)?, &label).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// A core memory block's versions, oldest first (a deleted block's too).
#[utoipa::path(
    get, path = "/api/v1/agents/{agent_id}/memory-blocks/{label}/history", tag = "agents",
    operation_id = "getMemoryBlockHistory",
    security(("bearer" = [])),
    params(("agent_id" = String, Path, description = "Agent id"), ("label" = String, Path, description = "The block's label")),
    responses(
        (status = 200, description = "Its versions", body = [BlockVersionResponse]),
        (status = 404, description = "`not_found`: no such agent, or no version of the block"),
    )
)]
pub async fn history(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<Reply<Vec<BlockVersionResponse>>, ApiError> {
    let (agent, label) = path.into_inner();
    let versions = state.blocks.history(&caller, &agent_id(agent)?, &label).await?;
    Ok(Reply::ok(versions.into_iter().map(Into::into).collect()))
}

//! `/auth/api-keys`: self-service API keys, managed with a user's access token.

use actix_web::web;
use agentry_domain::identity::ApiKey;
use agentry_domain::ids::ApiKeyId;
use chrono::{DateTime, Utc};
use secrecy::ExposeSecret as _;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::reply::{Reply, timestamp};

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/auth/api-keys").route(web::post().to(create)).route(web::get().to(list)))
        .service(web::resource("/auth/api-keys/{key_id}").route(web::delete().to(revoke)));
}

/// A new key.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateApiKeyRequest {
    /// 1 to 100 characters.
    #[schema(required = true, value_type = String, example = "ci pipeline")]
    pub name: Option<String>,
    /// At least one of `agents:read`, `agents:write`, `memory:read`, `memory:write`,
    /// `workflows:read`, `workflows:write`, `workflows:execute`, `webhooks:read`,
    /// `webhooks:write`, `billing:read`.
    #[schema(required = true, value_type = Vec<String>, example = json!(["agents:read", "workflows:execute"]))]
    pub scopes: Option<Vec<String>>,
    /// When the key stops working; must be in the future. Optional.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// A key as created: the only time the full `key` is shown.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedApiKeyResponse {
    /// Key id.
    pub id: String,
    /// Name.
    pub name: String,
    /// The full key: `agk_` and 40 characters. Store it now; it is never shown again.
    pub key: String,
    /// Scopes.
    pub scopes: Vec<&'static str>,
    /// Creation time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// Expiry, or null.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// A key as listed: its prefix instead of the key.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyItem {
    /// Key id.
    pub id: String,
    /// Name.
    pub name: String,
    /// The first 12 characters of the key.
    pub key_prefix: String,
    /// Scopes.
    pub scopes: Vec<&'static str>,
    /// Creation time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// Expiry, or null.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<DateTime<Utc>>,
    /// Last use (to the minute), or null.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_used_at: Option<DateTime<Utc>>,
}

impl From<ApiKey> for ApiKeyItem {
    fn from(k: ApiKey) -> Self {
        Self {
            id: k.id.into_string(),
            name: k.name.as_str().to_owned(),
            key_prefix: k.key_prefix,
            scopes: k.scopes.iter().map(|s| s.as_str()).collect(),
            created_at: k.created_at,
            expires_at: k.expires_at,
            last_used_at: k.last_used_at,
        }
    }
}

/// The caller's keys.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyList {
    /// Newest first.
    pub items: Vec<ApiKeyItem>,
}

/// The answer to a revocation.
#[derive(Debug, Serialize, ToSchema)]
pub struct SuccessMessage {
    /// Always true.
    pub success: bool,
    /// What happened.
    pub message: String,
}

/// Create an API key in the caller's tenant (`tenant_id` query to choose another of yours).
#[utoipa::path(
    post, path = "/api/v1/auth/api-keys", tag = "api-keys",
    security(("bearer" = [])),
    params(("tenant_id" = Option<String>, Query, description = "Tenant the key acts in; default: yours")),
    request_body = CreateApiKeyRequest,
    responses(
        (status = 201, body = CreatedApiKeyResponse),
        (status = 403, description = "Called with an API key, or not a member of the tenant"),
        (status = 422, description = "Bad name, scope or expiry"),
    )
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<CreateApiKeyRequest>,
) -> Result<Reply<CreatedApiKeyResponse>, ApiError> {
    let r = body.0;
    let created = state.access.create_key(&caller, r.name, r.scopes, r.expires_at).await?;
    let key = created.key;
    Ok(Reply::created(CreatedApiKeyResponse {
        id: key.id.into_string(),
        name: key.name.as_str().to_owned(),
        key: created.secret.expose_secret().to_owned(),
        scopes: key.scopes.iter().map(|s| s.as_str()).collect(),
        created_at: key.created_at,
        expires_at: key.expires_at,
    }))
}

/// List the caller's keys in the tenant.
#[utoipa::path(
    get, path = "/api/v1/auth/api-keys", tag = "api-keys",
    security(("bearer" = [])),
    params(("tenant_id" = Option<String>, Query, description = "Tenant; default: yours")),
    responses((status = 200, body = ApiKeyList), (status = 403, description = "Called with an API key"))
)]
pub async fn list(state: web::Data<AppState>, caller: Caller) -> Result<Reply<ApiKeyList>, ApiError> {
    let keys = state.access.list_keys(&caller).await?;
    Ok(Reply::ok(ApiKeyList { items: keys.into_iter().map(ApiKeyItem::from).collect() }))
}

/// Revoke one of the caller's keys. It stops working at once.
#[utoipa::path(
    delete, path = "/api/v1/auth/api-keys/{key_id}", tag = "api-keys",
    security(("bearer" = [])),
    params(("key_id" = String, Path, description = "Key id")),
    responses(
        (status = 200, body = SuccessMessage),
        (status = 404, description = "No such key of yours"),
        (status = 403, description = "Called with an API key"),
    )
)]
pub async fn revoke(
    state: web::Data<AppState>,
    caller: Caller,
    key_id: web::Path<String>,
) -> Result<Reply<SuccessMessage>, ApiError> {
    let key_id = ApiKeyId::from_string(key_id.into_inner());
    state.access.revoke_key(&caller, &key_id).await?;
    Ok(Reply::ok(SuccessMessage { success: true, message: format!("API key {key_id} revoked") }))
}

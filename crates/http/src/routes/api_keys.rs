//! `/auth/api-keys`: self-service API keys, managed with a user's access token.

use actix_web::web;
use agentry_domain::identity::{ApiKey, CreatedApiKey, NewApiKey};
use agentry_domain::ids::ApiKeyId;
use agentry_domain::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator, check_path_id};
use chrono::{DateTime, Utc};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::reply::{Reply, expose, timestamp};

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/auth/api-keys").route(web::post().to(create)).route(web::get().to(list)))
        .service(web::resource("/auth/api-keys/{key_id}").route(web::delete().to(revoke)));
}

/// A new key.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateApiKeyRequest {
    /// 1 to 100 characters.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 100,
        extensions(("x-text" = json!("name"))), example = "ci pipeline")]
    pub name: Option<String>,
    /// At least one of `agents:read`, `agents:write`, `memory:read`, `memory:write`,
    /// `knowledge:read`, `knowledge:write`, `workflows:read`, `workflows:write`,
    /// `workflows:execute`, `webhooks:read`, `webhooks:write`, `billing:read`, `members:read`,
    /// `members:write`.
    #[schema(required = true, schema_with = crate::schemas::scopes, example = json!(["agents:read", "workflows:execute"]))]
    pub scopes: Option<Vec<String>>,
    /// When the key stops working (RFC 3339); must be in the future. Optional.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<String>,
}

impl CreateApiKeyRequest {
    /// The new key, its name, scopes and expiry checked.
    ///
    /// # Errors
    /// [`ValidationErrors`] naming each refused field.
    pub(crate) fn try_into_domain(self) -> Result<NewApiKey, ValidationErrors> {
        let mut v = Validator::new();
        let expires_at = v.optional("expires_at", self.expires_at, |raw| {
            DateTime::parse_from_rfc3339(&raw).map(|t| t.with_timezone(&Utc)).map_err(|_| {
                FieldError::new(
                    "expires_at",
                    FieldErrorKind::InvalidFormat,
                    "expires_at must be an RFC 3339 time such as 2027-01-01T00:00:00Z",
                )
            })
        });
        let expires_at = v.finish(expires_at);
        let parsed = expires_at.as_ref().ok().copied().flatten();
        // Every refused field at once: the key's own rules and the expiry's format.
        match (NewApiKey::new(self.name, self.scopes, parsed), expires_at) {
            (Ok(key), Ok(_)) => Ok(key),
            (Ok(_), Err(e)) => Err(e),
            (Err(e), Ok(_)) => Err(e),
            (Err(mut e), Err(more)) => {
                e.0.extend(more.0);
                Err(e)
            }
        }
    }
}

/// A key as created: the only time the full `key` is shown.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedApiKeyResponse {
    /// Key id.
    pub id: String,
    /// Name.
    pub name: String,
    /// The full key: `agk_` and 40 characters. Store it now; it is never shown again.
    #[serde(serialize_with = "expose")]
    #[schema(value_type = String)]
    pub key: SecretString,
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

impl From<CreatedApiKey> for CreatedApiKeyResponse {
    fn from(created: CreatedApiKey) -> Self {
        let key = created.key;
        Self {
            id: key.id.into_string(),
            name: key.name.as_str().to_owned(),
            key: created.secret,
            scopes: key.scopes.iter().map(|s| s.as_str()).collect(),
            created_at: key.created_at,
            expires_at: key.expires_at,
        }
    }
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
    post, path = "/api/v1/auth/api-keys", tag = "api-keys", operation_id = "createApiKey",
    security(("bearer" = [])),
    request_body = CreateApiKeyRequest,
    responses(
        (status = 201, description = "The key, shown in full this once", body = CreatedApiKeyResponse),
        (status = 403, description = "`forbidden`: called with an API key, or not a member of the tenant"),
    )
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<CreateApiKeyRequest>,
) -> Result<Reply<CreatedApiKeyResponse>, ApiError> {
    let request = body.0.try_into_domain()?;
    let created = state.access.create_key(&caller, request).await?;
    Ok(Reply::created(created.into()))
}

/// List the caller's keys in the tenant.
#[utoipa::path(
    get, path = "/api/v1/auth/api-keys", tag = "api-keys", operation_id = "listApiKeys",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Your keys in the tenant", body = ApiKeyList),
        (status = 403, description = "`forbidden`: called with an API key, or not a member of the tenant"),
    )
)]
pub async fn list(state: web::Data<AppState>, caller: Caller) -> Result<Reply<ApiKeyList>, ApiError> {
    let keys = state.access.list_keys(&caller).await?;
    Ok(Reply::ok(ApiKeyList { items: keys.into_iter().map(ApiKeyItem::from).collect() }))
}

/// Revoke one of the caller's keys. It stops working at once.
#[utoipa::path(
    delete, path = "/api/v1/auth/api-keys/{key_id}", tag = "api-keys", operation_id = "revokeApiKey",
    security(("bearer" = [])),
    params(("key_id" = String, Path, description = "Key id")),
    responses(
        (status = 200, description = "Revoked", body = SuccessMessage),
        (status = 403, description = "`forbidden`: called with an API key, or not a member of the tenant"),
        (status = 404, description = "`not_found`: no such key of yours"),
    )
)]
pub async fn revoke(
    state: web::Data<AppState>,
    caller: Caller,
    key_id: web::Path<String>,
) -> Result<Reply<SuccessMessage>, ApiError> {
    check_path_id(&key_id, "key_id")?;
    let key_id = ApiKeyId::from_string(key_id.into_inner());
    state.access.revoke_key(&caller, &key_id).await?;
    Ok(Reply::ok(SuccessMessage { success: true, message: format!("API key {key_id} revoked") }))
}

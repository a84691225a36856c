//! API keys in the console: the caller's keys in the tenant (name, scopes, created, last used,
//! expiry), a new one (the key shown on the answer, once), and revocation.

use actix_web::{HttpResponse, web};
use agentry_domain::ids::ApiKeyId;
use agentry_domain::tenancy::Scope;
use agentry_domain::validation::check_path_id;
use minijinja::{Value, context};
use serde_json::json;

use super::render::{page, redirect};
use super::time::utc_from_local;
use super::{Console, Form};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::from_json_value;
use crate::routes::api_keys::{ApiKeyItem, CreateApiKeyRequest, CreatedApiKeyResponse};

/// Routes under `/console/{tenant_id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/keys", web::get().to(list))
        .route("/keys", web::post().to(create))
        .route("/keys/{key_id}/revoke", web::post().to(revoke));
}

/// Every scope a key may carry, for the form's checkboxes.
fn scopes() -> Vec<&'static str> {
    Scope::all().map(Scope::as_str).collect()
}

async fn list(state: web::Data<AppState>, c: Console) -> Result<HttpResponse, ApiError> {
    let keys: Vec<ApiKeyItem> = state.access.list_keys(&c).await?.into_iter().map(Into::into).collect();
    page(&c, "keys", "API keys", "keys.html", context! { keys, scopes => scopes() })
}

/// A new key; the answer shows it, the one time it is shown.
async fn create(state: web::Data<AppState>, c: Console, form: Form) -> Result<HttpResponse, ApiError> {
    let request: CreateApiKeyRequest = from_json_value(json!({
        "name": form.get("name"),
        "scopes": form.all("scopes"),
        "expires_at": utc_from_local(form.get("expires_at")),
    }))?;
    let created = CreatedApiKeyResponse::from(state.access.create_key(&c, request.try_into_domain()?).await?);
    page(
        &c,
        "keys",
        "API key created",
        "key_created.html",
        context! { key => Value::from_serialize(&created) },
    )
}

async fn revoke(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let raw = path.into_inner().1;
    check_path_id(&raw, "key_id")?;
    state.access.revoke_key(&c, &ApiKeyId::from_string(raw)).await?;
    Ok(redirect(format!("{}/keys", c.base())))
}

//! `/webhooks`: outbound webhook subscriptions, their test sends, delivery log, retries and
//! secret rotation (spec "Webhook subscriptions", Variant A; PRODUCT.md §8).
//!
//! The spec puts trigger calls (`/webhooks/trigger/{path}`) and integration receivers
//! (`/webhooks/integrations/{kind}`) beside `/webhooks/{webhook_id}`: routes with static
//! segments are registered before this module's, so they are never taken for a subscription id.

use actix_web::web;
use agentry_domain::events::EventType;
use agentry_domain::ids::{DeliveryId, WebhookId};
use agentry_domain::memory::model as memory_model;
use agentry_domain::patch::Patch;
use agentry_domain::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator, check_path_id};
use agentry_domain::webhooks::EventSelector;
use agentry_domain::webhooks::model::{check_description, check_events, check_secret};
use agentry_domain::webhooks::{NewSubscription, Subscription, SubscriptionPatch, SubscriptionStatus};
use chrono::{DateTime, Utc};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::reply::{Reply, timestamp};

mod deliveries;
pub use deliveries::*;

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/webhooks").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            web::resource("/webhooks/{webhook_id}")
                .route(web::get().to(get))
                .route(web::patch().to(update))
                .route(web::delete().to(delete)),
        )
        .service(web::resource("/webhooks/{webhook_id}/test").route(web::post().to(test)))
        .service(web::resource("/webhooks/{webhook_id}/secret").route(web::get().to(secret)))
        .service(web::resource("/webhooks/{webhook_id}/rotate-secret").route(web::post().to(rotate_secret)))
        .service(web::resource("/webhooks/{webhook_id}/recover").route(web::post().to(recover)))
        .service(web::resource("/webhooks/{webhook_id}/stats").route(web::get().to(stats)))
        .service(web::resource("/webhooks/{webhook_id}/deliveries").route(web::get().to(deliveries)))
        .service(web::resource("/webhooks/{webhook_id}/deliveries/retry").route(web::post().to(retry_all)))
        .service(
            web::resource("/webhooks/{webhook_id}/deliveries/{delivery_id}/attempts")
                .route(web::get().to(attempts)),
        )
        .service(
            web::resource("/webhooks/{webhook_id}/deliveries/{delivery_id}/retry")
                .route(web::post().to(retry)),
        );
}

/// A new subscription.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateWebhookRequest {
    /// Where to send events: `https://…` (`http://` only when the service allows insecure
    /// targets). Private, loopback and link-local targets are refused.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 2048, pattern = r"^[^\x00-\x1F\x7F-\x9F]*$",
        example = "https://hooks.example.com/agentry")]
    pub url: Option<String>,
    /// Event types, the aliases `agent.message` and `workflow.completed`, or `*` for all.
    #[schema(required = true, schema_with = crate::schemas::webhook_events, example = json!(["agent.created", "agent.message"]))]
    pub events: Option<Vec<String>>,
    /// Your own signing secret (16–256 characters); absent: `whsec_` + base64 of 32 random bytes.
    #[schema(value_type = Option<String>, min_length = 16, max_length = 256, pattern = r"^[^\s\x00-\x1F\x7F-\x9F]*$")]
    pub secret: Option<SecretString>,
    /// What the subscription is for (at most 1,000 characters).
    #[schema(value_type = Option<String>, max_length = 1000, pattern = r"^[^\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F]*$")]
    pub description: Option<String>,
    /// Free-form object.
    #[schema(schema_with = crate::schemas::metadata_optional)]
    pub metadata: Option<Value>,
}

fn metadata(
    v: &mut Validator,
    raw: Option<Value>,
) -> agentry_domain::validation::Checked<Option<Map<String, Value>>> {
    v.optional("metadata", raw, |m| memory_model::metadata(m, "metadata"))
}

impl CreateWebhookRequest {
    /// The new subscription, its fields checked (the URL's target is the service's check).
    ///
    /// # Errors
    /// [`ValidationErrors`] naming each refused field.
    pub(crate) fn try_into_domain(self) -> Result<NewSubscription, ValidationErrors> {
        let mut v = Validator::new();
        // Its form and target are the service's checks (WebhookService::check_url).
        let url = v.required("url", self.url, Ok);
        let events = v.required("events", self.events, |e| check_events(&e));
        let secret = v.optional("secret", self.secret, |s| {
            use secrecy::ExposeSecret as _;
            check_secret(s.expose_secret()).map(SecretString::from)
        });
        let description = v.optional("description", self.description, |d| check_description(&d));
        let metadata = metadata(&mut v, self.metadata);
        let (url, events, secret, description, metadata) =
            v.finish((url, events, secret, description, metadata))?;
        Ok(NewSubscription { url, events, secret, description, metadata: metadata.unwrap_or_default() })
    }
}

/// A change of a subscription: every field optional.
#[derive(Debug, Deserialize, ToSchema)]
pub struct UpdateWebhookRequest {
    /// A new URL (the same rules as at creation).
    #[schema(value_type = Option<String>, min_length = 1, max_length = 2048, pattern = r"^[^\x00-\x1F\x7F-\x9F]*$")]
    pub url: Option<String>,
    /// New event names.
    #[schema(schema_with = crate::schemas::webhook_events_optional)]
    pub events: Option<Vec<String>>,
    /// A new description; null removes it.
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 1000, pattern = r"^[^\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F]*$")]
    pub description: Patch<String>,
    /// New metadata.
    #[schema(schema_with = crate::schemas::metadata_optional)]
    pub metadata: Option<Value>,
    /// `active` resumes a `failed` or `disabled` subscription; `disabled` pauses it.
    #[schema(schema_with = crate::schemas::webhook_status_patch)]
    pub status: Option<String>,
}

impl UpdateWebhookRequest {
    /// The change, its fields checked.
    ///
    /// # Errors
    /// [`ValidationErrors`] naming each refused field.
    pub(crate) fn try_into_domain(self) -> Result<SubscriptionPatch, ValidationErrors> {
        let mut v = Validator::new();
        let url = v.optional("url", self.url, Ok);
        let events = v.optional("events", self.events, |e| check_events(&e));
        let description = match self.description {
            Patch::Value(d) => v.check("description", check_description(&d).map(Patch::Value)),
            Patch::Null => v.check("description", Ok(Patch::Null)),
            Patch::Absent => v.check("description", Ok(Patch::Absent)),
        };
        let metadata = metadata(&mut v, self.metadata);
        let status = v.optional("status", self.status, |s| match SubscriptionStatus::parse(&s) {
            Some(s @ (SubscriptionStatus::Active | SubscriptionStatus::Disabled)) => Ok(s),
            _ => Err(FieldError::new(
                "status",
                FieldErrorKind::InvalidValue,
                "status may be set to active or disabled",
            )),
        });
        let (url, events, description, metadata, status) =
            v.finish((url, events, description, metadata, status))?;
        Ok(SubscriptionPatch { url, events, description, metadata, status })
    }
}

/// A subscription (spec "Webhook subscription", plus `description`, `metadata`, `updated_at`).
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookResponse {
    /// Subscription id.
    pub id: String,
    /// Where events are sent.
    pub url: String,
    /// The names it listens to.
    pub events: Vec<String>,
    /// `active`, `failed` (a delivery failed every attempt) or `disabled` (the receiver answered
    /// 410, or you paused it).
    pub status: &'static str,
    /// The signing secret: only in the answers of creation, rotation and
    /// `GET /webhooks/{id}/secret`, never in lists or reads (whoever holds it can sign).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    /// Until when the secret before the last rotation still signs alongside, if it does.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    /// What it is for.
    pub description: Option<String>,
    /// Free-form object.
    pub metadata: Map<String, Value>,
    /// Creation time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// Last change.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
}

/// A subscription as answered; `signing_secret` only where it is shown (creation, rotation).
pub(crate) fn response(state: &AppState, s: Subscription, signing_secret: Option<String>) -> WebhookResponse {
    let now = state.clock.now();
    let d = s.details();
    WebhookResponse {
        id: s.id().to_string(),
        url: d.url.clone(),
        events: d.events.names(),
        status: s.status().as_str(),
        signing_secret,
        previous_secret_expires_at: s.previous_secret_at(now).map(|p| p.until),
        description: d.description.clone(),
        metadata: d.metadata.clone(),
        created_at: s.created_at(),
        updated_at: s.updated_at(),
    }
}

/// The tenant's subscriptions.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookList {
    /// Oldest first.
    pub items: Vec<WebhookResponse>,
}

/// A subscription id from a path.
pub(crate) fn webhook_id(raw: String) -> Result<WebhookId, ApiError> {
    check_path_id(&raw, "webhook_id")?;
    Ok(WebhookId::from_string(raw))
}

/// A delivery id from a path.
pub(crate) fn delivery_id(raw: String) -> Result<DeliveryId, ApiError> {
    check_path_id(&raw, "delivery_id")?;
    Ok(DeliveryId::from_string(raw))
}

/// List the tenant's webhook subscriptions.
#[utoipa::path(
    get, path = "/api/v1/webhooks", tag = "webhooks", operation_id = "listWebhooks",
    security(("bearer" = [])),
    responses((status = 200, description = "The subscriptions", body = WebhookList))
)]
pub async fn list(state: web::Data<AppState>, caller: Caller) -> Result<Reply<WebhookList>, ApiError> {
    let subscriptions = state.webhooks.list(&caller).await?;
    let items = subscriptions.into_iter().map(|s| response(&state, s, None)).collect();
    Ok(Reply::ok(WebhookList { items }))
}

/// Subscribe a URL to events. The answer carries the signing secret.
#[utoipa::path(
    post, path = "/api/v1/webhooks", tag = "webhooks", operation_id = "createWebhook",
    security(("bearer" = [])),
    request_body = CreateWebhookRequest,
    responses((status = 201, description = "The subscription, with its `signing_secret`", body = WebhookResponse))
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<CreateWebhookRequest>,
) -> Result<Reply<WebhookResponse>, ApiError> {
    let new = body.0.try_into_domain()?;
    let (subscription, secret) = state.webhooks.create(&caller, new).await?;
    Ok(Reply::created(response(&state, subscription, Some(secret))))
}

/// One subscription.
#[utoipa::path(
    get, path = "/api/v1/webhooks/{webhook_id}", tag = "webhooks", operation_id = "getWebhook",
    security(("bearer" = [])),
    params(("webhook_id" = String, Path, description = "Subscription id")),
    responses((status = 200, description = "The subscription (without its secret)", body = WebhookResponse))
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<WebhookResponse>, ApiError> {
    let subscription = state.webhooks.get(&caller, &webhook_id(path.into_inner())?).await?;
    Ok(Reply::ok(response(&state, subscription, None)))
}

/// A subscription with its signing secret. Needs `webhooks:write`: whoever holds the secret can
/// sign deliveries, so a reader may not see it.
#[utoipa::path(
    get, path = "/api/v1/webhooks/{webhook_id}/secret", tag = "webhooks", operation_id = "getWebhookSecret",
    security(("bearer" = [])),
    params(("webhook_id" = String, Path, description = "Subscription id")),
    responses((status = 200, description = "The subscription with its `signing_secret`", body = WebhookResponse))
)]
pub async fn secret(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<WebhookResponse>, ApiError> {
    let (subscription, secret) = state.webhooks.secret(&caller, &webhook_id(path.into_inner())?).await?;
    Ok(Reply::ok(response(&state, subscription, Some(secret))))
}

/// Change a subscription; `status: active` resumes a failed or disabled one.
#[utoipa::path(
    patch, path = "/api/v1/webhooks/{webhook_id}", tag = "webhooks", operation_id = "updateWebhook",
    security(("bearer" = [])),
    params(("webhook_id" = String, Path, description = "Subscription id")),
    request_body = UpdateWebhookRequest,
    responses((status = 200, description = "The subscription after the change", body = WebhookResponse))
)]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<UpdateWebhookRequest>,
) -> Result<Reply<WebhookResponse>, ApiError> {
    let id = webhook_id(path.into_inner())?;
    let patch = body.0.try_into_domain()?;
    let subscription = state.webhooks.update(&caller, &id, patch).await?;
    Ok(Reply::ok(response(&state, subscription, None)))
}

/// Delete a subscription and its delivery log.
#[utoipa::path(
    delete, path = "/api/v1/webhooks/{webhook_id}", tag = "webhooks", operation_id = "deleteWebhook",
    security(("bearer" = [])),
    params(("webhook_id" = String, Path, description = "Subscription id")),
    responses((status = 204, description = "Deleted"))
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<actix_web::HttpResponse, ApiError> {
    state.webhooks.delete(&caller, &webhook_id(path.into_inner())?).await?;
    Ok(actix_web::HttpResponse::NoContent().finish())
}

/// Give a subscription a new generated secret; the old one keeps signing alongside for 24 hours.
#[utoipa::path(
    post, path = "/api/v1/webhooks/{webhook_id}/rotate-secret", tag = "webhooks", operation_id = "rotateWebhookSecret",
    security(("bearer" = [])),
    params(("webhook_id" = String, Path, description = "Subscription id")),
    responses((status = 200, description = "The subscription with its new `signing_secret`", body = WebhookResponse))
)]
pub async fn rotate_secret(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<WebhookResponse>, ApiError> {
    let (subscription, secret) =
        state.webhooks.rotate_secret(&caller, &webhook_id(path.into_inner())?).await?;
    Ok(Reply::ok(response(&state, subscription, Some(secret))))
}

/// A test send.
#[derive(Debug, Deserialize, ToSchema)]
pub struct TestWebhookRequest {
    /// The event type to send a sample of, or any name a subscription lists: an alias sends its
    /// last type (`agent.message` → `agent.message.completed`), `*` sends `agent.created`.
    #[schema(required = true, schema_with = crate::schemas::event_selector)]
    pub event_type: Option<String>,
}

impl TestWebhookRequest {
    /// The event type to send a sample of.
    ///
    /// # Errors
    /// [`ValidationErrors`] for a missing or unknown `event_type`.
    pub(crate) fn try_into_domain(self) -> Result<EventType, ValidationErrors> {
        let mut v = Validator::new();
        let event_type = v.required("event_type", self.event_type, |t| {
            EventSelector::parse(&t).map(EventSelector::sample).ok_or_else(|| {
                FieldError::new(
                    "event_type",
                    FieldErrorKind::InvalidValue,
                    format!("unknown event type; expected one of: {}", EventSelector::names().join(", ")),
                )
            })
        });
        v.finish(event_type)
    }
}

/// What a test send did (the spec's fields, plus `error`).
#[derive(Debug, Serialize, ToSchema)]
pub struct TestWebhookResponse {
    /// Whether the receiver answered 2xx.
    pub success: bool,
    /// The delivery made for the test (in the delivery log).
    pub delivery_id: String,
    /// The receiver's status; 0 when it did not answer.
    pub response_status: u16,
    /// How long it took.
    pub response_time_ms: u64,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// Send one signed test event now and report the receiver's answer.
#[utoipa::path(
    post, path = "/api/v1/webhooks/{webhook_id}/test", tag = "webhooks", operation_id = "testWebhook",
    security(("bearer" = [])),
    params(("webhook_id" = String, Path, description = "Subscription id")),
    request_body = TestWebhookRequest,
    responses((status = 200, description = "The receiver's answer", body = TestWebhookResponse))
)]
pub async fn test(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<TestWebhookRequest>,
) -> Result<Reply<TestWebhookResponse>, ApiError> {
    let id = webhook_id(path.into_inner())?;
    let event_type = body.0.try_into_domain()?;
    let report = state.webhooks.test(&caller, &id, event_type).await?;
    Ok(Reply::ok(TestWebhookResponse {
        success: report.success,
        delivery_id: report.delivery_id.into_string(),
        response_status: report.response_status,
        response_time_ms: report.response_time_ms,
        error: report.error,
    }))
}

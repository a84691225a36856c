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
use agentry_domain::webhooks::{
    Attempt, Delivery, DeliveryStats, DeliveryStatus, NewSubscription, STATS_WINDOW_HOURS, Subscription,
    SubscriptionPatch, SubscriptionStatus,
};
use chrono::{DateTime, Utc};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::reply::{Reply, timestamp};

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

/// A delivery (spec "Webhook delivery record", plus `error`, `next_attempt_at`, `test` and
/// `created_at`).
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryResponse {
    /// Delivery id.
    pub id: String,
    /// The event (the `webhook-id` header of every attempt).
    pub event_id: String,
    /// The event's type.
    pub event_type: String,
    /// `pending`, `delivered`, `failed`, or `skipped` (kept while the subscription was `failed`
    /// or `disabled`; sent after a recovery or a retry).
    pub status: &'static str,
    /// The receiver's status at the last attempt that got an answer.
    pub response_status: Option<u16>,
    /// How long the last attempt took.
    pub response_time_ms: Option<u64>,
    /// Attempts made.
    pub attempts: u32,
    /// When the receiver accepted it.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub delivered_at: Option<DateTime<Utc>>,
    /// Why the last attempt failed.
    pub error: Option<String>,
    /// When the next attempt is due (pending deliveries).
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Made by a test send.
    pub test: bool,
    /// Creation time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

impl From<Delivery> for DeliveryResponse {
    fn from(d: Delivery) -> Self {
        Self {
            id: d.id().to_string(),
            event_id: d.event_id().to_string(),
            event_type: d.event_type().to_owned(),
            status: d.status().as_str(),
            response_status: d.response_status(),
            response_time_ms: d.response_time_ms(),
            attempts: d.attempts(),
            delivered_at: d.delivered_at(),
            error: d.error().map(str::to_owned),
            next_attempt_at: d.next_attempt_at(),
            test: d.is_test(),
            created_at: d.created_at(),
        }
    }
}

/// A subscription's deliveries.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryList {
    /// Newest first.
    pub items: Vec<DeliveryResponse>,
}

/// How many deliveries to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    /// 1–100, default 20.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
}

/// A subscription's deliveries, newest first.
#[utoipa::path(
    get, path = "/api/v1/webhooks/{webhook_id}/deliveries", tag = "webhooks", operation_id = "listWebhookDeliveries",
    security(("bearer" = [])),
    params(("webhook_id" = String, Path, description = "Subscription id"), DeliveriesQuery),
    responses((status = 200, description = "The deliveries", body = DeliveryList))
)]
pub async fn deliveries(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    query: crate::extract::QueryParams<DeliveriesQuery>,
) -> Result<Reply<DeliveryList>, ApiError> {
    let id = webhook_id(path.into_inner())?;
    let limit = match query.0.limit {
        None => 20,
        Some(n @ 1..=100) => u32::try_from(n).unwrap_or(20),
        Some(_) => {
            return Err(ValidationErrors::one(FieldError::new(
                "limit",
                FieldErrorKind::OutOfRange,
                "limit must be from 1 to 100",
            ))
            .into());
        }
    };
    let items = state.webhooks.deliveries(&caller, &id, limit).await?;
    Ok(Reply::ok(DeliveryList { items: items.into_iter().map(DeliveryResponse::from).collect() }))
}

/// One attempt of a delivery.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptResponse {
    /// Which attempt, from 1.
    pub attempt: u32,
    /// `succeeded` or `failed`.
    pub status: &'static str,
    /// The receiver's status, when it answered.
    pub response_status: Option<u16>,
    /// How long it took.
    pub response_time_ms: u64,
    /// What failed it: `http_status`, `refused_address`, `connection`, `timeout`,
    /// `invalid_url`, `secret` or `other`.
    pub error_kind: Option<&'static str>,
    /// Why it failed.
    pub error: Option<String>,
    /// The first 1 KiB of the receiver's answer.
    pub response_body: Option<String>,
    /// When it started.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub started_at: DateTime<Utc>,
}

impl From<Attempt> for AttemptResponse {
    fn from(a: Attempt) -> Self {
        Self {
            attempt: a.number,
            status: if a.succeeded { "succeeded" } else { "failed" },
            response_status: a.response_status,
            response_time_ms: a.response_time_ms,
            error_kind: a.error_kind.map(|k| k.as_str()),
            error: a.error,
            response_body: a.response_body,
            started_at: a.started_at,
        }
    }
}

/// A delivery's attempts.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptList {
    /// The delivery.
    pub delivery: DeliveryResponse,
    /// First first.
    pub items: Vec<AttemptResponse>,
}

/// The attempts of one delivery, with the receiver's status, latency and answer.
#[utoipa::path(
    get, path = "/api/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/attempts", tag = "webhooks",
    operation_id = "listWebhookDeliveryAttempts",
    security(("bearer" = [])),
    params(("webhook_id" = String, Path, description = "Subscription id"), ("delivery_id" = String, Path, description = "Delivery id")),
    responses((status = 200, description = "The attempts", body = AttemptList))
)]
pub async fn attempts(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<Reply<AttemptList>, ApiError> {
    let (id, delivery) = path.into_inner();
    let (delivery, attempts) =
        state.webhooks.attempts(&caller, &webhook_id(id)?, &delivery_id(delivery)?).await?;
    Ok(Reply::ok(AttemptList {
        delivery: delivery.into(),
        items: attempts.into_iter().map(AttemptResponse::from).collect(),
    }))
}

/// Make a new attempt of a delivery now (also of a failed one) and answer the delivery after it.
#[utoipa::path(
    post, path = "/api/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry", tag = "webhooks",
    operation_id = "retryWebhookDelivery",
    security(("bearer" = [])),
    params(("webhook_id" = String, Path, description = "Subscription id"), ("delivery_id" = String, Path, description = "Delivery id")),
    responses(
        (status = 200, description = "The delivery after the attempt", body = DeliveryResponse),
        (status = 409, description = "`conflict`: an attempt of this delivery is in progress"),
    )
)]
pub async fn retry(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<Reply<DeliveryResponse>, ApiError> {
    let (id, delivery) = path.into_inner();
    let delivery = state.webhooks.retry(&caller, &webhook_id(id)?, &delivery_id(delivery)?).await?;
    Ok(Reply::ok(delivery.into()))
}

/// A time a request gives (RFC 3339), or the field's error.
fn time_field(field: &'static str, raw: String) -> Result<DateTime<Utc>, FieldError> {
    DateTime::parse_from_rfc3339(&raw).map(|t| t.with_timezone(&Utc)).map_err(|_| {
        FieldError::new(
            field,
            FieldErrorKind::InvalidFormat,
            format!("{field} must be an RFC 3339 time such as 2026-11-26T09:00:00Z"),
        )
    })
}

/// Which missed deliveries to recover.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RecoverWebhookRequest {
    /// Skipped and failed deliveries created at or after this time (RFC 3339) are queued again.
    #[schema(required = true, value_type = String, format = DateTime, example = "2026-11-26T09:00:00Z")]
    pub since: Option<String>,
}

impl RecoverWebhookRequest {
    /// The time from which missed deliveries are recovered.
    ///
    /// # Errors
    /// [`ValidationErrors`] for a missing `since` or one that is not RFC 3339.
    pub(crate) fn try_into_domain(self) -> Result<DateTime<Utc>, ValidationErrors> {
        let mut v = Validator::new();
        let since = v.required("since", self.since, |raw| time_field("since", raw));
        v.finish(since)
    }
}

/// Deliveries queued again.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueuedResponse {
    /// How many deliveries were queued; each is sent with its original event id (`webhook-id`)
    /// and a fresh retry schedule.
    pub queued: u64,
}

/// Recover missed events: queue every skipped or failed delivery since a time again (each with
/// its original `webhook-id`) and set the subscription `active`, in one step.
#[utoipa::path(
    post, path = "/api/v1/webhooks/{webhook_id}/recover", tag = "webhooks", operation_id = "recoverWebhook",
    security(("bearer" = [])),
    params(("webhook_id" = String, Path, description = "Subscription id")),
    request_body = RecoverWebhookRequest,
    responses(
        (status = 202, description = "Queued; the subscription is active", body = QueuedResponse),
        (status = 404, description = "`not_found`: no such webhook in your tenant"),
    )
)]
pub async fn recover(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<RecoverWebhookRequest>,
) -> Result<Reply<QueuedResponse>, ApiError> {
    let id = webhook_id(path.into_inner())?;
    let since = body.0.try_into_domain()?;
    let queued = state.webhooks.recover(&caller, &id, since).await?;
    Ok(Reply::with_status(actix_web::http::StatusCode::ACCEPTED, QueuedResponse { queued }))
}

/// Which deliveries to retry.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RetryDeliveriesRequest {
    /// `failed` or `skipped`; absent: both.
    #[schema(schema_with = crate::schemas::delivery_retry_status)]
    pub status: Option<String>,
    /// Only deliveries created at or after this time (RFC 3339); absent: all.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub since: Option<String>,
}

/// Retry in bulk: queue the active subscription's failed and/or skipped deliveries again (each
/// with its original `webhook-id` and a fresh retry schedule). `{}` retries all of them.
#[utoipa::path(
    post, path = "/api/v1/webhooks/{webhook_id}/deliveries/retry", tag = "webhooks",
    operation_id = "retryWebhookDeliveries",
    security(("bearer" = [])),
    params(("webhook_id" = String, Path, description = "Subscription id")),
    request_body = RetryDeliveriesRequest,
    responses(
        (status = 202, description = "Queued", body = QueuedResponse),
        (status = 404, description = "`not_found`: no such webhook in your tenant"),
        (status = 409, description = "`conflict`: the subscription is not active (recover it instead)"),
    )
)]
pub async fn retry_all(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<RetryDeliveriesRequest>,
) -> Result<Reply<QueuedResponse>, ApiError> {
    let id = webhook_id(path.into_inner())?;
    let mut v = Validator::new();
    let status = v.optional("status", body.0.status, |raw| {
        DeliveryStatus::parse(&raw).ok_or_else(|| {
            FieldError::new("status", FieldErrorKind::InvalidValue, "status may be failed or skipped")
        })
    });
    let since = v.optional("since", body.0.since, |raw| time_field("since", raw));
    let (status, since) = v.finish((status, since))?;
    let queued = state.webhooks.retry_all(&caller, &id, status, since).await?;
    Ok(Reply::with_status(actix_web::http::StatusCode::ACCEPTED, QueuedResponse { queued }))
}

/// Deliveries per status.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryCountsResponse {
    /// Waiting for an attempt.
    pub pending: u64,
    /// Accepted by the receiver.
    pub delivered: u64,
    /// Every attempt failed.
    pub failed: u64,
    /// Kept while the subscription was not active.
    pub skipped: u64,
    /// All of them.
    pub total: u64,
}

/// The receiver's response times.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResponseTimes {
    /// Median, in milliseconds; null without an answer in the window.
    pub p50: Option<u64>,
    /// 99th percentile (nearest rank), in milliseconds; null without an answer in the window.
    pub p99: Option<u64>,
}

/// A subscription's health over the last 24 hours.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookStatsResponse {
    /// The subscription.
    pub webhook_id: String,
    /// The window's length.
    pub window_hours: i64,
    /// Its start (it ends now).
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub since: DateTime<Utc>,
    /// Deliveries created in the window, per status.
    pub deliveries: DeliveryCountsResponse,
    /// Attempts started in the window.
    pub attempts: u64,
    /// Of those, how many the receiver answered (the response times are theirs).
    pub answered: u64,
    /// The receiver's response times.
    pub response_time_ms: ResponseTimes,
}

impl WebhookStatsResponse {
    fn new(id: &WebhookId, s: DeliveryStats) -> Self {
        let c = s.counts;
        Self {
            webhook_id: id.to_string(),
            window_hours: STATS_WINDOW_HOURS,
            since: s.since,
            deliveries: DeliveryCountsResponse {
                pending: c.pending,
                delivered: c.delivered,
                failed: c.failed,
                skipped: c.skipped,
                total: c.total(),
            },
            attempts: s.attempts,
            answered: s.answered,
            response_time_ms: ResponseTimes { p50: s.p50_ms, p99: s.p99_ms },
        }
    }
}

/// Deliveries per status and the receiver's response times (p50, p99) over the last 24 hours.
#[utoipa::path(
    get, path = "/api/v1/webhooks/{webhook_id}/stats", tag = "webhooks", operation_id = "getWebhookStats",
    security(("bearer" = [])),
    params(("webhook_id" = String, Path, description = "Subscription id")),
    responses(
        (status = 200, description = "The statistics", body = WebhookStatsResponse),
        (status = 404, description = "`not_found`: no such webhook in your tenant"),
    )
)]
pub async fn stats(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<WebhookStatsResponse>, ApiError> {
    let id = webhook_id(path.into_inner())?;
    let stats = state.webhooks.stats(&caller, &id).await?;
    Ok(Reply::ok(WebhookStatsResponse::new(&id, stats)))
}

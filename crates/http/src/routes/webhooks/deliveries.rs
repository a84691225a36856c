//! A subscription's deliveries: the log, each delivery's attempts, retries one by one and in
//! bulk, recovery of missed events, and the subscription's health (counts and response times).

use actix_web::web;
use agentry_domain::ids::WebhookId;
use agentry_domain::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator};
use agentry_domain::webhooks::{Attempt, Delivery, DeliveryStats, DeliveryStatus, STATS_WINDOW_HOURS};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{delivery_id, webhook_id};
use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::reply::{Reply, timestamp};

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

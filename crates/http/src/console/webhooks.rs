//! Webhooks in the console: the subscriptions, a new one (its signing secret shown on the
//! answer, once), and a subscription's page: status, secret rotation, a test send, recovery of
//! missed events since a time, a chart of its deliveries per hour over 24 hours, and the
//! delivery log, each delivery with its attempts and a retry.

use actix_web::{HttpRequest, HttpResponse, web};
use agentry_domain::webhooks::{EventSelector, HourlyDeliveries};
use minijinja::{Value, context};
use serde::Deserialize;
use serde_json::json;

use super::charts::{self, Series};
use super::render::{page, redirect};
use super::time::{local_value, utc_from_local};
use super::{Console, Form};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::from_json_value;
use crate::routes::webhooks::{
    AttemptResponse, CreateWebhookRequest, DeliveryResponse, RecoverWebhookRequest, TestWebhookRequest,
    UpdateWebhookRequest, WebhookResponse, delivery_id, response, webhook_id,
};

/// Routes under `/console/{tenant_id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/webhooks", web::get().to(list))
        .route("/webhooks", web::post().to(create))
        .route("/webhooks/{webhook_id}", web::get().to(show))
        .route("/webhooks/{webhook_id}/status", web::post().to(set_status))
        .route("/webhooks/{webhook_id}/rotate-secret", web::post().to(rotate_secret))
        .route("/webhooks/{webhook_id}/test", web::post().to(test))
        .route("/webhooks/{webhook_id}/recover", web::post().to(recover))
        .route("/webhooks/{webhook_id}/deliveries/{delivery_id}", web::get().to(delivery))
        .route("/webhooks/{webhook_id}/deliveries/{delivery_id}/retry", web::post().to(retry));
}

/// Deliveries the log shows unless asked for more (the API's most is 100).
const LOG_LENGTH: u32 = 25;

async fn list(state: web::Data<AppState>, c: Console) -> Result<HttpResponse, ApiError> {
    let subscriptions: Vec<WebhookResponse> =
        state.webhooks.list(&c).await?.into_iter().map(|s| response(&state, s, None)).collect();
    page(
        &c,
        "webhooks",
        "Webhooks",
        "webhooks.html",
        context! { subscriptions, events => EventSelector::names() },
    )
}

async fn create(state: web::Data<AppState>, c: Console, form: Form) -> Result<HttpResponse, ApiError> {
    let request: CreateWebhookRequest = from_json_value(json!({
        "url": form.get("url"),
        "events": form.all("events"),
        "description": form.text("description"),
    }))?;
    let (subscription, secret) = state.webhooks.create(&c, request.try_into_domain()?).await?;
    secret_page(&c, &response(&state, subscription, Some(secret)), false)
}

/// The answer that shows a signing secret, the one time the console shows it.
fn secret_page(c: &Console, subscription: &WebhookResponse, rotated: bool) -> Result<HttpResponse, ApiError> {
    let title = if rotated { "New signing secret" } else { "Subscription created" };
    page(
        c,
        "webhooks",
        title,
        "webhook_secret.html",
        context! { subscription => Value::from_serialize(subscription), rotated },
    )
}

#[derive(Debug, Default, Deserialize)]
struct ShowQuery {
    limit: Option<u32>,
    queued: Option<u64>,
}

/// The chart's series, in the order they stack (and the legend reads).
fn series(hours: &[HourlyDeliveries]) -> Vec<Series> {
    let of = |f: fn(&HourlyDeliveries) -> u64| hours.iter().map(f).collect();
    vec![
        Series { label: "delivered".into(), color: "#17693a", values: of(|h| h.counts.delivered) },
        Series { label: "failed".into(), color: "#a4161a", values: of(|h| h.counts.failed) },
        Series { label: "pending".into(), color: "#d08c00", values: of(|h| h.counts.pending) },
        Series { label: "skipped".into(), color: "#8a94a3", values: of(|h| h.counts.skipped) },
    ]
}

async fn show(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = webhook_id(path.into_inner().1)?;
    let subscription = response(&state, state.webhooks.get(&c, &id).await?, None);
    let query: ShowQuery = serde_urlencoded::from_str(req.query_string()).unwrap_or_default();
    let limit = query.limit.unwrap_or(LOG_LENGTH).clamp(1, 100);
    let deliveries: Vec<DeliveryResponse> =
        state.webhooks.deliveries(&c, &id, limit).await?.into_iter().map(Into::into).collect();
    // A full log may have older deliveries: the page offers the API's most, 100.
    let more = limit < 100 && deliveries.len() == usize::try_from(limit).unwrap_or(usize::MAX);
    let hours = state.webhooks.deliveries_per_hour(&c, &id).await?;
    let labels: Vec<String> = hours.iter().map(|h| h.hour.format("%H:00").to_string()).collect();
    let series = series(&hours);
    let chart = charts::stacked_bars("Deliveries per hour over the last 24 hours (UTC)", &labels, &series, 3);
    let since = local_value(state.clock.now() - chrono::Duration::hours(24));
    page(
        &c,
        "webhooks",
        &subscription.url.clone(),
        "webhook.html",
        context! {
            subscription => Value::from_serialize(&subscription),
            deliveries,
            more,
            chart => Value::from_safe_string(chart),
            legend => Value::from_safe_string(charts::legend(&series)),
            events => EventSelector::names(),
            since,
            queued => query.queued,
        },
    )
}

/// Pauses (`disabled`) or resumes (`active`) a subscription, as `PATCH /webhooks/{id}` does.
async fn set_status(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = webhook_id(path.into_inner().1)?;
    let request: UpdateWebhookRequest = from_json_value(json!({ "status": form.get("status") }))?;
    state.webhooks.update(&c, &id, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/webhooks/{id}", c.base())))
}

async fn rotate_secret(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = webhook_id(path.into_inner().1)?;
    let (subscription, secret) = state.webhooks.rotate_secret(&c, &id).await?;
    secret_page(&c, &response(&state, subscription, Some(secret)), true)
}

/// A test send; the answer is the delivery it made, with the receiver's answer.
async fn test(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = webhook_id(path.into_inner().1)?;
    let request: TestWebhookRequest = from_json_value(json!({ "event_type": form.text("event_type") }))?;
    let report = state.webhooks.test(&c, &id, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/webhooks/{id}/deliveries/{}", c.base(), report.delivery_id)))
}

async fn recover(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = webhook_id(path.into_inner().1)?;
    let request: RecoverWebhookRequest =
        from_json_value(json!({ "since": utc_from_local(form.get("since")) }))?;
    let queued = state.webhooks.recover(&c, &id, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/webhooks/{id}?queued={queued}", c.base())))
}

async fn delivery(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, webhook, delivery) = path.into_inner();
    let (id, delivery) = (webhook_id(webhook)?, delivery_id(delivery)?);
    let subscription = response(&state, state.webhooks.get(&c, &id).await?, None);
    let (delivery, attempts) = state.webhooks.attempts(&c, &id, &delivery).await?;
    let attempts: Vec<AttemptResponse> = attempts.into_iter().map(Into::into).collect();
    page(
        &c,
        "webhooks",
        &format!("Delivery of {}", delivery.event_type()),
        "webhook_delivery.html",
        context! {
            subscription => Value::from_serialize(&subscription),
            delivery => Value::from_serialize(DeliveryResponse::from(delivery)),
            attempts,
        },
    )
}

/// A new attempt now, as `POST …/deliveries/{id}/retry`; the answer is the delivery's page.
async fn retry(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let (_, webhook, delivery) = path.into_inner();
    let (id, delivery) = (webhook_id(webhook)?, delivery_id(delivery)?);
    state.webhooks.retry(&c, &id, &delivery).await?;
    Ok(redirect(format!("{}/webhooks/{id}/deliveries/{delivery}", c.base())))
}

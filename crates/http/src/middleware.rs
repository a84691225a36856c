//! The request middleware: request id, one access-log line per request, and the rendering of
//! every error — ours and actix's own 404/405 — in the configured JSON envelope.

use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, web};
use agentry_domain::ratelimit::RateStatus;
use tracing::Instrument as _;

use crate::error::ApiError;
use crate::settings::HttpSettings;

/// The id of the current request: the client's `X-Request-Id` when it sent a sane one, else a
/// new ULID. Available to handlers through request extensions.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

fn incoming_request_id(req: &ServiceRequest) -> Option<String> {
    let value = req.headers().get(&REQUEST_ID)?.to_str().ok()?;
    // Echoed into logs and headers: accept only short, printable, unambiguous ids.
    let ok = !value.is_empty()
        && value.len() <= 128
        && value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c));
    ok.then(|| value.to_owned())
}

/// The outermost middleware of the app.
pub async fn request_context(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let started = Instant::now();
    let request_id =
        incoming_request_id(&req).unwrap_or_else(|| ulid::Ulid::new().to_string().to_lowercase());
    req.extensions_mut().insert(RequestId(request_id.clone()));
    let settings = req.app_data::<web::Data<HttpSettings>>().map(|s| s.get_ref().clone()).unwrap_or_default();
    let method = req.method().clone();
    let span = tracing::info_span!("request", request_id = %request_id);

    // Handler and extractor errors arrive here as responses carrying their error; an `Err`
    // could only come from a middleware below this one, and there is none.
    // The rest of the request runs as its own task: when the client disconnects, the work
    // (a transaction, a database call) finishes instead of being dropped halfway.
    let response = actix_web::rt::spawn(next.call(req).instrument(span.clone()))
        .await
        .map_err(|e| ApiError::internal(anyhow::anyhow!("request task failed: {e}")))??;
    let mut response = render_error(response.map_into_boxed_body(), &settings);

    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    add_rate_limit_headers(&mut response);
    let status = response.status().as_u16();
    let route = response.request().match_pattern().unwrap_or_else(|| "-".to_owned());
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    span.in_scope(|| // The route pattern, not the path: some paths carry secrets (magic-link tokens).
        tracing::info!(%method, %route, status, latency_ms = format!("{latency_ms:.2}"), "request"));
    Ok(response)
}

/// Re-renders error responses: an [`ApiError`] under the configured envelope, anything else
/// (actix's own 404 and 405, errors of built-in extractors) as the [`ApiError`] of its status.
fn render_error(response: ServiceResponse<BoxBody>, settings: &HttpSettings) -> ServiceResponse<BoxBody> {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let rendered = match response.response().error() {
        Some(error) => match error.as_error::<ApiError>() {
            Some(api) => {
                api.log();
                api.render(settings)
            }
            None => {
                tracing::debug!(%error, "framework error");
                ApiError::for_status(status).render(settings)
            }
        },
        // A plain response with an error status, e.g. actix's 405 for a known path.
        None if is_json(&response) => return response,
        None => ApiError::for_status(status).render(settings),
    };
    let allow = response.headers().get(header::ALLOW).cloned();
    let (request, _) = response.into_parts();
    let mut response = ServiceResponse::new(request, rendered);
    if let Some(allow) = allow {
        response.headers_mut().insert(header::ALLOW, allow);
    }
    response
}

fn is_json(response: &ServiceResponse<BoxBody>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// `X-RateLimit-*` on every response whose request was counted against a limit.
fn add_rate_limit_headers(response: &mut ServiceResponse<BoxBody>) {
    let status = response.request().extensions().get::<RateStatus>().copied();
    let Some(RateStatus { limit: Some(limit), remaining, reset_at, .. }) = status else {
        return;
    };
    let headers = response.headers_mut();
    for (name, value) in [
        ("x-ratelimit-limit", limit.to_string()),
        ("x-ratelimit-remaining", remaining.to_string()),
        ("x-ratelimit-reset", reset_at.to_string()),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
}

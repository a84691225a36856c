//! The request middleware: request id, one access-log line per request, the rendering of
//! every error — ours and actix's own 404/405 — in the configured JSON envelope, `HEAD` wherever
//! `GET` is served, and the security headers of every response.

use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
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
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let started = Instant::now();
    // Counted while it runs, also when its client goes away: background work yields while
    // more requests run than there are cores.
    let _in_request = req.app_data::<web::Data<crate::AppState>>().map(|state| state.load.enter());
    let request_id =
        incoming_request_id(&req).unwrap_or_else(|| ulid::Ulid::new().to_string().to_lowercase());
    req.extensions_mut().insert(RequestId(request_id.clone()));
    let settings = req.app_data::<web::Data<HttpSettings>>().map(|s| s.get_ref().clone()).unwrap_or_default();
    let method = req.method().clone();
    // HEAD is GET without the body: route it as GET. The connection already knows the request
    // was HEAD and sends no body.
    if method == Method::HEAD {
        req.head_mut().method = Method::GET;
    }
    let span = tracing::info_span!("request", request_id = %request_id);

    // Handler and extractor errors arrive here as responses carrying their error; an `Err`
    // could only come from a middleware below this one, and there is none.
    //
    // actix drops a request's future when its client disconnects. Each write is a unit that
    // finishes on its own (the store's `transaction!`), so dropping a read-only request loses
    // nothing, and GET and HEAD run right here. A request that may change things can be
    // several steps — a chat holds credits, asks the model, then records the exchange — so it
    // runs as a task of its own that finishes what it started.
    let response = if method == Method::GET || method == Method::HEAD {
        next.call(req).instrument(span.clone()).await?
    } else {
        actix_web::rt::spawn(next.call(req).instrument(span.clone()))
            .await
            .map_err(|e| ApiError::internal(anyhow::anyhow!("request task failed: {e}")))??
    };
    // In the span: an internal error's cause is logged with the request id.
    let mut response = span.in_scope(|| render_error(response.map_into_boxed_body(), &settings));

    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    add_rate_limit_headers(&mut response);
    add_security_headers(&mut response);
    let status = response.status().as_u16();
    let route = response.request().match_pattern().unwrap_or_else(|| "unmatched".to_owned());
    let elapsed = started.elapsed();
    let latency_ms = elapsed.as_secs_f64() * 1000.0;
    span.in_scope(|| // The route pattern, not the path: some paths carry secrets (magic-link tokens).
        tracing::info!(%method, %route, status, latency_ms = format!("{latency_ms:.2}"), "request"));
    record_request(&method, route, response.status().as_str(), elapsed);
    Ok(response)
}

/// Counts the request in `/metrics`, labelled with its route's template (never the path: paths
/// carry ids and, on some routes, secrets) and a method from a fixed list.
fn record_request(method: &Method, route: String, status: &str, elapsed: std::time::Duration) {
    use agentry_domain::metrics::{HTTP_REQUEST_DURATION, HTTP_REQUESTS};
    let method = match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    };
    let labels = [
        metrics::Label::new("method", method),
        metrics::Label::new("route", route),
        metrics::Label::new("status", status.to_owned()),
    ];
    metrics::counter!(HTTP_REQUESTS, labels.iter()).increment(1);
    metrics::histogram!(HTTP_REQUEST_DURATION, labels.iter()).record(elapsed);
}

/// Re-renders error responses: an [`ApiError`] under the configured envelope, anything else
/// (actix's own 404 and 405, errors of built-in extractors) as the [`ApiError`] of its status.
fn render_error(response: ServiceResponse<BoxBody>, settings: &HttpSettings) -> ServiceResponse<BoxBody> {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    // The OpenAI-compatible routes answer in OpenAI's error shape, which its clients read.
    let openai = crate::routes::openai::is_openai_path(response.request().path());
    let render = |api: &ApiError| if openai { api.render_openai(settings) } else { api.render(settings) };
    let rendered = match response.response().error() {
        Some(error) => match error.as_error::<ApiError>() {
            Some(api) => {
                api.log();
                render(api)
            }
            None => {
                tracing::debug!(%error, "framework error");
                render(&ApiError::for_status(status))
            }
        },
        // A response the handler rendered itself: JSON, or one of the HTML pages.
        None if is_json(&response) || is_html(&response) => return response,
        None => render(&ApiError::for_status(status)),
    };
    let allow = response.headers().get(header::ALLOW).and_then(|v| v.to_str().ok()).map(with_head);
    let (request, _) = response.into_parts();
    let mut response = ServiceResponse::new(request, rendered);
    if let Some(allow) = allow.and_then(|a| HeaderValue::from_str(&a).ok()) {
        response.headers_mut().insert(header::ALLOW, allow);
    }
    response
}

/// `Allow` of a resource: HEAD is served wherever GET is.
fn with_head(allow: &str) -> String {
    let methods: Vec<&str> = allow.split(',').map(str::trim).filter(|m| !m.is_empty()).collect();
    if methods.contains(&"GET") && !methods.contains(&"HEAD") {
        format!("{}, HEAD", methods.join(", "))
    } else {
        methods.join(", ")
    }
}

/// Content security policy of the HTML pages and the docs page: only the service's own
/// scripts, styles, images and connections; never framed.
pub const PAGE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
    img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Paths whose responses are the same for everyone and may be cached: the docs page's and the
/// pages' static files.
fn is_static_asset(path: &str) -> bool {
    (path.starts_with("/docs/") && path.contains('.')) || path.starts_with("/assets/")
}

fn is_page(path: &str) -> bool {
    path.starts_with("/docs")
        || path == "/console"
        || path.starts_with("/console/")
        || matches!(path, "/reset-password" | "/magic-link" | "/invitation")
}

/// `X-Content-Type-Options: nosniff` on every response; `Cache-Control: no-store` on every
/// response but static files (bodies carry tokens, keys and tenants' data); a content security
/// policy on the HTML pages.
fn add_security_headers(response: &mut ServiceResponse<BoxBody>) {
    let path = response.request().path().to_owned();
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if !headers.contains_key(header::CACHE_CONTROL) {
        let cache = if is_static_asset(&path) { "public, max-age=3600" } else { "no-store" };
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    }
    if is_page(&path) {
        headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(PAGE_CSP));
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    }
}

fn is_html(response: &ServiceResponse<BoxBody>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_is_allowed_wherever_get_is() {
        assert_eq!(with_head("GET, PATCH, DELETE"), "GET, PATCH, DELETE, HEAD");
        assert_eq!(with_head("POST"), "POST");
        assert_eq!(with_head("GET, HEAD"), "GET, HEAD");
    }

    #[test]
    fn only_static_files_may_be_cached() {
        assert!(is_static_asset("/docs/swagger-ui.css"));
        assert!(is_static_asset("/assets/pages.js"));
        assert!(!is_static_asset("/docs/"));
        assert!(!is_static_asset("/api/v1/auth/login"));
        assert!(!is_static_asset("/api/v1/openapi.json"));
    }
}

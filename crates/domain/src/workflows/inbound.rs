//! What trigger calls and integration deliveries share: how an inbound request becomes an
//! execution's input (its body parsed by content type, its headers and query as objects), the
//! errors they answer with, and the tenant's rate limit they count against.

use serde_json::{Map, Value};

use super::executions::ExecutionError;
use super::signatures::{Headers, SignatureError};
use crate::ids::TenantId;
use crate::ratelimit::{PlanTable, RateLimiter, RateStatus};
use crate::tenancy::Plan;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors};

/// Headers that carry a credential of some kind: never copied into an execution's input,
/// which anyone who may read the workflow's executions can see.
pub const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];

/// Why an inbound call (a trigger call, an integration delivery) started nothing.
#[derive(Debug, thiserror::Error)]
pub enum InboundError {
    /// No such trigger path (or it is inactive), integration, or kind: the same answer for
    /// each, so a caller learns nothing about what exists.
    #[error("no such trigger or integration")]
    NotFound,
    /// The trigger does not accept this method; `allow` is the `Allow` header's value.
    #[error("this trigger accepts only {allow}")]
    MethodNotAllowed {
        /// The accepted methods, `POST, GET`.
        allow: String,
    },
    /// The secret or signature is missing or wrong.
    #[error("the request's secret or signature was refused: {0}")]
    Unauthorized(#[source] SignatureError),
    /// The request is malformed (a JSON body that is not JSON, an invalid `Idempotency-Key`).
    #[error(transparent)]
    Invalid(ValidationErrors),
    /// The body is neither JSON, a form, nor UTF-8 text.
    #[error("the body must be JSON, form-urlencoded or UTF-8 text")]
    UnsupportedBody,
    /// The workflow is inactive.
    #[error("the workflow is inactive; set is_active to true to execute it")]
    Inactive,
    /// The trigger or integration acts as a member who was removed, or demoted below running
    /// workflows: it is paused until an owner or admin takes it over.
    #[error("this receiver is paused: {0}")]
    Paused(crate::tenancy::NotEntitled),
    /// The tenant's plan limit is spent; the status says until when.
    #[error("the tenant's rate limit is exceeded")]
    RateLimited(RateStatus),
    /// Storage, the cipher or the rate counter failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

impl From<ExecutionError> for InboundError {
    fn from(e: ExecutionError) -> Self {
        match e {
            ExecutionError::Inactive => Self::Inactive,
            ExecutionError::NotEntitled(lost) => Self::Paused(lost),
            ExecutionError::Unexpected(e) => Self::Unexpected(e),
            other => Self::Unexpected(anyhow::anyhow!("starting an execution failed: {other}")),
        }
    }
}

fn invalid(field: &str, kind: FieldErrorKind, message: impl Into<String>) -> InboundError {
    InboundError::Invalid(ValidationErrors::one(FieldError::new(field, kind, message)))
}

/// The media type of a `Content-Type` value, lower case, without parameters.
pub fn media_type(headers: &dyn Headers) -> Option<String> {
    headers
        .header("content-type")
        .map(|v| v.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
        .filter(|m| !m.is_empty())
}

/// Whether a media type is JSON (`application/json`, `application/*+json`).
pub fn is_json(media: &str) -> bool {
    media == "application/json" || (media.starts_with("application/") && media.ends_with("+json"))
}

/// Form fields as an object: each name once, its value a string, or an array of strings
/// when the name repeats (in the order sent).
pub fn form_object(raw: &[u8]) -> Map<String, Value> {
    let mut object = Map::new();
    for (name, value) in url::form_urlencoded::parse(raw) {
        let value = Value::String(value.into_owned());
        match object.get_mut(name.as_ref()) {
            None => {
                object.insert(name.into_owned(), value);
            }
            Some(Value::Array(values)) => values.push(value),
            Some(first) => {
                let first = first.take();
                object.insert(name.into_owned(), Value::Array(vec![first, value]));
            }
        }
    }
    object
}

/// A body as an execution reads it: `null` when empty; parsed JSON for a JSON content type;
/// an object of fields (see [`form_object`]) for a form; otherwise the text.
///
/// # Errors
/// [`InboundError::Invalid`] naming `body` for a JSON content type over a body that is not
/// JSON; [`InboundError::UnsupportedBody`] for any other body that is not UTF-8.
pub fn parse_body(media: Option<&str>, body: &[u8]) -> Result<Value, InboundError> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    match media {
        Some(m) if is_json(m) => serde_json::from_slice(body).map_err(|e| {
            invalid("body", FieldErrorKind::InvalidFormat, format!("the body is not valid JSON: {e}"))
        }),
        Some("application/x-www-form-urlencoded") => Ok(Value::Object(form_object(body))),
        _ => std::str::from_utf8(body)
            .map(|text| Value::String(text.to_owned()))
            .map_err(|_| InboundError::UnsupportedBody),
    }
}

/// The input an execution gets from a parsed body: the body itself when it is an object (a
/// JSON object or a form), `{}` when there was none, else `{"body": <the body>}` — so a
/// workflow reads `input.*` alike whether it is executed by the API or called at a URL.
pub fn input_of(body: &Value) -> Value {
    match body {
        Value::Object(_) => body.clone(),
        Value::Null => Value::Object(Map::new()),
        other => serde_json::json!({ "body": other }),
    }
}

/// Request headers as an object: names lower-cased, the values of a repeated name joined with
/// `, ` (as HTTP allows), without the credential headers and those named in `also_drop`
/// (lower case).
pub fn header_object<N: AsRef<str>, V: AsRef<str>>(
    headers: &[(N, V)],
    also_drop: &[&str],
) -> Map<String, Value> {
    let mut object = Map::new();
    for (name, value) in headers {
        let name = name.as_ref().to_ascii_lowercase();
        if CREDENTIAL_HEADERS.contains(&name.as_str()) || also_drop.contains(&name.as_str()) {
            continue;
        }
        match object.get_mut(&name) {
            Some(Value::String(joined)) => {
                joined.push_str(", ");
                joined.push_str(value.as_ref());
            }
            _ => {
                object.insert(name, Value::String(value.as_ref().to_owned()));
            }
        }
    }
    object
}

/// Refuses an input holding U+0000 in any string or key: PostgreSQL cannot store it in JSON,
/// and no sensible payload carries it.
///
/// # Errors
/// [`InboundError::Invalid`] naming the field within `body` (`body.user.name`).
pub fn check_storable(input: &Value) -> Result<(), InboundError> {
    check_storable_as(input, "body")
}

/// [`check_storable`] for what templates read as `trigger` (the call's query, headers and
/// body), naming the field within `trigger`.
///
/// # Errors
/// [`InboundError::Invalid`] naming the field (`trigger.query.q`).
pub fn check_storable_as(value: &Value, root: &str) -> Result<(), InboundError> {
    crate::storable::check(value, root).map_err(|e| InboundError::Invalid(ValidationErrors::one(e)))
}

/// Counts an inbound call against its tenant's plan limit, as an authenticated request of the
/// tenant is counted (the same `tenant:<id>` budget).
///
/// # Errors
/// [`InboundError::RateLimited`] when the budget is spent; the counter's failure.
pub async fn count_against_plan(
    limiter: &RateLimiter,
    plans: PlanTable,
    tenant: &TenantId,
    plan: Plan,
) -> Result<RateStatus, InboundError> {
    let status = limiter.check(&format!("tenant:{tenant}"), plans.quota(plan)).await?;
    if status.allowed() { Ok(status) } else { Err(InboundError::RateLimited(status)) }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn bodies_are_parsed_by_content_type() {
        assert_eq!(parse_body(Some("application/json"), br#"{"a":[1,2]}"#).unwrap(), json!({"a": [1, 2]}));
        assert_eq!(parse_body(Some("application/vnd.api+json"), b"[1]").unwrap(), json!([1]));
        assert_eq!(
            parse_body(Some("application/x-www-form-urlencoded"), b"a=1&b=x+y&a=2&c=%2Fcmd").unwrap(),
            json!({"a": ["1", "2"], "b": "x y", "c": "/cmd"})
        );
        assert_eq!(parse_body(Some("text/plain"), "héllo".as_bytes()).unwrap(), json!("héllo"));
        assert_eq!(parse_body(None, b"{\"not\": \"parsed\"}").unwrap(), json!("{\"not\": \"parsed\"}"));
        assert_eq!(parse_body(Some("application/json"), b"").unwrap(), Value::Null);
        match parse_body(Some("application/json"), b"{oops") {
            Err(InboundError::Invalid(e)) => assert_eq!(e.0[0].field, "body"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_body(Some("application/octet-stream"), &[0xff, 0xfe]),
            Err(InboundError::UnsupportedBody)
        ));
    }

    #[test]
    fn headers_are_lower_cased_joined_and_stripped_of_credentials() {
        let headers = [
            ("Content-Type", "application/json"),
            ("X-Webhook-Secret", "whsec_x"),
            ("Authorization", "Bearer t"),
            ("Cookie", "c=1"),
            ("X-Tag", "a"),
            ("x-tag", "b"),
        ];
        let object = header_object(&headers, &["x-webhook-secret"]);
        assert_eq!(Value::Object(object), json!({"content-type": "application/json", "x-tag": "a, b"}));
    }

    #[test]
    fn nul_anywhere_is_refused() {
        assert!(check_storable(&json!({"a": ["ok", {"b": 1}]})).is_ok());
        assert!(check_storable(&json!({"a": ["x\u{0}y"]})).is_err());
        assert!(check_storable(&json!({"k\u{0}": 1})).is_err());
    }

    #[test]
    fn media_types_are_read_without_parameters() {
        let headers = [("content-type", "Application/JSON; charset=utf-8")];
        assert_eq!(media_type(&headers).as_deref(), Some("application/json"));
        assert_eq!(media_type(&[("x", "y")]), None);
    }
}

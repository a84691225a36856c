//! The one error type of the HTTP layer. It is the only place that knows status codes and the
//! two error envelopes; every domain error is converted into it ([`conversions`]).

use std::fmt;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use agentry_domain::validation::{FieldError, FieldErrorKind, ValidationErrors};
use serde_json::{Value, json};

use crate::settings::{Envelope, HttpSettings};

mod conversions;

/// Machine-readable error codes, as they appear in bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request body, query or path is invalid (`invalid_request` in the wrapped envelope).
    ValidationError,
    /// Missing, invalid or expired credentials.
    Unauthorized,
    /// Valid credentials without the rights for this action.
    Forbidden,
    /// No such resource (or not the caller's).
    NotFound,
    /// The route exists but not for this method.
    MethodNotAllowed,
    /// The request conflicts with the current state (e.g. e-mail already registered).
    Conflict,
    /// The body is larger than allowed.
    PayloadTooLarge,
    /// The body's content type is not one the route accepts.
    UnsupportedMediaType,
    /// Wrong e-mail or password at login.
    InvalidCredentials,
    /// An e-mailed or refresh token that is invalid, used or expired.
    InvalidToken,
    /// Too many requests.
    RateLimitExceeded,
    /// Not enough credits.
    InsufficientCredits,
    /// The plan allows no more of something (knowledge files, their bytes).
    QuotaExceeded,
    /// An upstream provider failed.
    UpstreamError,
    /// The payment provider declined a purchase.
    PaymentDeclined,
    /// A dependency (the database) is unavailable.
    Unavailable,
    /// The in-process language model has as many generations running and queued as it takes.
    ModelBusy,
    /// A bug or an unexpected failure; details are logged, never sent.
    Internal,
}

impl ErrorCode {
    fn as_str(self, envelope: Envelope) -> &'static str {
        match self {
            Self::ValidationError if envelope == Envelope::Wrapped => "invalid_request",
            Self::ValidationError => "validation_error",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Conflict => "conflict",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::InvalidCredentials => "invalid_credentials",
            Self::InvalidToken => "invalid_token",
            Self::RateLimitExceeded => "rate_limit_exceeded",
            Self::InsufficientCredits => "insufficient_credits",
            Self::QuotaExceeded => "quota_exceeded",
            Self::UpstreamError => "upstream_error",
            Self::PaymentDeclined => "payment_declined",
            Self::Unavailable => "unavailable",
            Self::ModelBusy => "model_busy",
            Self::Internal => "internal_error",
        }
    }

    fn status(self, settings: &HttpSettings) -> StatusCode {
        match self {
            Self::ValidationError => {
                StatusCode::from_u16(settings.validation_status).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY)
            }
            Self::Unauthorized | Self::InvalidCredentials => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict => StatusCode::CONFLICT,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::InvalidToken => StatusCode::BAD_REQUEST,
            Self::RateLimitExceeded => StatusCode::TOO_MANY_REQUESTS,
            Self::InsufficientCredits | Self::QuotaExceeded | Self::PaymentDeclined => {
                StatusCode::PAYMENT_REQUIRED
            }
            Self::UpstreamError => StatusCode::BAD_GATEWAY,
            Self::Unavailable | Self::ModelBusy => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The code for a status produced outside our handlers (actix's own 404 and 405).
    fn for_status(status: StatusCode) -> Self {
        match status.as_u16() {
            400 | 422 => Self::ValidationError,
            401 => Self::Unauthorized,
            403 => Self::Forbidden,
            404 => Self::NotFound,
            405 => Self::MethodNotAllowed,
            402 => Self::InsufficientCredits,
            409 => Self::Conflict,
            413 => Self::PayloadTooLarge,
            415 => Self::UnsupportedMediaType,
            429 => Self::RateLimitExceeded,
            503 => Self::Unavailable,
            _ => Self::Internal,
        }
    }
}

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    code: ErrorCode,
    message: String,
    details: Vec<FieldError>,
    retry_after: Option<u64>,
    /// The `Allow` header of a 405.
    allow: Option<String>,
    /// Whether a 401 names the bearer scheme (`WWW-Authenticate: Bearer`): not for the inbound
    /// routes, whose proofs are secrets and signatures.
    bearer_challenge: bool,
    /// The cause of an internal error, for the log only.
    cause: Option<anyhow::Error>,
}

impl ApiError {
    /// An error with `code` and a human-readable `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: Vec::new(),
            retry_after: None,
            allow: None,
            bearer_challenge: true,
            cause: None,
        }
    }

    /// A validation error naming the refused fields.
    pub fn validation(details: Vec<FieldError>) -> Self {
        let message = match details.as_slice() {
            [one] => one.message.clone(),
            _ => "the request is invalid".to_owned(),
        };
        Self { details, ..Self::new(ErrorCode::ValidationError, message) }
    }

    /// A validation error of a single field.
    pub fn field(field: impl Into<String>, kind: FieldErrorKind, message: impl Into<String>) -> Self {
        Self::validation(vec![FieldError::new(field, kind, message)])
    }

    /// 401 `unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthorized, message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// 500 `internal_error`; `cause` is logged, a generic message is sent.
    pub fn internal(cause: anyhow::Error) -> Self {
        // The rate limiter's store is down and its policy is to refuse: whichever service the
        // check ran in, the caller gets a 503 to retry, not a 500. Not logged again per
        // request: the limiter logs the outage (once a second) and counts every refusal.
        if cause.downcast_ref::<agentry_domain::ratelimit::LimiterUnavailable>().is_some() {
            return Self::new(ErrorCode::Unavailable, "the rate limiter is unavailable; retry shortly")
                .with_retry_after(1);
        }
        Self { cause: Some(cause), ..Self::new(ErrorCode::Internal, "an unexpected error occurred") }
    }

    /// Adds `retry_after` (seconds) to a 429 or 503.
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// Adds the `Allow` header (the methods the resource accepts) to a 405.
    pub fn with_allow(mut self, allow: impl Into<String>) -> Self {
        self.allow = Some(allow.into());
        self
    }

    /// A 401 of a route that takes no bearer token: no `WWW-Authenticate: Bearer`.
    pub fn without_bearer_challenge(mut self) -> Self {
        self.bearer_challenge = false;
        self
    }

    /// The error's code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// What happened, as the answer says it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The refused fields of a validation error.
    pub fn details(&self) -> &[FieldError] {
        &self.details
    }

    /// The status this error answers with under `settings`.
    pub fn status(&self, settings: &HttpSettings) -> StatusCode {
        self.code.status(settings)
    }

    /// An error standing for a response actix produced by itself (no handler ran).
    pub(crate) fn for_status(status: StatusCode) -> Self {
        let code = ErrorCode::for_status(status);
        let message = match code {
            ErrorCode::NotFound => "no such route",
            ErrorCode::MethodNotAllowed => "this route does not accept that method",
            _ => status.canonical_reason().unwrap_or("error"),
        };
        Self::new(code, message)
    }

    /// Renders the response under `settings`.
    pub fn render(&self, settings: &HttpSettings) -> HttpResponse {
        self.render_body(settings, self.body(settings.envelope))
    }

    /// Renders the response in OpenAI's error shape (the OpenAI-compatible routes), with the
    /// status and headers it has everywhere.
    pub fn render_openai(&self, settings: &HttpSettings) -> HttpResponse {
        self.render_body(settings, self.openai_body())
    }

    /// OpenAI's error shape: `{"error": {"message", "type", "param", "code"}}`, the type and
    /// code as OpenAI's clients know them (`insufficient_quota`, `rate_limit_exceeded`, ...).
    pub fn openai_body(&self) -> Value {
        let (kind, code) = match self.code {
            ErrorCode::ValidationError | ErrorCode::PayloadTooLarge | ErrorCode::UnsupportedMediaType => {
                ("invalid_request_error", None)
            }
            ErrorCode::Unauthorized | ErrorCode::InvalidCredentials | ErrorCode::InvalidToken => {
                ("invalid_request_error", Some("invalid_api_key"))
            }
            ErrorCode::Forbidden => ("invalid_request_error", Some("permission_denied")),
            ErrorCode::NotFound => ("invalid_request_error", Some("model_not_found")),
            ErrorCode::MethodNotAllowed => ("invalid_request_error", Some("method_not_allowed")),
            ErrorCode::Conflict => ("invalid_request_error", Some("model_paused")),
            ErrorCode::InsufficientCredits | ErrorCode::QuotaExceeded | ErrorCode::PaymentDeclined => {
                ("insufficient_quota", Some("insufficient_quota"))
            }
            ErrorCode::RateLimitExceeded => ("rate_limit_error", Some("rate_limit_exceeded")),
            ErrorCode::UpstreamError => ("api_error", Some("upstream_error")),
            ErrorCode::ModelBusy => ("api_error", Some("model_busy")),
            ErrorCode::Unavailable => ("api_error", Some("unavailable")),
            ErrorCode::Internal => ("server_error", None),
        };
        json!({"error": {
            "message": self.message,
            "type": kind,
            "param": self.details.first().map(|d| d.field.as_str()),
            "code": code,
        }})
    }

    fn render_body(&self, settings: &HttpSettings, body: Value) -> HttpResponse {
        let mut response = HttpResponse::build(self.status(settings));
        if let Some(seconds) = self.retry_after {
            response.insert_header((header::RETRY_AFTER, seconds.to_string()));
        }
        if self.code == ErrorCode::Unauthorized && self.bearer_challenge {
            response.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
        }
        if let Some(allow) = self.allow.as_deref().and_then(|a| HeaderValue::from_str(a).ok()) {
            response.insert_header((header::ALLOW, allow));
        }
        response.json(body)
    }

    /// The data of a streamed answer's `error` event: `{error, message}` (a stream is never
    /// wrapped by the envelope). Logs the cause of a server-side error, as a response would.
    pub fn event_data(&self) -> Value {
        self.log();
        json!({ "error": self.code.as_str(Envelope::Bare), "message": self.message })
    }

    /// The JSON body under `envelope`.
    pub fn body(&self, envelope: Envelope) -> Value {
        let code = self.code.as_str(envelope);
        match envelope {
            Envelope::Bare => {
                let mut body = json!({ "error": code, "message": self.message });
                if !self.details.is_empty() {
                    body["details"] = self
                        .details
                        .iter()
                        .map(|d| json!({ "field": d.field, "message": d.message }))
                        .collect::<Value>();
                }
                if let Some(seconds) = self.retry_after {
                    body["retry_after"] = json!(seconds);
                }
                body
            }
            Envelope::Wrapped => {
                let mut error = json!({ "code": code, "message": self.message });
                // The wrapped envelope has room for one field: the first refused one.
                if let Some(d) = self.details.first() {
                    error["details"] = json!({ "field": d.field, "reason": d.kind.code() });
                }
                if let Some(seconds) = self.retry_after {
                    error["retry_after"] = json!(seconds);
                }
                json!({ "success": false, "error": error })
            }
        }
    }

    /// Logs the cause of a server-side error; client errors are not worth a log line of their
    /// own (the access log has them).
    pub(crate) fn log(&self) {
        if let Some(cause) = &self.cause {
            tracing::error!(error = ?cause, "request failed");
        } else if self.code == ErrorCode::Internal {
            tracing::error!(message = %self.message, "request failed");
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(Envelope::Bare), self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status(&HttpSettings::default())
    }

    /// A default rendering; the request middleware renders the error again under the
    /// configured envelope (it can see the app's settings, this method cannot).
    fn error_response(&self) -> HttpResponse {
        self.render(&HttpSettings::default())
    }
}

impl From<ValidationErrors> for ApiError {
    fn from(e: ValidationErrors) -> Self {
        Self::validation(e.0)
    }
}

impl From<FieldError> for ApiError {
    fn from(e: FieldError) -> Self {
        Self::validation(vec![e])
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        Self::internal(e)
    }
}

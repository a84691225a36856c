//! Request extractors that answer every bad input with an [`ApiError`] in the configured
//! envelope: JSON and form bodies (content type, size, syntax, field types), and the bearer
//! credentials of the caller.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest, web};
use agentry_domain::validation::FieldErrorKind;
use futures_util::StreamExt as _;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ErrorCode};
use crate::settings::HttpSettings;

type LocalFuture<T> = Pin<Box<dyn Future<Output = Result<T, ApiError>>>>;

/// A JSON request body (`Content-Type: application/json`), at most the configured size.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

/// A form-urlencoded request body (`Content-Type: application/x-www-form-urlencoded`).
#[derive(Debug)]
pub struct FormBody<T>(pub T);

fn settings(req: &HttpRequest) -> HttpSettings {
    req.app_data::<web::Data<HttpSettings>>().map(|s| s.get_ref().clone()).unwrap_or_default()
}

fn media_type(req: &HttpRequest) -> Option<String> {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
}

fn is_json(media: &str) -> bool {
    media == "application/json" || (media.starts_with("application/") && media.ends_with("+json"))
}

/// Reads the whole body, refusing it with 413 as soon as it passes `limit`.
async fn read_body(mut payload: Payload, declared: Option<usize>, limit: usize) -> Result<Vec<u8>, ApiError> {
    let too_large = || {
        ApiError::new(ErrorCode::PayloadTooLarge, format!("the request body is larger than {limit} bytes"))
    };
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0).min(limit));
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::field(
                "body",
                FieldErrorKind::InvalidFormat,
                format!("the request body could not be read: {e}"),
            )
        })?;
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn declared_length(req: &HttpRequest) -> Option<usize> {
    req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok())
}

/// Turns a serde error into a field-level validation error, naming the field by its path.
fn json_error(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    if inner.is_syntax() || inner.is_eof() {
        return ApiError::field(
            "body",
            FieldErrorKind::InvalidFormat,
            format!("the request body is not valid JSON: {inner}"),
        );
    }
    let message = inner.to_string();
    // serde reports a missing field at the path of the object that lacks it.
    if let Some(field) = message.strip_prefix("missing field `").and_then(|m| m.split('`').next()) {
        let field = if path == "." { field.to_owned() } else { format!("{path}.{field}") };
        return ApiError::validation(vec![agentry_domain::validation::FieldError::missing(field)]);
    }
    let field = if path == "." { "body".to_owned() } else { path };
    let message = message.split(" at line ").next().unwrap_or(&message).to_owned();
    ApiError::field(field.clone(), FieldErrorKind::InvalidType, format!("{field}: {message}"))
}

impl<T: DeserializeOwned + 'static> FromRequest for JsonBody<T> {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let settings = settings(req);
        let media = media_type(req);
        let declared = declared_length(req);
        let payload = payload.take();
        Box::pin(async move {
            match media.as_deref() {
                Some(m) if is_json(m) => {}
                other => {
                    return Err(ApiError::new(
                        ErrorCode::UnsupportedMediaType,
                        format!("expected Content-Type application/json, got {}", other.unwrap_or("none")),
                    ));
                }
            }
            let body = read_body(payload, declared, settings.max_body_bytes).await?;
            if body.iter().all(u8::is_ascii_whitespace) {
                return Err(ApiError::field(
                    "body",
                    FieldErrorKind::MissingRequiredField,
                    "the request body is empty",
                ));
            }
            let mut de = serde_json::Deserializer::from_slice(&body);
            let value = serde_path_to_error::deserialize(&mut de).map_err(json_error)?;
            de.end().map_err(|e| {
                ApiError::field(
                    "body",
                    FieldErrorKind::InvalidFormat,
                    format!("the request body is not valid JSON: {e}"),
                )
            })?;
            Ok(JsonBody(value))
        })
    }
}

impl<T: DeserializeOwned + 'static> FromRequest for FormBody<T> {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let settings = settings(req);
        let media = media_type(req);
        let declared = declared_length(req);
        let payload = payload.take();
        Box::pin(async move {
            if media.as_deref() != Some("application/x-www-form-urlencoded") {
                return Err(ApiError::new(
                    ErrorCode::UnsupportedMediaType,
                    format!(
                        "expected Content-Type application/x-www-form-urlencoded, got {}",
                        media.as_deref().unwrap_or("none")
                    ),
                ));
            }
            let body = read_body(payload, declared, settings.max_body_bytes).await?;
            let value = serde_urlencoded::from_bytes(&body).map_err(|e| {
                ApiError::field(
                    "body",
                    FieldErrorKind::InvalidFormat,
                    format!("the form body is invalid: {e}"),
                )
            })?;
            Ok(FormBody(value))
        })
    }
}

/// A query string; a value of the wrong type is a validation error naming the parameter.
#[derive(Debug)]
pub struct QueryParams<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for QueryParams<T> {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(req.query_string().as_bytes()));
        let result = serde_path_to_error::deserialize(de).map(QueryParams).map_err(|e| {
            let field = e.path().to_string();
            let message = e.into_inner().to_string();
            ApiError::field(
                field.clone(),
                FieldErrorKind::InvalidType,
                format!("query parameter {field}: {message}"),
            )
        });
        std::future::ready(result)
    }
}

//! Request extractors that answer every bad input with an [`ApiError`] in the configured
//! envelope: JSON and form bodies (content type, size, syntax, field types), raw bodies (size),
//! and the bearer credentials of the caller.

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

mod nul;

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

/// How much of a refused body is still read (and thrown away) before the 413 is sent. A client
/// that writes its whole body before reading the answer (most HTTP libraries) would otherwise
/// see the connection closed under it, a broken pipe, instead of the 413; a body much larger
/// than this is cut off, as reading it would cost more than the clear answer is worth.
const REFUSED_BODY_DRAIN_BYTES: usize = 4 * 1024 * 1024;

/// Reads and discards what is left of a refused body, up to `budget` bytes.
async fn drain(payload: &mut Payload, budget: usize) {
    let mut read = 0;
    while read <= budget {
        match payload.next().await {
            Some(Ok(chunk)) => read += chunk.len(),
            _ => return,
        }
    }
}

/// Reads the whole body, refusing it with 413 as soon as it passes `limit`.
async fn read_body(mut payload: Payload, declared: Option<usize>, limit: usize) -> Result<Vec<u8>, ApiError> {
    let too_large = || {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    };
    if let Some(declared) = declared.filter(|n| *n > limit) {
        if declared <= REFUSED_BODY_DRAIN_BYTES {
            drain(&mut payload, REFUSED_BODY_DRAIN_BYTES).await;
        }
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
            drain(&mut payload, REFUSED_BODY_DRAIN_BYTES.saturating_sub(body.len())).await;
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn declared_length(req: &HttpRequest) -> Option<usize> {
    req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok())
}

/// Rewrites a serde message in the client's terms: JSON types (`an integer`, `an object`,
/// `an array`) instead of Rust ones (`i64`, `struct AgentRequest`, `a sequence`), and no
/// sizes of Rust integers.
pub fn describe_input_error(message: &str) -> String {
    let message = message.split(" at line ").next().unwrap_or(message);
    // "invalid value: integer `-1`, expected u32": the number does not fit.
    if let Some(rest) = message.strip_prefix("invalid value: integer `")
        && let Some((number, expected)) = rest.split_once("`, expected ")
        && is_rust_number(expected)
    {
        return format!("the number {number} is out of range");
    }
    if message.starts_with("number too large to fit in target type")
        || message.starts_with("number too small to fit in target type")
    {
        return "the number is out of range".to_owned();
    }
    let (head, expected) = match message.split_once(", expected ") {
        Some((head, expected)) => (head, Some(expected)),
        None => (message, None),
    };
    let head = head
        .replace("invalid type: map", "invalid type: object")
        .replace("invalid type: sequence", "invalid type: array")
        .replace("invalid type: floating point", "invalid type: number")
        .replace("invalid type: unit value", "invalid type: null")
        .replace("invalid type: integer", "invalid type: number");
    match expected {
        None => head,
        Some(expected) => format!("{head}, expected {}", describe_expected(expected)),
    }
}

fn is_rust_number(name: &str) -> bool {
    matches!(
        name,
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" | "u8" | "u16" | "u32" | "u64" | "u128" | "usize"
    )
}

fn describe_expected(expected: &str) -> String {
    match expected {
        e if is_rust_number(e) => "an integer".to_owned(),
        "f32" | "f64" => "a number".to_owned(),
        "a sequence" => "an array".to_owned(),
        "a map" => "an object".to_owned(),
        "unit" => "null".to_owned(),
        e if e.starts_with("struct ") || e.starts_with("a struct") => "an object".to_owned(),
        e if e.starts_with("enum ") || e.starts_with("variant ") => "one of the allowed values".to_owned(),
        other => other.to_owned(),
    }
}

/// Turns a serde error into a field-level validation error, naming the field by its path.
fn json_error(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    if inner.is_syntax() || inner.is_eof() {
        return ApiError::field(
            "body",
            FieldErrorKind::InvalidFormat,
            format!("the request body is not valid JSON: {}", describe_input_error(&inner.to_string())),
        );
    }
    let message = inner.to_string();
    // serde reports a missing field at the path of the object that lacks it.
    if let Some(field) = message.strip_prefix("missing field `").and_then(|m| m.split('`').next()) {
        let field = if path == "." { field.to_owned() } else { format!("{path}.{field}") };
        return ApiError::validation(vec![agentry_domain::validation::FieldError::missing(field)]);
    }
    let field = if path == "." { "body".to_owned() } else { path };
    ApiError::field(
        field.clone(),
        FieldErrorKind::InvalidType,
        format!("{field}: {}", describe_input_error(&message)),
    )
}

/// Reads a request type from a JSON value built by the server (the console turns its forms
/// into the API's request bodies this way), with the same field-named errors as a JSON body.
///
/// # Errors
/// A validation error naming the field of the wrong type or the missing one.
pub fn from_json_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    nul::refuse_in::<T>(&value)?;
    serde_path_to_error::deserialize(value).map_err(json_error)
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
            match body.iter().find(|b| !b.is_ascii_whitespace()) {
                None => {
                    return Err(ApiError::field(
                        "body",
                        FieldErrorKind::MissingRequiredField,
                        "the request body is empty",
                    ));
                }
                // Every body of this API is an object. serde would read `[…]` into a struct
                // field by field; refuse it (and `7`, `"x"`) up front.
                Some(b'{') => {}
                Some(_) => {
                    return Err(ApiError::field(
                        "body",
                        FieldErrorKind::InvalidType,
                        "the request body must be a JSON object",
                    ));
                }
            }
            nul::refuse::<T>(&body)?;
            let mut de = serde_json::Deserializer::from_slice(&body);
            let value = serde_path_to_error::deserialize(&mut de).map_err(json_error)?;
            de.end().map_err(|e| {
                ApiError::field(
                    "body",
                    FieldErrorKind::InvalidFormat,
                    format!("the request body is not valid JSON: {}", describe_input_error(&e.to_string())),
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
                    format!("the form body is invalid: {}", describe_input_error(&e.to_string())),
                )
            })?;
            Ok(FormBody(value))
        })
    }
}

/// A request body of any content type, as bytes, at most the configured size (413 past it):
/// for the inbound routes, whose signatures cover the raw body.
#[derive(Debug)]
pub struct RawBody(pub Vec<u8>);

impl FromRequest for RawBody {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let limit = settings(req).max_body_bytes;
        let declared = declared_length(req);
        let payload = payload.take();
        Box::pin(async move { read_body(payload, declared, limit).await.map(RawBody) })
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
            let message = describe_input_error(&e.into_inner().to_string());
            ApiError::field(
                field.clone(),
                FieldErrorKind::InvalidType,
                format!("query parameter {field}: {message}"),
            )
        });
        std::future::ready(result)
    }
}

#[cfg(test)]
mod tests {
    use super::describe_input_error;

    #[test]
    fn input_errors_speak_json_not_rust() {
        let cases = [
            (
                "invalid type: string \"x\", expected i64 at line 1 column 9",
                "invalid type: string \"x\", expected an integer",
            ),
            ("invalid type: integer `42`, expected a string", "invalid type: number `42`, expected a string"),
            ("invalid value: integer `-1`, expected u32", "the number -1 is out of range"),
            ("invalid type: map, expected a sequence", "invalid type: object, expected an array"),
            (
                "invalid type: sequence, expected struct CreateAgentRequest",
                "invalid type: array, expected an object",
            ),
            (
                "invalid type: floating point `1.5`, expected i64",
                "invalid type: number `1.5`, expected an integer",
            ),
            ("invalid type: string \"x\", expected f64", "invalid type: string \"x\", expected a number"),
            ("number too large to fit in target type", "the number is out of range"),
            (
                "unknown variant `x`, expected one of `a`, `b`",
                "unknown variant `x`, expected one of `a`, `b`",
            ),
        ];
        for (serde, ours) in cases {
            assert_eq!(describe_input_error(serde), ours);
        }
    }
}

/// A nested JSON object of a request body. serde reads a struct from an array too, field by
/// field (`"config": [null, 2]`); this reads only an object, and keeps serde's path of the
/// fields inside it for error messages.
#[derive(Debug, Default)]
pub struct JsonObject<T>(pub T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for JsonObject<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Visitor<T> {
            type Value = JsonObject<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(JsonObject)
            }
        }
        deserializer.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

/// An integer of a JSON body. JSON Schema counts `5.0` as an integer, so this does too; a
/// number with a fraction, or a string, is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonInt(pub i64);

impl<'de> serde::Deserialize<'de> for JsonInt {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = JsonInt;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an integer")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<JsonInt, E> {
                Ok(JsonInt(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<JsonInt, E> {
                // Past i64 it is past every bound of this API: saturate, and let the field's
                // own range check refuse it.
                Ok(JsonInt(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<JsonInt, E> {
                if v.fract() == 0.0 && v.is_finite() {
                    Ok(JsonInt(if v >= i64::MAX as f64 {
                        i64::MAX
                    } else if v <= i64::MIN as f64 {
                        i64::MIN
                    } else {
                        v as i64
                    }))
                } else {
                    Err(E::invalid_type(serde::de::Unexpected::Float(v), &self))
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod nested_tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Inner {
        a: Option<JsonInt>,
    }

    #[test]
    fn a_nested_object_must_be_an_object_and_integers_may_be_written_as_floats() {
        let ok: JsonObject<Inner> = serde_json::from_str(r#"{"a": 5.0}"#).unwrap();
        assert_eq!(ok.0.a, Some(JsonInt(5)));
        assert!(serde_json::from_str::<JsonObject<Inner>>("[5]").is_err());
        assert!(serde_json::from_str::<JsonObject<Inner>>(r#"{"a": 5.5}"#).is_err());
        assert!(serde_json::from_str::<JsonObject<Inner>>(r#"{"a": "5"}"#).is_err());
        let big: JsonObject<Inner> = serde_json::from_str(r#"{"a": 18446744073709551615}"#).unwrap();
        assert_eq!(big.0.a, Some(JsonInt(i64::MAX)));
    }
}

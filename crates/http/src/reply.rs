//! Success responses in the configured envelope, and the timestamp format of every body.

use actix_web::body::BoxBody;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, Responder, web};
use serde::Serialize;

use crate::settings::{Envelope, HttpSettings};

/// A successful JSON answer; wrapped as `{success: true, data}` when so configured.
#[derive(Debug)]
pub struct Reply<T> {
    status: StatusCode,
    body: T,
}

impl<T: Serialize> Reply<T> {
    /// 200 with `body`.
    pub fn ok(body: T) -> Self {
        Self { status: StatusCode::OK, body }
    }

    /// 201 with `body`.
    pub fn created(body: T) -> Self {
        Self { status: StatusCode::CREATED, body }
    }

    /// `status` with `body`.
    pub fn with_status(status: StatusCode, body: T) -> Self {
        Self { status, body }
    }
}

#[derive(Serialize)]
struct Wrapped<'a, T> {
    success: bool,
    data: &'a T,
}

impl<T: Serialize> Responder for Reply<T> {
    type Body = BoxBody;

    fn respond_to(self, req: &HttpRequest) -> HttpResponse<Self::Body> {
        let envelope = req.app_data::<web::Data<HttpSettings>>().map_or(Envelope::Bare, |s| s.envelope);
        let mut response = HttpResponse::build(self.status);
        match envelope {
            Envelope::Bare => response.json(&self.body),
            Envelope::Wrapped => response.json(Wrapped { success: true, data: &self.body }),
        }
    }
}

/// Serde helpers for RFC 3339 UTC timestamps with millisecond precision and `Z`.
pub mod timestamp {
    use chrono::{DateTime, Utc};
    use serde::Serializer;

    pub use agentry_domain::time::rfc3339::format;

    /// `#[serde(serialize_with = "timestamp::serialize")]`.
    ///
    /// # Errors
    /// As the serializer's.
    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        agentry_domain::time::rfc3339::serialize(t, s)
    }

    /// The same for an optional timestamp (`null` when absent).
    ///
    /// # Errors
    /// As the serializer's.
    pub fn serialize_opt<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => serialize(t, s),
            None => s.serialize_none(),
        }
    }
}

/// `#[serde(serialize_with = "reply::expose")]`: writes a secret into a response body — the one
/// place it is meant to leave the service (a token pair, a new API key). Everywhere else
/// `SecretString` keeps it out of `Debug` output and logs.
///
/// # Errors
/// As the serializer's.
pub fn expose<S: serde::Serializer>(secret: &secrecy::SecretString, s: S) -> Result<S::Ok, S::Error> {
    use secrecy::ExposeSecret as _;
    s.serialize_str(secret.expose_secret())
}

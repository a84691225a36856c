//! The console's session: three cookies, scoped to `/console`, so the JSON API never receives
//! them and never acts on a cookie (no cross-site request can ride on them there).
//!
//! - `agentry_access`: the session's JWT access token, exactly what the API takes as a bearer
//!   token. Every console request authenticates it through [`authenticate_counted`], the same
//!   call the API's extractor makes: revocation, membership, role and rate limit apply alike.
//! - `agentry_session`: the session's refresh token. When the access token has expired, a page
//!   load rotates it (the session lives on, as a client of the API would refresh); a script's
//!   request does not, it answers 401 and the script reloads the page. Only one request then
//!   rotates, so two concurrent refreshes never present the same token (which is reuse, and
//!   would end the session).
//! - `agentry_csrf`: 256 random bits made at sign-in. Every form carries it in a hidden field
//!   and every script request in `X-CSRF-Token`; a state-changing request whose value does not
//!   match the cookie is refused with 403 before anything runs. Another site can make a browser
//!   send the cookie (not with `SameSite=Lax` on a POST, but older browsers exist), never read
//!   it to put it in the form.
//!
//! All three are `HttpOnly` and `SameSite=Lax`, and `Secure` when the request came over https.

use std::collections::HashMap;

use actix_web::dev::Payload;
use actix_web::http::{Method, header};
use actix_web::{FromRequest, HttpMessage, HttpRequest, HttpResponse, web};
use agentry_domain::identity::TokenPair;
use agentry_domain::ids::TenantId;
use agentry_domain::tenancy::{Membership, Principal};
use agentry_domain::validation::check_path_id;
use secrecy::ExposeSecret as _;

use crate::AppState;
use crate::access::authenticate_counted;
use crate::error::{ApiError, ErrorCode};

type LocalFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ApiError>>>>;

/// The access token's cookie.
pub const ACCESS_COOKIE: &str = "agentry_access";
/// The refresh token's cookie.
pub const SESSION_COOKIE: &str = "agentry_session";
/// The CSRF token's cookie.
pub const CSRF_COOKIE: &str = "agentry_csrf";
/// The form field that carries the CSRF token.
pub const CSRF_FIELD: &str = "csrf";
/// The header that carries the CSRF token on script requests.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long the cookies are kept by the browser: the refresh token's own lifetime bounds the
/// session anyway.
const COOKIE_MAX_AGE_SECS: i64 = 30 * 24 * 3600;

/// The answer to a console request without a live session: a page load is sent to the sign-in
/// page, a script is told to reload.
pub fn signed_out() -> ApiError {
    ApiError::unauthorized("sign in to the console").without_bearer_challenge()
}

/// The answer to a state-changing request without the session's CSRF token.
pub fn csrf_refused() -> ApiError {
    ApiError::new(
        ErrorCode::Forbidden,
        "this form is missing its security token or is from an older session: reload the page and send it again",
    )
}

/// The cookies of the request.
pub(crate) fn cookies(req: &HttpRequest) -> HashMap<String, String> {
    req.headers()
        .get_all(header::COOKIE)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

fn is_https(req: &HttpRequest) -> bool {
    req.connection_info().scheme() == "https"
}

/// A `Set-Cookie` value of the console's cookies.
fn set_cookie(req: &HttpRequest, name: &str, value: &str, max_age: i64) -> String {
    let secure = if is_https(req) { "; Secure" } else { "" };
    format!("{name}={value}; Path=/console; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}")
}

/// Adds the cookies of a new session (or a refreshed one) to `response`.
pub fn start(req: &HttpRequest, response: &mut HttpResponse, pair: &TokenPair, csrf: Option<&str>) {
    let mut values = vec![
        set_cookie(req, ACCESS_COOKIE, &pair.access.token, COOKIE_MAX_AGE_SECS),
        set_cookie(req, SESSION_COOKIE, pair.refresh_token.expose_secret(), COOKIE_MAX_AGE_SECS),
    ];
    if let Some(csrf) = csrf {
        values.push(set_cookie(req, CSRF_COOKIE, csrf, COOKIE_MAX_AGE_SECS));
    }
    for value in values {
        if let Ok(value) = header::HeaderValue::from_str(&value) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
}

/// Sets the CSRF cookie alone (the sign-in page, before there is a session).
pub fn set_csrf(req: &HttpRequest, response: &mut HttpResponse, csrf: &str) {
    if let Ok(value) = header::HeaderValue::from_str(&set_cookie(req, CSRF_COOKIE, csrf, COOKIE_MAX_AGE_SECS))
    {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
}

/// Clears the console's cookies.
pub fn end(req: &HttpRequest, response: &mut HttpResponse) {
    for name in [ACCESS_COOKIE, SESSION_COOKIE, CSRF_COOKIE] {
        if let Ok(value) = header::HeaderValue::from_str(&set_cookie(req, name, "", 0)) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
}

/// A fresh CSRF token: 256 bits from the operating system's generator, as hex.
///
/// # Errors
/// When the generator fails (it does not on supported systems).
pub fn new_csrf_token() -> Result<String, ApiError> {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0_u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| ApiError::internal(anyhow::anyhow!("the system's random generator failed")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A session refreshed by this request: its new cookies are added to the response by
/// [`add_refreshed_cookies`].
#[derive(Clone)]
struct Refreshed(std::sync::Arc<TokenPair>);

/// Puts the cookies of a session refreshed while handling the request on its response.
pub fn add_refreshed_cookies(response: &mut actix_web::dev::ServiceResponse<actix_web::body::BoxBody>) {
    let refreshed = response.request().extensions().get::<Refreshed>().cloned();
    let Some(Refreshed(pair)) = refreshed else {
        return;
    };
    let request = response.request().clone();
    start(&request, response.response_mut(), &pair, None);
}

/// The signed-in user of a console request, acting in `tenant` (or their first tenant).
async fn signed_in(req: &HttpRequest, tenant: Option<TenantId>) -> Result<(Principal, String), ApiError> {
    let state = req
        .app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("application state is not configured")))?;
    let jar = cookies(req);
    let csrf = jar.get(CSRF_COOKIE).cloned().unwrap_or_default();
    let access = jar.get(ACCESS_COOKIE).filter(|t| !t.is_empty());
    if let Some(access) = access {
        match authenticate_counted(req, access, tenant.clone()).await {
            Ok(principal) => return Ok((principal, csrf)),
            Err(e) if e.code() == ErrorCode::Unauthorized => {}
            Err(e) => return Err(e),
        }
    }
    // Only a page load refreshes (see the module's comment); a script is told to reload.
    let navigation = req.method() == Method::GET && req.headers().get(CSRF_HEADER).is_none();
    let refresh = jar.get(SESSION_COOKIE).filter(|t| !t.is_empty());
    let (Some(refresh), true) = (refresh, navigation) else {
        return Err(signed_out());
    };
    let Ok(pair) = state.accounts.refresh(refresh).await else {
        return Err(signed_out());
    };
    let principal = authenticate_counted(req, &pair.access.token, tenant).await?;
    req.extensions_mut().insert(Refreshed(std::sync::Arc::new(pair)));
    Ok((principal, csrf))
}

/// A console request of a signed-in user in the tenant its path names (`/console/{tenant_id}/…`).
/// A tenant they are not a member of answers 404, as the API's tenant routes do; a request
/// without a live session is sent to the sign-in page.
#[derive(Debug, Clone)]
pub struct Console {
    /// The caller, in the path's tenant: what every domain service is handed.
    pub principal: Principal,
    /// The CSRF token the page's forms carry.
    pub csrf: String,
    /// The caller's tenants, for the switcher.
    pub memberships: Vec<Membership>,
    /// The caller's e-mail address.
    pub email: String,
}

impl std::ops::Deref for Console {
    type Target = Principal;
    fn deref(&self) -> &Principal {
        &self.principal
    }
}

impl Console {
    /// The path of the console's tenant, e.g. `/console/ten_…`.
    pub fn base(&self) -> String {
        format!("/console/{}", self.principal.tenant_id)
    }
}

impl FromRequest for Console {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let raw = req.match_info().get("tenant_id").unwrap_or_default().to_owned();
            if check_path_id(&raw, "tenant_id").is_err() || raw.len() > 128 {
                return Err(ApiError::not_found("no such tenant"));
            }
            let (principal, csrf) = match signed_in(&req, Some(TenantId::from_string(raw))).await {
                Err(e) if e.code() == ErrorCode::Forbidden => {
                    return Err(ApiError::not_found("no such tenant"));
                }
                other => other?,
            };
            Self::complete(&req, principal, csrf).await
        })
    }
}

impl Console {
    async fn complete(req: &HttpRequest, principal: Principal, csrf: String) -> Result<Self, ApiError> {
        let state = req
            .app_data::<web::Data<AppState>>()
            .cloned()
            .ok_or_else(|| ApiError::internal(anyhow::anyhow!("application state is not configured")))?;
        let me = state.accounts.me(&principal.user_id).await.map_err(ApiError::from)?;
        Ok(Self { principal, csrf, memberships: me.memberships, email: me.user.email.as_str().to_owned() })
    }
}

/// A console request of a signed-in user, in no tenant in particular (their first).
#[derive(Debug, Clone)]
pub struct SignedIn(pub Console);

impl FromRequest for SignedIn {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let (principal, csrf) = signed_in(&req, None).await?;
            Ok(Self(Console::complete(&req, principal, csrf).await?))
        })
    }
}

/// The fields of a console form, its CSRF token checked: a request whose token is missing or
/// does not match the session's answers 403 before its handler runs.
#[derive(Debug, Clone, Default)]
pub struct Form {
    fields: Vec<(String, String)>,
}

/// The largest form body the console takes (a document's text is the largest).
pub const FORM_LIMIT: usize = 2 * 1024 * 1024;

impl FromRequest for Form {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let req = req.clone();
        let body = web::Bytes::from_request(&req, payload);
        Box::pin(async move {
            let body = body.await.map_err(|_| {
                ApiError::new(ErrorCode::PayloadTooLarge, "the form is larger than the console takes (2 MiB)")
            })?;
            let fields: Vec<(String, String)> =
                form_urlencoded::parse(&body).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
            let presented = req
                .headers()
                .get(CSRF_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .or_else(|| fields.iter().find(|(k, _)| k == CSRF_FIELD).map(|(_, v)| v.clone()));
            let expected = cookies(&req).get(CSRF_COOKIE).cloned().unwrap_or_default();
            match presented {
                Some(p) if !expected.is_empty() && constant_time_eq(p.as_bytes(), expected.as_bytes()) => {
                    Ok(Self { fields })
                }
                _ => Err(csrf_refused()),
            }
        })
    }
}

impl Form {
    /// A field's value; `None` when absent. Blank values are kept (the domain decides).
    pub fn get(&self, name: &str) -> Option<String> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    /// A field's value, `None` when absent or blank.
    pub fn text(&self, name: &str) -> Option<String> {
        self.get(name).filter(|v| !v.trim().is_empty())
    }

    /// Every value of a repeated field (checkboxes).
    pub fn all(&self, name: &str) -> Vec<String> {
        self.fields.iter().filter(|(k, _)| k == name).map(|(_, v)| v.clone()).collect()
    }

    /// Whether a checkbox was ticked.
    pub fn checked(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// A field as a JSON value for the API's request types: absent or blank is null, a number
    /// is a number, anything else stays text (and is refused, naming the field, if the request
    /// type wants a number).
    pub fn number(&self, name: &str) -> serde_json::Value {
        let Some(raw) = self.text(name) else {
            return serde_json::Value::Null;
        };
        let raw = raw.trim();
        if let Ok(n) = raw.parse::<i64>() {
            return n.into();
        }
        raw.parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| serde_json::Value::String(raw.to_owned()), serde_json::Value::Number)
    }

    /// A field holding JSON text (an editor's content) as its value; absent or blank is null.
    ///
    /// # Errors
    /// A validation error naming `name` when the text is not JSON, with serde's position.
    pub fn json(&self, name: &str) -> Result<serde_json::Value, ApiError> {
        let Some(raw) = self.text(name) else {
            return Ok(serde_json::Value::Null);
        };
        serde_json::from_str(&raw).map_err(|e| {
            ApiError::field(
                name,
                agentry_domain::validation::FieldErrorKind::InvalidFormat,
                format!("{name} is not valid JSON: {e}"),
            )
        })
    }
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0_u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csrf_comparison_needs_equal_bytes_and_length() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }

    #[test]
    fn csrf_tokens_are_256_bits_of_hex_and_differ() {
        let (a, b) = (new_csrf_token().unwrap(), new_csrf_token().unwrap());
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}

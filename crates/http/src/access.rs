//! Who is calling and from where: the [`Caller`] extractor (a JWT access token or an API key,
//! resolved to one tenant), the client address, and the per-address throttle of the
//! unauthenticated auth routes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpMessage, HttpRequest, web};
use agentry_domain::identity::AccessError;
use agentry_domain::ids::TenantId;
use agentry_domain::ratelimit::RateStatus;
use agentry_domain::tenancy::Principal;
use agentry_domain::validation::{check_length, check_path_id};

use crate::AppState;
use crate::error::{ApiError, ErrorCode};

type LocalFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ApiError>>>>;

/// Runs `work` as a task of its own and waits for it: if the waiting future is dropped (the
/// client went away), the task still runs to its end. The request middleware does this for
/// every request but GET and HEAD; a GET handler whose work is several writes — the magic-link
/// exchange spends a token, then starts a session — wraps that work in this.
///
/// # Errors
/// The work's own error, or an internal error if the task panicked.
pub async fn run_to_completion<T: 'static>(
    work: impl std::future::Future<Output = Result<T, ApiError>> + 'static,
) -> Result<T, ApiError> {
    use tracing::Instrument as _;
    // In the request's span: what the work logs carries the request id.
    actix_web::rt::spawn(work.instrument(tracing::Span::current()))
        .await
        .map_err(|e| ApiError::internal(anyhow::anyhow!("request task failed: {e}")))?
}

fn state(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("application state is not configured")))
}

/// The bearer token of the request, before it is verified.
pub(crate) fn bearer_token(req: &HttpRequest) -> Result<String, ApiError> {
    let value = req
        .headers()
        .get(header::AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("missing Authorization: Bearer <token> header"))?;
    let value = value.to_str().map_err(|_| ApiError::unauthorized("malformed Authorization header"))?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
            Ok(token.trim().to_owned())
        }
        _ => Err(ApiError::unauthorized("the Authorization header must be: Bearer <token>")),
    }
}

/// The `tenant_id` query parameter, if present.
fn requested_tenant(req: &HttpRequest) -> Result<Option<TenantId>, ApiError> {
    let Some(value) = form_urlencoded::parse(req.query_string().as_bytes())
        .find(|(k, _)| k == "tenant_id")
        .map(|(_, v)| v.into_owned())
    else {
        return Ok(None);
    };
    check_path_id(&value, "tenant_id")?;
    check_length(&value, 1, 128, "tenant_id")?;
    Ok(Some(TenantId::from_string(value)))
}

/// Addresses refused after too many failed bearer authentications, until their window ends.
///
/// The failures are counted by the shared rate limiter (so every instance sees the same
/// count); once an address is over its budget, each instance remembers that here, so its
/// further attempts are refused before any credential is looked at — without a database read
/// on every authenticated request.
#[derive(Debug, Default)]
pub struct FailedAuthGate {
    blocked: Mutex<HashMap<String, i64>>,
}

impl FailedAuthGate {
    /// Seconds until `address` may try again, if it is refused at `now` (Unix seconds).
    fn retry_after(&self, address: &str, now: i64) -> Option<i64> {
        let mut blocked = self.blocked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match blocked.get(address) {
            Some(&until) if until > now => Some(until - now),
            Some(_) => {
                blocked.remove(address);
                None
            }
            None => None,
        }
    }

    fn block(&self, address: &str, until: i64, now: i64) {
        let mut blocked = self.blocked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Keep the map to the addresses that are refused right now.
        if blocked.len() > 10_000 {
            blocked.retain(|_, until| *until > now);
        }
        blocked.insert(address.to_owned(), until);
    }
}

/// The authenticated caller of a request, acting in the tenant named by the `tenant_id` query
/// parameter or, without one, in its own. Counts the request against the tenant's rate limit.
#[derive(Debug, Clone)]
pub struct Caller(pub Principal);

impl std::ops::Deref for Caller {
    type Target = Principal;
    fn deref(&self) -> &Principal {
        &self.0
    }
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            if let Some(caller) = req.extensions().get::<Caller>() {
                return Ok(caller.clone());
            }
            let tenant = requested_tenant(&req)?;
            resolve(&req, tenant).await
        })
    }
}

/// The caller of a route under `/tenants/{tenant_id}`, acting in that tenant. A tenant the
/// caller is not a member of (or that does not exist, or another tenant than an API key's own)
/// answers 404: the route never tells whether a tenant exists. The `tenant_id` query parameter
/// plays no part.
#[derive(Debug, Clone)]
pub struct TenantCaller(pub Principal);

impl std::ops::Deref for TenantCaller {
    type Target = Principal;
    fn deref(&self) -> &Principal {
        &self.0
    }
}

impl FromRequest for TenantCaller {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let no_such_tenant = || ApiError::not_found("no such tenant");
            let raw = req.match_info().get("tenant_id").unwrap_or_default().to_owned();
            if check_path_id(&raw, "tenant_id").is_err() || check_length(&raw, 1, 128, "tenant_id").is_err() {
                return Err(no_such_tenant());
            }
            match resolve(&req, Some(TenantId::from_string(raw))).await {
                Ok(caller) => Ok(Self(caller.0)),
                Err(e) if e.code() == ErrorCode::Forbidden => Err(no_such_tenant()),
                Err(e) => Err(e),
            }
        })
    }
}

/// Authenticates the request's bearer credential for `tenant` (or the credential's own) and
/// counts it against the tenant's rate limit.
async fn resolve(req: &HttpRequest, tenant: Option<TenantId>) -> Result<Caller, ApiError> {
    // A request without credentials guesses nothing: only presented ones count.
    let token = bearer_token(req)?;
    let caller = Caller(authenticate_counted(req, &token, tenant).await?);
    req.extensions_mut().insert(caller.clone());
    Ok(caller)
}

/// Authenticates `token` (an access token or an API key, however the request carried it) for
/// `tenant` (or the credential's own): a failure counts against the client address, a success
/// against the tenant's rate limit. The API's bearer header and the console's session cookie
/// both come here, so a console page is authorised and limited exactly as its API route.
///
/// # Errors
/// 401 for a refused credential, 403 for a tenant the caller is not a member of, 429 over a
/// limit.
pub(crate) async fn authenticate_counted(
    req: &HttpRequest,
    token: &str,
    tenant: Option<TenantId>,
) -> Result<Principal, ApiError> {
    let state = state(req)?;
    let address = client_address(req, &state.limits.trusted_proxies);
    let now = state.clock.now().timestamp();
    if let Some(retry_after) = state.failed_auth.retry_after(&address, now) {
        return Err(too_many_failures(u64::try_from(retry_after).unwrap_or(1)));
    }
    // Dropping this future halfway (a sibling extractor failed, the client left) loses
    // nothing: the writes in here (an API key's last use, a rate-limit count) are each a
    // unit of work that finishes on its own.
    let principal = match state.access.authenticate(token, tenant.as_ref()).await {
        Ok(principal) => principal,
        Err(AccessError::Unauthorized(reason)) => {
            let refused = ApiError::from(AccessError::Unauthorized(reason));
            return Err(count_failure(req, state, address, refused).await);
        }
        Err(e) => return Err(e.into()),
    };
    let quota = state.limits.quota_for(principal.plan);
    let status = state.limiter.check(&format!("tenant:{}", principal.tenant_id), quota).await?;
    req.extensions_mut().insert(status);
    if let Some(retry_after) = status.retry_after {
        return Err(rate_limited("plan", retry_after));
    }
    Ok(principal)
}

/// A refusal by the rate limit `limit` (a label of `/metrics`), counted.
pub(crate) fn rate_limited(limit: &'static str, retry_after: u64) -> ApiError {
    metrics::counter!(agentry_domain::metrics::RATE_LIMIT_REJECTIONS, "limit" => limit).increment(1);
    ApiError::new(ErrorCode::RateLimitExceeded, format!("rate limit exceeded; retry in {retry_after} s"))
        .with_retry_after(retry_after)
}

fn too_many_failures(retry_after: u64) -> ApiError {
    metrics::counter!(agentry_domain::metrics::RATE_LIMIT_REJECTIONS, "limit" => "failed_auth_per_ip")
        .increment(1);
    ApiError::new(
        ErrorCode::RateLimitExceeded,
        format!("too many failed authentications from this address; retry in {retry_after} s"),
    )
    .with_retry_after(retry_after)
}

fn client_address(req: &HttpRequest, trusted: &[IpAddr]) -> String {
    ClientIp::of(req, trusted).map_or_else(|| "unknown".to_owned(), |ip| ip.0.to_string())
}

/// Counts a failed bearer authentication against its client address. Past the budget, the
/// address is refused (429) until the window ends; before, the failure answers as `refused`.
async fn count_failure(
    req: &HttpRequest,
    state: web::Data<AppState>,
    address: String,
    refused: ApiError,
) -> ApiError {
    let bucket = format!("authfail:{address}");
    let quota = state.limits.failed_auth_per_ip;
    let counted = state.limiter.check(&bucket, quota).await.map_err(ApiError::from);
    match counted {
        Ok(status) => match status.retry_after {
            Some(retry_after) => {
                state.failed_auth.block(&address, status.reset_at, state.clock.now().timestamp());
                req.extensions_mut().insert(status);
                too_many_failures(retry_after)
            }
            None => refused,
        },
        Err(e) => e,
    }
}

/// The client's address: the socket peer, or — when the peer is a trusted proxy — the last
/// `X-Forwarded-For` entry that is not itself a trusted proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

impl ClientIp {
    /// Works out the client address of `req` given the trusted proxies.
    pub fn of(req: &HttpRequest, trusted: &[IpAddr]) -> Option<Self> {
        let peer = req.peer_addr()?.ip().to_canonical();
        if !trusted.contains(&peer) {
            return Some(Self(peer));
        }
        let forwarded: Vec<&str> = req
            .headers()
            .get_all("x-forwarded-for")
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect();
        // Walk from the nearest hop outwards: entries added by our own proxies are skipped; the
        // first other one is the client as our outermost proxy saw it. An entry that is not an
        // address ends the walk at the last trusted hop, so a client cannot slip a forged entry
        // past one its proxy wrote in another form.
        let mut client = peer;
        for entry in forwarded.iter().rev() {
            let Ok(ip) = entry.parse::<IpAddr>().map(|ip| ip.to_canonical()) else {
                break;
            };
            client = ip;
            if !trusted.contains(&ip) {
                break;
            }
        }
        Some(Self(client))
    }
}

/// One of the budgets the unauthenticated auth routes count against, each its own per client
/// address, so that people behind one address (an office, a NAT) who sign in do not spend the
/// budget of one who recovers an account, and the other way round. Refreshes count per token
/// family instead (see [`count_refresh`]).
pub trait AuthBudget: 'static {
    /// The counter's key prefix.
    const KEY: &'static str;
    /// The budget's label in `/metrics` (`agentry_rate_limit_rejections_total{limit}`).
    const LIMIT: &'static str;
}

/// Registration and sign-in with a password.
#[derive(Debug, Clone, Copy)]
pub struct SignIn;

impl AuthBudget for SignIn {
    const KEY: &'static str = "ip";
    const LIMIT: &'static str = "auth_per_ip";
}

/// Account recovery: password reset and magic-link requests, and their redemptions.
#[derive(Debug, Clone, Copy)]
pub struct Recovery;

impl AuthBudget for Recovery {
    const KEY: &'static str = "recovery-ip";
    const LIMIT: &'static str = "recovery_per_ip";
}

/// Counts a request to an unauthenticated auth route against its client address's budget `B`
/// (`AGENTRY_AUTH_RATE_PER_MINUTE` each), refusing it with 429 when spent.
#[derive(Debug, Clone, Copy)]
pub struct AuthThrottle<B: AuthBudget = SignIn>(pub RateStatus, std::marker::PhantomData<B>);

impl<B: AuthBudget> FromRequest for AuthThrottle<B> {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = state(&req)?;
            let ip = client_address(&req, &state.limits.trusted_proxies);
            let status = count(&req, &state, &format!("{}:{ip}", B::KEY), B::LIMIT).await?;
            Ok(Self(status, std::marker::PhantomData))
        })
    }
}

/// Counts a request against the budget `key` (`AGENTRY_AUTH_RATE_PER_MINUTE`), records the
/// status for the `X-RateLimit-*` headers, and refuses the request with 429 when spent.
async fn count(
    req: &HttpRequest,
    state: &AppState,
    key: &str,
    limit: &'static str,
) -> Result<RateStatus, ApiError> {
    let status = state.limiter.check(key, state.limits.auth_per_ip).await?;
    req.extensions_mut().insert(status);
    match status.retry_after {
        Some(retry_after) => Err(rate_limited(limit, retry_after)),
        None => Ok(status),
    }
}

/// Counts a refresh against its token family's budget (`AGENTRY_AUTH_RATE_PER_MINUTE`): a
/// session refreshes on its own, whoever shares its address. A token the service does not know
/// has no family and counts against its client address instead, so guessing stays throttled.
///
/// # Errors
/// 429 when the budget is spent; a storage failure.
pub async fn count_refresh(
    req: &HttpRequest,
    state: &AppState,
    presented: &str,
) -> Result<RateStatus, ApiError> {
    let key = match state.accounts.refresh_family(presented).await? {
        Some(family) => format!("family:{family}"),
        None => format!("refresh-ip:{}", client_address(req, &state.limits.trusted_proxies)),
    };
    count(req, state, &key, "refresh_per_family").await
}

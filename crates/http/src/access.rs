//! Who is calling and from where: the [`Caller`] extractor (a JWT access token or an API key,
//! resolved to one tenant), the client address, and the per-address throttle of the
//! unauthenticated auth routes.

use std::net::IpAddr;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpMessage, HttpRequest, web};
use agentry_domain::identity::Principal;
use agentry_domain::ids::TenantId;
use agentry_domain::ratelimit::RateStatus;

use crate::AppState;
use crate::error::{ApiError, ErrorCode};

type LocalFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ApiError>>>>;

/// Runs `work` as its own task on the worker's runtime and waits for it. If the waiting future
/// is dropped — a sibling extractor failed, the client went away — the task still runs to its
/// end instead of being cancelled halfway through a database call. (Cancelling a SQLite call
/// mid-flight is not safe on actix's single-threaded worker runtimes.)
pub async fn run_to_completion<T: 'static>(
    work: impl std::future::Future<Output = Result<T, ApiError>> + 'static,
) -> Result<T, ApiError> {
    actix_web::rt::spawn(work)
        .await
        .map_err(|e| ApiError::internal(anyhow::anyhow!("request task failed: {e}")))?
}

fn state(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("application state is not configured")))
}

/// The bearer token of the request, before it is verified.
fn bearer_token(req: &HttpRequest) -> Result<String, ApiError> {
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

/// The `tenant_id` query parameter, if present. An empty value counts as absent.
fn requested_tenant(req: &HttpRequest) -> Option<TenantId> {
    form_urlencoded::parse(req.query_string().as_bytes())
        .find(|(k, _)| k == "tenant_id")
        .map(|(_, v)| v.into_owned())
        .filter(|v| !v.is_empty())
        .map(TenantId::from_string)
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
            let state = state(&req)?;
            let token = bearer_token(&req)?;
            let tenant = requested_tenant(&req);
            let (principal, status) = run_to_completion(async move {
                let principal = state.access.authenticate(&token, tenant.as_ref()).await?;
                let quota = state.limits.quota_for(principal.plan);
                let status = state.limiter.check(&format!("tenant:{}", principal.tenant_id), quota).await?;
                Ok((principal, status))
            })
            .await?;
            req.extensions_mut().insert(status);
            if let Some(retry_after) = status.retry_after {
                return Err(rate_limited(retry_after));
            }
            let caller = Caller(principal);
            req.extensions_mut().insert(caller.clone());
            Ok(caller)
        })
    }
}

fn rate_limited(retry_after: u64) -> ApiError {
    ApiError::new(ErrorCode::RateLimitExceeded, format!("rate limit exceeded; retry in {retry_after} s"))
        .with_retry_after(retry_after)
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

/// Counts a request to an unauthenticated auth route against its client address's budget
/// (`AGENTRY_AUTH_RATE_PER_MINUTE`), refusing it with 429 when spent.
#[derive(Debug, Clone, Copy)]
pub struct AuthThrottle(pub RateStatus);

impl FromRequest for AuthThrottle {
    type Error = ApiError;
    type Future = LocalFuture<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = state(&req)?;
            let ip = ClientIp::of(&req, &state.limits.trusted_proxies)
                .map_or_else(|| "unknown".to_owned(), |ip| ip.0.to_string());
            let status = run_to_completion(async move {
                Ok(state.limiter.check(&format!("ip:{ip}"), state.limits.auth_per_ip).await?)
            })
            .await?;
            req.extensions_mut().insert(status);
            match status.retry_after {
                Some(retry_after) => Err(rate_limited(retry_after)),
                None => Ok(Self(status)),
            }
        })
    }
}

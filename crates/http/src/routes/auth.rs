//! `/auth`: registration, login, the current user, refresh and logout.

use actix_web::{HttpResponse, web};
use agentry_domain::identity::{CurrentUser, RegisterCommand, Registration, TokenPair};
use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::access::{AuthThrottle, Caller};
use crate::error::ApiError;
use crate::extract::{FormBody, JsonBody};
use crate::reply::{Reply, timestamp};

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/auth/register").route(web::post().to(register)))
        .service(web::resource("/auth/login").route(web::post().to(login)))
        .service(web::resource("/auth/me").route(web::get().to(me)))
        .service(web::resource("/auth/refresh").route(web::post().to(refresh)))
        .service(web::resource("/auth/logout").route(web::post().to(logout)));
}

/// Registration request.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RegisterRequest {
    /// E-mail address; trimmed and lower-cased.
    #[schema(required = true, value_type = String, example = "ada@example.com")]
    pub email: Option<String>,
    /// 8 to 128 characters.
    #[schema(required = true, value_type = String, example = "correct horse battery staple")]
    pub password: Option<String>,
    /// 1 to 200 characters.
    #[schema(required = true, value_type = String, example = "Ada Lovelace")]
    pub full_name: Option<String>,
    /// Names the tenant created for the user; optional.
    #[schema(example = "Analytical Engines")]
    pub company: Option<String>,
}

/// The registered user.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserResponse {
    /// User id.
    pub id: String,
    /// Normalised e-mail address.
    pub email: String,
    /// Full name.
    pub full_name: String,
    /// The tenant created at registration.
    pub tenant_id: String,
    /// Welcome credits granted to the tenant.
    pub credits: i64,
    /// When the user was created.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

impl From<Registration> for UserResponse {
    fn from(r: Registration) -> Self {
        Self {
            id: r.user.id.into_string(),
            email: r.user.email.as_str().to_owned(),
            full_name: r.user.full_name.as_str().to_owned(),
            tenant_id: r.tenant.id.into_string(),
            credits: r.credits,
            created_at: r.user.created_at,
        }
    }
}

/// Create an account: a user, a tenant owned by them, and welcome credits.
#[utoipa::path(
    post, path = "/api/v1/auth/register", tag = "auth",
    request_body = RegisterRequest,
    responses(
        (status = 201, description = "Registered", body = UserResponse),
        (status = 409, description = "E-mail already registered"),
        (status = 429, description = "Too many requests from this address"),
        (status = 422, description = "Invalid field (400 with the wrapped envelope)"),
    )
)]
pub async fn register(
    state: web::Data<AppState>,
    _throttle: AuthThrottle,
    body: JsonBody<RegisterRequest>,
) -> Result<Reply<UserResponse>, ApiError> {
    let r = body.0;
    let command = RegisterCommand::new(r.email, r.password, r.full_name, r.company)?;
    let registration = state.accounts.register(command).await?;
    Ok(Reply::created(registration.into()))
}

/// OAuth2-style password login form. Extra fields (`grant_type`, `scope`, …) are ignored.
#[derive(Debug, Deserialize, ToSchema)]
pub struct LoginForm {
    /// The e-mail address.
    #[schema(required = true, value_type = String)]
    pub username: Option<String>,
    /// The password.
    #[schema(required = true, value_type = String)]
    pub password: Option<String>,
}

/// An access token and the refresh token that renews it.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenResponse {
    /// JWT access token.
    pub access_token: String,
    /// Always `bearer`.
    #[schema(example = "bearer")]
    pub token_type: &'static str,
    /// Lifetime of the access token in seconds.
    #[schema(example = 3600)]
    pub expires_in: i64,
    /// Opaque refresh token; single use.
    pub refresh_token: String,
}

impl From<TokenPair> for TokenResponse {
    fn from(p: TokenPair) -> Self {
        Self {
            access_token: p.access.token,
            token_type: "bearer",
            expires_in: p.access.expires_in,
            refresh_token: p.refresh_token.expose_secret().to_owned(),
        }
    }
}

/// Sign in with e-mail and password.
#[utoipa::path(
    post, path = "/api/v1/auth/login", tag = "auth",
    request_body(content = LoginForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "Signed in", body = TokenResponse),
        (status = 401, description = "Unknown e-mail or wrong password (`invalid_credentials`)"),
        (status = 403, description = "Account deactivated"),
        (status = 415, description = "Not a form body"),
    )
)]
pub async fn login(
    state: web::Data<AppState>,
    _throttle: AuthThrottle,
    form: FormBody<LoginForm>,
) -> Result<Reply<TokenResponse>, ApiError> {
    let form = form.0;
    let mut v = agentry_domain::validation::Validator::new();
    let username = v.required("username", form.username, Ok);
    let password = v.required("password", form.password, Ok);
    v.finish()?;
    let (Some(username), Some(password)) = (username, password) else {
        return Err(ApiError::internal(anyhow::anyhow!("validator accepted missing login fields")));
    };
    let pair = state.accounts.login(&username, SecretString::from(password)).await?;
    Ok(Reply::ok(pair.into()))
}

/// A tenant the user belongs to.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantMembership {
    /// Tenant id.
    pub id: String,
    /// Tenant name.
    pub name: String,
    /// The user's role: `owner`, `admin`, `member` or `viewer`.
    pub role: &'static str,
}

/// The signed-in user.
#[derive(Debug, Serialize, ToSchema)]
pub struct MeResponse {
    /// User id.
    pub id: String,
    /// E-mail address.
    pub email: String,
    /// Full name.
    pub full_name: String,
    /// Whether the account is active.
    pub is_active: bool,
    /// Tenants the user belongs to, oldest first.
    pub tenants: Vec<TenantMembership>,
}

impl From<CurrentUser> for MeResponse {
    fn from(c: CurrentUser) -> Self {
        Self {
            id: c.user.id.into_string(),
            email: c.user.email.as_str().to_owned(),
            full_name: c.user.full_name.as_str().to_owned(),
            is_active: c.user.is_active,
            tenants: c
                .memberships
                .into_iter()
                .map(|m| TenantMembership {
                    id: m.tenant_id.into_string(),
                    name: m.tenant_name,
                    role: m.role.as_str(),
                })
                .collect(),
        }
    }
}

/// The current user and their tenants. Works with an access token or an API key.
#[utoipa::path(
    get, path = "/api/v1/auth/me", tag = "auth",
    security(("bearer" = [])),
    responses((status = 200, body = MeResponse), (status = 401, description = "Missing or invalid token"))
)]
pub async fn me(state: web::Data<AppState>, caller: Caller) -> Result<Reply<MeResponse>, ApiError> {
    let me = state.accounts.me(&caller.user_id).await?;
    Ok(Reply::ok(me.into()))
}

/// A refresh token.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RefreshRequest {
    /// The refresh token from login or the previous refresh.
    #[schema(required = true, value_type = String)]
    pub refresh_token: Option<String>,
}

impl RefreshRequest {
    fn token(self) -> Result<String, ApiError> {
        let mut v = agentry_domain::validation::Validator::new();
        let token = v.required("refresh_token", self.refresh_token, Ok);
        v.finish()?;
        token.ok_or_else(|| ApiError::internal(anyhow::anyhow!("validator accepted a missing token")))
    }
}

/// Exchange a refresh token for a new pair. The presented token is spent; presenting it again
/// revokes every token of its session.
#[utoipa::path(
    post, path = "/api/v1/auth/refresh", tag = "auth",
    request_body = RefreshRequest,
    responses((status = 200, body = TokenResponse), (status = 401, description = "Invalid, expired or reused"))
)]
pub async fn refresh(
    state: web::Data<AppState>,
    _throttle: AuthThrottle,
    body: JsonBody<RefreshRequest>,
) -> Result<Reply<TokenResponse>, ApiError> {
    let token = body.0.token()?;
    let pair = state.accounts.refresh(&token).await?;
    Ok(Reply::ok(pair.into()))
}

/// End the session the refresh token belongs to.
#[utoipa::path(
    post, path = "/api/v1/auth/logout", tag = "auth",
    security(("bearer" = [])),
    request_body = RefreshRequest,
    responses((status = 204, description = "Signed out (also for an unknown token)"), (status = 401))
)]
pub async fn logout(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<RefreshRequest>,
) -> Result<HttpResponse, ApiError> {
    let token = body.0.token()?;
    state.accounts.logout(&caller.user_id, &token).await?;
    Ok(HttpResponse::NoContent().finish())
}

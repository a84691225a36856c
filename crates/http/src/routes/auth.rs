//! `/auth`: registration, login, the current user, refresh and logout.

use actix_web::{HttpResponse, web};
use agentry_domain::identity::{CurrentUser, RegisterCommand, Registration, TokenPair};
use agentry_domain::validation::{FieldError, TextKind, ValidationErrors, Validator, check_text};
use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::access::{AuthThrottle, Caller, count_refresh};
use crate::error::ApiError;
use crate::extract::{FormBody, JsonBody};
use crate::reply::{Reply, expose, timestamp};

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
    #[schema(required = true, value_type = String, format = Email, max_length = 254, example = "ada@example.com")]
    pub email: Option<String>,
    /// 8 to 128 characters, no control characters.
    #[schema(required = true, value_type = String, format = Password, min_length = 8, max_length = 128, extensions(("x-text" = json!("one-line"))),
        example = "correct horse battery staple")]
    pub password: Option<SecretString>,
    /// 1 to 200 characters.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 200, extensions(("x-text" = json!("name"))),
        example = "Ada Lovelace")]
    pub full_name: Option<String>,
    /// Names the tenant created for the user; optional (blank is the same as absent).
    #[schema(max_length = 200, extensions(("x-text" = json!("one-line"))), example = "Analytical Engines")]
    pub company: Option<String>,
}

impl RegisterRequest {
    fn try_into_domain(self) -> Result<RegisterCommand, ValidationErrors> {
        RegisterCommand::new(self.email, self.password, self.full_name, self.company)
    }
}

/// The registered user.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserResponse {
    /// User id.
    pub id: String,
    /// Normalised e-mail address.
    #[schema(format = Email)]
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
    post, path = "/api/v1/auth/register", tag = "auth", operation_id = "register",
    request_body = RegisterRequest,
    extensions(("x-rate-limit" = json!("client address"))),
    responses(
        (status = 201, description = "Registered", body = UserResponse),
        (status = 409, description = "`conflict`: an account with this e-mail address exists"),
    )
)]
pub async fn register(
    state: web::Data<AppState>,
    _throttle: AuthThrottle,
    body: JsonBody<RegisterRequest>,
) -> Result<Reply<UserResponse>, ApiError> {
    let command = body.0.try_into_domain()?;
    let registration = state.accounts.register(command).await?;
    Ok(Reply::created(registration.into()))
}

/// OAuth2-style password login form. Extra fields (`grant_type`, `scope`, …) are ignored.
#[derive(Debug, Deserialize, ToSchema)]
pub struct LoginForm {
    /// The e-mail address.
    #[schema(required = true, value_type = String, max_length = 1024, extensions(("x-text" = json!("one-line"))))]
    pub username: Option<String>,
    /// The password.
    #[schema(required = true, value_type = String, format = Password, max_length = 1024, extensions(("x-text" = json!("one-line"))))]
    pub password: Option<SecretString>,
}

/// Longest username or password a login form may carry; longer ones cannot match anything.
const MAX_LOGIN_FIELD_CHARS: usize = 1024;

impl LoginForm {
    fn try_into_domain(self) -> Result<(String, SecretString), ValidationErrors> {
        let one_line = |field: &str, value: &str| -> Result<(), FieldError> {
            check_text(value, field, TextKind::SingleLine)?;
            agentry_domain::validation::check_length(value, 0, MAX_LOGIN_FIELD_CHARS, field)
        };
        let mut v = Validator::new();
        let username = v.required("username", self.username, |u| one_line("username", &u).map(|()| u));
        let password =
            v.required("password", self.password, |p| one_line("password", p.expose_secret()).map(|()| p));
        v.finish((username, password))
    }
}

/// An access token and the refresh token that renews it.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenResponse {
    /// JWT access token.
    #[serde(serialize_with = "expose")]
    #[schema(value_type = String)]
    pub access_token: SecretString,
    /// Always `bearer`.
    #[schema(example = "bearer")]
    pub token_type: &'static str,
    /// Lifetime of the access token in seconds.
    #[schema(example = 3600)]
    pub expires_in: i64,
    /// Opaque refresh token; single use.
    #[serde(serialize_with = "expose")]
    #[schema(value_type = String)]
    pub refresh_token: SecretString,
}

impl From<TokenPair> for TokenResponse {
    fn from(p: TokenPair) -> Self {
        Self {
            access_token: SecretString::from(p.access.token),
            token_type: "bearer",
            expires_in: p.access.expires_in,
            refresh_token: p.refresh_token,
        }
    }
}

/// Sign in with e-mail and password.
#[utoipa::path(
    post, path = "/api/v1/auth/login", tag = "auth", operation_id = "login",
    request_body(content = LoginForm, content_type = "application/x-www-form-urlencoded"),
    extensions(("x-rate-limit" = json!("client address"))),
    responses(
        (status = 200, description = "Signed in", body = TokenResponse),
        (status = 401, description = "`invalid_credentials`: unknown e-mail or wrong password"),
        (status = 403, description = "`forbidden`: the account is deactivated"),
    )
)]
pub async fn login(
    state: web::Data<AppState>,
    _throttle: AuthThrottle,
    form: FormBody<LoginForm>,
) -> Result<Reply<TokenResponse>, ApiError> {
    let (username, password) = form.0.try_into_domain()?;
    let pair = state.accounts.login(&username, password).await?;
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
    #[schema(format = Email)]
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
    get, path = "/api/v1/auth/me", tag = "auth", operation_id = "getCurrentUser",
    security(("bearer" = [])),
    responses((status = 200, description = "The current user", body = MeResponse))
)]
pub async fn me(state: web::Data<AppState>, caller: Caller) -> Result<Reply<MeResponse>, ApiError> {
    let me = state.accounts.me(&caller.user_id).await?;
    Ok(Reply::ok(me.into()))
}

/// A refresh token.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RefreshRequest {
    /// The refresh token from login or the previous refresh.
    #[schema(required = true, value_type = String, max_length = 1024, extensions(("x-text" = json!("one-line"))))]
    pub refresh_token: Option<SecretString>,
}

impl RefreshRequest {
    fn try_into_domain(self) -> Result<SecretString, ValidationErrors> {
        let mut v = Validator::new();
        let token = v.required("refresh_token", self.refresh_token, |t| {
            check_text(t.expose_secret(), "refresh_token", TextKind::SingleLine)?;
            agentry_domain::validation::check_length(t.expose_secret(), 0, 1024, "refresh_token")?;
            Ok(t)
        });
        v.finish(token)
    }
}

/// Exchange a refresh token for a new pair. The presented token is spent; presenting it again
/// revokes every token of its session.
#[utoipa::path(
    post, path = "/api/v1/auth/refresh", tag = "auth", operation_id = "refreshToken",
    request_body = RefreshRequest,
    extensions(("x-rate-limit" = json!("the token's family (a token the service does not know: the client address)"))),
    responses(
        (status = 200, description = "A new token pair", body = TokenResponse),
        (status = 401, description = "`unauthorized`: the refresh token is unknown, expired, revoked or reused"),
    )
)]
pub async fn refresh(
    req: actix_web::HttpRequest,
    state: web::Data<AppState>,
    body: JsonBody<RefreshRequest>,
) -> Result<Reply<TokenResponse>, ApiError> {
    let token = body.0.try_into_domain()?;
    count_refresh(&req, &state, token.expose_secret()).await?;
    let pair = state.accounts.refresh(token.expose_secret()).await?;
    Ok(Reply::ok(pair.into()))
}

/// End the session the refresh token belongs to; its access tokens stop working at once.
#[utoipa::path(
    post, path = "/api/v1/auth/logout", tag = "auth", operation_id = "logout",
    security(("bearer" = [])),
    request_body = RefreshRequest,
    responses((status = 204, description = "Signed out (also for an unknown token)"))
)]
pub async fn logout(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<RefreshRequest>,
) -> Result<HttpResponse, ApiError> {
    let token = body.0.try_into_domain()?;
    state.accounts.logout(&caller.user_id, token.expose_secret()).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_reports_every_bad_field() {
        let request = RegisterRequest {
            email: Some("nope".into()),
            password: Some(SecretString::from("short")),
            full_name: Some("Ada\u{0}".into()),
            company: None,
        };
        let fields: Vec<String> =
            request.try_into_domain().unwrap_err().0.into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["email", "password", "full_name"]);
    }

    #[test]
    fn a_login_form_refuses_control_characters_and_reports_missing_fields() {
        let form = LoginForm { username: Some("a\u{0}@b.co".into()), password: None };
        let errors = form.try_into_domain().unwrap_err().0;
        let got: Vec<(&str, &str)> = errors.iter().map(|e| (e.field.as_str(), e.kind.code())).collect();
        assert_eq!(got, [("username", "invalid_format"), ("password", "missing_required_field")]);
    }
}

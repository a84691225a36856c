//! Password reset and magic-link sign-in by e-mail.

use actix_web::web;
use agentry_domain::identity::{Email, Password};
use agentry_domain::validation::Validator;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::access::AuthThrottle;
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::reply::Reply;
use crate::routes::auth::TokenResponse;

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/auth/forgot-password").route(web::post().to(forgot_password)))
        .service(web::resource("/auth/reset-password").route(web::post().to(reset_password)))
        .service(web::resource("/auth/magic-link").route(web::post().to(request_magic_link)))
        .service(web::resource("/auth/magic-link/{token}").route(web::get().to(exchange_magic_link)));
}

/// An address to send a link to.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EmailRequest {
    /// The account's e-mail address.
    #[schema(required = true, value_type = String, example = "ada@example.com")]
    pub email: Option<String>,
}

impl EmailRequest {
    fn email(self) -> Result<Email, ApiError> {
        let mut v = Validator::new();
        let email = v.required("email", self.email, |e| Email::parse(&e));
        v.finish()?;
        email.ok_or_else(|| ApiError::internal(anyhow::anyhow!("validator accepted a missing e-mail")))
    }
}

/// The same answer for every address.
#[derive(Debug, Serialize, ToSchema)]
pub struct Accepted {
    /// What happens next.
    pub message: &'static str,
}

const SENT_IF_KNOWN: &str =
    "If an account exists for this address, an e-mail with a link is on its way. The link works once.";

/// Ask for a password-reset e-mail. Answers 202 alike for known and unknown addresses.
#[utoipa::path(
    post, path = "/api/v1/auth/forgot-password", tag = "auth",
    request_body = EmailRequest,
    responses((status = 202, body = Accepted), (status = 422, description = "Not an e-mail address"), (status = 429))
)]
pub async fn forgot_password(
    state: web::Data<AppState>,
    _throttle: AuthThrottle,
    body: JsonBody<EmailRequest>,
) -> Result<Reply<Accepted>, ApiError> {
    let email = body.0.email()?;
    state.recovery.request_password_reset(&email).await?;
    Ok(Reply::with_status(actix_web::http::StatusCode::ACCEPTED, Accepted { message: SENT_IF_KNOWN }))
}

/// A reset token from the e-mail and the new password.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ResetPasswordRequest {
    /// The token from the e-mail's link.
    #[schema(required = true, value_type = String)]
    pub token: Option<String>,
    /// 8 to 128 characters.
    #[schema(required = true, value_type = String)]
    pub new_password: Option<String>,
}

/// Set a new password with a reset token. Every session of the user ends.
#[utoipa::path(
    post, path = "/api/v1/auth/reset-password", tag = "auth",
    request_body = ResetPasswordRequest,
    responses(
        (status = 200, body = Accepted),
        (status = 400, description = "`invalid_token`: unknown, used or expired"),
        (status = 422, description = "Missing token or unacceptable password"),
    )
)]
pub async fn reset_password(
    state: web::Data<AppState>,
    _throttle: AuthThrottle,
    body: JsonBody<ResetPasswordRequest>,
) -> Result<Reply<Accepted>, ApiError> {
    let r = body.0;
    let mut v = Validator::new();
    let token = v.required("token", r.token, Ok);
    let password = v.required("new_password", r.new_password, Password::new);
    v.finish()?;
    let (Some(token), Some(password)) = (token, password) else {
        return Err(ApiError::internal(anyhow::anyhow!("validator accepted missing reset fields")));
    };
    state.recovery.reset_password(&token, &password).await?;
    Ok(Reply::ok(Accepted {
        message: "Password changed. Every session was signed out; sign in with the new password.",
    }))
}

/// Ask for a magic sign-in link. Answers 202 alike for known and unknown addresses.
#[utoipa::path(
    post, path = "/api/v1/auth/magic-link", tag = "auth",
    request_body = EmailRequest,
    responses((status = 202, body = Accepted), (status = 422, description = "Not an e-mail address"), (status = 429))
)]
pub async fn request_magic_link(
    state: web::Data<AppState>,
    _throttle: AuthThrottle,
    body: JsonBody<EmailRequest>,
) -> Result<Reply<Accepted>, ApiError> {
    let email = body.0.email()?;
    state.recovery.request_magic_link(&email).await?;
    Ok(Reply::with_status(actix_web::http::StatusCode::ACCEPTED, Accepted { message: SENT_IF_KNOWN }))
}

/// Exchange a magic-link token for a session, once.
#[utoipa::path(
    get, path = "/api/v1/auth/magic-link/{token}", tag = "auth",
    params(("token" = String, Path, description = "The token from the e-mail")),
    responses((status = 200, body = TokenResponse), (status = 400, description = "`invalid_token`: unknown, used or expired"))
)]
pub async fn exchange_magic_link(
    state: web::Data<AppState>,
    _throttle: AuthThrottle,
    token: web::Path<String>,
) -> Result<Reply<TokenResponse>, ApiError> {
    let pair = state.recovery.exchange_magic_link(&token).await?;
    Ok(Reply::ok(pair.into()))
}

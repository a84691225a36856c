//! Password reset and magic-link sign-in by e-mail.

use actix_web::http::StatusCode;
use actix_web::web;
use agentry_domain::identity::{Email, Password};
use agentry_domain::validation::{
    FieldError, TextKind, ValidationErrors, Validator, check_length, check_path_id, check_text,
};
use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::access::{AuthThrottle, Recovery, run_to_completion};
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
    #[schema(required = true, value_type = String, format = Email, max_length = 254, example = "ada@example.com")]
    pub email: Option<String>,
}

impl EmailRequest {
    fn try_into_domain(self) -> Result<Email, ValidationErrors> {
        let mut v = Validator::new();
        let email = v.required("email", self.email, |e| Email::parse(&e));
        v.finish(email)
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

/// Ask for a password-reset e-mail. Answers 202 alike for known and unknown addresses, in the
/// same time: the request is stored and the e-mail sent in the background.
#[utoipa::path(
    post, path = "/api/v1/auth/forgot-password", tag = "auth", operation_id = "forgotPassword",
    request_body = EmailRequest,
    extensions(("x-rate-limit" = json!("client address"))),
    responses((status = 202, description = "Accepted (the same for every address)", body = Accepted))
)]
pub async fn forgot_password(
    state: web::Data<AppState>,
    _throttle: AuthThrottle<Recovery>,
    body: JsonBody<EmailRequest>,
) -> Result<Reply<Accepted>, ApiError> {
    let email = body.0.try_into_domain()?;
    state.recovery.request_password_reset(&email).await?;
    Ok(Reply::with_status(StatusCode::ACCEPTED, Accepted { message: SENT_IF_KNOWN }))
}

/// A one-time token from an e-mail: URL-safe text, as short as the service makes them.
fn one_time_token(raw: &str, field: &str) -> Result<(), FieldError> {
    check_text(raw, field, TextKind::SingleLine)?;
    check_length(raw, 1, MAX_TOKEN_CHARS, field)
}

/// Longest token accepted; the service's own are 43 characters.
const MAX_TOKEN_CHARS: usize = 256;

/// A reset token from the e-mail and the new password.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ResetPasswordRequest {
    /// The token from the e-mail's link.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 256, extensions(("x-text" = json!("one-line"))))]
    pub token: Option<SecretString>,
    /// 8 to 128 characters, no control characters.
    #[schema(required = true, value_type = String, format = Password, min_length = 8, max_length = 128, extensions(("x-text" = json!("one-line"))))]
    pub new_password: Option<SecretString>,
}

impl ResetPasswordRequest {
    /// The token and the validated new password.
    ///
    /// # Errors
    /// [`ValidationErrors`] naming each missing or invalid field.
    pub fn try_into_domain(self) -> Result<(SecretString, Password), ValidationErrors> {
        let mut v = Validator::new();
        let token =
            v.required("token", self.token, |t| one_time_token(t.expose_secret(), "token").map(|()| t));
        let password = v.required("new_password", self.new_password, Password::from_secret);
        v.finish((token, password))
    }
}

/// Set a new password with a reset token. Every session of the user ends, and every other link
/// mailed to them stops working.
#[utoipa::path(
    post, path = "/api/v1/auth/reset-password", tag = "auth", operation_id = "resetPassword",
    request_body = ResetPasswordRequest,
    extensions(("x-rate-limit" = json!("client address"))),
    responses(
        (status = 200, description = "Password changed", body = Accepted),
        (status = 400, description = "`invalid_token`: unknown, used or expired"),
    )
)]
pub async fn reset_password(
    state: web::Data<AppState>,
    _throttle: AuthThrottle<Recovery>,
    body: JsonBody<ResetPasswordRequest>,
) -> Result<Reply<Accepted>, ApiError> {
    let (token, password) = body.0.try_into_domain()?;
    state.recovery.reset_password(token.expose_secret(), &password).await?;
    Ok(Reply::ok(Accepted { message: PASSWORD_CHANGED }))
}

/// What a successful reset answers.
pub const PASSWORD_CHANGED: &str =
    "Password changed. Every session was signed out; sign in with the new password.";

/// Ask for a magic sign-in link. Answers 202 alike for known and unknown addresses, in the
/// same time.
#[utoipa::path(
    post, path = "/api/v1/auth/magic-link", tag = "auth", operation_id = "requestMagicLink",
    request_body = EmailRequest,
    extensions(("x-rate-limit" = json!("client address"))),
    responses((status = 202, description = "Accepted (the same for every address)", body = Accepted))
)]
pub async fn request_magic_link(
    state: web::Data<AppState>,
    _throttle: AuthThrottle<Recovery>,
    body: JsonBody<EmailRequest>,
) -> Result<Reply<Accepted>, ApiError> {
    let email = body.0.try_into_domain()?;
    state.recovery.request_magic_link(&email).await?;
    Ok(Reply::with_status(StatusCode::ACCEPTED, Accepted { message: SENT_IF_KNOWN }))
}

/// Checks a magic-link token taken from a path.
///
/// # Errors
/// A validation error for control characters or an absurd length.
pub fn magic_link_token(raw: &str) -> Result<(), ApiError> {
    check_path_id(raw, "token")?;
    Ok(one_time_token(raw, "token")?)
}

/// Exchange a magic-link token for a session, once.
#[utoipa::path(
    get, path = "/api/v1/auth/magic-link/{token}", tag = "auth", operation_id = "exchangeMagicLink",
    params(("token" = String, Path, description = "The token from the e-mail", min_length = 1, max_length = 256)),
    extensions(("x-rate-limit" = json!("client address"))),
    responses(
        (status = 200, description = "Signed in", body = TokenResponse),
        (status = 400, description = "`invalid_token`: unknown, used or expired"),
    )
)]
pub async fn exchange_magic_link(
    state: web::Data<AppState>,
    _throttle: AuthThrottle<Recovery>,
    token: web::Path<String>,
) -> Result<Reply<TokenResponse>, ApiError> {
    magic_link_token(&token)?;
    // A GET that writes twice (spends the token, starts a session): see `run_to_completion`.
    let pair =
        run_to_completion(async move { Ok(state.recovery.exchange_magic_link(&token).await?) }).await?;
    Ok(Reply::ok(pair.into()))
}

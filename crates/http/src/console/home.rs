//! Signing in and out of the console, and moving between tenants.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use agentry_domain::identity::{Email, LoginError};
use minijinja::context;
use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;

use super::render::{bare_page, redirect};
use super::session::{self, Form, SignedIn};
use crate::AppState;
use crate::access::{AuthThrottle, Recovery, SignIn, authenticate_counted, bearer_token};
use crate::error::ApiError;

/// Routes at the console's root.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("", web::get().to(home))
        .route("/", web::get().to(home))
        .route("/sign-in", web::get().to(sign_in_page))
        .route("/sign-in", web::post().to(sign_in))
        .route("/magic-link", web::post().to(request_magic_link))
        .route("/sign-out", web::post().to(sign_out))
        .route("/session", web::post().to(session_from_token))
        .route("/switch", web::get().to(switch));
}

/// Routes of a tenant's root.
pub fn configure_tenant(cfg: &mut web::ServiceConfig) {
    cfg.route("", web::get().to(tenant_home)).route("/docs", web::get().to(docs));
}

async fn home(signed_in: SignedIn) -> HttpResponse {
    redirect(format!("{}/agents", signed_in.0.base()))
}

async fn tenant_home(console: super::Console) -> HttpResponse {
    redirect(format!("{}/agents", console.base()))
}

async fn docs(_console: super::Console) -> HttpResponse {
    redirect("/docs/")
}

#[derive(Debug, Deserialize)]
struct SignInQuery {
    next: Option<String>,
}

/// Where to go after signing in: a console path, never another site.
fn safe_next(next: Option<String>) -> String {
    next.filter(|n| n.starts_with("/console") && !n.contains("//") && !n.contains('\\'))
        .unwrap_or_else(|| "/console".to_owned())
}

/// The CSRF token of the sign-in forms: the browser's, or a new one set with the page. Signing
/// in checks it too, so another site cannot sign a visitor into an account of its own.
fn sign_in_csrf(req: &HttpRequest) -> Result<(String, bool), ApiError> {
    let existing = session::cookies(req).remove(session::CSRF_COOKIE).filter(|v| !v.is_empty());
    match existing {
        Some(token) => Ok((token, false)),
        None => Ok((session::new_csrf_token()?, true)),
    }
}

fn sign_in_form(
    req: &HttpRequest,
    status: StatusCode,
    next: &str,
    email: &str,
    notice: Option<&str>,
    error: Option<&str>,
) -> Result<HttpResponse, ApiError> {
    let (csrf, new) = sign_in_csrf(req)?;
    let mut response = bare_page(
        status,
        "Sign in to the console",
        "sign_in.html",
        context! { csrf, next, email, notice, error },
    )?;
    if new {
        session::set_csrf(req, &mut response, &csrf);
    }
    Ok(response)
}

async fn sign_in_page(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let query = serde_urlencoded::from_str::<SignInQuery>(req.query_string()).ok();
    let next = safe_next(query.and_then(|q| q.next));
    sign_in_form(&req, StatusCode::OK, &next, "", None, None)
}

async fn sign_in(
    req: HttpRequest,
    state: web::Data<AppState>,
    _throttle: AuthThrottle<SignIn>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    // Besides the form's token (checked by `Form`): a session is never started from another
    // site's page.
    if crate::origin::is_cross_origin(&req) {
        return Err(session::csrf_refused());
    }
    let next = safe_next(form.get("next"));
    let email = form.get("email").unwrap_or_default();
    let password = SecretString::from(form.get("password").unwrap_or_default());
    match state.accounts.login(&email, password).await {
        Ok(pair) => {
            let mut response = redirect(next);
            // A new CSRF token with the new session: one fixed before signing in is not kept.
            session::start(&req, &mut response, &pair, Some(&session::new_csrf_token()?));
            Ok(response)
        }
        Err(LoginError::InvalidCredentials) => sign_in_form(
            &req,
            StatusCode::UNAUTHORIZED,
            &next,
            &email,
            None,
            Some("The e-mail address or the password is wrong."),
        ),
        Err(e) => Err(e.into()),
    }
}

async fn request_magic_link(
    req: HttpRequest,
    state: web::Data<AppState>,
    _throttle: AuthThrottle<Recovery>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let email = form.get("email").unwrap_or_default();
    let parsed = Email::parse(&email).map_err(|e| ApiError::validation(vec![e]))?;
    state.recovery.request_magic_link(&parsed).await?;
    sign_in_form(
        &req,
        StatusCode::OK,
        "/console",
        "",
        Some("If an account has this address, a sign-in link is on its way. Open it in this browser."),
        None,
    )
}

/// Ends the session (its refresh-token family is revoked, so its access token stops working at
/// once) and clears the cookies.
async fn sign_out(
    req: HttpRequest,
    state: web::Data<AppState>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let jar = session::cookies(&req);
    let access = jar.get(session::ACCESS_COOKIE).cloned().unwrap_or_default();
    let refresh = jar.get(session::SESSION_COOKIE).cloned().unwrap_or_default();
    let user = match authenticate_counted(&req, &access, None).await {
        Ok(principal) => Some((principal.user_id, refresh)),
        // An expired access token: the refresh token still names the session; rotate it once
        // to learn whose it is, then end it.
        Err(_) => match state.accounts.refresh(&refresh).await {
            Ok(pair) => authenticate_counted(&req, &pair.access.token, None)
                .await
                .ok()
                .map(|p| (p.user_id, pair.refresh_token.expose_secret().to_owned())),
            Err(_) => None,
        },
    };
    if let Some((user, refresh)) = user {
        state.accounts.logout(&user, &refresh).await?;
    }
    let mut response = redirect("/console/sign-in");
    session::end(&req, &mut response);
    Ok(response)
}

/// Starts a console session for the bearer of a user's access token: the magic-link and
/// invitation pages sign in through the API with their script, then call this so that their
/// "Open the console" link works. The console gets a session of its own (the page's tokens stay
/// the caller's). No CSRF token is needed: no other site can make a browser send an
/// `Authorization` header here (that would need a CORS preflight, which the service refuses);
/// a request a browser says came from another origin is refused all the same.
async fn session_from_token(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    if crate::origin::is_cross_origin(&req) {
        return Err(session::csrf_refused());
    }
    let token = bearer_token(&req)?;
    let principal = authenticate_counted(&req, &token, None).await?;
    principal.require_user_session().map_err(|e| ApiError::new(crate::error::ErrorCode::Forbidden, e.0))?;
    let pair = state.accounts.start_session(&principal.user_id).await?;
    let mut response = HttpResponse::NoContent().finish();
    session::start(&req, &mut response, &pair, Some(&session::new_csrf_token()?));
    Ok(response)
}

#[derive(Debug, Deserialize)]
struct SwitchQuery {
    tenant_id: Option<String>,
}

/// The tenant switcher's form (a GET, so it works without JavaScript).
async fn switch(req: HttpRequest, signed_in: SignedIn) -> HttpResponse {
    let wanted = serde_urlencoded::from_str::<SwitchQuery>(req.query_string()).ok().and_then(|q| q.tenant_id);
    match wanted.filter(|t| signed_in.0.memberships.iter().any(|m| m.tenant_id.as_str() == t)) {
        Some(tenant) => redirect(format!("/console/{tenant}/agents")),
        // Not one of theirs (a stale page after leaving a tenant): the console's start.
        None => redirect("/console"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_signing_in_only_console_paths_are_followed() {
        assert_eq!(safe_next(Some("/console/ten_1/agents".into())), "/console/ten_1/agents");
        for bad in [
            "https://evil.example/console",
            "//evil.example",
            "/console//evil",
            "/api/v1/agents",
            "/console\\x",
        ] {
            assert_eq!(safe_next(Some(bad.into())), "/console", "{bad}");
        }
        assert_eq!(safe_next(None), "/console");
    }
}

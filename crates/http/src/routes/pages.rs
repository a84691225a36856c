//! The small HTML pages the e-mailed links open: `/reset-password` sets a new password,
//! `/magic-link` signs in, `/invitation` joins a tenant (registering the address when it has
//! no account). Plain HTML forms that post to the page itself, so they work with
//! JavaScript off; `/assets/pages.js` makes them talk to the JSON API in place when it is on.
//! No framework, no third-party asset: the content security policy allows only the service's
//! own files. The docs page (Swagger UI, vendored) is served from here too.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, ContentType};
use actix_web::{HttpRequest, HttpResponse, web};
use agentry_domain::identity::{RecoveryError, TokenPair};
use agentry_domain::mail::escape_html;
use agentry_domain::team::TeamError;
use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;

use crate::AppState;
use crate::access::AuthThrottle as SignInThrottle;
use crate::access::{AuthThrottle, Recovery};
use crate::error::ApiError;
use crate::routes::recovery::{PASSWORD_CHANGED, ResetPasswordRequest, magic_link_token};
use crate::routes::team::AcceptInvitationRequest;

/// Registers the pages at the root.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/reset-password").route(web::get().to(reset_page)).route(web::post().to(reset_submit)),
    )
    .service(
        web::resource("/magic-link")
            .route(web::get().to(magic_link_page))
            .route(web::post().to(magic_link_submit)),
    )
    .service(
        web::resource("/invitation")
            .route(web::get().to(invitation_page))
            .route(web::post().to(invitation_submit)),
    )
    .service(web::resource("/assets/{file}").route(web::get().to(asset)))
    .service(web::resource("/docs").route(web::get().to(docs_redirect)))
    .service(web::resource("/docs/{tail:.*}").route(web::get().to(docs)));
}

const PAGES_CSS: &str = include_str!("../../assets/pages.css");
const PAGES_JS: &str = include_str!("../../assets/pages.js");
const CONSOLE_CSS: &str = include_str!("../../assets/console.css");
const CONSOLE_JS: &str = include_str!("../../assets/console.js");

async fn asset(file: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let (body, content_type) = match file.as_str() {
        "pages.css" => (PAGES_CSS, "text/css; charset=utf-8"),
        "pages.js" => (PAGES_JS, "text/javascript; charset=utf-8"),
        "console.css" => (CONSOLE_CSS, "text/css; charset=utf-8"),
        "console.js" => (CONSOLE_JS, "text/javascript; charset=utf-8"),
        _ => return Err(ApiError::not_found("no such file")),
    };
    Ok(HttpResponse::Ok().insert_header((header::CONTENT_TYPE, content_type)).body(body))
}

fn html(status: StatusCode, title: &str, body: &str) -> HttpResponse {
    let page = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · Agentry</title><link rel=\"stylesheet\" href=\"/assets/pages.css\">\
         <script src=\"/assets/pages.js\" defer></script></head>\
         <body><main><h1>{title}</h1>{body}</main></body></html>\n",
        title = escape_html(title),
    );
    HttpResponse::build(status).content_type(ContentType::html()).body(page)
}

/// The `token` query parameter of a link.
#[derive(Debug, Deserialize)]
struct LinkQuery {
    token: Option<String>,
}

fn link_token(req: &HttpRequest) -> Option<String> {
    serde_urlencoded::from_str::<LinkQuery>(req.query_string())
        .ok()
        .and_then(|q| q.token)
        .filter(|t| magic_link_token(t).is_ok())
}

/// The cookie of the forms that sign in (the magic link's and the invitation's), scoped to the
/// page's own path: the page sets it, its form carries the same value, and the post is taken
/// only with both (and not from another origin). Another site can make a browser post the form
/// with its own link's token, but can neither read nor set this cookie, so it cannot sign a
/// visitor in to an account of its own (login CSRF).
const PAGE_CSRF_COOKIE: &str = "agentry_page_csrf";

/// A page's form token, and the `Set-Cookie` value that goes with it (scoped to `path`).
fn page_csrf(req: &HttpRequest, path: &str) -> Option<(String, String)> {
    let token = crate::console::session::new_csrf_token().ok()?;
    let secure = if req.connection_info().scheme() == "https" { "; Secure" } else { "" };
    let cookie =
        format!("{PAGE_CSRF_COOKIE}={token}; Path={path}; HttpOnly; SameSite=Strict; Max-Age=3600{secure}");
    Some((token, cookie))
}

/// Adds the page's form-token cookie to `response`.
fn with_page_csrf(mut response: HttpResponse, cookie: &str) -> HttpResponse {
    if let Ok(value) = header::HeaderValue::from_str(cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// Whether a sign-in form's post is the page's own: same origin, and its token is the page's
/// cookie.
fn is_own_form(req: &HttpRequest, presented: Option<&str>) -> bool {
    if crate::origin::is_cross_origin(req) {
        return false;
    }
    let expected = crate::console::session::cookies(req).remove(PAGE_CSRF_COOKIE).unwrap_or_default();
    matches!(presented, Some(p) if !expected.is_empty()
        && crate::console::session::constant_time_eq(p.as_bytes(), expected.as_bytes()))
}

/// The answer to a sign-in form that is not the page's own (another site's, or a page older
/// than its cookie): nothing happens and no cookie is set.
fn foreign_form(title: &str) -> HttpResponse {
    html(
        StatusCode::FORBIDDEN,
        title,
        "<p class=\"error\" id=\"result\">This form was not sent from its page. Open the link from the e-mail \
         again and use the button there.</p>",
    )
}

fn incomplete_link(title: &str) -> HttpResponse {
    html(
        StatusCode::BAD_REQUEST,
        title,
        "<p class=\"error\" id=\"result\">This link is incomplete. Open the link from the e-mail as it is, \
         or ask for a new one.</p>",
    )
}

async fn reset_page(req: HttpRequest) -> HttpResponse {
    let Some(token) = link_token(&req) else {
        return incomplete_link("Choose a new password");
    };
    html(
        StatusCode::OK,
        "Choose a new password",
        &format!(
            "<form method=\"post\" action=\"/reset-password\" data-api=\"reset\">\
             <input type=\"hidden\" name=\"token\" value=\"{token}\">\
             <label for=\"new_password\">New password</label>\
             <input type=\"password\" id=\"new_password\" name=\"new_password\" minlength=\"8\" maxlength=\"128\" \
              autocomplete=\"new-password\" required>\
             <label for=\"confirm_password\">The same again</label>\
             <input type=\"password\" id=\"confirm_password\" name=\"confirm_password\" minlength=\"8\" maxlength=\"128\" \
              autocomplete=\"new-password\" required>\
             <p class=\"note\">8 to 128 characters. Every session of your account is signed out.</p>\
             <button type=\"submit\" id=\"submit\">Set the new password</button></form>\
             <p id=\"result\" role=\"status\"></p>",
            token = escape_html(&token),
        ),
    )
}

/// The reset form as the page posts it.
#[derive(Debug, Deserialize)]
struct ResetForm {
    token: Option<SecretString>,
    new_password: Option<SecretString>,
    confirm_password: Option<SecretString>,
}

async fn reset_submit(
    state: web::Data<AppState>,
    _throttle: AuthThrottle<Recovery>,
    body: web::Bytes,
) -> HttpResponse {
    const TITLE: &str = "Choose a new password";
    let Ok(form) = serde_urlencoded::from_bytes::<ResetForm>(&body) else {
        return incomplete_link(TITLE);
    };
    let same = match (&form.new_password, &form.confirm_password) {
        (Some(a), Some(b)) => a.expose_secret() == b.expose_secret(),
        _ => false,
    };
    if !same {
        return html(
            StatusCode::UNPROCESSABLE_ENTITY,
            TITLE,
            "<p class=\"error\" id=\"result\">The two passwords differ. Go back and type them again.</p>",
        );
    }
    let request = ResetPasswordRequest { token: form.token, new_password: form.new_password };
    let (token, password) = match request.try_into_domain() {
        Ok(parsed) => parsed,
        Err(e) => {
            let reasons: Vec<String> = e.0.iter().map(|f| escape_html(&f.message)).collect();
            return html(
                StatusCode::UNPROCESSABLE_ENTITY,
                TITLE,
                &format!(
                    "<p class=\"error\" id=\"result\">{}. Go back and try again.</p>",
                    reasons.join("; ")
                ),
            );
        }
    };
    match state.recovery.reset_password(token.expose_secret(), &password).await {
        Ok(()) => html(
            StatusCode::OK,
            "Password changed",
            &format!("<p class=\"ok\" id=\"result\">{PASSWORD_CHANGED}</p>"),
        ),
        Err(RecoveryError::InvalidToken) => html(
            StatusCode::BAD_REQUEST,
            TITLE,
            "<p class=\"error\" id=\"result\">This link is used or expired. Ask for a new one.</p>",
        ),
        Err(RecoveryError::Unexpected(e)) => {
            tracing::error!(error = ?e, "password reset from the page failed");
            html(
                StatusCode::INTERNAL_SERVER_ERROR,
                TITLE,
                "<p class=\"error\" id=\"result\">Something went wrong. Try again later.</p>",
            )
        }
    }
}

async fn magic_link_page(req: HttpRequest) -> HttpResponse {
    let Some(token) = link_token(&req) else {
        return incomplete_link("Sign in to Agentry");
    };
    let Some((csrf, cookie)) = page_csrf(&req, "/magic-link") else {
        return unavailable("Sign in to Agentry");
    };
    // A button, not an automatic sign-in: mail scanners that open links must not spend them.
    let page = html(
        StatusCode::OK,
        "Sign in to Agentry",
        &format!(
            "<form method=\"post\" action=\"/magic-link\" data-api=\"magic-link\">\
             <input type=\"hidden\" name=\"token\" value=\"{token}\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <p>The link signs you in once.</p>\
             <button type=\"submit\" id=\"submit\">Sign in</button></form>\
             <p id=\"result\" role=\"status\"></p>{tokens}",
            token = escape_html(&token),
            tokens = tokens_block("", "", true),
        ),
    );
    with_page_csrf(page, &cookie)
}

fn unavailable(title: &str) -> HttpResponse {
    html(
        StatusCode::INTERNAL_SERVER_ERROR,
        title,
        "<p class=\"error\" id=\"result\">Something went wrong. Try again later.</p>",
    )
}

fn tokens_block(access: &str, refresh: &str, hidden: bool) -> String {
    format!(
        "<div id=\"tokens\"{hidden}><label for=\"access_token\">Access token (send as <code>Authorization: Bearer …</code>)</label>\
         <textarea id=\"access_token\" readonly>{access}</textarea>\
         <label for=\"refresh_token\">Refresh token (for <code>POST /api/v1/auth/refresh</code>)</label>\
         <textarea id=\"refresh_token\" readonly>{refresh}</textarea>\
         <p><a href=\"/console\" id=\"open-console\"{hidden}>Open the console</a></p></div>",
        hidden = if hidden { " hidden" } else { "" },
        access = escape_html(access),
        refresh = escape_html(refresh),
    )
}

#[derive(Debug, Deserialize)]
struct MagicLinkForm {
    token: Option<SecretString>,
    csrf: Option<String>,
}

async fn magic_link_submit(
    req: HttpRequest,
    state: web::Data<AppState>,
    _throttle: AuthThrottle<Recovery>,
    body: web::Bytes,
) -> HttpResponse {
    const TITLE: &str = "Sign in to Agentry";
    let Ok(form) = serde_urlencoded::from_bytes::<MagicLinkForm>(&body) else {
        return incomplete_link(TITLE);
    };
    if !is_own_form(&req, form.csrf.as_deref()) {
        return foreign_form(TITLE);
    }
    let Some(token) = form.token.filter(|t| magic_link_token(t.expose_secret()).is_ok()) else {
        return incomplete_link(TITLE);
    };
    match state.recovery.exchange_magic_link(token.expose_secret()).await {
        Ok(pair) => {
            let mut page = html(
                StatusCode::OK,
                "Signed in",
                &format!(
                    "<p class=\"ok\" id=\"result\">You are signed in. Your access token is valid for {} seconds.</p>{}",
                    pair.access.expires_in,
                    tokens_block(&pair.access.token, pair.refresh_token.expose_secret(), false)
                ),
            );
            console_session(&req, &state, &pair, &mut page).await;
            page
        }
        Err(RecoveryError::InvalidToken) => html(
            StatusCode::BAD_REQUEST,
            TITLE,
            "<p class=\"error\" id=\"result\">This link is used or expired. Ask for a new one.</p>",
        ),
        Err(RecoveryError::Unexpected(e)) => {
            tracing::error!(error = ?e, "magic-link sign-in from the page failed");
            html(
                StatusCode::INTERNAL_SERVER_ERROR,
                TITLE,
                "<p class=\"error\" id=\"result\">Something went wrong. Try again later.</p>",
            )
        }
    }
}

/// Signs the browser in to the console too, with a session of its own: the tokens shown on
/// the page stay the caller's to use (a client rotating them must not end the console's).
/// Failing here only leaves the console signed out; the page still shows the tokens.
async fn console_session(req: &HttpRequest, state: &AppState, pair: &TokenPair, page: &mut HttpResponse) {
    let started = async {
        let principal = state.access.authenticate(&pair.access.token, None).await.ok()?;
        let console = state.accounts.start_session(&principal.user_id).await.ok()?;
        let csrf = crate::console::session::new_csrf_token().ok()?;
        Some((console, csrf))
    };
    if let Some((console, csrf)) = started.await {
        crate::console::session::start(req, page, &console, Some(&csrf));
    }
}

const INVITATION_TITLE: &str = "Join a tenant on Agentry";

fn invitation_refused() -> HttpResponse {
    html(
        StatusCode::BAD_REQUEST,
        INVITATION_TITLE,
        "<p class=\"error\" id=\"result\">This invitation is used, revoked or expired. Ask for a new one.</p>",
    )
}

async fn invitation_page(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let Some(token) = link_token(&req) else {
        return incomplete_link(INVITATION_TITLE);
    };
    let preview = match state.team.preview(&token).await {
        Ok(preview) => preview,
        Err(TeamError::InvalidToken) => return invitation_refused(),
        Err(e) => {
            tracing::error!(error = ?e, "reading an invitation for its page failed");
            return html(
                StatusCode::INTERNAL_SERVER_ERROR,
                INVITATION_TITLE,
                "<p class=\"error\" id=\"result\">Something went wrong. Try again later.</p>",
            );
        }
    };
    let invitation = &preview.view.invitation;
    let fields = if preview.has_account {
        format!(
            "<p class=\"note\">You have an account as <strong>{email}</strong>: give its password to accept.</p>\
             <label for=\"password\">Password</label>\
             <input type=\"password\" id=\"password\" name=\"password\" maxlength=\"1024\" autocomplete=\"current-password\" required>",
            email = escape_html(invitation.email.as_str()),
        )
    } else {
        format!(
            "<p class=\"note\">Create your account as <strong>{email}</strong> to accept.</p>\
             <label for=\"full_name\">Your name</label>\
             <input type=\"text\" id=\"full_name\" name=\"full_name\" maxlength=\"200\" autocomplete=\"name\" required>\
             <label for=\"password\">Password</label>\
             <input type=\"password\" id=\"password\" name=\"password\" minlength=\"8\" maxlength=\"128\" \
              autocomplete=\"new-password\" required>\
             <label for=\"confirm_password\">The same again</label>\
             <input type=\"password\" id=\"confirm_password\" name=\"confirm_password\" minlength=\"8\" maxlength=\"128\" \
              autocomplete=\"new-password\" required>\
             <p class=\"note\">8 to 128 characters.</p>",
            email = escape_html(invitation.email.as_str()),
        )
    };
    let Some((csrf, cookie)) = page_csrf(&req, "/invitation") else {
        return unavailable(INVITATION_TITLE);
    };
    let page = html(
        StatusCode::OK,
        INVITATION_TITLE,
        &format!(
            "<p id=\"invitation\">{inviter} invites you to join <strong id=\"tenant\">{tenant}</strong> as \
             <strong id=\"role\">{role}</strong>.</p>\
             <form method=\"post\" action=\"/invitation\" data-api=\"invitation\">\
             <input type=\"hidden\" name=\"token\" value=\"{token}\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">{fields}\
             <button type=\"submit\" id=\"submit\">Accept the invitation</button></form>\
             <p id=\"result\" role=\"status\"></p>{tokens}",
            inviter = escape_html(&preview.view.inviter_name),
            tenant = escape_html(&preview.view.tenant_name),
            role = invitation.role.as_str(),
            token = escape_html(&token),
            tokens = tokens_block("", "", true),
        ),
    );
    with_page_csrf(page, &cookie)
}

/// The invitation form as the page posts it.
#[derive(Debug, Deserialize)]
struct InvitationForm {
    token: Option<SecretString>,
    password: Option<SecretString>,
    confirm_password: Option<SecretString>,
    full_name: Option<String>,
    csrf: Option<String>,
}

async fn invitation_submit(
    req: HttpRequest,
    state: web::Data<AppState>,
    _throttle: SignInThrottle,
    body: web::Bytes,
) -> HttpResponse {
    let error = |status: StatusCode, text: &str| {
        html(status, INVITATION_TITLE, &format!("<p class=\"error\" id=\"result\">{}</p>", escape_html(text)))
    };
    let Ok(form) = serde_urlencoded::from_bytes::<InvitationForm>(&body) else {
        return incomplete_link(INVITATION_TITLE);
    };
    if !is_own_form(&req, form.csrf.as_deref()) {
        return foreign_form(INVITATION_TITLE);
    }
    if let Some(confirm) = &form.confirm_password
        && form.password.as_ref().is_none_or(|p| p.expose_secret() != confirm.expose_secret())
    {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "The two passwords differ. Go back and type them again.",
        );
    }
    let request = AcceptInvitationRequest {
        token: form.token,
        password: form.password,
        full_name: form.full_name.filter(|n| !n.trim().is_empty()),
    };
    let outcome = match request.try_into_domain() {
        Ok(request) => state.team.accept(request).await,
        Err(e) => Err(TeamError::Invalid(e)),
    };
    match outcome {
        Ok(joined) => {
            let mut page = html(
                StatusCode::OK,
                "Welcome",
                &format!(
                    "<p class=\"ok\" id=\"result\">You joined {tenant} as {role}. You are signed in; your access token \
                     is valid for {expires} seconds.</p>{tokens}",
                    tenant = escape_html(&joined.tenant_name),
                    role = joined.role.as_str(),
                    expires = joined.tokens.access.expires_in,
                    tokens = tokens_block(
                        &joined.tokens.access.token,
                        joined.tokens.refresh_token.expose_secret(),
                        false
                    ),
                ),
            );
            console_session(&req, &state, &joined.tokens, &mut page).await;
            page
        }
        Err(TeamError::InvalidToken) => invitation_refused(),
        Err(TeamError::InvalidCredentials) => {
            error(StatusCode::UNAUTHORIZED, "The password is wrong. Go back and try again.")
        }
        Err(TeamError::Invalid(e)) => {
            let reasons: Vec<String> = e.0.iter().map(|f| f.message.clone()).collect();
            error(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("{}. Go back and try again.", reasons.join("; ")),
            )
        }
        Err(TeamError::Conflict(message)) => error(StatusCode::CONFLICT, &message),
        Err(e) => {
            tracing::error!(error = ?e, "accepting an invitation from the page failed");
            error(StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong. Try again later.")
        }
    }
}

async fn docs_redirect() -> HttpResponse {
    HttpResponse::MovedPermanently().insert_header((header::LOCATION, "/docs/")).finish()
}

/// Swagger UI, vendored into the binary, reading the document this service serves (which
/// reflects the configured envelope), with the OAuth2 password flow for "Authorize".
async fn docs(tail: web::Path<String>) -> Result<HttpResponse, ApiError> {
    use std::sync::{Arc, OnceLock};
    static CONFIG: OnceLock<Arc<utoipa_swagger_ui::Config<'static>>> = OnceLock::new();
    let config = CONFIG
        .get_or_init(|| {
            Arc::new(utoipa_swagger_ui::Config::new(["/api/v1/openapi.json"]).persist_authorization(false))
        })
        .clone();
    match utoipa_swagger_ui::serve(&tail, config) {
        Ok(Some(file)) => {
            Ok(HttpResponse::Ok().content_type(file.content_type).body(file.bytes.into_owned()))
        }
        Ok(None) => Err(ApiError::not_found("no such file")),
        Err(e) => Err(ApiError::internal(anyhow::anyhow!("serving the docs page: {e}"))),
    }
}

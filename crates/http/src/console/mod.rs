//! The console at `/console`: a tenant's agents, memory, knowledge bases, workflows, webhooks, keys, team and
//! billing as web pages, served by the same binary.
//!
//! How it is made, and why:
//! - **The same way to the data.** Every page calls the domain services the API's handlers
//!   call, with the [`Principal`](agentry_domain::tenancy::Principal) of the console's session,
//!   which is authenticated, rate-limited and resolved to a tenant by the same function as an
//!   API bearer token ([`session`]). A console action is therefore authorised exactly as the API
//!   route that does the same; forms are turned into the API's own request types, so they are
//!   validated by the same code too.
//! - **Server-rendered.** Pages are MiniJinja templates (`templates/console/`, HTML-escaped by
//!   default) and every page that reads works without JavaScript. Forms post to the console and
//!   redirect (post/redirect/get); a secret shown once (an API key, a signing secret) is shown
//!   on the answer to its POST instead.
//! - **Small scripts, no build step.** `/assets/console.js` streams chat replies, refreshes
//!   running executions' timelines and adds copy buttons; nothing else needs it. The content
//!   security policy allows scripts from the service itself only, and no inline script.
//! - **Charts** are SVG drawn by the server ([`charts`]).
//! - **Tenants in the path**: `/console/{tenant_id}/…`. A tenant the user is not a member of,
//!   and another tenant's object, answer 404, as the API does.

pub mod charts;
mod render;
pub mod session;

mod agent_blocks;
mod agent_knowledge;
mod agent_tools;
mod agents;
mod billing;
mod home;
mod keys;
mod knowledge;
mod mcp;
mod memory;
mod team;
mod time;
mod webhooks;
mod workflows;

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, header};
use actix_web::middleware::Next;
use actix_web::{HttpResponse, web};

pub use render::{page, redirect};
pub use session::{Console, Form, SignedIn};

use crate::error::{ApiError, ErrorCode};
use crate::settings::HttpSettings;

/// Registers the console under `/console`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/console")
            .wrap(actix_web::middleware::from_fn(console_responses))
            .app_data(web::PayloadConfig::new(session::FORM_LIMIT))
            .configure(home::configure)
            .service(
                web::scope("/{tenant_id}")
                    .configure(home::configure_tenant)
                    .configure(agents::configure)
                    .configure(agent_tools::configure)
                    .configure(agent_knowledge::configure)
                    .configure(agent_blocks::configure)
                    .configure(memory::configure)
                    .configure(knowledge::configure)
                    .configure(workflows::configure)
                    .configure(webhooks::configure)
                    .configure(keys::configure)
                    .configure(mcp::configure)
                    .configure(team::configure)
                    .configure(billing::configure),
            ),
    );
}

/// Middleware of the console: puts a refreshed session's cookies on the response, and turns
/// errors into pages. A request without a session is sent to the sign-in page (a script is
/// answered 401 and reloads); any other error is a page with the error's status and message.
async fn console_responses(
    req: ServiceRequest,
    next: Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let settings = req.app_data::<web::Data<HttpSettings>>().map(|s| s.get_ref().clone()).unwrap_or_default();
    let mut response = next.call(req).await?.map_into_boxed_body();
    let Some(error) = response.response().error().and_then(|e| e.as_error::<ApiError>()) else {
        session::add_refreshed_cookies(&mut response);
        return Ok(response);
    };
    let request = response.request().clone();
    let script = request.headers().contains_key(session::CSRF_HEADER);
    let page = if error.code() == ErrorCode::Unauthorized && !script {
        let mut back = request.path().to_owned();
        if request.method() != Method::GET {
            back = "/console".to_owned();
        }
        HttpResponse::SeeOther()
            .insert_header((header::LOCATION, format!("/console/sign-in?next={}", encode(&back))))
            .finish()
    } else {
        render::error_page(error.status(&settings), error)
    };
    let mut response = ServiceResponse::new(request, page);
    session::add_refreshed_cookies(&mut response);
    Ok(response)
}

/// Percent-encodes a query value.
pub(crate) fn encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

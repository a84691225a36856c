//! The OpenAPI 3.1 document, generated from the handlers' annotations, and the docs page.

use std::sync::OnceLock;

use actix_web::HttpResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::routes::{agents, api_keys, auth, billing, health, recovery};

/// The API description. Every route joins it through its `#[utoipa::path]`.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Agentry API",
        description = "Multi-tenant platform for AI agents. Every route under `/api/v1` is also \
                       served under `/v1`. Authenticate with `Authorization: Bearer <token>`.",
    ),
    paths(
        auth::register, auth::login, auth::me, auth::refresh, auth::logout,
        recovery::forgot_password, recovery::reset_password, recovery::request_magic_link,
        recovery::exchange_magic_link,
        api_keys::create, api_keys::list, api_keys::revoke,
        agents::list, agents::create, agents::get, agents::update, agents::delete, agents::chat,
        agents::messages,
        billing::overview, billing::ledger, billing::purchase,
        health::healthz, health::readyz,
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "auth", description = "Accounts and sessions"),
        (name = "api-keys", description = "Self-service API keys"),
        (name = "agents", description = "Agents and chat"),
        (name = "billing", description = "Plan, credits, ledger and purchases"),
        (name = "operations", description = "Health and readiness"),
    )
)]
#[derive(Debug)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build(),
            ),
        );
    }
}

fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        ApiDoc::openapi().to_pretty_json().unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    })
}

/// `GET /api/v1/openapi.json`.
pub async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(document())
}

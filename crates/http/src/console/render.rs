//! Rendering the console's pages: MiniJinja templates compiled into the binary, HTML-escaped
//! by default (the templates' names end in `.html`), each page's content set in the one layout
//! (header with the tenant switcher and sign-out, the sections' navigation, `main`).

use std::sync::LazyLock;

use actix_web::http::{StatusCode, header};
use actix_web::{HttpResponse, http::header::ContentType};
use minijinja::{Environment, Value, context};
use serde::Serialize;

use super::Console;
use crate::error::ApiError;

/// The templates, by name; compiled once.
static TEMPLATES: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    macro_rules! templates {
        ($($name:literal),* $(,)?) => {
            $(
                // A template that does not parse is a bug caught by the first test that renders.
                if let Err(e) = env.add_template($name, include_str!(concat!("../../templates/console/", $name))) {
                    panic!("console template {} does not parse: {e:#}", $name);
                }
            )*
        };
    }
    templates![
        "layout.html",
        "error.html",
        "sign_in.html",
        "agents.html",
        "agent.html",
        "agent_delete.html",
        "memory.html",
        "memory_document.html",
        "memory_entry.html",
        "workflows.html",
        "workflow.html",
        "workflow_delete.html",
        "executions.html",
        "execution.html",
        "trigger.html",
        "trigger_created.html",
        "webhooks.html",
        "webhook.html",
        "webhook_secret.html",
        "webhook_delivery.html",
        "keys.html",
        "key_created.html",
        "mcp.html",
        "knowledge_bases.html",
        "knowledge_base.html",
        "knowledge_file.html",
        "team.html",
        "billing.html",
    ];
    env
});

/// One section of the navigation.
#[derive(Serialize)]
struct NavItem {
    path: &'static str,
    label: &'static str,
}

/// The console's sections, in the order of the navigation.
const SECTIONS: [(&str, &str); 9] = [
    ("agents", "Agents"),
    ("knowledge", "Knowledge"),
    ("workflows", "Workflows"),
    ("webhooks", "Webhooks"),
    ("keys", "API keys"),
    ("mcp", "MCP"),
    ("team", "Team"),
    ("billing", "Billing"),
    ("docs", "API docs"),
];

#[derive(Serialize)]
struct TenantChoice {
    id: String,
    name: String,
    role: &'static str,
}

fn render(name: &str, ctx: Value) -> Result<String, ApiError> {
    TEMPLATES
        .get_template(name)
        .and_then(|t| t.render(ctx))
        .map_err(|e| ApiError::internal(anyhow::anyhow!("console template {name}: {e:#}")))
}

fn html(status: StatusCode, body: String) -> HttpResponse {
    HttpResponse::build(status).content_type(ContentType::html()).body(body)
}

/// A console page: `template` rendered with `ctx` (plus `base`, the tenant's path, and `csrf`,
/// the token its forms carry) inside the layout, `section` marked in the navigation.
///
/// # Errors
/// 500 when a template fails to render (a bug).
pub fn page(
    c: &Console,
    section: &str,
    title: &str,
    template: &str,
    ctx: Value,
) -> Result<HttpResponse, ApiError> {
    page_with_status(c, StatusCode::OK, section, title, template, ctx)
}

/// [`page`] with another status than 200 (a form re-shown with its errors).
///
/// # Errors
/// 500 when a template fails to render (a bug).
pub fn page_with_status(
    c: &Console,
    status: StatusCode,
    section: &str,
    title: &str,
    template: &str,
    ctx: Value,
) -> Result<HttpResponse, ApiError> {
    let base = c.base();
    let content = render(template, context! { base => &base, csrf => &c.csrf, ..ctx })?;
    let tenants: Vec<TenantChoice> = c
        .memberships
        .iter()
        .map(|m| TenantChoice {
            id: m.tenant_id.to_string(),
            name: m.tenant_name.clone(),
            role: m.role.as_str(),
        })
        .collect();
    let nav: Vec<NavItem> = SECTIONS.iter().map(|&(path, label)| NavItem { path, label }).collect();
    let body = render(
        "layout.html",
        context! {
            title, section, base, nav, tenants,
            tenant_id => c.principal.tenant_id.to_string(),
            role => c.principal.role.as_str(),
            email => &c.email,
            csrf => &c.csrf,
            content => Value::from_safe_string(content),
        },
    )?;
    Ok(html(status, body))
}

/// A page outside the signed-in layout (sign-in).
///
/// # Errors
/// 500 when the template fails to render (a bug).
pub fn bare_page(
    status: StatusCode,
    title: &str,
    template: &str,
    ctx: Value,
) -> Result<HttpResponse, ApiError> {
    let content = render(template, ctx)?;
    let body = render("error.html", context! { title, content => Value::from_safe_string(content) })?;
    Ok(html(status, body))
}

/// The page of an error: its message and, for a refused form, each refused field.
pub fn error_page(status: StatusCode, error: &ApiError) -> HttpResponse {
    #[derive(Serialize)]
    struct Field<'a> {
        field: &'a str,
        message: &'a str,
    }
    let fields: Vec<Field<'_>> =
        error.details().iter().map(|d| Field { field: &d.field, message: &d.message }).collect();
    let title = status.canonical_reason().unwrap_or("Error");
    let rendered = render(
        "error.html",
        context! { title, status => status.as_u16(), message => error.message(), fields },
    );
    match rendered {
        Ok(body) => html(status, body),
        Err(_) => HttpResponse::build(status)
            .content_type(ContentType::plaintext())
            .body(error.message().to_owned()),
    }
}

/// See other: where a form's POST sends the browser next.
pub fn redirect(to: impl Into<String>) -> HttpResponse {
    HttpResponse::SeeOther().insert_header((header::LOCATION, to.into())).finish()
}

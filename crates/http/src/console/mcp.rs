//! MCP in the console: the tenant's MCP servers (add, refresh, see their tools and errors,
//! delete), and how to connect an MCP client to Agentry's own `/mcp` with an API key.

use actix_web::{HttpRequest, HttpResponse, web};
use agentry_domain::ids::McpServerId;
use minijinja::context;
use serde_json::{Map, Value, json};

use super::render::{page, redirect};
use super::{Console, Form};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::from_json_value;
use crate::routes::mcp_servers::{CreateMcpServerRequest, McpServerResponse};

/// Routes under `/console/{tenant_id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/mcp", web::get().to(list))
        .route("/mcp", web::post().to(create))
        .route("/mcp/{server_id}/refresh", web::post().to(refresh))
        .route("/mcp/{server_id}/delete", web::post().to(delete));
}

/// The URL MCP clients are given: this service's `/mcp`.
fn endpoint(req: &HttpRequest) -> String {
    let info = req.connection_info();
    format!("{}://{}/mcp", info.scheme(), info.host())
}

async fn list(state: web::Data<AppState>, c: Console, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let servers: Vec<McpServerResponse> =
        state.mcp_servers.list(&c).await?.into_iter().map(Into::into).collect();
    page(&c, "mcp", "MCP", "mcp.html", context! { servers, endpoint => endpoint(&req) })
}

/// Registers a server from the form (one optional header), as `POST /mcp-servers` does.
async fn create(state: web::Data<AppState>, c: Console, form: Form) -> Result<HttpResponse, ApiError> {
    let mut headers = Map::new();
    if let Some(name) = form.get("header_name").filter(|n| !n.trim().is_empty()) {
        headers.insert(name.trim().to_owned(), json!(form.get("header_value").unwrap_or_default()));
    }
    let allowed: Vec<String> = form
        .get("allowed_tools")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    let timeout = form
        .get("timeout_seconds")
        .filter(|t| !t.trim().is_empty())
        .map(|t| t.trim().parse::<i64>().map_or(json!(t), |n| json!(n)));
    let request: CreateMcpServerRequest = from_json_value(json!({
        "name": form.get("name"),
        "url": form.get("url"),
        "headers": Value::Object(headers),
        "allowed_tools": if allowed.is_empty() { Value::Null } else { json!(allowed) },
        "timeout_seconds": timeout,
    }))?;
    state.mcp_servers.create(&c, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/mcp", c.base())))
}

fn server_id(path: web::Path<(String, String)>) -> Result<McpServerId, ApiError> {
    crate::routes::mcp_servers::server_id(path.into_inner().1)
}

async fn refresh(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    state.mcp_servers.refresh(&c, &server_id(path)?).await?;
    Ok(redirect(format!("{}/mcp", c.base())))
}

async fn delete(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    state.mcp_servers.delete(&c, &server_id(path)?).await?;
    Ok(redirect(format!("{}/mcp", c.base())))
}

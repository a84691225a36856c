//! `/mcp-servers`: remote MCP servers whose tools a tenant's agents may use (PRODUCT.md §17).
//! Registering, changing the URL or headers of, or refreshing a server lists its tools at once;
//! the outcome is shown (`status`, `error`, `tools`, `checked_at`). Header values are sealed and
//! never shown again: only their names are.

use actix_web::web;
use agentry_domain::ids::McpServerId;
use agentry_domain::mcp::{self, McpServer, McpServerChanges, NewMcpServer};
use agentry_domain::patch::Patch;
use agentry_domain::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator, check_path_id};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, JsonInt};
use crate::reply::{Reply, timestamp};

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/mcp-servers").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            web::resource("/mcp-servers/{server_id}")
                .route(web::get().to(get))
                .route(web::patch().to(update))
                .route(web::delete().to(delete)),
        )
        .service(web::resource("/mcp-servers/{server_id}/refresh").route(web::post().to(refresh)));
}

/// An MCP server id from a path or a form.
pub(crate) fn server_id(raw: String) -> Result<McpServerId, ApiError> {
    check_path_id(&raw, "server_id")?;
    Ok(McpServerId::from_string(raw))
}

fn text(field: &str, raw: Value) -> Result<String, FieldError> {
    match raw {
        Value::String(s) => Ok(s),
        _ => Err(FieldError::new(field, FieldErrorKind::InvalidType, format!("{field} must be a string"))),
    }
}

fn headers(raw: Value) -> Result<Vec<(String, secrecy::SecretString)>, FieldError> {
    let Value::Object(map) = raw else {
        return Err(FieldError::new(
            "headers",
            FieldErrorKind::InvalidType,
            "headers must be an object of strings",
        ));
    };
    let pairs = map
        .into_iter()
        .map(|(name, value)| match value {
            Value::String(v) => Ok((name, v)),
            _ => Err(FieldError::new(
                format!("headers.{name}"),
                FieldErrorKind::InvalidType,
                format!("headers.{name} must be a string"),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    mcp::headers(pairs)
}

fn allowed_tools(raw: Value) -> Result<Vec<String>, FieldError> {
    let wrong = || {
        FieldError::new(
            "allowed_tools",
            FieldErrorKind::InvalidType,
            "allowed_tools must be a list of tool names",
        )
    };
    let Value::Array(items) = raw else { return Err(wrong()) };
    let names = items
        .into_iter()
        .map(|v| v.as_str().map(str::to_owned).ok_or_else(wrong))
        .collect::<Result<_, _>>()?;
    mcp::allowed_tools(names)
}

/// A server to register. A field it does not know is refused.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMcpServerRequest {
    /// Its name, unique in the tenant: 1–24 letters, digits or `-`. Agents' models see its
    /// tools as `<name>__<tool>`.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 24, pattern = r"^[A-Za-z0-9-]{1,24}$", example = "files")]
    pub name: Option<Value>,
    /// Its MCP Streamable HTTP endpoint (`https`; the webhooks' rules apply).
    #[schema(required = true, value_type = String, min_length = 1, max_length = 2048, pattern = r"^https?://[^\s\x00-\x1F\x7F-\x9F/?#@]+(/[^\s\x00-\x1F\x7F-\x9F#]*)?$", example = "https://mcp.example.com/mcp")]
    pub url: Option<Value>,
    /// Headers sent with every request (an `Authorization` token, a key): sealed, never shown
    /// again.
    #[schema(schema_with = crate::schemas::mcp_headers_optional)]
    pub headers: Option<Value>,
    /// The tools agents may use; absent or null: all the server lists.
    #[schema(schema_with = crate::schemas::mcp_allowed_tools_optional)]
    pub allowed_tools: Option<Value>,
    /// Longest a call may take, 1–120 s (default 30).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 120)]
    pub timeout_seconds: Option<JsonInt>,
}

/// Changes to a server: absent fields stay. A new URL or new headers list its tools again.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMcpServerRequest {
    /// A new name.
    #[schema(value_type = Option<String>, min_length = 1, max_length = 24, pattern = r"^[A-Za-z0-9-]{1,24}$")]
    pub name: Option<Value>,
    /// A new endpoint.
    #[schema(value_type = Option<String>, min_length = 1, max_length = 2048, pattern = r"^https?://[^\s\x00-\x1F\x7F-\x9F/?#@]+(/[^\s\x00-\x1F\x7F-\x9F#]*)?$")]
    pub url: Option<Value>,
    /// New headers, replacing all.
    #[schema(schema_with = crate::schemas::mcp_headers_optional)]
    pub headers: Option<Value>,
    /// New allowed tools; null: all.
    #[serde(default)]
    #[schema(schema_with = crate::schemas::mcp_allowed_tools_optional)]
    pub allowed_tools: Patch<Value>,
    /// A new timeout, 1–120 s.
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 120)]
    pub timeout_seconds: Option<JsonInt>,
}

impl CreateMcpServerRequest {
    pub(crate) fn try_into_domain(self) -> Result<NewMcpServer, ValidationErrors> {
        let mut v = Validator::new();
        let name = v.required("name", self.name, |n| mcp::server_name(&text("name", n)?));
        let url = v.required("url", self.url, |u| text("url", u));
        let headers = v.check_nested(self.headers.map_or(Ok(Vec::new()), headers));
        let allowed = v.check_nested(match self.allowed_tools {
            None | Some(Value::Null) => Ok(None),
            Some(raw) => allowed_tools(raw).map(Some),
        });
        let timeout = v.optional("timeout_seconds", self.timeout_seconds, |t| mcp::timeout_seconds(t.0));
        let (name, url, headers, allowed_tools, timeout) =
            v.finish((name, url, headers, allowed, timeout))?;
        Ok(NewMcpServer {
            name,
            url,
            headers,
            allowed_tools,
            timeout_seconds: timeout.unwrap_or(mcp::DEFAULT_TIMEOUT_SECONDS),
        })
    }
}

impl UpdateMcpServerRequest {
    fn try_into_domain(self) -> Result<McpServerChanges, ValidationErrors> {
        let mut v = Validator::new();
        let name = v.optional("name", self.name, |n| mcp::server_name(&text("name", n)?));
        let url = v.optional("url", self.url, |u| text("url", u));
        let headers = v.check_nested(self.headers.map(headers).transpose());
        let allowed = v.check_nested(match self.allowed_tools {
            Patch::Absent => Ok(None),
            Patch::Null | Patch::Value(Value::Null) => Ok(Some(None)),
            Patch::Value(raw) => allowed_tools(raw).map(|a| Some(Some(a))),
        });
        let timeout = v.optional("timeout_seconds", self.timeout_seconds, |t| mcp::timeout_seconds(t.0));
        let (name, url, headers, allowed_tools, timeout_seconds) =
            v.finish((name, url, headers, allowed, timeout))?;
        Ok(McpServerChanges { name, url, headers, allowed_tools, timeout_seconds })
    }
}

/// A tool a server lists, as it describes it (its data, shown as such).
#[derive(Debug, Serialize, ToSchema)]
pub struct McpToolResponse {
    /// Its name on the server.
    pub name: String,
    /// What the server says it does.
    pub description: Option<String>,
    /// Its arguments, a JSON Schema object.
    #[schema(value_type = Object)]
    pub input_schema: Value,
}

/// A registered MCP server.
#[derive(Debug, Serialize, ToSchema)]
pub struct McpServerResponse {
    /// Server id (`mcp_…`).
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its endpoint.
    pub url: String,
    /// The names of the headers sent (their values are never shown).
    pub header_names: Vec<String>,
    /// The tools agents may use; null: all.
    pub allowed_tools: Option<Vec<String>>,
    /// Longest a call may take, in seconds.
    pub timeout_seconds: u32,
    /// `ok` when its tools were listed, `error` when listing failed.
    pub status: String,
    /// Why listing failed.
    pub error: Option<String>,
    /// The tools it listed.
    pub tools: Vec<McpToolResponse>,
    /// When it was last listed.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub checked_at: Option<DateTime<Utc>>,
    /// Creation time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// Last change.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
}

impl From<McpServer> for McpServerResponse {
    fn from(s: McpServer) -> Self {
        Self {
            id: s.id.into_string(),
            name: s.name,
            url: s.url,
            header_names: s.header_names,
            allowed_tools: s.allowed_tools,
            timeout_seconds: s.timeout_seconds,
            status: s.status.as_str().to_owned(),
            error: s.error,
            tools: s
                .tools
                .into_iter()
                .map(|t| McpToolResponse {
                    name: t.name,
                    description: t.description,
                    input_schema: t.input_schema,
                })
                .collect(),
            checked_at: s.checked_at,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

/// The tenant's MCP servers.
#[derive(Debug, Serialize, ToSchema)]
pub struct McpServerList {
    /// Oldest first.
    pub items: Vec<McpServerResponse>,
}

/// The tenant's MCP servers.
#[utoipa::path(
    get, path = "/api/v1/mcp-servers", tag = "mcp", operation_id = "listMcpServers",
    security(("bearer" = [])),
    responses((status = 200, description = "The servers", body = McpServerList))
)]
pub async fn list(state: web::Data<AppState>, caller: Caller) -> Result<Reply<McpServerList>, ApiError> {
    let items = state.mcp_servers.list(&caller).await?;
    Ok(Reply::ok(McpServerList { items: items.into_iter().map(McpServerResponse::from).collect() }))
}

/// Register an MCP server: its tools are listed at once (`status`, `error`, `tools`). Needs
/// `agents:write`.
#[utoipa::path(
    post, path = "/api/v1/mcp-servers", tag = "mcp", operation_id = "createMcpServer",
    security(("bearer" = [])),
    request_body = CreateMcpServerRequest,
    responses(
        (status = 201, description = "The server, with what listing its tools gave", body = McpServerResponse),
        (status = 409, description = "`conflict`: the tenant has a server of this name already"),
        (status = 422, description = "`validation_error`: a field"),
    )
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<CreateMcpServerRequest>,
) -> Result<Reply<McpServerResponse>, ApiError> {
    let new = body.0.try_into_domain()?;
    Ok(Reply::created(state.mcp_servers.create(&caller, new).await?.into()))
}

/// One MCP server.
#[utoipa::path(
    get, path = "/api/v1/mcp-servers/{server_id}", tag = "mcp", operation_id = "getMcpServer",
    security(("bearer" = [])),
    params(("server_id" = String, Path, description = "Server id")),
    responses(
        (status = 200, description = "The server", body = McpServerResponse),
        (status = 404, description = "`not_found`: no such server in your tenant"),
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<McpServerResponse>, ApiError> {
    let id = server_id(path.into_inner())?;
    Ok(Reply::ok(state.mcp_servers.get(&caller, &id).await?.into()))
}

/// Change an MCP server; a new URL or new headers list its tools again.
#[utoipa::path(
    patch, path = "/api/v1/mcp-servers/{server_id}", tag = "mcp", operation_id = "updateMcpServer",
    security(("bearer" = [])),
    params(("server_id" = String, Path, description = "Server id")),
    request_body = UpdateMcpServerRequest,
    responses(
        (status = 200, description = "The server after the change", body = McpServerResponse),
        (status = 404, description = "`not_found`: no such server in your tenant"),
        (status = 409, description = "`conflict`: the tenant has another server of this name"),
    )
)]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<UpdateMcpServerRequest>,
) -> Result<Reply<McpServerResponse>, ApiError> {
    let id = server_id(path.into_inner())?;
    let changes = body.0.try_into_domain()?;
    Ok(Reply::ok(state.mcp_servers.update(&caller, &id, changes).await?.into()))
}

/// List an MCP server's tools again.
#[utoipa::path(
    post, path = "/api/v1/mcp-servers/{server_id}/refresh", tag = "mcp", operation_id = "refreshMcpServer",
    security(("bearer" = [])),
    params(("server_id" = String, Path, description = "Server id")),
    responses(
        (status = 200, description = "The server with what listing its tools gave now", body = McpServerResponse),
        (status = 404, description = "`not_found`: no such server in your tenant"),
    )
)]
pub async fn refresh(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<McpServerResponse>, ApiError> {
    let id = server_id(path.into_inner())?;
    Ok(Reply::ok(state.mcp_servers.refresh(&caller, &id).await?.into()))
}

/// Delete an MCP server: agents listing it are offered none of its tools.
#[utoipa::path(
    delete, path = "/api/v1/mcp-servers/{server_id}", tag = "mcp", operation_id = "deleteMcpServer",
    security(("bearer" = [])),
    params(("server_id" = String, Path, description = "Server id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not_found`: no such server in your tenant"),
    )
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<actix_web::HttpResponse, ApiError> {
    let id = server_id(path.into_inner())?;
    state.mcp_servers.delete(&caller, &id).await?;
    Ok(actix_web::HttpResponse::NoContent().finish())
}

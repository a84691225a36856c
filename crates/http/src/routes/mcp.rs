//! `/mcp`: Agentry as an MCP server (Streamable HTTP), so that any MCP client (Claude Desktop,
//! IDEs, other agents) can use a tenant's agents, memory and workflows (PRODUCT.md §17).
//!
//! - `POST /mcp` takes one JSON-RPC message. A request is answered with one JSON object
//!   (`application/json`, which the transport allows in place of a stream); a notification or a
//!   response is accepted with 202. `initialize` negotiates the protocol version and issues an
//!   `Mcp-Session-Id`; `ping`, `tools/list` and `tools/call` follow.
//! - `GET /mcp` answers 405: the server sends nothing unasked. `DELETE /mcp` ends a session.
//! - Sessions carry no state: every request is authenticated by its own bearer (an API key or
//!   an access token, as every route), counted against the tenant's rate limit once, and
//!   authorised as the REST route of the tool it calls. So a session survives a restart and
//!   works across instances.
//! - A request whose `Origin` names another site is refused (403): a web page must not reach a
//!   local MCP server through its visitor's browser (DNS rebinding), as the MCP specification
//!   requires.
//!
//! The tools are the REST routes' own operations, their arguments read with the REST bodies'
//! types and checks, their results the REST answers: `chat_<agent>` (a chat: held, charged,
//! stored, and continued with `session_id`), `memory_search`, `memory_add`, `knowledge_search`,
//! `run_workflow`, `get_execution`. A refusal (a scope, credits, a bad argument) is the tool's error
//! (`isError`), never a transport error; an unknown method or tool is a JSON-RPC error.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use agentry_domain::agents::Agent;
use agentry_domain::validation::{FieldError, FieldErrorKind, ValidationErrors};
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::access::Caller;
use crate::error::{ApiError, ErrorCode};
use crate::routes::chat::{ChatRequest, ChatResponse};
use crate::routes::executions::{ExecuteRequest, ExecutionResponse, ExecutionStarted, execution_id};
use crate::routes::knowledge::{KnowledgeSearchResponse, SearchRequest};
use crate::routes::memory::{
    AddMemoryRequest, MemoryEntryResponse, MemorySearchHit, MemorySearchResponse, SearchMemoryRequest,
};
use crate::settings::Envelope;

/// Protocol versions this server speaks, newest first.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// The session header.
const SESSION_HEADER: &str = "mcp-session-id";
/// Prefix of the chat tools' names.
const CHAT_PREFIX: &str = "chat_";

/// Registers `/mcp` (outside the versioned API: MCP clients are given its URL).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/mcp")
            .route(web::post().to(post))
            .route(web::get().to(get))
            .route(web::delete().to(delete)),
    );
}

/// A JSON-RPC error object.
fn rpc_error(id: &Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A tool's result: its JSON as text (and as structured content), or its error.
fn tool_result(outcome: Result<Value, ApiError>) -> Value {
    match outcome {
        Ok(value) => json!({
            "content": [{"type": "text", "text": value.to_string()}],
            "structuredContent": value,
            "isError": false,
        }),
        Err(e) => {
            let body = e.body(Envelope::Bare);
            json!({"content": [{"type": "text", "text": body.to_string()}], "isError": true})
        }
    }
}

fn refuse_cross_origin(req: &HttpRequest) -> Result<(), ApiError> {
    if crate::origin::is_cross_origin(req) {
        return Err(ApiError::new(
            crate::error::ErrorCode::Forbidden,
            "cross-origin requests to /mcp are refused",
        ));
    }
    Ok(())
}

async fn get(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    refuse_cross_origin(&req)?;
    Err(ApiError::new(ErrorCode::MethodNotAllowed, "the server sends nothing unasked: POST requests to /mcp")
        .with_allow("POST, DELETE"))
}

async fn delete(req: HttpRequest, _caller: Caller) -> Result<HttpResponse, ApiError> {
    refuse_cross_origin(&req)?;
    Ok(HttpResponse::NoContent().finish())
}

async fn post(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: Caller,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    refuse_cross_origin(&req)?;
    let message: Value = match serde_json::from_slice(&body) {
        Ok(Value::Object(m)) => Value::Object(m),
        Ok(_) => return Ok(json_reply(rpc_error(&Value::Null, -32600, "a JSON-RPC message is an object"))),
        Err(e) => return Ok(json_reply(rpc_error(&Value::Null, -32700, format!("not JSON: {e}")))),
    };
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        // A response to something we asked (we ask nothing): accepted.
        return Ok(HttpResponse::Accepted().finish());
    };
    let Some(id) = message.get("id").cloned() else {
        // A notification (`notifications/initialized`, a cancellation): accepted.
        return Ok(HttpResponse::Accepted().finish());
    };
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let answer = match method {
        "initialize" => {
            let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
            let version = PROTOCOL_VERSIONS.iter().find(|v| **v == asked).unwrap_or(&PROTOCOL_VERSIONS[0]);
            let result = json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "agentry", "version": env!("CARGO_PKG_VERSION")},
                "instructions": "Agentry: chat with this tenant's agents (chat_<agent>), search and add memory, run workflows.",
            });
            return Ok(HttpResponse::Ok()
                .insert_header((SESSION_HEADER, session_id()))
                .json(rpc_result(&id, result)));
        }
        "ping" => rpc_result(&id, json!({})),
        "tools/list" => match tools(&state, &caller).await {
            Ok(tools) => rpc_result(&id, json!({"tools": tools})),
            Err(e) => rpc_error(&id, -32603, e.to_string()),
        },
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
            let arguments = match params.get("arguments") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(a)) => a.clone(),
                Some(_) => return Ok(json_reply(rpc_error(&id, -32602, "arguments must be an object"))),
            };
            match call(&state, &caller, &name, arguments).await {
                Some(outcome) => rpc_result(&id, tool_result(outcome)),
                None => rpc_error(&id, -32602, format!("unknown tool: {name}")),
            }
        }
        other => rpc_error(&id, -32601, format!("method not found: {other}")),
    };
    Ok(json_reply(answer))
}

fn json_reply(body: Value) -> HttpResponse {
    HttpResponse::build(StatusCode::OK).json(body)
}

/// A new session id: 128 random bits (the operating system's generator, through ring).
fn session_id() -> String {
    use ring::rand::{SecureRandom as _, SystemRandom};
    let mut bytes = [0u8; 16];
    if SystemRandom::new().fill(&mut bytes).is_err() {
        // A session id grants nothing (every request carries its bearer): a fresh ULID will do.
        return format!("mcps_{}", ulid::Ulid::new());
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("mcps_{hex}")
}

/// The chat tool's name of `agent`: `chat_` and its name with every character outside
/// `[A-Za-z0-9_-]` as `_`, at most 64 characters.
fn chat_tool_name(agent: &Agent) -> String {
    let name: String = agent
        .name
        .as_str()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    let mut tool = format!("{CHAT_PREFIX}{name}");
    tool.truncate(64);
    tool
}

/// The tools the caller may see: a chat tool per active agent of the tenant (when two agents
/// would share one, the older keeps it), and the memory and workflow tools.
async fn tools(state: &AppState, caller: &Caller) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::new();
    let mut names: Vec<String> = Vec::new();
    if let Ok(agents) = state.agents.all(caller).await {
        for agent in agents.iter().filter(|a| a.status == agentry_domain::agents::AgentStatus::Active) {
            let name = chat_tool_name(agent);
            if names.contains(&name) {
                continue;
            }
            names.push(name.clone());
            let about = agent.description.as_deref().unwrap_or("an agent of this tenant");
            out.push(json!({
                "name": name,
                "description": format!("Chat with the agent {:?} ({about}). Pass session_id to continue a conversation; the answer gives it.", agent.name.as_str()),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "message": {"type": "string", "description": "Your message"},
                        "session_id": {"type": "string", "description": "The conversation to continue"}
                    },
                    "required": ["message"]
                }
            }));
        }
    }
    out.push(json!({
        "name": "memory_search",
        "description": "Search the tenant's memory (hybrid: meaning and words).",
        "inputSchema": {"type": "object", "properties": {
            "query": {"type": "string"}, "agent_id": {"type": "string"},
            "memory_type": {"type": "string", "enum": ["semantic", "episodic", "procedural"]},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 100}
        }, "required": ["query"]}
    }));
    out.push(json!({
        "name": "memory_add",
        "description": "Add a memory entry.",
        "inputSchema": {"type": "object", "properties": {
            "content": {"type": "string"}, "agent_id": {"type": "string"},
            "memory_type": {"type": "string", "enum": ["semantic", "episodic", "procedural"]},
            "metadata": {"type": "object"}, "tags": {"type": "array", "items": {"type": "string"}}
        }, "required": ["content"]}
    }));
    out.push(json!({
        "name": "knowledge_search",
        "description": "Search the tenant's knowledge bases (uploaded files) for the passages that best answer a query; each result names its file, page and headings.",
        "inputSchema": {"type": "object", "properties": {
            "query": {"type": "string"},
            "knowledge_base_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 20},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 50},
            "min_score": {"type": "number", "minimum": 0, "maximum": 1}
        }, "required": ["query", "knowledge_base_ids"]}
    }));
    out.push(json!({
        "name": "run_workflow",
        "description": "Start an execution of a workflow. With wait_seconds, wait up to that long for its end and answer the execution (status, steps, output); without, answer its id at once, which get_execution reads.",
        "inputSchema": {"type": "object", "properties": {
            "workflow_id": {"type": "string"}, "input": {"type": "object"},
            "wait_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS}
        }, "required": ["workflow_id"]}
    }));
    out.push(json!({
        "name": "get_execution",
        "description": "An execution with its steps, status and output.",
        "inputSchema": {"type": "object", "properties": {"execution_id": {"type": "string"}}, "required": ["execution_id"]}
    }));
    Ok(out)
}

/// The longest `run_workflow` waits for an execution's end (MCP clients commonly give up on a
/// request after a minute).
const MAX_WAIT_SECONDS: u64 = 60;

/// `run_workflow`'s `wait_seconds`: absent or null is 0 (answer at once).
fn wait_seconds(raw: Option<Value>) -> Result<u64, ApiError> {
    match raw {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v.as_u64().filter(|s| *s <= MAX_WAIT_SECONDS).ok_or_else(|| {
            ValidationErrors::one(FieldError::new(
                "wait_seconds",
                FieldErrorKind::OutOfRange,
                format!("must be a whole number of seconds from 0 to {MAX_WAIT_SECONDS}"),
            ))
            .into()
        }),
    }
}

/// Reads `arguments` as a REST body type, as the route's body is read (a wrong or unknown field
/// and U+0000 in what the route reads are its 422).
fn body<T: serde::de::DeserializeOwned>(arguments: Map<String, Value>) -> Result<T, ApiError> {
    crate::extract::from_json_value(Value::Object(arguments))
}

fn json<T: serde::Serialize>(value: T) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(|e| ApiError::internal(anyhow::anyhow!(e)))
}

/// Performs the tool `name`; `None` when there is no such tool.
async fn call(
    state: &AppState,
    caller: &Caller,
    name: &str,
    mut arguments: Map<String, Value>,
) -> Option<Result<Value, ApiError>> {
    Some(match name {
        "memory_search" => {
            async {
                let query = body::<SearchMemoryRequest>(arguments)?.try_into_domain()?;
                let results = state.memory.search(caller, query).await?;
                json(MemorySearchResponse {
                    results: results.hits.into_iter().map(MemorySearchHit::from).collect(),
                })
            }
            .await
        }
        "memory_add" => {
            async {
                let new = body::<AddMemoryRequest>(arguments)?.try_into_domain(true)?;
                json(MemoryEntryResponse::from(state.memory.add(caller, new).await?))
            }
            .await
        }
        "knowledge_search" => {
            async {
                let query = body::<SearchRequest>(arguments)?.try_into_domain()?;
                let hits = state.knowledge.search(caller, query).await?;
                json(KnowledgeSearchResponse { results: hits.into_iter().map(Into::into).collect() })
            }
            .await
        }
        "run_workflow" => {
            async {
                let raw = arguments
                    .remove("workflow_id")
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                let wait = wait_seconds(arguments.remove("wait_seconds"))?;
                let workflow = crate::routes::workflows::workflow_id(raw)?;
                let input = body::<ExecuteRequest>(arguments)?.try_into_domain()?;
                if wait == 0 {
                    return json(ExecutionStarted::from(
                        &state.executions.execute(caller, &workflow, input).await?,
                    ));
                }
                let wait = std::time::Duration::from_secs(wait);
                let origin = agentry_domain::workflows::ExecutionOrigin::Api;
                let execution = state.runner.run_and_wait(caller, &workflow, input, origin, wait).await?;
                json(ExecutionResponse::from(execution))
            }
            .await
        }
        "get_execution" => {
            async {
                let raw = arguments
                    .remove("execution_id")
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                let id = execution_id(raw)?;
                json(ExecutionResponse::from(state.executions.get(caller, &id).await?))
            }
            .await
        }
        chat if chat.starts_with(CHAT_PREFIX) => {
            let agents = match state.agents.all(caller).await {
                Ok(agents) => agents,
                Err(e) => return Some(Err(e.into())),
            };
            let agent = agents
                .into_iter()
                .filter(|a| a.status == agentry_domain::agents::AgentStatus::Active)
                .find(|a| chat_tool_name(a) == chat)?;
            async {
                let input = body::<ChatRequest>(arguments)?.try_into_domain()?;
                json(ChatResponse::from(state.chat.chat(caller, &agent.id, input).await?))
            }
            .await
        }
        _ => return None,
    })
}

//! Agents in the console: the list, creating, editing and deleting one, and the chat
//! playground (streamed with the script, a whole reply without it) with the session's history.

use actix_web::{HttpRequest, HttpResponse, web};
use agentry_domain::ids::SessionId;
use agentry_domain::pagination::Page;
use minijinja::{Value, context};
use serde::Deserialize;
use serde_json::json;

use super::render::{page, redirect};
use super::{Console, Form, encode};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::from_json_value;
use crate::routes::agents::{AgentResponse, CreateAgentRequest, UpdateAgentRequest, agent_id};
use crate::routes::chat::{ChatRequest, ChatResponse, MessageResponse, stream_reply};
use crate::sse;

/// Routes under `/console/{tenant_id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/agents", web::get().to(list))
        .route("/agents", web::post().to(create))
        .route("/agents/{agent_id}", web::get().to(show))
        .route("/agents/{agent_id}", web::post().to(update))
        .route("/agents/{agent_id}/delete", web::get().to(confirm_delete))
        .route("/agents/{agent_id}/delete", web::post().to(delete))
        .route("/agents/{agent_id}/chat", web::post().to(chat));
}

/// The agent form's fields as the API's body: `config` keys from `config.*` fields, the tools
/// as the JSON text of their editor, memory types from checkboxes.
fn agent_body(form: &Form) -> Result<serde_json::Value, ApiError> {
    Ok(json!({
        "name": form.get("name"),
        "type": form.text("type"),
        "status": form.text("status"),
        "description": form.get("description").unwrap_or_default(),
        "memory_types": form.all("memory_types"),
        "config": {
            "model": form.text("config.model"),
            "temperature": form.number("config.temperature"),
            "system_prompt": form.get("config.system_prompt").unwrap_or_default(),
            "max_tokens": form.number("config.max_tokens"),
            "tools": form.json("config.tools")?,
            "max_tool_rounds": form.number("config.max_tool_rounds"),
            "memory_extraction": form.text("config.memory_extraction"),
        },
    }))
}

/// The JSON text of an agent's tools for the editor.
fn tools_text(agent: &AgentResponse) -> String {
    if agent.config.tools.is_empty() {
        return String::new();
    }
    serde_json::to_string_pretty(&agent.config.tools).unwrap_or_default()
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    page: Option<i64>,
}

async fn list(state: web::Data<AppState>, c: Console, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let query =
        serde_urlencoded::from_str::<ListQuery>(req.query_string()).unwrap_or(ListQuery { page: None });
    let page_of = Page::new(query.page, Some(50)).map_err(ApiError::from)?;
    let (agents, total) = state.agents.list(&c, page_of).await?;
    let agents: Vec<AgentResponse> = agents.into_iter().map(AgentResponse::from).collect();
    let pages = total.div_ceil(u64::from(page_of.per_page)).max(1);
    page(&c, "agents", "Agents", "agents.html", context! { agents, total, page => page_of.page, pages })
}

async fn create(state: web::Data<AppState>, c: Console, form: Form) -> Result<HttpResponse, ApiError> {
    let request: CreateAgentRequest = from_json_value(agent_body(&form)?)?;
    let agent = state.agents.create(&c, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/agents/{}", c.base(), agent.id)))
}

#[derive(Debug, Deserialize)]
struct ShowQuery {
    session: Option<String>,
}

async fn show(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = agent_id(path.into_inner().1)?;
    let agent = AgentResponse::from(state.agents.get(&c, &id).await?);
    let query =
        serde_urlencoded::from_str::<ShowQuery>(req.query_string()).unwrap_or(ShowQuery { session: None });
    let session = query.session.and_then(|s| SessionId::parse(&s).ok());
    // The conversation shown: the one the page names (after a reply, or a link), its last 100
    // messages; a conversation that is not there (yet) is simply empty.
    let messages: Vec<MessageResponse> = match &session {
        Some(session) => {
            let page_of = Page::new(Some(1), Some(100)).map_err(ApiError::from)?;
            match state.chat.history(&c, &id, session, page_of).await {
                Ok((messages, _)) => messages.into_iter().map(MessageResponse::from).collect(),
                Err(e) => match ApiError::from(e) {
                    e if e.code() == crate::error::ErrorCode::NotFound => Vec::new(),
                    e => return Err(e),
                },
            }
        }
        None => Vec::new(),
    };
    let tools = tools_text(&agent);
    // A member who may not read MCP servers sees none to choose from, not an error page.
    let servers = match state.mcp_servers.list(&c).await {
        Ok(servers) => servers.into_iter().map(Into::into).collect(),
        Err(e) => match ApiError::from(e) {
            e if e.code() == crate::error::ErrorCode::Forbidden => Vec::new(),
            e => return Err(e),
        },
    };
    let mcp_servers = super::agent_tools::choices(&agent, servers);
    let knowledge_bases = super::agent_knowledge::choices(&state, &c, &agent).await?;
    let blocks = super::agent_blocks::shown(&state, &c, &id).await?;
    page(
        &c,
        "agents",
        &agent.name.clone(),
        "agent.html",
        context! {
            agent => Value::from_serialize(&agent),
            tools,
            mcp_servers,
            knowledge_bases,
            blocks => Value::from_serialize(&blocks),
            session => session.map(|s| s.as_str().to_owned()),
            messages,
        },
    )
}

/// The edit form sends every field: each becomes a change (blank text clears what may be
/// empty), so the page and the agent agree afterwards.
async fn update(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = agent_id(path.into_inner().1)?;
    let mut body = agent_body(&form)?;
    // In a change, null clears a key and absent keeps it; the form means "clear" for blanks.
    body["description"] = form.text("description").map_or(serde_json::Value::Null, Into::into);
    body["config"]["system_prompt"] =
        form.text("config.system_prompt").map_or(serde_json::Value::Null, Into::into);
    let request: UpdateAgentRequest = from_json_value(body)?;
    state.agents.update(&c, &id, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/agents/{}", c.base(), id)))
}

async fn confirm_delete(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = agent_id(path.into_inner().1)?;
    let agent = AgentResponse::from(state.agents.get(&c, &id).await?);
    page(
        &c,
        "agents",
        "Delete an agent",
        "agent_delete.html",
        context! { agent => Value::from_serialize(&agent) },
    )
}

async fn delete(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = agent_id(path.into_inner().1)?;
    state.agents.delete(&c, &id).await?;
    Ok(redirect(format!("{}/agents", c.base())))
}

/// The playground's message: streamed as the API streams it when the script asks
/// (`Accept: text/event-stream`), otherwise answered whole and shown in the conversation.
async fn chat(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = agent_id(path.into_inner().1)?;
    let request: ChatRequest =
        from_json_value(json!({ "message": form.get("message"), "session_id": form.text("session_id") }))?;
    let input = request.try_into_domain()?;
    if sse::accepts_event_stream(&req) {
        let prepared = state.chat.prepare(&c, &id, input).await?;
        return Ok(stream_reply(prepared));
    }
    let reply = ChatResponse::from(state.chat.chat(&c, &id, input).await?);
    Ok(redirect(format!("{}/agents/{}?session={}#playground", c.base(), id, encode(&reply.session_id))))
}

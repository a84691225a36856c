//! `/agents`: agents' lifecycle, chat, and conversation history.

use actix_web::{HttpResponse, web};
use agentry_domain::agents::{Agent, AgentFields, ChatInput, ChatReply, Message};
use agentry_domain::ids::{AgentId, SessionId};
use agentry_domain::pagination::Page;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, QueryParams};
use crate::reply::{Reply, timestamp};

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/agents").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            web::resource("/agents/{agent_id}")
                .route(web::get().to(get))
                .route(web::patch().to(update))
                .route(web::delete().to(delete)),
        )
        .service(web::resource("/agents/{agent_id}/chat").route(web::post().to(chat)))
        .service(
            web::resource("/agents/{agent_id}/sessions/{session_id}/messages").route(web::get().to(messages)),
        );
}

/// Query of paged lists.
#[derive(Debug, Deserialize, IntoParams)]
pub struct PageQuery {
    /// Page number, from 1.
    pub page: Option<i64>,
    /// Items per page, 1–100 (default 20).
    pub per_page: Option<i64>,
    /// Tenant to act in; default: the caller's.
    pub tenant_id: Option<String>,
}

impl PageQuery {
    /// The validated page.
    pub fn page(&self) -> Result<Page, ApiError> {
        Ok(Page::new(self.page, self.per_page)?)
    }
}

/// Fields of an agent in a request. On update every field is optional and absent ones keep
/// their value; `id`, `tenant_id` and timestamps are never taken from a body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AgentRequest {
    /// 1–100 characters; required at creation.
    #[schema(example = "Support bot")]
    pub name: Option<String>,
    /// `assistant` (default), `support` or `custom`.
    #[serde(rename = "type")]
    #[schema(example = "support")]
    pub agent_type: Option<String>,
    /// `active` (default) or `paused`.
    pub status: Option<String>,
    /// Up to 2,000 characters.
    pub description: Option<String>,
    /// Any of `semantic`, `episodic`, `procedural`.
    #[schema(example = json!(["semantic", "episodic"]))]
    pub memory_types: Option<Vec<String>>,
    /// `{model, temperature (0–2), system_prompt, max_tokens}`; on update, only the keys given
    /// change.
    #[schema(value_type = Object, example = json!({"model": "gpt-4o-mini", "temperature": 0.7}))]
    pub config: Option<Value>,
}

impl From<AgentRequest> for AgentFields {
    fn from(r: AgentRequest) -> Self {
        Self {
            name: r.name,
            agent_type: r.agent_type,
            status: r.status,
            description: r.description,
            memory_types: r.memory_types,
            config: r.config,
        }
    }
}

/// An agent.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentResponse {
    /// Agent id.
    pub id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// Name.
    pub name: String,
    /// `assistant`, `support` or `custom`.
    #[serde(rename = "type")]
    pub agent_type: &'static str,
    /// `active` or `paused`.
    pub status: &'static str,
    /// Description or null.
    pub description: Option<String>,
    /// Memory types.
    pub memory_types: Vec<&'static str>,
    /// `{model, temperature, system_prompt, max_tokens}`, null where unset.
    #[schema(value_type = Object)]
    pub config: Value,
    /// Creation time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// Last change.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
}

impl From<Agent> for AgentResponse {
    fn from(a: Agent) -> Self {
        Self {
            config: a.config.to_json(),
            id: a.id.into_string(),
            tenant_id: a.tenant_id.into_string(),
            name: a.name.as_str().to_owned(),
            agent_type: a.agent_type.as_str(),
            status: a.status.as_str(),
            description: a.description,
            memory_types: a.memory_types.iter().map(|m| m.as_str()).collect(),
            created_at: a.created_at,
            updated_at: a.updated_at,
        }
    }
}

/// A page of agents.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    /// The agents of this page, oldest first.
    pub agents: Vec<AgentResponse>,
    /// All agents of the tenant.
    pub total: u64,
    /// This page.
    pub page: u32,
    /// Page size.
    pub per_page: u32,
}

/// List the tenant's agents.
#[utoipa::path(
    get, path = "/api/v1/agents", tag = "agents", security(("bearer" = [])), params(PageQuery),
    responses((status = 200, body = AgentList), (status = 422, description = "Bad page or per_page"))
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    query: QueryParams<PageQuery>,
) -> Result<Reply<AgentList>, ApiError> {
    let page = query.0.page()?;
    let (agents, total) = state.agents.list(&caller, page).await?;
    Ok(Reply::ok(AgentList {
        agents: agents.into_iter().map(AgentResponse::from).collect(),
        total,
        page: page.page,
        per_page: page.per_page,
    }))
}

/// Create an agent.
#[utoipa::path(
    post, path = "/api/v1/agents", tag = "agents", security(("bearer" = [])),
    params(("tenant_id" = Option<String>, Query, description = "Tenant; default: yours")),
    request_body = AgentRequest,
    responses(
        (status = 201, body = AgentResponse),
        (status = 403, description = "Needs agents:write"),
        (status = 422, description = "Invalid field"),
    )
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<AgentRequest>,
) -> Result<Reply<AgentResponse>, ApiError> {
    let agent = state.agents.create(&caller, body.0.into()).await?;
    Ok(Reply::created(agent.into()))
}

/// Read an agent.
#[utoipa::path(
    get, path = "/api/v1/agents/{agent_id}", tag = "agents", security(("bearer" = [])),
    params(("agent_id" = String, Path, description = "Agent id")),
    responses((status = 200, body = AgentResponse), (status = 404, description = "No such agent in your tenant"))
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    agent_id: web::Path<String>,
) -> Result<Reply<AgentResponse>, ApiError> {
    let agent = state.agents.get(&caller, &AgentId::from_string(agent_id.into_inner())).await?;
    Ok(Reply::ok(agent.into()))
}

/// Change an agent; fields absent from the body keep their value.
#[utoipa::path(
    patch, path = "/api/v1/agents/{agent_id}", tag = "agents", security(("bearer" = [])),
    params(("agent_id" = String, Path, description = "Agent id")),
    request_body = AgentRequest,
    responses((status = 200, body = AgentResponse), (status = 404), (status = 422))
)]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    agent_id: web::Path<String>,
    body: JsonBody<AgentRequest>,
) -> Result<Reply<AgentResponse>, ApiError> {
    let id = AgentId::from_string(agent_id.into_inner());
    let agent = state.agents.update(&caller, &id, body.0.into()).await?;
    Ok(Reply::ok(agent.into()))
}

/// Delete an agent with its conversations and memory.
#[utoipa::path(
    delete, path = "/api/v1/agents/{agent_id}", tag = "agents", security(("bearer" = [])),
    params(("agent_id" = String, Path, description = "Agent id")),
    responses((status = 204, description = "Deleted"), (status = 404))
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    agent_id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.agents.delete(&caller, &AgentId::from_string(agent_id.into_inner())).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// A chat message.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatRequest {
    /// 1–32,000 characters.
    #[schema(required = true, value_type = String, example = "How do I reset my password?")]
    pub message: Option<String>,
    /// The conversation to continue; omit to start a new one.
    pub session_id: Option<String>,
}

/// Token usage of an exchange.
#[derive(Debug, Serialize, ToSchema)]
pub struct Usage {
    /// Tokens of the prompt (system prompt, memories, history, message).
    pub prompt_tokens: u64,
    /// Tokens of the reply.
    pub completion_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
}

/// Credits of an exchange.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatCredits {
    /// Charged for this exchange: one per started 1,000 tokens, at least one.
    pub charged: i64,
    /// The tenant's balance after it.
    pub remaining: i64,
}

/// An agent's reply.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatResponse {
    /// Message id of the reply.
    pub id: String,
    /// The reply.
    pub content: String,
    /// Always `assistant`.
    pub role: &'static str,
    /// Token usage.
    pub usage: Usage,
    /// When the reply was made.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// The conversation; send it back to continue.
    pub session_id: String,
    /// Credits charged and left.
    pub credits: ChatCredits,
}

impl From<ChatReply> for ChatResponse {
    fn from(r: ChatReply) -> Self {
        let m = r.message;
        Self {
            id: m.id.into_string(),
            role: "assistant",
            usage: Usage {
                prompt_tokens: m.prompt_tokens,
                completion_tokens: m.completion_tokens,
                total_tokens: m.prompt_tokens + m.completion_tokens,
            },
            content: m.content,
            created_at: m.created_at,
            session_id: r.session_id.into_string(),
            credits: ChatCredits { charged: r.charged, remaining: r.remaining },
        }
    }
}

/// Send a message to an agent and get its reply.
#[utoipa::path(
    post, path = "/api/v1/agents/{agent_id}/chat", tag = "agents", security(("bearer" = [])),
    params(("agent_id" = String, Path, description = "Agent id")),
    request_body = ChatRequest,
    responses(
        (status = 200, body = ChatResponse),
        (status = 402, description = "`insufficient_credits`; the model was not called"),
        (status = 404, description = "No such agent or session"),
        (status = 409, description = "The agent is paused"),
        (status = 502, description = "`upstream_error`: the model provider failed or timed out; nothing was charged"),
    )
)]
pub async fn chat(
    state: web::Data<AppState>,
    caller: Caller,
    agent_id: web::Path<String>,
    body: JsonBody<ChatRequest>,
) -> Result<Reply<ChatResponse>, ApiError> {
    let id = AgentId::from_string(agent_id.into_inner());
    let input = ChatInput { message: body.0.message, session_id: body.0.session_id };
    let reply = state.chat.chat(&caller, &id, input).await?;
    Ok(Reply::ok(reply.into()))
}

/// A stored message.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageResponse {
    /// Message id.
    pub id: String,
    /// `user` or `assistant`.
    pub role: &'static str,
    /// The text.
    pub content: String,
    /// For replies: the exchange's usage; null for user messages.
    pub usage: Option<Usage>,
    /// When it was written.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

impl From<Message> for MessageResponse {
    fn from(m: Message) -> Self {
        let usage = (m.role == agentry_domain::agents::ChatRole::Assistant).then_some(Usage {
            prompt_tokens: m.prompt_tokens,
            completion_tokens: m.completion_tokens,
            total_tokens: m.prompt_tokens + m.completion_tokens,
        });
        Self {
            id: m.id.into_string(),
            role: m.role.as_str(),
            content: m.content,
            usage,
            created_at: m.created_at,
        }
    }
}

/// A page of a conversation.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageList {
    /// Oldest first.
    pub messages: Vec<MessageResponse>,
    /// Messages in the conversation.
    pub total: u64,
    /// This page.
    pub page: u32,
    /// Page size.
    pub per_page: u32,
}

/// Read a conversation with an agent.
#[utoipa::path(
    get, path = "/api/v1/agents/{agent_id}/sessions/{session_id}/messages", tag = "agents",
    security(("bearer" = [])),
    params(("agent_id" = String, Path), ("session_id" = String, Path), PageQuery),
    responses((status = 200, body = MessageList), (status = 404, description = "No such agent or session"))
)]
pub async fn messages(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    query: QueryParams<PageQuery>,
) -> Result<Reply<MessageList>, ApiError> {
    let (agent_id, session_id) = path.into_inner();
    let page = query.0.page()?;
    let (messages, total) = state
        .chat
        .history(&caller, &AgentId::from_string(agent_id), &SessionId::from_string(session_id), page)
        .await?;
    Ok(Reply::ok(MessageList {
        messages: messages.into_iter().map(MessageResponse::from).collect(),
        total,
        page: page.page,
        per_page: page.per_page,
    }))
}

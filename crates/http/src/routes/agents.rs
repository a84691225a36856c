//! `/agents`: agents' lifecycle, chat, and conversation history.

pub mod blocks;
mod knowledge;

use actix_web::{HttpResponse, web};
use agentry_domain::agents::{
    Agent, AgentChanges, AgentConfig, AgentName, AgentStatus, AgentTool, AgentType, ConfigChanges, NewAgent,
    description, memory_types, tools,
};
use agentry_domain::ids::AgentId;
use agentry_domain::pagination::Page;
use agentry_domain::patch::Patch;
use agentry_domain::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator, check_path_id};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, JsonInt, JsonObject, QueryParams};
use crate::reply::{Reply, timestamp};
use crate::routes::{not_null, nullable};
pub use knowledge::{KnowledgeConfigRequest, KnowledgeConfigResponse};

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    blocks::configure(cfg);
    cfg.service(web::resource("/agents").route(web::get().to(list)).route(web::post().to(create))).service(
        web::resource("/agents/{agent_id}")
            .route(web::get().to(get))
            .route(web::patch().to(update))
            .route(web::delete().to(delete)),
    );
}

/// Query of paged lists.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page number, from 1 (default 1).
    #[param(minimum = 1, maximum = 4_294_967_295_i64)]
    pub page: Option<i64>,
    /// Items per page, 1–100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub per_page: Option<i64>,
}

impl PageQuery {
    /// The validated page.
    ///
    /// # Errors
    /// A validation error naming `page` or `per_page`.
    pub fn try_into_domain(self) -> Result<Page, ValidationErrors> {
        Page::new(self.page, self.per_page)
    }
}

/// An agent id from a path.
pub(crate) fn agent_id(raw: String) -> Result<AgentId, ApiError> {
    check_path_id(&raw, "agent_id")?;
    Ok(AgentId::from_string(raw))
}

/// Model settings in a request. Every key is optional; null is the same as absent.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct AgentConfigRequest {
    /// The model, e.g. `gpt-4o-mini`; default: the service's model. 1–200 characters.
    #[schema(min_length = 1, max_length = 200, extensions(("x-text" = json!("name"))), example = "gpt-4o-mini")]
    pub model: Option<String>,
    /// Sampling temperature, 0–2.
    #[schema(minimum = 0.0, maximum = 2.0, example = 0.7)]
    pub temperature: Option<f64>,
    /// Instructions sent before every conversation; up to 16,000 characters.
    #[schema(max_length = 16000, extensions(("x-text" = json!("long-text"))))]
    pub system_prompt: Option<String>,
    /// Longest reply in tokens, 1–32,000.
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 32000)]
    pub max_tokens: Option<JsonInt>,
    /// The tools it may call (docs/agents.md).
    #[schema(schema_with = crate::schemas::agent_tools_optional)]
    pub tools: Option<serde_json::Value>,
    /// Most rounds of tool calls per chat, 0–20 (default 5; 0 offers no tools).
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 20)]
    pub max_tool_rounds: Option<JsonInt>,
    /// Ids of the tenant's knowledge bases it answers from (up to 20).
    #[schema(max_items = 20)]
    pub knowledge_bases: Option<Vec<String>>,
    /// How chat uses them; every key optional.
    #[schema(value_type = Option<KnowledgeConfigRequest>)]
    pub knowledge: Option<JsonObject<KnowledgeConfigRequest>>,
    /// How its memory learns from its conversations: `auto` (default: the model when the
    /// service's is OpenAI-compatible, else the rules), `rules`, `model` or `off`.
    #[schema(schema_with = crate::schemas::memory_extraction_optional)]
    pub memory_extraction: Option<String>,
}

/// A new agent.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateAgentRequest {
    /// 1–100 characters.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 100,
        extensions(("x-text" = json!("name"))), example = "Support bot")]
    pub name: Option<String>,
    /// `assistant` (default), `support` or `custom`.
    #[serde(rename = "type")]
    #[schema(schema_with = crate::schemas::agent_type_optional, example = "support")]
    pub agent_type: Option<String>,
    /// `active` (default) or `paused`.
    #[schema(schema_with = crate::schemas::agent_status_optional)]
    pub status: Option<String>,
    /// Up to 2,000 characters; tabs and line breaks allowed.
    #[schema(max_length = 2000, extensions(("x-text" = json!("long-text"))))]
    pub description: Option<String>,
    /// Any of `semantic`, `episodic`, `procedural`.
    #[schema(schema_with = crate::schemas::memory_types_optional, example = json!(["semantic", "episodic"]))]
    pub memory_types: Option<Vec<String>>,
    /// Model settings; every key optional.
    #[schema(value_type = Option<AgentConfigRequest>)]
    pub config: Option<JsonObject<AgentConfigRequest>>,
}

impl CreateAgentRequest {
    pub(crate) fn try_into_domain(self) -> Result<NewAgent, ValidationErrors> {
        let mut v = Validator::new();
        let name = v.required("name", self.name, |n| AgentName::new(&n));
        let agent_type = v.optional("type", self.agent_type, |t| t.parse::<AgentType>());
        let status = v.optional("status", self.status, |s| s.parse::<AgentStatus>());
        let description = v.optional("description", self.description, description);
        let memory_types = v.optional("memory_types", self.memory_types, |m| memory_types(&m));
        let c = self.config.map(|c| c.0).unwrap_or_default();
        let model = v.optional("config.model", c.model, |m| AgentConfig::model(&m));
        let temperature = v.optional("config.temperature", c.temperature, AgentConfig::temperature);
        let system_prompt = v.optional("config.system_prompt", c.system_prompt, AgentConfig::system_prompt);
        let max_tokens = v.optional("config.max_tokens", c.max_tokens, |n| AgentConfig::max_tokens(n.0));
        let tools = v.check_all(c.tools.map(|t| AgentTool::parse_list(&t)).transpose());
        let max_tool_rounds =
            v.optional("config.max_tool_rounds", c.max_tool_rounds, |n| tools::max_tool_rounds(n.0));
        let bases = knowledge::new_bases(&mut v, c.knowledge_bases);
        let knowledge = knowledge::new_settings(&mut v, c.knowledge);
        let extraction = v.optional("config.memory_extraction", c.memory_extraction, |m| m.parse());
        let (
            name,
            agent_type,
            status,
            description,
            memory_types,
            model,
            temperature,
            system_prompt,
            max_tokens,
            tools,
            max_tool_rounds,
            bases,
            knowledge,
            extraction,
        ) = v.finish((
            name,
            agent_type,
            status,
            description,
            memory_types,
            model,
            temperature,
            system_prompt,
            max_tokens,
            tools,
            max_tool_rounds,
            bases,
            knowledge,
            extraction,
        ))?;
        Ok(NewAgent {
            name,
            agent_type: agent_type.unwrap_or(AgentType::Assistant),
            status: status.unwrap_or(AgentStatus::Active),
            description: description.flatten(),
            memory_types: memory_types.unwrap_or_default(),
            config: AgentConfig {
                model,
                temperature,
                system_prompt,
                max_tokens,
                tools: tools.unwrap_or_default(),
                max_tool_rounds,
                knowledge_bases: bases,
                knowledge,
                memory_extraction: extraction.unwrap_or_default(),
            },
        })
    }
}

/// Config keys to change: each one absent (kept), null (cleared) or a value.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct AgentConfigPatch {
    /// The model; null returns to the service's model.
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 200, extensions(("x-text" = json!("name"))))]
    pub model: Patch<String>,
    /// Sampling temperature, 0–2; null clears it.
    #[serde(default)]
    #[schema(value_type = Option<f64>, minimum = 0.0, maximum = 2.0)]
    pub temperature: Patch<f64>,
    /// Instructions; null clears them.
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 16000, extensions(("x-text" = json!("long-text"))))]
    pub system_prompt: Patch<String>,
    /// Longest reply, 1–32,000; null returns to the service's default.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 32000)]
    pub max_tokens: Patch<JsonInt>,
    /// The tools, replacing the list; null removes them.
    #[serde(default)]
    #[schema(schema_with = crate::schemas::agent_tools_optional)]
    pub tools: Patch<serde_json::Value>,
    /// Most rounds of tool calls per chat, 0–20; null returns to the default (5).
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 20)]
    pub max_tool_rounds: Patch<JsonInt>,
    /// The knowledge bases, replacing the list; null removes them.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>, max_items = 20)]
    pub knowledge_bases: Patch<Vec<String>>,
    /// How chat uses them, replaced whole (absent keys take their defaults); null: the defaults.
    #[serde(default)]
    #[schema(value_type = Option<KnowledgeConfigRequest>)]
    pub knowledge: Patch<JsonObject<KnowledgeConfigRequest>>,
    /// `auto`, `rules`, `model` or `off`; null: `auto`.
    #[serde(default)]
    #[schema(schema_with = crate::schemas::memory_extraction_optional)]
    pub memory_extraction: Patch<String>,
}

/// A partial update: absent fields keep their value; null clears the fields that may be empty.
#[derive(Debug, Deserialize, ToSchema)]
pub struct UpdateAgentRequest {
    /// 1–100 characters (never null).
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 100, extensions(("x-text" = json!("name"))))]
    pub name: Patch<String>,
    /// `assistant`, `support` or `custom` (never null).
    #[serde(default, rename = "type")]
    #[schema(schema_with = crate::schemas::agent_type)]
    pub agent_type: Patch<String>,
    /// `active` or `paused` (never null).
    #[serde(default)]
    #[schema(schema_with = crate::schemas::agent_status)]
    pub status: Patch<String>,
    /// Up to 2,000 characters; null clears it.
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 2000, extensions(("x-text" = json!("long-text"))))]
    pub description: Patch<String>,
    /// Memory types; null clears them.
    #[serde(default)]
    #[schema(schema_with = crate::schemas::memory_types_optional)]
    pub memory_types: Patch<Vec<String>>,
    /// Config keys to change; null resets every key.
    #[serde(default)]
    #[schema(value_type = Option<AgentConfigPatch>)]
    pub config: Patch<JsonObject<AgentConfigPatch>>,
}

impl UpdateAgentRequest {
    pub(crate) fn try_into_domain(self) -> Result<AgentChanges, ValidationErrors> {
        let mut v = Validator::new();
        let name = not_null(&mut v, "name", self.name, |n| AgentName::new(&n));
        let agent_type = not_null(&mut v, "type", self.agent_type, |t| t.parse::<AgentType>());
        let status = not_null(&mut v, "status", self.status, |s| s.parse::<AgentStatus>());
        // Blank text clears a description as null does.
        let description = nullable(&mut v, "description", self.description, description);
        let memory_types = nullable(&mut v, "memory_types", self.memory_types, |m| memory_types(&m));
        let (reset, keys) = match self.config {
            Patch::Absent => (false, AgentConfigPatch::default()),
            Patch::Null => (true, AgentConfigPatch::default()),
            Patch::Value(keys) => (false, keys.0),
        };
        let model = nullable(&mut v, "config.model", keys.model, |m| AgentConfig::model(&m));
        let temperature = nullable(&mut v, "config.temperature", keys.temperature, AgentConfig::temperature);
        let system_prompt =
            nullable(&mut v, "config.system_prompt", keys.system_prompt, AgentConfig::system_prompt);
        let max_tokens =
            nullable(&mut v, "config.max_tokens", keys.max_tokens, |n| AgentConfig::max_tokens(n.0));
        let tools = match keys.tools {
            Patch::Absent => v.check_nested(Ok(Patch::Absent)),
            Patch::Null => v.check_nested(Ok(Patch::Null)),
            Patch::Value(t) => v.check_all(AgentTool::parse_list(&t).map(Patch::Value)),
        };
        let max_tool_rounds =
            nullable(&mut v, "config.max_tool_rounds", keys.max_tool_rounds, |n| tools::max_tool_rounds(n.0));
        let bases = knowledge::changed_bases(&mut v, keys.knowledge_bases);
        let knowledge = knowledge::changed_settings(&mut v, keys.knowledge);
        let extraction = nullable(&mut v, "config.memory_extraction", keys.memory_extraction, |m| m.parse());
        let (
            name,
            agent_type,
            status,
            description,
            memory_types,
            model,
            temperature,
            system_prompt,
            max_tokens,
            tools,
            max_tool_rounds,
            bases,
            knowledge,
            extraction,
        ) = v.finish((
            name,
            agent_type,
            status,
            description,
            memory_types,
            model,
            temperature,
            system_prompt,
            max_tokens,
            tools,
            max_tool_rounds,
            bases,
            knowledge,
            extraction,
        ))?;
        Ok(AgentChanges {
            name,
            agent_type,
            status,
            description: match description {
                Patch::Value(None) => Patch::Null,
                Patch::Value(Some(d)) => Patch::Value(d),
                Patch::Null => Patch::Null,
                Patch::Absent => Patch::Absent,
            },
            memory_types,
            config: ConfigChanges {
                reset,
                model,
                temperature,
                system_prompt,
                max_tokens,
                tools,
                max_tool_rounds,
                knowledge_bases: bases,
                knowledge,
                memory_extraction: extraction,
            },
        })
    }
}

/// An agent's model settings; null where unset.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentConfigResponse {
    /// The model, or null for the service's default.
    pub model: Option<String>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Instructions sent before every conversation.
    pub system_prompt: Option<String>,
    /// Longest reply in tokens.
    pub max_tokens: Option<u32>,
    /// The tools it may call, as configured (defaults filled in).
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<serde_json::Value>,
    /// Most rounds of tool calls per chat; null for the default (5).
    pub max_tool_rounds: Option<u8>,
    /// The knowledge bases it answers from.
    pub knowledge_bases: Vec<String>,
    /// How chat uses them (defaults filled in).
    pub knowledge: KnowledgeConfigResponse,
    /// How its memory learns from its conversations.
    #[schema(schema_with = crate::schemas::memory_extraction)]
    pub memory_extraction: &'static str,
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
    /// Model settings.
    pub config: AgentConfigResponse,
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
            id: a.id.into_string(),
            tenant_id: a.tenant_id.into_string(),
            name: a.name.as_str().to_owned(),
            agent_type: a.agent_type.as_str(),
            status: a.status.as_str(),
            description: a.description,
            memory_types: a.memory_types.iter().map(|m| m.as_str()).collect(),
            config: AgentConfigResponse {
                model: a.config.model,
                temperature: a.config.temperature,
                system_prompt: a.config.system_prompt,
                max_tokens: a.config.max_tokens,
                tools: a.config.tools.iter().map(AgentTool::to_json).collect(),
                max_tool_rounds: a.config.max_tool_rounds,
                knowledge_bases: a.config.knowledge_bases.iter().map(ToString::to_string).collect(),
                knowledge: a.config.knowledge.into(),
                memory_extraction: a.config.memory_extraction.as_str(),
            },
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
    get, path = "/api/v1/agents", tag = "agents", operation_id = "listAgents",
    security(("bearer" = [])), params(PageQuery),
    responses((status = 200, description = "A page of agents", body = AgentList))
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    query: QueryParams<PageQuery>,
) -> Result<Reply<AgentList>, ApiError> {
    let page = query.0.try_into_domain()?;
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
    post, path = "/api/v1/agents", tag = "agents", operation_id = "createAgent",
    security(("bearer" = [])),
    request_body = CreateAgentRequest,
    responses((status = 201, description = "Created", body = AgentResponse))
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<CreateAgentRequest>,
) -> Result<Reply<AgentResponse>, ApiError> {
    let new = body.0.try_into_domain()?;
    let agent = state.agents.create(&caller, new).await?;
    Ok(Reply::created(agent.into()))
}

/// Read an agent.
#[utoipa::path(
    get, path = "/api/v1/agents/{agent_id}", tag = "agents", operation_id = "getAgent",
    security(("bearer" = [])),
    params(("agent_id" = String, Path, description = "Agent id")),
    responses(
        (status = 200, description = "The agent", body = AgentResponse),
        (status = 404, description = "`not_found`: no such agent in your tenant"),
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<AgentResponse>, ApiError> {
    let agent = state.agents.get(&caller, &agent_id(path.into_inner())?).await?;
    Ok(Reply::ok(agent.into()))
}

/// Change an agent: fields absent from the body keep their value; null clears those that may
/// be empty (`description`, `memory_types`, `config` and its keys).
#[utoipa::path(
    patch, path = "/api/v1/agents/{agent_id}", tag = "agents", operation_id = "updateAgent",
    security(("bearer" = [])),
    params(("agent_id" = String, Path, description = "Agent id")),
    request_body = UpdateAgentRequest,
    responses(
        (status = 200, description = "The changed agent", body = AgentResponse),
        (status = 404, description = "`not_found`: no such agent in your tenant"),
    )
)]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<UpdateAgentRequest>,
) -> Result<Reply<AgentResponse>, ApiError> {
    let id = agent_id(path.into_inner())?;
    let changes = body.0.try_into_domain()?;
    let agent = state.agents.update(&caller, &id, changes).await?;
    Ok(Reply::ok(agent.into()))
}

/// Delete an agent with its conversations and memory.
#[utoipa::path(
    delete, path = "/api/v1/agents/{agent_id}", tag = "agents", operation_id = "deleteAgent",
    security(("bearer" = [])),
    params(("agent_id" = String, Path, description = "Agent id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not_found`: no such agent in your tenant"),
    )
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.agents.delete(&caller, &agent_id(path.into_inner())?).await?;
    Ok(HttpResponse::NoContent().finish())
}

pub(crate) fn first_error(e: ValidationErrors) -> FieldError {
    e.0.into_iter()
        .next()
        .unwrap_or_else(|| FieldError::new("query", FieldErrorKind::InvalidValue, "invalid"))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn update(body: Value) -> Result<AgentChanges, ValidationErrors> {
        serde_json::from_value::<UpdateAgentRequest>(body).unwrap().try_into_domain()
    }

    #[test]
    fn a_patch_tells_absent_from_null_from_value_for_every_field() {
        let c =
            update(serde_json::json!({"description": null, "config": {"model": null, "temperature": 1.5}}))
                .unwrap();
        assert_eq!(c.description, Patch::Null);
        assert_eq!(c.memory_types, Patch::Absent);
        assert_eq!(c.config.model, Patch::Null);
        assert_eq!(c.config.temperature, Patch::Value(1.5));
        assert_eq!(c.config.max_tokens, Patch::Absent);
        assert!(!c.config.reset);
        assert!(update(serde_json::json!({"config": null})).unwrap().config.reset);
        let errors = update(serde_json::json!({"name": null, "status": null, "config": {"max_tokens": 0}}))
            .unwrap_err()
            .0;
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["name", "status", "config.max_tokens"]);
    }

    #[test]
    fn a_new_agent_gets_defaults_and_every_bad_field_is_named() {
        let new: CreateAgentRequest =
            serde_json::from_value(serde_json::json!({"name": " Helper "})).unwrap();
        let new = new.try_into_domain().unwrap();
        assert_eq!(
            (new.name.as_str(), new.agent_type, new.status),
            ("Helper", AgentType::Assistant, AgentStatus::Active)
        );
        let bad: CreateAgentRequest = serde_json::from_value(serde_json::json!({
            "type": "robot", "memory_types": ["dreams"], "config": {"temperature": 9, "model": ""}
        }))
        .unwrap();
        let fields: Vec<String> = bad.try_into_domain().unwrap_err().0.into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["name", "type", "memory_types", "config.model", "config.temperature"]);
    }
}

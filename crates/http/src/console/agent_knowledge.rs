//! The agent page's knowledge: the tenant's knowledge bases, ticked where this agent answers
//! from them, and how (`config.knowledge`), changed through the API's own update.

use actix_web::{HttpResponse, web};
use serde::Serialize;
use serde_json::json;

use super::render::redirect;
use super::{Console, Form};
use crate::AppState;
use crate::error::{ApiError, ErrorCode};
use crate::extract::from_json_value;
use crate::routes::agents::{AgentResponse, UpdateAgentRequest, agent_id};

/// Routes under `/console/{tenant_id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/agents/{agent_id}/knowledge", web::post().to(choose));
}

/// One base as the agent page shows it.
#[derive(Debug, Serialize)]
pub(crate) struct BaseChoice {
    id: String,
    name: String,
    file_count: u64,
    chosen: bool,
}

/// The tenant's bases with the agent's choice among them; none for a member who may not read
/// knowledge bases (not an error page).
pub(crate) async fn choices(
    state: &AppState,
    c: &Console,
    agent: &AgentResponse,
) -> Result<Vec<BaseChoice>, ApiError> {
    let bases = match state.knowledge.list_bases(c).await {
        Ok(bases) => bases,
        Err(e) => match ApiError::from(e) {
            e if e.code() == ErrorCode::Forbidden => return Ok(Vec::new()),
            e => return Err(e),
        },
    };
    Ok(bases
        .into_iter()
        .map(|b| BaseChoice {
            chosen: agent.config.knowledge_bases.contains(&b.id.to_string()),
            id: b.id.into_string(),
            name: b.name,
            file_count: b.file_count,
        })
        .collect())
}

async fn choose(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = agent_id(path.into_inner().1)?;
    let request: UpdateAgentRequest = from_json_value(json!({"config": {
        "knowledge_bases": form.all("knowledge_bases"),
        "knowledge": {
            "mode": form.text("mode"),
            "top_k": form.number("top_k"),
            "max_context_tokens": form.number("max_context_tokens"),
        },
    }}))?;
    state.agents.update(&c, &id, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/agents/{}#knowledge", c.base(), id)))
}

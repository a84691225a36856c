//! The agent page's core memory blocks: each block with how full it is, edited whole or deleted
//! here (the agent edits them too, with its `core_memory` tools), through the service the API
//! uses, so the same limits and versions hold.

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::render::redirect;
use super::{Console, Form};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::from_json_value;
use crate::routes::agents::agent_id;
use crate::routes::agents::blocks::{MemoryBlockResponse, PutBlockRequest};

/// Routes under `/console/{tenant_id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/agents/{agent_id}/blocks", web::post().to(save))
        .route("/agents/{agent_id}/blocks/{label}/delete", web::post().to(delete));
}

/// The agent's blocks for its page.
pub(crate) async fn shown(
    state: &AppState,
    c: &Console,
    agent: &agentry_domain::ids::AgentId,
) -> Result<Vec<MemoryBlockResponse>, ApiError> {
    Ok(state.blocks.list(c, agent).await?.into_iter().map(Into::into).collect())
}

fn blocks_path(c: &Console, agent: &agentry_domain::ids::AgentId) -> String {
    format!("{}/agents/{}#blocks", c.base(), agent)
}

async fn save(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = agent_id(path.into_inner().1)?;
    let label = form.text("label").unwrap_or_default();
    let request: PutBlockRequest = from_json_value(json!({
        "value": form.get("value").unwrap_or_default(),
        "description": form.text("description"),
        "limit": form.number("limit"),
    }))?;
    let input = request.try_into_domain()?;
    state.blocks.put(&c, &id, &label, input).await?;
    Ok(redirect(blocks_path(&c, &id)))
}

async fn delete(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let (_, agent, label) = path.into_inner();
    let id = agent_id(agent)?;
    state.blocks.delete(&c, &id, &label).await?;
    Ok(redirect(blocks_path(&c, &id)))
}

//! The agent page's MCP tools: each of the tenant's MCP servers with the tools it offers, ticked
//! where this agent offers them to its model, and a form per server that changes which (the
//! agent's `config.tools` entry `{type: "mcp", server_id, tools?}`, through the API's update).

use actix_web::{HttpResponse, web};
use serde::Serialize;
use serde_json::{Value, json};

use super::render::redirect;
use super::{Console, Form};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::from_json_value;
use crate::routes::agents::{AgentResponse, UpdateAgentRequest, agent_id};
use crate::routes::mcp_servers::{McpServerResponse, server_id};

/// Routes under `/console/{tenant_id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/agents/{agent_id}/mcp-tools", web::post().to(choose));
}

/// One server as the agent page shows it.
#[derive(Debug, Serialize)]
pub(crate) struct ServerChoice {
    id: String,
    name: String,
    status: String,
    error: Option<String>,
    tools: Vec<ToolChoice>,
}

/// One of a server's tools, and whether the agent offers it.
#[derive(Debug, Serialize)]
struct ToolChoice {
    name: String,
    /// The remote server's words: data, shown escaped like any text.
    description: Option<String>,
    offered: bool,
}

/// The agent's `mcp` entry for `server_id`, if it has one.
fn entry<'a>(agent_tools: &'a [Value], server_id: &str) -> Option<&'a Value> {
    agent_tools.iter().find(|t| t["type"] == "mcp" && t["server_id"] == server_id)
}

/// The server's tools the agent may be given: those discovered, within its `allowed_tools`.
fn usable(server: &McpServerResponse) -> impl Iterator<Item = &crate::routes::mcp_servers::McpToolResponse> {
    server
        .tools
        .iter()
        .filter(|t| server.allowed_tools.as_ref().is_none_or(|allowed| allowed.contains(&t.name)))
}

/// The tenant's servers with the agent's choice among their tools.
pub(crate) fn choices(agent: &AgentResponse, servers: Vec<McpServerResponse>) -> Vec<ServerChoice> {
    servers
        .into_iter()
        .map(|server| {
            let chosen = entry(&agent.config.tools, &server.id);
            let tools = usable(&server)
                .map(|t| ToolChoice {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    offered: chosen.is_some_and(|e| match e.get("tools").and_then(Value::as_array) {
                        Some(names) => names.iter().any(|n| n == t.name.as_str()),
                        None => true,
                    }),
                })
                .collect();
            ServerChoice {
                id: server.id,
                name: server.name,
                status: server.status,
                error: server.error,
                tools,
            }
        })
        .collect()
}

/// The agent's tools with the server's entry replaced: none when no tool is ticked, every tool
/// (no `tools` list, so tools the server adds later come too) when all are, else the ticked.
fn with_choice(mut tools: Vec<Value>, server_id: &str, ticked: Vec<String>, all: &[String]) -> Vec<Value> {
    let at = tools.iter().position(|t| t["type"] == "mcp" && t["server_id"] == server_id);
    let new = match ticked.len() {
        0 => None,
        _ if all.iter().all(|name| ticked.contains(name)) => {
            Some(json!({"type": "mcp", "server_id": server_id}))
        }
        _ => Some(json!({"type": "mcp", "server_id": server_id, "tools": ticked})),
    };
    match (at, new) {
        (Some(at), Some(new)) => tools[at] = new,
        (Some(at), None) => {
            tools.remove(at);
        }
        (None, Some(new)) => tools.push(new),
        (None, None) => {}
    }
    tools
}

async fn choose(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = agent_id(path.into_inner().1)?;
    let agent = AgentResponse::from(state.agents.get(&c, &id).await?);
    let server_id = server_id(form.get("server_id").unwrap_or_default())?;
    let server = McpServerResponse::from(state.mcp_servers.get(&c, &server_id).await?);
    let all: Vec<String> = usable(&server).map(|t| t.name.clone()).collect();
    let ticked: Vec<String> = form.all("tools").into_iter().filter(|t| all.contains(t)).collect();
    let tools = with_choice(agent.config.tools, &server.id, ticked, &all);
    let request: UpdateAgentRequest = from_json_value(json!({"config": {"tools": tools}}))?;
    state.agents.update(&c, &id, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/agents/{}#mcp-tools", c.base(), id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_choice_replaces_only_its_servers_entry() {
        let tools = vec![json!({"type": "memory_search"}), json!({"type": "mcp", "server_id": "mcp_a"})];
        let all = names(&["add", "fail"]);
        let some = with_choice(tools.clone(), "mcp_a", names(&["add"]), &all);
        assert_eq!(some[1], json!({"type": "mcp", "server_id": "mcp_a", "tools": ["add"]}));
        assert_eq!(some[0], tools[0]);
        let every = with_choice(some, "mcp_a", names(&["fail", "add"]), &all);
        assert_eq!(every[1], json!({"type": "mcp", "server_id": "mcp_a"}), "all ticked: no list");
        let none = with_choice(every, "mcp_a", vec![], &all);
        assert_eq!(none, vec![json!({"type": "memory_search"})]);
        let other = with_choice(none, "mcp_b", names(&["x"]), &names(&["x", "y"]));
        assert_eq!(other[1], json!({"type": "mcp", "server_id": "mcp_b", "tools": ["x"]}));
    }
}

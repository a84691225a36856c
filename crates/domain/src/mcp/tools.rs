//! Remote MCP servers' tools as agents' tools: a [`ToolProvider`] for the `mcp` entries of an
//! agent's `config.tools`. An entry `{type: "mcp", server_id, tools?}` offers the server's
//! listed tools (those the server allows, and of them those the entry names) as
//! `<server name>__<tool>`, with the server's own input schema. Offering reads what the last
//! discovery stored (no network in a chat's preparation); a call opens a session with the
//! server as the chat's caller and closes it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::model::{MAX_RESULT_BYTES, McpServer, McpTool};
use super::ports::{McpClient, McpFailure, McpServerRepository};
use super::service::endpoint;
use crate::agents::{Agent, OfferedTool, ToolCallContext, ToolError, ToolKind, ToolProvider, ToolSpec};
use crate::ids::McpServerId;
use crate::tenancy::Principal;
use crate::webhooks::SecretCipher;

/// Separates a server's name from its tool's in the name a model sees.
pub const SEPARATOR: &str = "__";

/// The MCP tools of agents.
#[derive(Clone)]
pub struct McpTools {
    servers: Arc<dyn McpServerRepository>,
    client: Arc<dyn McpClient>,
    cipher: Arc<dyn SecretCipher>,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("McpTools { .. }")
    }
}

/// The `mcp` entries of an agent's tools: position, server, the tools it names.
fn entries(agent: &Agent) -> impl Iterator<Item = (usize, &McpServerId, Option<&Vec<String>>)> {
    agent.config.tools.iter().enumerate().filter_map(|(i, t)| match &t.kind {
        ToolKind::Mcp { server_id, tools } => Some((i, server_id, tools.as_ref())),
        _ => None,
    })
}

/// The tools of `server` an entry naming `named` offers.
fn offered<'a>(server: &'a McpServer, named: Option<&'a Vec<String>>) -> impl Iterator<Item = &'a McpTool> {
    server.usable_tools().filter(move |t| named.is_none_or(|n| n.contains(&t.name)))
}

impl McpTools {
    /// The provider over the tenants' servers and an MCP client.
    pub fn new(
        servers: Arc<dyn McpServerRepository>,
        client: Arc<dyn McpClient>,
        cipher: Arc<dyn SecretCipher>,
    ) -> Self {
        Self { servers, client, cipher }
    }
}

#[async_trait]
impl ToolProvider for McpTools {
    async fn offer(&self, agent: &Agent, caller: &Principal) -> Vec<OfferedTool> {
        let mut out = Vec::new();
        for (position, server_id, named) in entries(agent) {
            let server = match self.servers.get(&caller.tenant_id, server_id).await {
                Ok(Some(server)) => server,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(error = ?e, %server_id, "reading an MCP server failed; its tools are not offered");
                    continue;
                }
            };
            for tool in offered(&server, named) {
                let name = format!("{}{SEPARATOR}{}", server.name, tool.name);
                if name.len() > 64 {
                    continue;
                }
                let description = format!(
                    "A tool of the MCP server {:?}. What the server says it does: {}",
                    server.name,
                    tool.description.as_deref().unwrap_or("(nothing)")
                );
                out.push(OfferedTool {
                    spec: ToolSpec { name, description, parameters: tool.input_schema.clone() },
                    timeout: Duration::from_secs(u64::from(server.timeout_seconds)),
                    kind: "mcp",
                    position,
                });
            }
        }
        out
    }

    async fn call<'a>(
        &self,
        context: ToolCallContext<'a>,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, ToolError> {
        let unknown = || ToolError::Unknown(name.to_owned());
        let (server_name, tool) = name.split_once(SEPARATOR).ok_or_else(unknown)?;
        // The entry and server that offered it, read again: the tool must still be offered.
        let mut found = None;
        for (_, server_id, named) in entries(context.agent) {
            let server = self
                .servers
                .get(&context.caller.tenant_id, server_id)
                .await
                .map_err(|e| ToolError::Failed(e.to_string()))?;
            if let Some(server) = server.filter(|s| s.name == server_name)
                && offered(&server, named).any(|t| t.name == tool)
            {
                found = Some(server);
                break;
            }
        }
        let server = found.ok_or_else(unknown)?;
        let endpoint =
            endpoint(self.cipher.as_ref(), &server).map_err(|e| ToolError::Failed(e.to_string()))?;
        // The client gives up at the endpoint's deadline, the server's timeout (the tool's).
        match self.client.call_tool(&endpoint, tool, arguments).await {
            Ok(result) if result.is_error => {
                Err(ToolError::Failed(format!("the tool failed: {}", capped(result.content))))
            }
            Ok(result) => Ok(json!({ "content": capped(result.content) })),
            Err(McpFailure::Refused(why)) => Err(ToolError::NotAllowed(why)),
            Err(McpFailure::TimedOut) => Err(ToolError::TimedOut(context.timeout)),
            Err(failure) => Err(ToolError::Failed(failure.to_string())),
        }
    }
}

/// The result as the model reads it: its text, cut at [`MAX_RESULT_BYTES`] with a note.
fn capped(content: Value) -> String {
    let text = match &content {
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| b.get("text").and_then(Value::as_str).map_or_else(|| b.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.len() <= MAX_RESULT_BYTES {
        return text;
    }
    let mut end = MAX_RESULT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… [cut: the result has {} bytes; a tool result gives the model at most {MAX_RESULT_BYTES}]",
        &text[..end],
        text.len()
    )
}

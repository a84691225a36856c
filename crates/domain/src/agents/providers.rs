//! The port every kind of tool plugs into: a [`ToolProvider`] tells what tools it offers an
//! agent's model and performs their calls, failing with a typed [`ToolError`]. The chat loop
//! knows only the [`ToolRegistry`](super::registry::ToolRegistry) composing them; a new kind of tool is
//! one more provider.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::chat::ToolSpec;
use super::model::Agent;
use super::tools::ToolError;
use crate::ids::SessionId;
use crate::tenancy::Principal;

/// A tool as a provider offers it to a model.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedTool {
    /// Its name, description and parameters, as the model is told.
    pub spec: ToolSpec,
    /// Longest a call may take.
    pub timeout: Duration,
    /// The kind of tool (a bounded set, for metrics): `memory_search`, `mcp`, ….
    pub kind: &'static str,
    /// The position in the agent's `config.tools` of the entry it comes from: tools are offered
    /// in the order they are configured.
    pub position: usize,
}

/// Whom a tool call acts for, and where.
#[derive(Debug, Clone, Copy)]
pub struct ToolCallContext<'a> {
    /// The chat's caller, with their current role: a tool reaches only what they may.
    pub caller: &'a Principal,
    /// The agent whose model called it.
    pub agent: &'a Agent,
    /// The conversation.
    pub session_id: &'a SessionId,
    /// How long the call may take: the provider gives up with [`ToolError::TimedOut`] then.
    pub timeout: Duration,
}

/// One kind of tool.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait ToolProvider: Send + Sync {
    /// The tools of this kind that `agent` offers its model when `caller` chats with it; a
    /// provider may have to ask elsewhere (an MCP server's `tools/list`). A tool it cannot
    /// offer now is left out (and logged), not an error of the chat.
    async fn offer(&self, agent: &Agent, caller: &Principal) -> Vec<OfferedTool>;

    /// Performs a call of the tool named `name` (one it offered) with the model's `arguments`.
    ///
    /// # Errors
    /// Why there is no output, as the model reads it.
    async fn call<'a>(
        &self,
        context: ToolCallContext<'a>,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, ToolError>;
}

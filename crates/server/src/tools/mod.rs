//! The tool providers of chat, one per kind of tool, over the services that already do their
//! work. Memory searches and additions and HTTP requests run as the workflow steps of the same
//! kind do ([`BasicSteps`]: the same memory service, the same guarded outbound client);
//! `run_workflow` starts an execution (`workflows::WorkflowTools`); `knowledge_search` searches
//! the agent's knowledge bases (`knowledge::KnowledgeTools`). Everything runs as the chat's
//! caller, whose current role the registry has read before the call.
//!
//! Nothing here holds chat: the executions' steps chat, so the workflow tools are added to a
//! chat where the executions exist (the application's chat, and each `agent_chat` step's, over
//! the executor running the step), and the object graph has no cycle.

pub(crate) mod knowledge;
pub(crate) mod workflows;

use std::time::Duration;

use agentry_domain::agents::{
    Agent, AgentTool, OfferedTool, ToolAction, ToolCallContext, ToolError, ToolKind, ToolProvider,
};
use agentry_domain::tenancy::Principal;
use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::steps::basic::BasicSteps;

/// The agent's configured tools that `serves` picks, as offered to its model.
fn offer_configured(agent: &Agent, serves: impl Fn(&ToolKind) -> bool) -> Vec<OfferedTool> {
    agent
        .config
        .tools
        .iter()
        .enumerate()
        .filter(|(_, t)| serves(&t.kind))
        .map(|(position, t)| OfferedTool {
            spec: t.spec(),
            timeout: t.timeout(),
            kind: t.kind.type_name(),
            position,
        })
        .collect()
}

/// The configured tool named `name` that `serves` picks.
fn configured<'a>(
    agent: &'a Agent,
    name: &str,
    serves: impl Fn(&ToolKind) -> bool,
) -> Result<&'a AgentTool, ToolError> {
    agent
        .config
        .tools
        .iter()
        .find(|t| t.name == name && serves(&t.kind))
        .ok_or_else(|| ToolError::Unknown(name.to_owned()))
}

/// Gives up on `work` once `timeout` has passed.
pub(crate) async fn within<T>(
    timeout: Duration,
    work: impl Future<Output = Result<T, ToolError>>,
) -> Result<T, ToolError> {
    tokio::time::timeout(timeout, work).await.unwrap_or(Err(ToolError::TimedOut(timeout)))
}

/// Performs a step-like tool call with the steps' performer.
async fn run_step(
    steps: &BasicSteps,
    context: ToolCallContext<'_>,
    tool: &AgentTool,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let ToolAction::Step(step) = tool.action(&context.agent.id, arguments)? else {
        return Err(ToolError::Unknown(tool.name.clone()));
    };
    within(context.timeout, async {
        steps.run(context.caller, step).await.map_err(|e| ToolError::Failed(e.message))
    })
    .await
}

/// `memory_search` and `memory_add`: the agent's own memory.
#[derive(Debug, Clone)]
pub struct MemoryTools(pub BasicSteps);

fn is_memory(kind: &ToolKind) -> bool {
    matches!(kind, ToolKind::MemorySearch | ToolKind::MemoryAdd)
}

#[async_trait]
impl ToolProvider for MemoryTools {
    async fn offer(&self, agent: &Agent, _: &Principal) -> Vec<OfferedTool> {
        offer_configured(agent, is_memory)
    }

    async fn call<'a>(
        &self,
        context: ToolCallContext<'a>,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, ToolError> {
        let tool = configured(context.agent, name, is_memory)?;
        run_step(&self.0, context, tool, arguments).await
    }
}

/// `http_request`: a URL on one of the tool's allowed hosts, through the guarded client.
#[derive(Debug, Clone)]
pub struct HttpTools(pub BasicSteps);

fn is_http(kind: &ToolKind) -> bool {
    matches!(kind, ToolKind::HttpRequest { .. })
}

#[async_trait]
impl ToolProvider for HttpTools {
    async fn offer(&self, agent: &Agent, _: &Principal) -> Vec<OfferedTool> {
        offer_configured(agent, is_http)
    }

    async fn call<'a>(
        &self,
        context: ToolCallContext<'a>,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, ToolError> {
        let tool = configured(context.agent, name, is_http)?;
        run_step(&self.0, context, tool, arguments).await
    }
}

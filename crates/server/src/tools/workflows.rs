//! `run_workflow`: starts an execution (origin `agent`) as `POST /workflows/{id}/execute` does
//! and waits for its end (see [`crate::runner`]: it runs in the waiting chat's own task).

use std::sync::Arc;

use agentry_domain::agents::{
    Agent, OfferedTool, ToolAction, ToolCallContext, ToolError, ToolKind, ToolProvider,
};
use agentry_domain::tenancy::Principal;
use agentry_domain::workflows::{ExecutionError, ExecutionOrigin, ExecutionStatus, WorkflowRunner};
use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{configured, offer_configured};

/// Runs agents' `run_workflow` tools with an executor.
#[derive(Clone)]
pub struct WorkflowTools {
    runner: Arc<dyn WorkflowRunner>,
}

impl std::fmt::Debug for WorkflowTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkflowTools").finish_non_exhaustive()
    }
}

fn is_workflow(kind: &ToolKind) -> bool {
    matches!(kind, ToolKind::RunWorkflow { .. })
}

impl WorkflowTools {
    /// Tools that start and run executions with `runner`.
    pub fn new(runner: Arc<dyn WorkflowRunner>) -> Self {
        Self { runner }
    }
}

fn refused(e: ExecutionError) -> ToolError {
    match e {
        ExecutionError::Forbidden(_) | ExecutionError::Nesting(_) | ExecutionError::NotEntitled(_) => {
            ToolError::NotAllowed(e.to_string())
        }
        ExecutionError::Invalid(_) => ToolError::BadArguments(e.to_string()),
        other => ToolError::Failed(other.to_string()),
    }
}

#[async_trait]
impl ToolProvider for WorkflowTools {
    async fn offer(&self, agent: &Agent, _: &Principal) -> Vec<OfferedTool> {
        offer_configured(agent, is_workflow)
    }

    /// Starts the workflow and waits up to the tool's timeout for its end: its output, its
    /// failure, or (still running, now the workers') its id and status, which the model may
    /// report.
    async fn call<'a>(
        &self,
        context: ToolCallContext<'a>,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, ToolError> {
        let tool = configured(context.agent, name, is_workflow)?;
        let ToolAction::Workflow { workflow_id, input } = tool.action(&context.agent.id, arguments)? else {
            return Err(ToolError::Unknown(name.to_owned()));
        };
        let origin = ExecutionOrigin::Agent(context.agent.id.clone());
        let now = self
            .runner
            .run_and_wait(context.caller, &workflow_id, input, origin, context.timeout)
            .await
            .map_err(refused)?;
        match now.status() {
            ExecutionStatus::Completed => {
                Ok(json!({"execution_id": now.id, "status": "completed", "output": now.output()}))
            }
            ExecutionStatus::Failed | ExecutionStatus::Cancelled => Err(ToolError::Failed(format!(
                "the workflow's execution {} ended {}: {}",
                now.id,
                now.status(),
                now.error().unwrap_or("no reason given")
            ))),
            _ => Ok(json!({"execution_id": now.id, "status": now.status().as_str()})),
        }
    }
}

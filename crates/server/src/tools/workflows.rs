//! `run_workflow`: starts an execution (origin `agent`) as `POST /workflows/{id}/execute` does
//! and waits for its end.
//!
//! The execution runs in the waiting chat's own task, not in a worker's slot: it is stored
//! already held by the chat, and given back to the workers only if the chat stops waiting (its
//! timeout) before it ends. So a chain of executions waiting for each other (a workflow's agent
//! running a workflow whose agent runs another) holds one worker, however deep, and an
//! execution never waits for a slot its own parent holds. The chat's chain of executions
//! (`Principal::chain`) refuses a cycle and a nesting deeper than five. The wait ends with the
//! run's own task (its completion), not by reading the execution again and again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentry_domain::agents::{
    Agent, OfferedTool, ToolAction, ToolCallContext, ToolError, ToolKind, ToolProvider,
};
use agentry_domain::tenancy::Principal;
use agentry_domain::workflows::{ExecutionError, ExecutionOrigin, ExecutionService, ExecutionStatus};
use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{configured, offer_configured};

/// Runs agents' `run_workflow` tools with an executor.
#[derive(Clone)]
pub struct WorkflowTools {
    executions: ExecutionService,
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
    /// Tools that start and run executions with `executions`.
    pub fn new(executions: ExecutionService) -> Self {
        Self { executions }
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

    /// Starts the workflow, runs it in this task (see the module's documentation) and waits up
    /// to the tool's timeout for its end: its output, its failure, or (still running, now the
    /// workers') its id and status, which the model may report.
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
        let held =
            self.executions.start_held(context.caller, &workflow_id, input, origin).await.map_err(refused)?;
        let started = held.execution.clone();
        // Its own task, so that a timeout leaves it running: it then gives the execution back
        // to the workers after the step under way (`keep_going`), rather than dropping the step.
        let handed_back = Arc::new(AtomicBool::new(false));
        let run = {
            let (executions, handed_back) = (self.executions.clone(), handed_back.clone());
            tokio::spawn(async move {
                let keep_going = move || !handed_back.load(Ordering::SeqCst);
                if let Err(e) = executions.run_execution(held, &keep_going).await {
                    tracing::error!(error = ?e, "running an agent's workflow failed; a worker resumes it when its lease ends");
                }
            })
        };
        if tokio::time::timeout(context.timeout, run).await.is_err() {
            handed_back.store(true, Ordering::SeqCst);
        }
        let now = self.executions.reread(&started).await.map_err(refused)?;
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

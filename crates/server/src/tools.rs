//! The [`ToolRunner`] of chat: an agent's tools over the services that already do their work.
//! Memory searches and additions and HTTP requests run as the workflow steps of the same kind
//! do (the steps' performer: the same memory service, the same guarded outbound client);
//! `run_workflow` starts an execution (origin `agent`) as `POST /workflows/{id}/execute` does
//! and waits for its end. Everything runs as the chat's caller.
//!
//! A `run_workflow` execution runs in the waiting chat's own task, not in a worker's slot: it
//! is stored already held by the chat, and given back to the workers only if the chat stops
//! waiting (its timeout) before it ends. So a chain of executions waiting for each other (a
//! workflow's agent running a workflow whose agent runs another) holds one worker, however
//! deep, and an execution never waits for a slot its own parent holds. The chat's chain of
//! executions (`Principal::chain`) refuses a cycle and a nesting deeper than five.
//!
//! Chat is built before workflows (their `agent_chat` steps chat), and tools run workflows:
//! the runner is handed to chat empty and filled in once the executions exist
//! ([`LateTools::set`]). Chat holds it weakly: chat → tools → executions → steps → chat would
//! otherwise be a cycle of strong references that outlives the application (its database pools
//! with it); the application's state holds the tools.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use agentry_domain::agents::{ToolAction, ToolRunner};
use agentry_domain::ids::AgentId;
use agentry_domain::tenancy::{MemberRoles, NotEntitled, Principal};
use agentry_domain::workflows::{ExecutionOrigin, ExecutionService, ExecutionStatus, StepPerformer};
use async_trait::async_trait;
use serde_json::{Value, json};

/// Runs agents' tools with the steps' performer and the executions.
#[derive(Clone)]
pub struct ServiceTools {
    steps: Arc<dyn StepPerformer>,
    executions: ExecutionService,
    members: Arc<dyn MemberRoles>,
}

impl std::fmt::Debug for ServiceTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceTools").finish_non_exhaustive()
    }
}

impl ServiceTools {
    /// Tools over these services; `members` gives the callers' current roles.
    pub fn new(
        steps: Arc<dyn StepPerformer>,
        executions: ExecutionService,
        members: Arc<dyn MemberRoles>,
    ) -> Self {
        Self { steps, executions, members }
    }

    /// Starts the workflow, runs it in this task (see the module's documentation) and waits up
    /// to `timeout` for its end: its output, its failure, or (still running, now the workers')
    /// its id and status, which the model may report.
    async fn run_workflow(
        &self,
        caller: &Principal,
        agent: &AgentId,
        workflow_id: &agentry_domain::ids::WorkflowId,
        input: Value,
        timeout: Duration,
    ) -> Result<Value, String> {
        let held = self
            .executions
            .start_held(caller, workflow_id, input, ExecutionOrigin::Agent(agent.clone()))
            .await
            .map_err(|e| e.to_string())?;
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
        if tokio::time::timeout(timeout, run).await.is_err() {
            handed_back.store(true, Ordering::SeqCst);
        }
        let now = self.executions.reread(&started).await.map_err(|e| e.to_string())?;
        match now.status() {
            ExecutionStatus::Completed => {
                Ok(json!({"execution_id": now.id, "status": "completed", "output": now.output()}))
            }
            ExecutionStatus::Failed | ExecutionStatus::Cancelled => Err(format!(
                "the workflow's execution {} ended {}: {}",
                now.id,
                now.status(),
                now.error().unwrap_or("no reason given")
            )),
            _ => Ok(json!({"execution_id": now.id, "status": now.status().as_str()})),
        }
    }
}

#[async_trait]
impl ToolRunner for ServiceTools {
    async fn run(
        &self,
        caller: &Principal,
        agent: &AgentId,
        action: ToolAction,
        timeout: Duration,
    ) -> Result<Value, String> {
        // A tool acts with its caller's role now: a chat that outlives its caller's membership
        // (a long one, or an execution's) stops acting for them, and a demotion applies at once.
        let role = match self.members.role_of(&caller.tenant_id, &caller.user_id).await {
            Ok(Some(role)) => role,
            Ok(None) => return Err(NotEntitled::Gone(caller.user_id.clone()).to_string()),
            Err(e) => return Err(format!("the caller's membership could not be read: {e}")),
        };
        let role = if role.outranks(caller.role) { caller.role } else { role };
        let caller = &Principal { role, ..caller.clone() };
        match action {
            ToolAction::Step(step) => self.steps.perform(caller, step, timeout).await.map_err(|e| e.0),
            ToolAction::Workflow { workflow_id, input } => {
                self.run_workflow(caller, agent, &workflow_id, input, timeout).await
            }
        }
    }
}

/// A [`ToolRunner`] set after it is handed out, and held weakly (see the module's
/// documentation).
#[derive(Debug, Clone, Default)]
pub struct LateTools(Arc<OnceLock<Weak<ServiceTools>>>);

impl LateTools {
    /// Fills the runner in; later calls change nothing. Whoever passes `tools` keeps it.
    pub fn set(&self, tools: &Arc<ServiceTools>) {
        let _ = self.0.set(Arc::downgrade(tools));
    }
}

#[async_trait]
impl ToolRunner for LateTools {
    async fn run(
        &self,
        caller: &Principal,
        agent: &AgentId,
        action: ToolAction,
        timeout: Duration,
    ) -> Result<Value, String> {
        match self.0.get().and_then(Weak::upgrade) {
            Some(tools) => tools.run(caller, agent, action, timeout).await,
            None => Err("tools are not available: the service is starting or stopping".into()),
        }
    }
}

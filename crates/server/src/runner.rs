//! Running a workflow for a caller who waits for its end (the domain's [`WorkflowRunner`]): an
//! agent's `run_workflow` tool, and `/mcp`'s `run_workflow` with `wait_seconds`.
//!
//! The execution runs in a task of the waiting caller's, not in a worker's slot: it is stored
//! already held by the caller, and given back to the workers only if the caller stops waiting
//! before it ends. So a chain of executions waiting for each other (a workflow's agent running
//! a workflow whose agent runs another) holds one worker, however deep, and an execution never
//! waits for a slot its own parent holds. The caller's chain of executions
//! (`Principal::chain`) refuses a cycle and a nesting deeper than five. The wait ends with the
//! run's own task (its completion), not by reading the execution again and again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentry_domain::ids::WorkflowId;
use agentry_domain::tenancy::Principal;
use agentry_domain::workflows::{
    Execution, ExecutionError, ExecutionOrigin, ExecutionService, WorkflowRunner,
};
use async_trait::async_trait;
use serde_json::Value;

/// Runs held executions in their own task with an executor.
#[derive(Clone)]
pub struct HeldRunner {
    executions: ExecutionService,
}

impl std::fmt::Debug for HeldRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldRunner").finish_non_exhaustive()
    }
}

impl HeldRunner {
    /// A runner over `executions`.
    pub fn new(executions: ExecutionService) -> Self {
        Self { executions }
    }
}

#[async_trait]
impl WorkflowRunner for HeldRunner {
    async fn run_and_wait(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
        input: Value,
        origin: ExecutionOrigin,
        wait: Duration,
    ) -> Result<Execution, ExecutionError> {
        let held = self.executions.start_held(caller, workflow_id, input, origin).await?;
        let started = held.execution.clone();
        // Its own task, so that the end of the wait leaves it running: it then gives the
        // execution back to the workers after the step under way (`keep_going`), rather than
        // dropping the step.
        let handed_back = Arc::new(AtomicBool::new(false));
        let run = {
            let (executions, handed_back) = (self.executions.clone(), handed_back.clone());
            tokio::spawn(async move {
                let keep_going = move || !handed_back.load(Ordering::SeqCst);
                if let Err(e) = executions.run_execution(held, &keep_going).await {
                    tracing::error!(error = ?e, "running a waited-for workflow failed; a worker resumes it when its lease ends");
                }
            })
        };
        if tokio::time::timeout(wait, run).await.is_err() {
            handed_back.store(true, Ordering::SeqCst);
        }
        self.executions.reread(&started).await
    }
}

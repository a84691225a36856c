//! Starting an execution and waiting for its end, for the callers that answer with the result:
//! an agent's `run_workflow` tool and `/mcp`'s `run_workflow` with `wait_seconds`.
//!
//! The waiting itself needs a task of its own (so that a caller who stops waiting leaves the
//! execution running, to be given back to the workers after the step under way), which is the
//! runtime's business, not the domain's: the composition root implements this port.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::execution_state::{Execution, ExecutionOrigin};
use super::executions::ExecutionError;
use crate::ids::WorkflowId;
use crate::tenancy::Principal;

/// Runs a workflow for a caller who waits for it.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait WorkflowRunner: Send + Sync {
    /// Starts `workflow_id` on `input` from `origin`, authorised as
    /// [`super::ExecutionService::execute`] is, and waits up to `wait` for its end. The
    /// execution as it is then: ended (completed, failed, cancelled) or still running, in which
    /// case the workers finish it.
    ///
    /// # Errors
    /// As [`super::ExecutionService::start_held`]; storage failures.
    async fn run_and_wait(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
        input: Value,
        origin: ExecutionOrigin,
        wait: Duration,
    ) -> Result<Execution, ExecutionError>;
}

//! The [`StepPerformer`] of workflow executions: each step type over the service it uses —
//! chat (which charges credits as a chat request does; its agents' `run_workflow` tools run
//! with the executor performing the step), memory, and the guarded outbound HTTP client (the
//! webhooks' rules: no private targets unless allowed, no redirects, bounded). The steps
//! without chat are [`BasicSteps`], which agents' tools of the same kinds use too.
//! Outputs are the domain's `workflows::outputs`, in the shapes the API shows for the same
//! operations.

use std::sync::Arc;
use std::time::Duration;

pub mod basic;

use agentry_domain::agents::{ChatInput, ChatService, chat_message};
use agentry_domain::ids::SessionId;
use agentry_domain::tenancy::Principal;
use agentry_domain::workflows::outputs::ChatOutput;
use agentry_domain::workflows::{ExecutionService, FailureKind, StepAction, StepFailure, StepPerformer};
use async_trait::async_trait;
use serde_json::Value;

use self::basic::{BasicSteps, to_json};
use crate::runner::HeldRunner;
use crate::tools::workflows::WorkflowTools;

/// Performs every step: an `agent_chat` step with the service's chat, whose agents' workflows
/// run with the executor running the step; the others as [`BasicSteps`].
#[derive(Clone)]
pub struct ServiceSteps {
    chat: ChatService,
    basic: BasicSteps,
}

impl std::fmt::Debug for ServiceSteps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceSteps").finish_non_exhaustive()
    }
}

impl ServiceSteps {
    /// Steps over `chat` (without the workflow tools: those are added per step, over the
    /// executor running it) and `basic`.
    pub fn new(chat: ChatService, basic: BasicSteps) -> Self {
        Self { chat, basic }
    }

    async fn run(
        &self,
        caller: &Principal,
        action: StepAction,
        executions: &ExecutionService,
    ) -> Result<Value, StepFailure> {
        let fail = |e: &dyn std::fmt::Display| StepFailure::new(e.to_string());
        match action {
            StepAction::AgentChat { agent_id, message, session_id } => {
                let message = chat_message(message).map_err(|e| fail(&e))?;
                let session_id =
                    session_id.map(|s| SessionId::parse(&s)).transpose().map_err(|e| fail(&e))?;
                let reply = self
                    .chat
                    .with_tools(Arc::new(WorkflowTools::new(Arc::new(HeldRunner::new(executions.clone())))))
                    .chat(caller, &agent_id, ChatInput { message, session_id })
                    .await
                    .map_err(|e| fail(&e))?;
                to_json(ChatOutput::from(reply))
            }
            other => self.basic.run(caller, other).await,
        }
    }
}

#[async_trait]
impl StepPerformer for ServiceSteps {
    async fn perform(
        &self,
        caller: &Principal,
        action: StepAction,
        timeout: Duration,
        executions: &ExecutionService,
    ) -> Result<Value, StepFailure> {
        match tokio::time::timeout(timeout, self.run(caller, action, executions)).await {
            Ok(result) => result,
            Err(_) => Err(StepFailure::of(
                FailureKind::Timeout,
                format!("the step timed out after {} s", timeout.as_secs()),
            )),
        }
    }
}

//! The worker's side of executions: running a claimed execution's steps under its lease
//! (see the [parent module](super) for what is stored when), and executions as a kind of work.

use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::super::execution_state::{Execution, ExecutionStatus, InvalidTransition, StepResult, StepStatus};
use super::super::outputs::output_size;
use super::super::ports::{ClaimedExecution, ExecutionRun, Finish, StepFailure};
use super::super::steps::{Step, StepAction};
use super::super::template::TemplateContext;
use super::{EXECUTION_QUEUE, ExecutionService, ExecutionSettings, RunOutcome};
use crate::events::{Event, EventPayload, ExecutionCompletedData, ExecutionFailedData};
use crate::storable;
use crate::tenancy::{Credential, Permission, Plan, Principal, current_role};
use crate::work::{Claimed, Lease, LeaseQueue, Ran, WorkKind};

/// What happens after a step ran: decided by its run, applied by the executor
/// ([`ExecutionService::apply`]) and stored with the step's result in one transaction.
#[derive(Debug, Clone, PartialEq)]
enum Next {
    /// The step produced its output: the execution goes on at the step after it, or completes
    /// with this output after the last.
    Done(Value),
    /// The step failed: so does the execution.
    Fail(StepFailure),
}

/// What applying a [`Next`] did.
struct Applied {
    /// The execution's end, when it ended: its event and how the run ended.
    end: Option<(Event, RunOutcome)>,
    /// The position of the step the execution goes on at.
    then: Option<usize>,
}

impl ExecutionService {
    /// Runs a claimed execution's remaining steps (see [`Self::run_steps`]); how it ended.
    ///
    /// # Errors
    /// When storage fails; the lease then runs out and another worker resumes the execution.
    pub async fn run_execution(
        &self,
        claimed: ClaimedExecution,
        keep_going: &(dyn Fn() -> bool + Send + Sync),
    ) -> anyhow::Result<RunOutcome> {
        self.run_steps(claimed, keep_going, None).await
    }

    /// Runs a claimed execution's remaining steps, from the first, each leading to the next
    /// ([`Next`]), storing each step's start and result under the lease, until it ends, is cancelled, or the lease is lost. Before each
    /// step it asks `keep_going`; when that says no (the service is stopping) it gives the
    /// execution back for another worker to resume. With `given_up`, the step it is at fails
    /// with that reason instead of running (it was claimed too often without finishing).
    async fn run_steps(
        &self,
        claimed: ClaimedExecution,
        keep_going: &(dyn Fn() -> bool + Send + Sync),
        given_up: Option<StepFailure>,
    ) -> anyhow::Result<RunOutcome> {
        let d = &self.deps;
        let Claimed { item: ExecutionRun { mut execution, steps, run_as, call_chain }, lease, claims: _ } =
            claimed;
        let mut caller = Principal {
            user_id: run_as.user_id,
            tenant_id: execution.tenant_id.clone(),
            // The plan only sets rate limits, which apply where a request enters.
            plan: Plan::Starter,
            role: run_as.role,
            credential: Credential::AccessToken,
            // What its agents' tools start runs one level deeper.
            chain: call_chain.then(&execution.workflow_id),
        };
        let mut context =
            TemplateContext::new(execution.input.clone()).with_trigger(execution.trigger.clone());
        // The step the execution is at: the first, then the one each step's run leads to.
        let mut at = Some(0);
        while let Some(index) = at {
            let Some(step) = steps.get(index) else { break };
            let following = (index + 1 < steps.len()).then_some(index + 1);
            let result = execution.step(step.id());
            match result.map_or(StepStatus::Pending, StepResult::status) {
                StepStatus::Completed => {
                    // Done before this claim: its output is read back, not made again.
                    let output = result.and_then(StepResult::output).cloned().unwrap_or(Value::Null);
                    context.add_output(step.id(), output);
                    at = following;
                    continue;
                }
                // A finished execution is never claimed; these mean it ended meanwhile.
                StepStatus::Failed | StepStatus::Skipped => return Ok(RunOutcome::Cancelled),
                // A step that was running when its worker died runs again.
                StepStatus::Pending | StepStatus::Running => {}
            }
            if !keep_going() {
                d.executions.release(&execution.id, &lease).await?;
                return Ok(RunOutcome::Released);
            }
            let started_at = d.clock.now();
            execution.start_step(step.id(), started_at)?;
            let step_lease =
                Lease { token: lease.token.clone(), until: started_at + step_window(step, &self.settings) };
            if !d.executions.start_step(&execution.id, &step_lease, step.id(), started_at).await? {
                return Ok(self.why_stopped(&execution).await);
            }
            // Each step acts with its starter's role now, not the one they had when it started:
            // a starter who was removed, or demoted below running workflows, stops it here.
            let entitled = match &given_up {
                Some(failure) => Err(failure.clone()),
                None => current_role(
                    d.members.as_ref(),
                    &caller.tenant_id,
                    &caller.user_id,
                    Permission::WorkflowsExecute,
                )
                .await?
                .map_err(|lost| StepFailure(format!("the execution stopped: {lost}"))),
            };
            let next = match entitled {
                Err(failure) => Next::Fail(failure),
                Ok(role) => {
                    caller.role = role;
                    match self.perform(&caller, step, &context).await {
                        Ok(output) => Next::Done(output),
                        Err(failure) => Next::Fail(failure),
                    }
                }
            };
            let applied = self.apply(&mut execution, step, next, following, &mut context, d.clock.now())?;
            let finish = applied.end.as_ref().map(|(event, _)| Finish::of(&execution, event.clone()));
            let Some(result) = execution.step(step.id()) else { break };
            if !d.executions.record_step(&execution.id, &step_lease, result, finish).await? {
                tracing::warn!(execution_id = %execution.id, step = %step.id(), "execution was taken over by another worker; step result dropped");
                return Ok(RunOutcome::LostLease);
            }
            if let Some((_, outcome)) = applied.end {
                // A cancel that came while the last step ran keeps the execution cancelled.
                return Ok(match self.status_of(&execution).await {
                    Some(ExecutionStatus::Cancelled) => RunOutcome::Cancelled,
                    _ => outcome,
                });
            }
            at = applied.then;
        }
        // Every step had completed before this claim (the result that ended it was stored but
        // its end was not: impossible, as both are one transaction).
        Ok(RunOutcome::Completed)
    }

    /// Applies `next`, what the run of `step` decided, to `execution` at `at`: the step's
    /// result; its output for the later steps' templates; the execution's end, with its event,
    /// when it ends. `following`: the step after `step` in the workflow's order.
    fn apply(
        &self,
        execution: &mut Execution,
        step: &Step,
        next: Next,
        following: Option<usize>,
        context: &mut TemplateContext,
        at: DateTime<Utc>,
    ) -> Result<Applied, InvalidTransition> {
        match next {
            Next::Done(output) => {
                execution.complete_step(step.id(), output.clone(), at)?;
                if following.is_some() {
                    context.add_output(step.id(), output);
                    return Ok(Applied { end: None, then: following });
                }
                execution.complete(output.clone(), at)?;
                let event = self.completed_event(execution, output, at);
                Ok(Applied { end: Some((event, RunOutcome::Completed)), then: None })
            }
            Next::Fail(failure) => {
                execution.fail_step(step.id(), failure.0.clone(), at)?;
                let error = format!("step {} failed: {}", step.id(), failure.0);
                execution.fail(error.clone(), at)?;
                let event = self.failed_event(execution, step, error, at);
                Ok(Applied { end: Some((event, RunOutcome::Failed)), then: None })
            }
        }
    }

    /// The event of an execution that completed with `output` at `at`.
    fn completed_event(&self, execution: &Execution, output: Value, at: DateTime<Utc>) -> Event {
        let payload = EventPayload::WorkflowExecutionCompleted(ExecutionCompletedData {
            execution_id: execution.id.clone(),
            workflow_id: execution.workflow_id.clone(),
            output,
            duration_ms: millis_between(execution.started_at, at),
        });
        Event::new(self.deps.ids.as_ref(), &execution.tenant_id, payload, at)
    }

    /// The event of an execution that failed at `step` with `error` at `at`.
    fn failed_event(&self, execution: &Execution, step: &Step, error: String, at: DateTime<Utc>) -> Event {
        let payload = EventPayload::WorkflowExecutionFailed(ExecutionFailedData {
            execution_id: execution.id.clone(),
            workflow_id: execution.workflow_id.clone(),
            step_id: step.id().to_owned(),
            error,
            duration_ms: millis_between(execution.started_at, at),
        });
        Event::new(self.deps.ids.as_ref(), &execution.tenant_id, payload, at)
    }

    /// Renders and performs one step within its timeout, checking its output's size.
    async fn perform(
        &self,
        caller: &Principal,
        step: &Step,
        context: &TemplateContext,
    ) -> Result<Value, StepFailure> {
        let deadline = Instant::now() + step.timeout();
        let action = render_off_runtime(step, context, deadline).await?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        // Outputs and failures quote remote answers (an HTTP response, a model's reply): stored
        // alike on both databases.
        let output = match self.deps.performer.perform(caller, action, remaining, self).await {
            Ok(output) => storable::json(output),
            Err(failure) => return Err(StepFailure(storable::text(failure.0))),
        };
        output_size(&output).map_err(|e| StepFailure(e.to_string()))?;
        Ok(output)
    }

    async fn status_of(&self, execution: &Execution) -> Option<ExecutionStatus> {
        match self.deps.executions.get(&execution.tenant_id, &execution.id).await {
            Ok(found) => found.map(|e| e.status()),
            Err(e) => {
                tracing::error!(execution_id = %execution.id, error = ?e, "reading an execution's status failed");
                None
            }
        }
    }

    /// Why a step could not start: a cancel, a deleted workflow, or a lost lease.
    async fn why_stopped(&self, execution: &Execution) -> RunOutcome {
        match self.status_of(execution).await {
            Some(ExecutionStatus::Running) => RunOutcome::LostLease,
            _ => RunOutcome::Cancelled,
        }
    }
}

/// Executions as a kind of work: the worker claims running executions and runs their steps.
#[async_trait]
impl WorkKind for ExecutionService {
    type Item = ExecutionRun;

    fn name(&self) -> &'static str {
        EXECUTION_QUEUE
    }

    fn queue(&self) -> &dyn LeaseQueue<ExecutionRun> {
        self.deps.due.as_ref()
    }

    fn lease(&self) -> chrono::Duration {
        self.settings.lease
    }

    fn concurrency(&self) -> u32 {
        self.settings.concurrency
    }

    fn max_claims(&self) -> u32 {
        self.settings.max_claims
    }

    async fn run(
        &self,
        claimed: ClaimedExecution,
        keep_going: &(dyn Fn() -> bool + Send + Sync),
    ) -> anyhow::Result<Ran> {
        Ok(Ran::ended(self.run_execution(claimed, keep_going).await?.into()))
    }

    /// The step the execution is at fails with the reason, and so does the execution.
    async fn give_up(&self, claimed: ClaimedExecution, reason: String) -> anyhow::Result<Ran> {
        Ok(Ran::ended(self.run_steps(claimed, &|| true, Some(StepFailure(reason))).await?.into()))
    }
}

/// Renders `step` on a thread of its own, so that a template that takes its whole timeout
/// never holds one of the async runtime's threads; the render stops itself at `deadline`. A
/// render that panics fails the step rather than the worker.
async fn render_off_runtime(
    step: &Step,
    context: &TemplateContext,
    deadline: Instant,
) -> Result<StepAction, StepFailure> {
    let (sender, receiver) = futures_channel::oneshot::channel();
    let (step, context) = (step.clone(), context.clone());
    std::thread::Builder::new()
        .name("template-render".to_owned())
        .spawn(move || {
            let _ = sender.send(step.render(&context, Some(deadline)));
        })
        .map_err(|e| StepFailure(format!("the step's templates could not be rendered: {e}")))?;
    match receiver.await {
        Ok(rendered) => rendered.map_err(|e| StepFailure(e.to_string())),
        Err(_) => Err(StepFailure("rendering the step's templates failed unexpectedly".to_owned())),
    }
}

/// How long a claim must hold an execution while `step` runs: its timeout and the lease.
fn step_window(step: &Step, settings: &ExecutionSettings) -> chrono::Duration {
    chrono::Duration::from_std(step.timeout()).unwrap_or(chrono::Duration::MAX) + settings.lease
}

fn millis_between(from: DateTime<Utc>, to: DateTime<Utc>) -> u64 {
    u64::try_from((to - from).num_milliseconds()).unwrap_or(0)
}

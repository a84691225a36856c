//! Executions: starting, reading and cancelling them for requests, and running their steps for
//! the worker.
//!
//! An execution is rows before it is work (one kind of the durable-work core, [`crate::work`]):
//! starting one stores it `running` with one `pending` result per step and the
//! `workflow.execution.started` event, in one transaction, which wakes the workers. A worker
//! claims it under a lease and runs its steps in order. Every step's start and every step's
//! result is stored under that lease before the next step starts, and the result that ends the
//! execution stores its end and its event in the same transaction. So after a crash another
//! worker claims the execution once the lease runs out, reads the outputs already stored and
//! resumes at the first step without a result: a finished step is never run again (only a step
//! that was running when the process died runs once more).
//!
//! The steps an execution runs are the workflow's steps when it started, kept with it: editing
//! the workflow changes later executions, not one under way.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::execution_state::{Execution, ExecutionOrigin, ExecutionStatus, StepResult, StepStatus};
use super::model::{RunAs, Workflow};
use super::outputs::output_size;
use super::ports::{
    ClaimedExecution, ExecutionRepository, ExecutionRun, Finish, NewExecution, Started, StepFailure,
    WorkflowRepository,
};
use super::steps::{Step, StepAction};
use super::template::TemplateContext;
use crate::events::{Event, EventPayload, ExecutionCompletedData, ExecutionFailedData, ExecutionStartedData};
use crate::ids::{ExecutionId, IdGenerator, WorkflowId};
use crate::pagination::Page;
use crate::storable;
use crate::tenancy::{
    CallChain, Credential, Forbidden, MemberRoles, Nesting, NotEntitled, Permission, Plan, Principal,
    current_role,
};
use crate::time::Clock;
use crate::validation::ValidationErrors;
use crate::work::{Claimed, Lease, LeaseQueue, Ran, WorkKind};

/// The queue name executions report under in the metrics.
pub const EXECUTION_QUEUE: &str = "workflow_executions";

/// Why an execution operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecutionError {
    /// The caller lacks the permission.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// No such workflow in the caller's tenant.
    #[error("no such workflow")]
    WorkflowNotFound,
    /// No such execution in the caller's tenant.
    #[error("no such execution")]
    NotFound,
    /// The input cannot be stored (it holds U+0000, see [`crate::storable`]).
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// The workflow is inactive: it may not be executed.
    #[error("the workflow is inactive; set is_active to true to execute it")]
    Inactive,
    /// The execution has already finished.
    #[error("the execution has already finished ({0})")]
    Finished(ExecutionStatus),
    /// Started from within executions (an agent's `run_workflow` tool), it would make a cycle
    /// or nest too deep.
    #[error(transparent)]
    Nesting(#[from] Nesting),
    /// Started for a member (a trigger, an integration, a schedule) who is no longer a member,
    /// or whose role no longer runs workflows.
    #[error(transparent)]
    NotEntitled(#[from] NotEntitled),
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// How executions run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutionSettings {
    /// How long a claim holds an execution between steps; a step's own timeout is added while
    /// it runs. A worker that dies is replaced after at most this long (plus the step's
    /// timeout).
    pub lease: chrono::Duration,
    /// Executions one instance runs at once.
    pub concurrency: u32,
    /// Claims after which an execution that has not ended is failed instead of run again: an
    /// input that crashes or stalls its worker every time must not be retried forever.
    pub max_claims: u32,
}

/// The default of [`ExecutionSettings::max_claims`].
pub const DEFAULT_MAX_CLAIMS: u32 = 5;

impl Default for ExecutionSettings {
    fn default() -> Self {
        Self { lease: chrono::Duration::seconds(30), concurrency: 16, max_claims: DEFAULT_MAX_CLAIMS }
    }
}

/// Performs rendered steps against the rest of the service (chat, memory, the guarded HTTP
/// client). Declared with the executor because a step may start executions of its own (an
/// `agent_chat` step's agent runs a workflow): the executor running the step is handed to it,
/// rather than held by the performer, which the executor holds.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait StepPerformer: Send + Sync {
    /// Performs `action` as `caller` and returns its output; executions it starts run with
    /// `executions`. MUST give up with a [`StepFailure`] once `timeout` has passed.
    async fn perform(
        &self,
        caller: &Principal,
        action: StepAction,
        timeout: std::time::Duration,
        executions: &ExecutionService,
    ) -> Result<Value, StepFailure>;
}

/// What the service needs.
#[derive(Clone)]
#[allow(missing_debug_implementations)] // trait objects
pub struct ExecutionServiceDeps {
    /// Workflows.
    pub workflows: Arc<dyn WorkflowRepository>,
    /// Executions.
    pub executions: Arc<dyn ExecutionRepository>,
    /// Steps.
    pub performer: Arc<dyn StepPerformer>,
    /// Running executions, as the worker claims them.
    pub due: Arc<dyn LeaseQueue<ExecutionRun>>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Ids.
    pub ids: Arc<dyn IdGenerator>,
    /// Members' current roles: what executions started for them act with.
    pub members: Arc<dyn MemberRoles>,
}

/// Executions for requests, and their steps for the worker.
#[derive(Clone)]
pub struct ExecutionService {
    deps: ExecutionServiceDeps,
    settings: ExecutionSettings,
}

impl std::fmt::Debug for ExecutionService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutionService").field("settings", &self.settings).finish_non_exhaustive()
    }
}

crate::string_enum! {
    /// How a run of a claimed execution ended, for the worker's metrics.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum RunOutcome {
        /// Every step completed.
        Completed => "done",
        /// A step failed.
        Failed => "failed",
        /// It was cancelled; no further step started.
        Cancelled => "cancelled",
        /// Another worker took it over (this one stalled past its lease).
        LostLease => "lost_lease",
        /// The worker is stopping: it gave the execution back between two steps.
        Released => "released",
    }
}

impl From<RunOutcome> for crate::work::Outcome {
    fn from(outcome: RunOutcome) -> Self {
        match outcome {
            RunOutcome::Completed => Self::Done,
            RunOutcome::Failed => Self::Failed,
            RunOutcome::Cancelled => Self::Cancelled,
            RunOutcome::LostLease => Self::LostLease,
            RunOutcome::Released => Self::Released,
        }
    }
}

impl ExecutionService {
    /// A service over its dependencies.
    pub fn new(deps: ExecutionServiceDeps, settings: ExecutionSettings) -> Self {
        Self { deps, settings }
    }

    /// Executes a workflow of the caller's tenant on `input`, as the caller.
    ///
    /// # Errors
    /// [`ExecutionError::Forbidden`] without `workflows:execute`,
    /// [`ExecutionError::WorkflowNotFound`], [`ExecutionError::Inactive`].
    pub async fn execute(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
        input: Value,
    ) -> Result<Execution, ExecutionError> {
        self.execute_from(caller, workflow_id, input, ExecutionOrigin::Api).await
    }

    /// [`ExecutionService::execute`], started from `origin` (an agent's `run_workflow` tool).
    ///
    /// # Errors
    /// As [`ExecutionService::execute`].
    pub async fn execute_from(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
        input: Value,
        origin: ExecutionOrigin,
    ) -> Result<Execution, ExecutionError> {
        let workflow = self.startable(caller, workflow_id, &input).await?;
        let start = StartOf::by(caller, origin, None);
        let started = self.start_as(&workflow, input, start).await?;
        Ok(started.execution().clone())
    }

    /// [`ExecutionService::execute_from`], stored already held under a lease of the caller's
    /// (its first claim): the caller runs it ([`ExecutionService::run_execution`]) in its own
    /// task, with no worker's slot, as an agent's `run_workflow` tool does while it waits for
    /// the end. Given back ([`ExecutionService::run_execution`]'s `keep_going`), it is any
    /// worker's to finish.
    ///
    /// # Errors
    /// As [`ExecutionService::execute`]; [`ExecutionError::Nesting`] when the caller's chain
    /// does not admit the workflow.
    pub async fn start_held(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
        input: Value,
        origin: ExecutionOrigin,
    ) -> Result<ClaimedExecution, ExecutionError> {
        let workflow = self.startable(caller, workflow_id, &input).await?;
        let lease = Lease::new(self.deps.ids.as_ref(), self.deps.clock.now(), self.settings.lease);
        let start = StartOf::by(caller, origin, Some(lease.clone()));
        let (run_as, call_chain) = (start.run_as.clone(), start.call_chain.clone());
        match self.start_as(&workflow, input, start).await? {
            Started::New(execution) => Ok(Claimed {
                item: ExecutionRun { execution, steps: workflow.steps.clone(), run_as, call_chain },
                claims: 1,
                lease,
            }),
            // Nothing deduplicates these starts (they have no key).
            Started::Existing(execution) => {
                Err(ExecutionError::Unexpected(anyhow::anyhow!("execution {} started twice", execution.id)))
            }
        }
    }

    /// The workflow the caller may execute on `input`, from where the caller is.
    async fn startable(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
        input: &Value,
    ) -> Result<Workflow, ExecutionError> {
        caller.require(Permission::WorkflowsExecute)?;
        storable::check(input, "input").map_err(ValidationErrors::one)?;
        caller.chain.admits(workflow_id)?;
        self.deps.workflows.get(&caller.tenant_id, workflow_id).await?.ok_or(ExecutionError::WorkflowNotFound)
    }

    /// An execution as it is now, read again by its own tenant and id: for whoever started it
    /// and waits for its end (no further permission asked).
    ///
    /// # Errors
    /// [`ExecutionError::NotFound`] when it is gone (its workflow was deleted).
    pub async fn reread(&self, started: &Execution) -> Result<Execution, ExecutionError> {
        self.deps.executions.get(&started.tenant_id, &started.id).await?.ok_or(ExecutionError::NotFound)
    }

    /// Starts an execution of `workflow` (already found in its tenant) from `origin` for its
    /// maker, who is not there: the entry point of trigger calls, integration events and
    /// schedule ticks. It acts with the maker's role now (see [`crate::tenancy::Automation`]).
    ///
    /// # Errors
    /// [`ExecutionError::Inactive`]; [`ExecutionError::NotEntitled`] when `run_as` is no
    /// longer a member, or no longer runs workflows; storage failures.
    pub async fn start(
        &self,
        workflow: &Workflow,
        input: Value,
        trigger: Value,
        origin: ExecutionOrigin,
        run_as: RunAs,
        dedup_key: Option<String>,
    ) -> Result<Started, ExecutionError> {
        let role = current_role(
            self.deps.members.as_ref(),
            &workflow.tenant_id,
            &run_as.user_id,
            Permission::WorkflowsExecute,
        )
        .await??;
        let run_as = RunAs { role, ..run_as };
        let start =
            StartOf { trigger, origin, run_as, dedup_key, call_chain: CallChain::default(), held: None };
        self.start_as(workflow, input, start).await
    }

    /// Stores a new execution of `workflow` on `input`, started as `start` says.
    async fn start_as(
        &self,
        workflow: &Workflow,
        input: Value,
        start: StartOf,
    ) -> Result<Started, ExecutionError> {
        let StartOf { trigger, origin, run_as, dedup_key, call_chain, held } = start;
        if !workflow.is_active {
            return Err(ExecutionError::Inactive);
        }
        let d = &self.deps;
        let now = d.clock.now();
        let execution = Execution::start(
            ExecutionId::generate(d.ids.as_ref()),
            workflow.tenant_id.clone(),
            workflow.id.clone(),
            input,
            origin,
            now,
            &workflow.steps,
        )
        .with_trigger(trigger);
        let started_event = Event::new(
            d.ids.as_ref(),
            &workflow.tenant_id,
            EventPayload::WorkflowExecutionStarted(ExecutionStartedData {
                execution_id: execution.id.clone(),
                workflow_id: workflow.id.clone(),
                origin: execution.origin.kind().to_owned(),
                input: execution.input.clone(),
            }),
            now,
        );
        let new = NewExecution {
            execution,
            steps: workflow.steps.clone(),
            run_as,
            dedup_key,
            started_event,
            call_chain,
            held,
        };
        Ok(d.executions.create(&new).await?)
    }

    /// One execution of the caller's tenant, with its steps.
    ///
    /// # Errors
    /// [`ExecutionError::NotFound`], [`ExecutionError::Forbidden`].
    pub async fn get(&self, caller: &Principal, id: &ExecutionId) -> Result<Execution, ExecutionError> {
        caller.require(Permission::WorkflowsRead)?;
        self.deps.executions.get(&caller.tenant_id, id).await?.ok_or(ExecutionError::NotFound)
    }

    /// A page of a workflow's executions, newest first, optionally only those in `status`.
    ///
    /// # Errors
    /// [`ExecutionError::WorkflowNotFound`], [`ExecutionError::Forbidden`].
    pub async fn list(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
        status: Option<ExecutionStatus>,
        page: Page,
    ) -> Result<(Vec<Execution>, u64), ExecutionError> {
        caller.require(Permission::WorkflowsRead)?;
        if self.deps.workflows.get(&caller.tenant_id, workflow_id).await?.is_none() {
            return Err(ExecutionError::WorkflowNotFound);
        }
        Ok(self.deps.executions.list(&caller.tenant_id, workflow_id, status, page).await?)
    }

    /// Cancels a running execution: no further step starts (a running step may finish).
    ///
    /// # Errors
    /// [`ExecutionError::NotFound`], [`ExecutionError::Finished`] when it had already
    /// finished, [`ExecutionError::Forbidden`] without `workflows:execute`.
    pub async fn cancel(&self, caller: &Principal, id: &ExecutionId) -> Result<Execution, ExecutionError> {
        caller.require(Permission::WorkflowsExecute)?;
        let executions = &self.deps.executions;
        let mut execution = executions.get(&caller.tenant_id, id).await?.ok_or(ExecutionError::NotFound)?;
        if execution.cancel(self.deps.clock.now()).is_err() {
            return Err(ExecutionError::Finished(execution.status()));
        }
        if executions.record_cancel(&execution).await? {
            return Ok(execution);
        }
        // It ended between the read and the write.
        let now_stored = executions.get(&caller.tenant_id, id).await?.ok_or(ExecutionError::NotFound)?;
        Err(ExecutionError::Finished(now_stored.status()))
    }

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

    /// Runs a claimed execution's remaining steps in order, storing each step's start and
    /// result under the lease, until it ends, is cancelled, or the lease is lost. Before each
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
        for (position, step) in steps.iter().enumerate() {
            let status = execution.steps().get(position).map_or(StepStatus::Pending, StepResult::status);
            match status {
                StepStatus::Completed => {
                    let output = execution.steps()[position].output().cloned().unwrap_or(Value::Null);
                    context.add_output(step.id(), output);
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
            execution.start_step(position, started_at)?;
            let step_lease =
                Lease { token: lease.token.clone(), until: started_at + step_window(step, &self.settings) };
            if !d.executions.start_step(&execution.id, &step_lease, position, started_at).await? {
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
            let produced = match entitled {
                Err(failure) => Err(failure),
                Ok(role) => {
                    caller.role = role;
                    self.perform(&caller, step, &context).await
                }
            };
            let finished_at = d.clock.now();
            let last = position + 1 == steps.len();
            let (event, outcome) = match produced {
                Ok(output) => {
                    execution.complete_step(position, output.clone(), finished_at)?;
                    if last {
                        execution.complete(output.clone(), finished_at)?;
                        (
                            Some(self.completed_event(&execution, output, finished_at)),
                            Some(RunOutcome::Completed),
                        )
                    } else {
                        context.add_output(step.id(), output);
                        (None, None)
                    }
                }
                Err(failure) => {
                    execution.fail_step(position, failure.0.clone(), finished_at)?;
                    let error = format!("step {} failed: {}", step.id(), failure.0);
                    execution.fail(error.clone(), finished_at)?;
                    (Some(self.failed_event(&execution, step, error, finished_at)), Some(RunOutcome::Failed))
                }
            };
            let finish = event.map(|event| Finish::of(&execution, event));
            let result = &execution.steps()[position];
            if !d.executions.record_step(&execution.id, &step_lease, position, result, finish).await? {
                tracing::warn!(execution_id = %execution.id, step = %step.id(), "execution was taken over by another worker; step result dropped");
                return Ok(RunOutcome::LostLease);
            }
            if let Some(outcome) = outcome {
                // A cancel that came while the last step ran keeps the execution cancelled.
                return Ok(match self.status_of(&execution).await {
                    Some(ExecutionStatus::Cancelled) => RunOutcome::Cancelled,
                    _ => outcome,
                });
            }
        }
        // Every step had completed before this claim (the result that ended it was stored but
        // its end was not: impossible, as both are one transaction).
        Ok(RunOutcome::Completed)
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

/// How an execution is started, besides its workflow and input.
struct StartOf {
    /// What templates read as `trigger.*`.
    trigger: Value,
    /// Where it was started from.
    origin: ExecutionOrigin,
    /// Whose authority its steps act with.
    run_as: RunAs,
    /// Its key among the starts of its origin.
    dedup_key: Option<String>,
    /// The workflows of the executions above it.
    call_chain: CallChain,
    /// The lease it is stored under, when the starter runs it.
    held: Option<Lease>,
}

impl StartOf {
    /// A start by `caller` (a request, or an agent's tool) from `origin`, in the caller's chain.
    fn by(caller: &Principal, origin: ExecutionOrigin, held: Option<Lease>) -> Self {
        Self {
            trigger: Value::Null,
            origin,
            run_as: RunAs { user_id: caller.user_id.clone(), role: caller.role },
            dedup_key: None,
            call_chain: caller.chain.clone(),
            held,
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

#[cfg(test)]
mod tests;

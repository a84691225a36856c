//! Executions: starting, reading and cancelling them for requests, and running their steps for
//! the worker (`runner`).
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

use async_trait::async_trait;
use serde_json::Value;

use super::execution_state::{Execution, ExecutionOrigin, ExecutionStatus};
use super::model::{RunAs, Workflow};
use super::ports::{
    ClaimedExecution, ExecutionRepository, ExecutionRun, NewExecution, Started, StepFailure,
    WorkflowRepository,
};
use super::steps::StepAction;
use crate::events::{Event, EventPayload, ExecutionStartedData};
use crate::ids::{ExecutionId, IdGenerator, WorkflowId};
use crate::pagination::Page;
use crate::storable;
use crate::tenancy::{
    CallChain, Forbidden, MemberRoles, Nesting, NotEntitled, Permission, Principal, current_role,
};
use crate::time::Clock;
use crate::validation::ValidationErrors;
use crate::work::{Claimed, Lease, LeaseQueue};

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
    /// Only a failed execution is retried.
    #[error("only a failed execution can be retried; this one is {0}")]
    NotFailed(ExecutionStatus),
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
        /// A step failed an attempt and backs off: the execution is due again later.
        Retrying => "retry",
        /// A step waits: the execution is due again when its wait ends.
        Waiting => "waiting",
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
            RunOutcome::Retrying => Self::Retry,
            RunOutcome::Waiting => Self::Waiting,
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

    /// Runs failed execution `id` again from step `from_step` (default: the step it failed at),
    /// keeping the results of the steps before it ([`Execution::retry_from`]); a worker takes
    /// it up at once.
    ///
    /// # Errors
    /// [`ExecutionError::NotFailed`] unless it failed; [`ExecutionError::Inactive`] when its
    /// workflow is inactive (or gone); [`ExecutionError::Invalid`] for a `from_step` it does
    /// not have; not found in the caller's tenant; forbidden.
    pub async fn retry(
        &self,
        caller: &Principal,
        id: &ExecutionId,
        from_step: Option<String>,
    ) -> Result<Execution, ExecutionError> {
        caller.require(Permission::WorkflowsExecute)?;
        let executions = &self.deps.executions;
        let mut execution = executions.get(&caller.tenant_id, id).await?.ok_or(ExecutionError::NotFound)?;
        if execution.status() != ExecutionStatus::Failed {
            return Err(ExecutionError::NotFailed(execution.status()));
        }
        // An inactive workflow runs nothing, retried or new.
        let workflow = self.deps.workflows.get(&caller.tenant_id, &execution.workflow_id).await?;
        if !workflow.is_some_and(|w| w.is_active) {
            return Err(ExecutionError::Inactive);
        }
        let failed_at = execution.at_step().or_else(|| execution.steps().first().map(|s| s.step_id.as_str()));
        let from = from_step.or_else(|| failed_at.map(str::to_owned)).unwrap_or_default();
        if execution.step(&from).is_none() {
            let ids: Vec<&str> = execution.steps().iter().map(|s| s.step_id.as_str()).collect();
            return Err(ValidationErrors::one(crate::validation::FieldError::new(
                "from_step",
                crate::validation::FieldErrorKind::InvalidValue,
                format!("the execution has no step {from:?}; its steps are: {}", ids.join(", ")),
            ))
            .into());
        }
        // A step left running or waiting (an execution failed unread) cannot start afresh.
        let status = execution.status();
        execution.retry_from(&from, self.deps.clock.now()).map_err(|_| ExecutionError::NotFailed(status))?;
        if executions.record_retry(&execution).await? {
            return Ok(execution);
        }
        // Retried by someone else between the read and the write.
        let now_stored = executions.get(&caller.tenant_id, id).await?.ok_or(ExecutionError::NotFound)?;
        Err(ExecutionError::NotFailed(now_stored.status()))
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

mod runner;

#[cfg(test)]
mod tests;

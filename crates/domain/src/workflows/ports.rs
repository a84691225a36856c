//! What workflows need from outside: storage of workflows, triggers, integrations, schedules
//! and executions (with what crosses that port), and the performer of rendered steps.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::execution_state::{Execution, ExecutionStatus, StepResult};
pub use super::failure::{FailureKind, StepFailure};
use super::model::{Integration, RunAs, Trigger, Workflow};
use super::schedules::Schedule;
use super::steps::Step;
use crate::events::Event;
use crate::ids::{ExecutionId, IntegrationId, ScheduleId, TenantId, TriggerId, WorkflowId};
use crate::pagination::Page;
use crate::tenancy::{CallChain, Plan};
use crate::work::{Claimed, Lease};

/// Workflows, scoped by tenant in every operation.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait WorkflowRepository: Send + Sync {
    /// Stores a new workflow.
    async fn create(&self, workflow: &Workflow) -> anyhow::Result<()>;

    /// One workflow of `tenant`.
    async fn get(&self, tenant: &TenantId, id: &WorkflowId) -> anyhow::Result<Option<Workflow>>;

    /// A page of `tenant`'s workflows, oldest first, with how many there are in all.
    async fn list(&self, tenant: &TenantId, page: Page) -> anyhow::Result<(Vec<Workflow>, u64)>;

    /// Replaces a stored workflow; `false` when it no longer exists.
    async fn update(&self, workflow: &Workflow) -> anyhow::Result<bool>;

    /// Deletes a workflow, and with it its triggers and integrations; `false` when there was
    /// none.
    async fn delete(&self, tenant: &TenantId, id: &WorkflowId) -> anyhow::Result<bool>;
}

/// A trigger found by its URL's path, with what a call to it needs: the workflow it executes
/// and its tenant's plan (which sets the rate limit the call counts against). Read together,
/// in one look-up.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerTarget {
    /// The trigger.
    pub trigger: Trigger,
    /// Its workflow.
    pub workflow: Workflow,
    /// Its tenant's plan.
    pub plan: Plan,
}

/// Webhook triggers: scoped by tenant, except the look-up by path that an (unauthenticated)
/// call to a trigger URL starts with.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait TriggerRepository: Send + Sync {
    /// Stores a new trigger; `false` when its workflow no longer exists (deleted meanwhile).
    /// MUST refuse a second trigger with the same path.
    async fn create(&self, trigger: &Trigger) -> anyhow::Result<bool>;

    /// The triggers of one workflow of `tenant`, oldest first.
    async fn list(&self, tenant: &TenantId, workflow: &WorkflowId) -> anyhow::Result<Vec<Trigger>>;

    /// Deletes a trigger of one workflow of `tenant`; `false` when there was none.
    async fn delete(&self, tenant: &TenantId, workflow: &WorkflowId, id: &TriggerId) -> anyhow::Result<bool>;

    /// The trigger whose URL has `path`, of any tenant, with its workflow and plan.
    async fn find_by_path(&self, path: &str) -> anyhow::Result<Option<TriggerTarget>>;

    /// Adds one to the trigger's `trigger_count` and returns the new count. MUST be one atomic
    /// increment in the database (`SET trigger_count = trigger_count + 1`), so concurrent calls
    /// on any number of instances are all counted. `None` when the trigger is gone.
    async fn count_call(&self, id: &TriggerId) -> anyhow::Result<Option<u64>>;
}

/// An integration found by id for its receiver, with its workflow and its tenant's plan.
#[derive(Debug, Clone, PartialEq)]
pub struct IntegrationTarget {
    /// The integration.
    pub integration: Integration,
    /// Its workflow.
    pub workflow: Workflow,
    /// Its tenant's plan.
    pub plan: Plan,
}

/// Inbound integrations: scoped by tenant, except the look-up by id that an (unauthenticated)
/// delivery to a receiver starts with.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait IntegrationRepository: Send + Sync {
    /// Stores a new integration; `false` when its workflow no longer exists (deleted
    /// meanwhile).
    async fn create(&self, integration: &Integration) -> anyhow::Result<bool>;

    /// One integration of `tenant`.
    async fn get(&self, tenant: &TenantId, id: &IntegrationId) -> anyhow::Result<Option<Integration>>;

    /// The integrations of `tenant`, oldest first.
    async fn list(&self, tenant: &TenantId) -> anyhow::Result<Vec<Integration>>;

    /// Deletes an integration of `tenant`; `false` when there was none.
    async fn delete(&self, tenant: &TenantId, id: &IntegrationId) -> anyhow::Result<bool>;

    /// The integration with this id, of any tenant, with its workflow and plan.
    async fn find_target(&self, id: &IntegrationId) -> anyhow::Result<Option<IntegrationTarget>>;
}

/// A due schedule with what starting its execution needs.
#[derive(Debug, Clone, PartialEq)]
pub struct DueSchedule {
    /// The schedule.
    pub schedule: Schedule,
    /// Its workflow.
    pub workflow: Workflow,
    /// Its tenant's plan.
    pub plan: Plan,
}

/// How a due schedule moves on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advance {
    /// The tick it was at: it moves only if it still is (another instance did not move it).
    pub from: DateTime<Utc>,
    /// Its next tick.
    pub next_run_at: Option<DateTime<Utc>>,
    /// The tick that started an execution now, if one did.
    pub ran: Option<DateTime<Utc>>,
    /// Ticks to add to `missed_count`.
    pub missed: u64,
}

/// Schedules, scoped by tenant but for the due ones the ticker reads.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait ScheduleRepository: Send + Sync {
    /// Stores a new schedule; `false` when its workflow no longer exists.
    async fn create(&self, schedule: &Schedule) -> anyhow::Result<bool>;

    /// One schedule of a workflow of `tenant`.
    async fn get(
        &self,
        tenant: &TenantId,
        workflow: &WorkflowId,
        id: &ScheduleId,
    ) -> anyhow::Result<Option<Schedule>>;

    /// The schedules of a workflow of `tenant`, oldest first.
    async fn list(&self, tenant: &TenantId, workflow: &WorkflowId) -> anyhow::Result<Vec<Schedule>>;

    /// Replaces what its owners may change (cron, timezone, input, is_active, next_run_at,
    /// updated_at); `false` when it is gone.
    async fn update(&self, schedule: &Schedule) -> anyhow::Result<bool>;

    /// Deletes a schedule of a workflow of `tenant`; `false` when there was none.
    async fn delete(&self, tenant: &TenantId, workflow: &WorkflowId, id: &ScheduleId)
    -> anyhow::Result<bool>;

    /// Active schedules of every tenant whose next tick is at or before `now`, earliest first,
    /// at most `limit`, with their workflows and plans.
    async fn due(&self, now: DateTime<Utc>, limit: u32) -> anyhow::Result<Vec<DueSchedule>>;

    /// Moves a schedule on, if its next tick is still `advance.from` (compare-and-set); `false`
    /// when another instance (or an update) moved it first.
    async fn advance(&self, id: &ScheduleId, advance: &Advance) -> anyhow::Result<bool>;
}

/// An execution to store, with what running it needs.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExecution {
    /// The execution: `running`, one `pending` result per step.
    pub execution: Execution,
    /// The steps it runs (the workflow's, as they were when it started).
    pub steps: Vec<Step>,
    /// Whose authority the steps act with.
    pub run_as: RunAs,
    /// A key that makes a repeated start from the same origin return the first execution
    /// (a trigger call's `Idempotency-Key`, an integration event's delivery id).
    pub dedup_key: Option<String>,
    /// `workflow.execution.started`.
    pub started_event: Event,
    /// The workflows of the executions above it (an agent's `run_workflow` tool started it
    /// from one); empty otherwise.
    pub call_chain: CallChain,
    /// Stored already held under this lease (counted as its first claim): the caller runs it
    /// itself rather than leaving it to a worker.
    pub held: Option<Lease>,
}

/// What storing a [`NewExecution`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Started {
    /// It was stored.
    New(Execution),
    /// An execution from the same origin with the same key existed: nothing was stored.
    Existing(Execution),
}

impl Started {
    /// The execution, new or existing.
    pub fn execution(&self) -> &Execution {
        match self {
            Self::New(e) | Self::Existing(e) => e,
        }
    }

    /// Whether it was stored now.
    pub fn is_new(&self) -> bool {
        matches!(self, Self::New(_))
    }
}

/// An execution as a claim hands it over: its step results so far, the steps it runs and
/// whose authority they act with. Held, it is a [`ClaimedExecution`], whose claims count the
/// workers that took it up (more than one: a worker before this one crashed, stalled past its
/// lease or stopped).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRun {
    /// The execution with its step results so far.
    pub execution: Execution,
    /// The steps it runs.
    pub steps: Vec<Step>,
    /// Whose authority the steps act with.
    pub run_as: RunAs,
    /// The workflows of the executions above it, outermost first.
    pub call_chain: CallChain,
}

/// An execution a worker holds under a lease.
pub type ClaimedExecution = Claimed<ExecutionRun>;

/// How an execution ends, stored with the result of its last step.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// `completed` or `failed`.
    pub status: ExecutionStatus,
    /// The last step's output, when completed.
    pub output: Option<Value>,
    /// Why it failed.
    pub error: Option<String>,
    /// When.
    pub finished_at: DateTime<Utc>,
    /// `workflow.execution.completed` or `.failed`.
    pub event: Event,
}

/// What becomes of an execution after a step's result is stored.
#[derive(Debug, Clone, PartialEq)]
pub enum After {
    /// The worker goes on with the next step under its lease.
    GoOn,
    /// It is due again at this time (a step backs off before its next attempt): the lease is
    /// given back, and the execution waits as a row, not as a task.
    DueAt(DateTime<Utc>),
    /// It waits until `until` (a `wait` step), with status `waiting`, telling subscribers with
    /// `event` (`workflow.execution.waiting`): the lease is given back, and it waits as a row,
    /// not as a task.
    Wait {
        /// When its wait ends.
        until: DateTime<Utc>,
        /// Its `workflow.execution.waiting` event.
        event: Box<Event>,
    },
    /// It ended.
    Finish(Box<Finish>),
}

impl After {
    /// The end it stores, if it ends the execution.
    pub fn finish(&self) -> Option<&Finish> {
        match self {
            Self::Finish(finish) => Some(finish),
            _ => None,
        }
    }

    /// [`Self::finish`], by value.
    pub fn into_finish(self) -> Option<Finish> {
        match self {
            Self::Finish(finish) => Some(*finish),
            _ => None,
        }
    }
}

impl Finish {
    /// How `execution`, just ended by its last step, ends: its status, output, error and end
    /// time as its transition set them, with `event`.
    pub fn of(execution: &Execution, event: Event) -> Self {
        Self {
            status: execution.status(),
            output: execution.output().cloned(),
            error: execution.error().map(str::to_owned),
            finished_at: execution.finished_at().unwrap_or(event.created_at),
            event,
        }
    }
}

/// Executions and their step results, within a tenant. The workers claim running and waiting
/// executions that are due and that no live lease holds through the store's
/// [`LeaseQueue`](crate::work::LeaseQueue) of [`ExecutionRun`]s (across tenants); a claim of a
/// waiting one stores it `running` again and hands it over so.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait ExecutionRepository: Send + Sync {
    /// Stores a new execution, its step results and its started event in one transaction;
    /// when `dedup_key` is set and an execution of the same origin has it, stores nothing and
    /// returns that one. MUST never store two executions with one (origin, key), also when two
    /// instances start them at once.
    async fn create(&self, new: &NewExecution) -> anyhow::Result<Started>;

    /// One execution of `tenant`, with its step results.
    async fn get(&self, tenant: &TenantId, id: &ExecutionId) -> anyhow::Result<Option<Execution>>;

    /// A page of one workflow's executions, newest first, optionally only those in `status`,
    /// with how many there are in all; their step lists are left empty.
    async fn list(
        &self,
        tenant: &TenantId,
        workflow: &WorkflowId,
        status: Option<ExecutionStatus>,
        page: Page,
    ) -> anyhow::Result<(Vec<Execution>, u64)>;

    /// Stores the end a caller gave a running or waiting execution ([`Execution::cancel`]):
    /// its status, error and end time, the steps it skipped and the step that waited (failed),
    /// in one transaction, only if the stored execution of its tenant is still `running` or
    /// `waiting` (a running step may still record its result); whether it was.
    async fn record_cancel(&self, execution: &Execution) -> anyhow::Result<bool>;

    /// Stores a failed execution retried from a step ([`Execution::retry_from`]): running, due
    /// at once and free of any lease, with no end, error or output and with its claims counted
    /// afresh, and the steps it runs again as pending, in one transaction, only if the stored
    /// execution of its tenant is still `failed`; whether it was. Wakes the workers.
    async fn record_retry(&self, execution: &Execution) -> anyhow::Result<bool>;

    /// Stores step `step` as it started at `now` ([`Execution::start_step`]: running, its
    /// attempt counted, what an earlier run of it left cleared), makes it the step the
    /// execution is at, counts a step run, and extends the lease to `lease.until`, only if the
    /// execution is still `running` and carries `lease.token`; `false` otherwise (it was
    /// cancelled, or another worker took it over).
    async fn start_step(
        &self,
        id: &ExecutionId,
        lease: &Lease,
        step: &StepResult,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool>;

    /// Gives a held execution back (the worker is stopping between two steps): clears the
    /// lease if it still carries `lease.token`, so any worker may claim it at once, and takes
    /// back the claim's count: a claim given back is not one that crashed or stalled.
    async fn release(&self, id: &ExecutionId, lease: &Lease) -> anyhow::Result<()>;

    /// Stores a step's `result` (addressed by its step id) and what becomes of the execution
    /// `after` it, in one transaction and only if the execution carries `lease.token`; `false`
    /// when the lease was lost. [`After::DueAt`] gives the lease back (not counted as a claim
    /// that failed) with the execution's due time; [`After::Wait`] does too, with the status
    /// `waiting` (the claim that takes it when due makes it `running` again:
    /// [`Execution::resume`]); [`After::Finish`] stores its end, its
    /// remaining pending steps as `skipped` and the finish event, applied only to a `running`
    /// execution (a cancelled one keeps its status; its running step still records its
    /// result).
    async fn record_step(
        &self,
        id: &ExecutionId,
        lease: &Lease,
        result: &StepResult,
        after: After,
    ) -> anyhow::Result<bool>;
}

//! An execution of a workflow and the results of its steps: two small state machines. Only a
//! running execution moves, and a finished one never changes again (so a late cancel cannot undo
//! a completion, nor a late completion a cancel):
//!
//! ```text
//!  execution   Running ──complete──▶ Completed
//!                 ├─────fail───────▶ Failed
//!                 └─────cancel─────▶ Cancelled
//!
//!  step        Pending ──start──▶ Running ──complete──▶ Completed
//!                 │                  └──────fail──────▶ Failed
//!                 └──────skip──────▶ Skipped
//! ```
//!
//! [`Execution`] and [`StepResult`] change state only through their transitions
//! ([`Execution::start_step`], [`Execution::complete`], …), each refusing a move the machine does
//! not draw with [`InvalidTransition`]. Their state — the status and what goes with it: output,
//! error, times — is private and read through accessors, so it always is one the transitions
//! reach: an execution ends with its time, a completed step has started and finished, a failed
//! one says why. A stored execution comes back through one constructor, [`Execution::restore`],
//! which refuses a state the transitions cannot reach ([`InvalidState`]).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::steps::{Step, StepType};
use crate::ids::{AgentId, ExecutionId, IntegrationId, ScheduleId, TenantId, TriggerId, WorkflowId};

/// A move a state machine refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cannot {event} {what} that is {from}")]
pub struct InvalidTransition {
    /// What refused it: `an execution` or `a step`.
    pub what: &'static str,
    /// The state it is in.
    pub from: &'static str,
    /// The event refused.
    pub event: &'static str,
}

crate::string_enum! {
    /// Where an execution stands.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ExecutionStatus {
        /// Its steps are running (or waiting for a worker).
        Running => "running",
        /// Every step completed.
        Completed => "completed",
        /// A step failed (or the execution could not go on).
        Failed => "failed",
        /// Cancelled on request before it finished.
        Cancelled => "cancelled",
    }
}

impl ExecutionStatus {
    /// Whether it has finished for good.
    pub fn is_terminal(self) -> bool {
        self != Self::Running
    }
}

crate::string_enum! {
    /// What happens to an execution.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ExecutionEvent {
        /// Its last step completed.
        Complete => "complete",
        /// A step failed.
        Fail => "fail",
        /// A caller cancelled it.
        Cancel => "cancel",
    }
}

/// The status an execution in `from` moves to on `event`: only a running execution moves.
///
/// # Errors
/// [`InvalidTransition`] for a finished execution.
pub fn transition(
    from: ExecutionStatus,
    event: ExecutionEvent,
) -> Result<ExecutionStatus, InvalidTransition> {
    match (from, event) {
        (ExecutionStatus::Running, ExecutionEvent::Complete) => Ok(ExecutionStatus::Completed),
        (ExecutionStatus::Running, ExecutionEvent::Fail) => Ok(ExecutionStatus::Failed),
        (ExecutionStatus::Running, ExecutionEvent::Cancel) => Ok(ExecutionStatus::Cancelled),
        (ExecutionStatus::Completed | ExecutionStatus::Failed | ExecutionStatus::Cancelled, _) => {
            Err(InvalidTransition { what: "an execution", from: from.as_str(), event: event.as_str() })
        }
    }
}

crate::string_enum! {
    /// Where one step of an execution stands.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum StepStatus {
        /// Not started yet.
        Pending => "pending",
        /// Running.
        Running => "running",
        /// Produced its output.
        Completed => "completed",
        /// Failed (its error says why); the execution fails with it.
        Failed => "failed",
        /// Never ran: the execution ended (failed or was cancelled) before it.
        Skipped => "skipped",
    }
}

impl StepStatus {
    /// Whether it has finished for good.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Skipped)
    }
}

crate::string_enum! {
    /// What happens to a step.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum StepEvent {
        /// Its turn came.
        Start => "start",
        /// It produced its output.
        Complete => "complete",
        /// It failed.
        Fail => "fail",
        /// The execution ended before its turn.
        Skip => "skip",
    }
}

/// The status a step in `from` moves to on `event`: a pending step starts or is skipped, a
/// running one completes or fails; a finished step never moves.
///
/// # Errors
/// [`InvalidTransition`] for any other pair.
pub fn step_transition(from: StepStatus, event: StepEvent) -> Result<StepStatus, InvalidTransition> {
    match (from, event) {
        (StepStatus::Pending, StepEvent::Start) => Ok(StepStatus::Running),
        (StepStatus::Pending, StepEvent::Skip) => Ok(StepStatus::Skipped),
        (StepStatus::Running, StepEvent::Complete) => Ok(StepStatus::Completed),
        (StepStatus::Running, StepEvent::Fail) => Ok(StepStatus::Failed),
        _ => Err(InvalidTransition { what: "a step", from: from.as_str(), event: event.as_str() }),
    }
}

/// The error a cancelled execution keeps.
pub const CANCELLED_ERROR: &str = "cancelled on request";

/// A stored execution whose state no sequence of transitions reaches (a row written by hand, or
/// by a fault).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stored {what} {id} is {status} but {problem}")]
pub struct InvalidState {
    /// `execution` or `step`.
    pub what: &'static str,
    /// The execution's id, or the step's.
    pub id: String,
    /// The status it is stored with.
    pub status: &'static str,
    /// What does not go with that status.
    pub problem: &'static str,
}

/// One execution (run) of a workflow. What identifies it and what it was started with are
/// public; its state changes only through its transitions (see the [module](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    /// Its id.
    pub id: ExecutionId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The workflow it runs.
    pub workflow_id: WorkflowId,
    /// What it was started with.
    pub input: Value,
    /// What started it.
    pub origin: ExecutionOrigin,
    /// The details of the call, event or tick that started it, which templates read as
    /// `trigger.*` (see [`Execution::with_trigger`]); null when started by the API or an agent.
    pub trigger: Value,
    /// When it started.
    pub started_at: DateTime<Utc>,
    status: ExecutionStatus,
    output: Option<Value>,
    error: Option<String>,
    finished_at: Option<DateTime<Utc>>,
    steps: Vec<StepResult>,
}

/// An execution as stored and shown, every field plain: what [`Execution::restore`] reads back
/// and [`Execution::into_record`] gives.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRecord {
    /// Its id.
    pub id: ExecutionId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The workflow it runs.
    pub workflow_id: WorkflowId,
    /// Where it stands.
    pub status: ExecutionStatus,
    /// What it was started with.
    pub input: Value,
    /// Its result, once completed.
    pub output: Option<Value>,
    /// Why it failed (or that it was cancelled).
    pub error: Option<String>,
    /// What started it.
    pub origin: ExecutionOrigin,
    /// The details of what started it (null when none).
    pub trigger: Value,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it finished.
    pub finished_at: Option<DateTime<Utc>>,
    /// One result per step, in the workflow's order (none in lists).
    pub steps: Vec<StepRecord>,
}

/// What started an execution. Written by hand rather than with `string_enum!`: its variants
/// carry the id of what started it, stored in a column of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutionOrigin {
    /// `POST /workflows/{id}/execute`.
    Api,
    /// A call to a trigger URL.
    Trigger(TriggerId),
    /// An event at an integration's receiver.
    Integration(IntegrationId),
    /// An agent's `run_workflow` tool, during a chat.
    Agent(AgentId),
    /// A due tick of a schedule.
    Schedule(ScheduleId),
}

impl ExecutionOrigin {
    /// The stored and shown kind: `api`, `trigger`, `integration`, `agent` or `schedule`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::Trigger(_) => "trigger",
            Self::Integration(_) => "integration",
            Self::Agent(_) => "agent",
            Self::Schedule(_) => "schedule",
        }
    }

    /// The trigger's, integration's, agent's or schedule's id.
    pub fn source_id(&self) -> Option<&str> {
        match self {
            Self::Api => None,
            Self::Trigger(id) => Some(id.as_str()),
            Self::Integration(id) => Some(id.as_str()),
            Self::Agent(id) => Some(id.as_str()),
            Self::Schedule(id) => Some(id.as_str()),
        }
    }

    /// Reads a stored kind and source id back.
    pub fn parse(kind: &str, source_id: Option<String>) -> Option<Self> {
        match (kind, source_id) {
            ("api", _) => Some(Self::Api),
            ("trigger", Some(id)) => Some(Self::Trigger(TriggerId::from_string(id))),
            ("integration", Some(id)) => Some(Self::Integration(IntegrationId::from_string(id))),
            ("agent", Some(id)) => Some(Self::Agent(AgentId::from_string(id))),
            ("schedule", Some(id)) => Some(Self::Schedule(ScheduleId::from_string(id))),
            _ => None,
        }
    }
}

impl Execution {
    /// A new execution of `steps` started at `started_at`: running, every step pending.
    pub fn start(
        id: ExecutionId,
        tenant_id: TenantId,
        workflow_id: WorkflowId,
        input: Value,
        origin: ExecutionOrigin,
        started_at: DateTime<Utc>,
        steps: &[Step],
    ) -> Self {
        Self {
            id,
            tenant_id,
            workflow_id,
            input,
            origin,
            trigger: Value::Null,
            started_at,
            status: ExecutionStatus::Running,
            output: None,
            error: None,
            finished_at: None,
            steps: steps.iter().map(StepResult::pending).collect(),
        }
    }

    /// The execution with the details of what started it: a trigger call's `{method, query,
    /// headers, body}`, an integration event's `{kind, delivery_id, headers}`. Its input stays
    /// what the workflow reads alike from every entry point.
    #[must_use]
    pub fn with_trigger(mut self, trigger: Value) -> Self {
        self.trigger = trigger;
        self
    }

    /// An execution as it was stored.
    ///
    /// # Errors
    /// [`InvalidState`] when its state, or a step's, is not one the transitions reach: an end
    /// time exactly when it has ended, an output only when completed, an error when failed and
    /// only when failed or cancelled.
    pub fn restore(record: ExecutionRecord) -> Result<Self, InvalidState> {
        let status = record.status;
        let invalid = |problem| InvalidState {
            what: "execution",
            id: record.id.to_string(),
            status: status.as_str(),
            problem,
        };
        if record.finished_at.is_some() != status.is_terminal() {
            return Err(invalid(if status.is_terminal() { "has no end time" } else { "has an end time" }));
        }
        if record.output.is_some() && status != ExecutionStatus::Completed {
            return Err(invalid("has an output"));
        }
        match (status, &record.error) {
            (ExecutionStatus::Failed, None) => return Err(invalid("says not why")),
            (ExecutionStatus::Running | ExecutionStatus::Completed, Some(_)) => {
                return Err(invalid("has an error"));
            }
            _ => {}
        }
        Ok(Self {
            id: record.id,
            tenant_id: record.tenant_id,
            workflow_id: record.workflow_id,
            input: record.input,
            origin: record.origin,
            trigger: record.trigger,
            started_at: record.started_at,
            status,
            output: record.output,
            error: record.error,
            finished_at: record.finished_at,
            steps: record.steps.into_iter().map(StepResult::restore).collect::<Result<_, _>>()?,
        })
    }

    /// The execution as stored and shown.
    pub fn into_record(self) -> ExecutionRecord {
        ExecutionRecord {
            id: self.id,
            tenant_id: self.tenant_id,
            workflow_id: self.workflow_id,
            status: self.status,
            input: self.input,
            output: self.output,
            error: self.error,
            origin: self.origin,
            trigger: self.trigger,
            started_at: self.started_at,
            finished_at: self.finished_at,
            steps: self.steps.into_iter().map(StepResult::into_record).collect(),
        }
    }

    /// Where it stands.
    pub fn status(&self) -> ExecutionStatus {
        self.status
    }

    /// Its result, once completed: the last step's output.
    pub fn output(&self) -> Option<&Value> {
        self.output.as_ref()
    }

    /// Why it failed, or that it was cancelled.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// When it ended.
    pub fn finished_at(&self) -> Option<DateTime<Utc>> {
        self.finished_at
    }

    /// One result per step, in the workflow's order (none for an execution read in a list).
    pub fn steps(&self) -> &[StepResult] {
        &self.steps
    }

    /// The result of the step with id `step_id`.
    pub fn step(&self, step_id: &str) -> Option<&StepResult> {
        self.steps.iter().find(|s| s.step_id == step_id)
    }

    /// Starts step `step_id` at `at`. A step found running was left so by a worker that died:
    /// it starts over.
    ///
    /// # Errors
    /// [`InvalidTransition`] when the execution has ended (no further step starts) or the step
    /// has finished.
    pub fn start_step(&mut self, step_id: &str, at: DateTime<Utc>) -> Result<(), InvalidTransition> {
        if self.status.is_terminal() {
            return Err(self.refusal("start a step of"));
        }
        let step = self.step_mut(step_id, StepEvent::Start)?;
        if step.status == StepStatus::Running {
            *step = StepResult { status: StepStatus::Pending, started_at: None, ..step.clone() };
        }
        step.apply(StepEvent::Start, at)
    }

    /// Completes running step `step_id` with `output` at `at` (also when the execution was
    /// cancelled while it ran: a running step may finish).
    ///
    /// # Errors
    /// [`InvalidTransition`] when the step is not running.
    pub fn complete_step(
        &mut self,
        step_id: &str,
        output: Value,
        at: DateTime<Utc>,
    ) -> Result<(), InvalidTransition> {
        let step = self.step_mut(step_id, StepEvent::Complete)?;
        step.apply(StepEvent::Complete, at)?;
        step.output = Some(output);
        Ok(())
    }

    /// Fails running step `step_id` at `at`, saying why.
    ///
    /// # Errors
    /// [`InvalidTransition`] when the step is not running.
    pub fn fail_step(
        &mut self,
        step_id: &str,
        error: String,
        at: DateTime<Utc>,
    ) -> Result<(), InvalidTransition> {
        let step = self.step_mut(step_id, StepEvent::Fail)?;
        step.apply(StepEvent::Fail, at)?;
        step.error = Some(error);
        Ok(())
    }

    /// Ends the execution completed with `output` (its last step's) at `at`.
    ///
    /// # Errors
    /// [`InvalidTransition`] when it has already ended.
    pub fn complete(&mut self, output: Value, at: DateTime<Utc>) -> Result<(), InvalidTransition> {
        self.end(ExecutionEvent::Complete, at)?;
        self.output = Some(output);
        Ok(())
    }

    /// Ends the execution failed at `at`, saying why.
    ///
    /// # Errors
    /// [`InvalidTransition`] when it has already ended.
    pub fn fail(&mut self, error: String, at: DateTime<Utc>) -> Result<(), InvalidTransition> {
        self.end(ExecutionEvent::Fail, at)?;
        self.error = Some(error);
        Ok(())
    }

    /// Cancels the execution at `at`: no further step starts (a running one may finish).
    ///
    /// # Errors
    /// [`InvalidTransition`] when it has already ended.
    pub fn cancel(&mut self, at: DateTime<Utc>) -> Result<(), InvalidTransition> {
        self.end(ExecutionEvent::Cancel, at)?;
        self.error = Some(CANCELLED_ERROR.to_owned());
        Ok(())
    }

    /// Moves to the end `event` leads to, skipping the steps that never started.
    fn end(&mut self, event: ExecutionEvent, at: DateTime<Utc>) -> Result<(), InvalidTransition> {
        self.status = transition(self.status, event)?;
        self.finished_at = Some(at);
        for step in &mut self.steps {
            if step.status == StepStatus::Pending {
                step.apply(StepEvent::Skip, at)?;
            }
        }
        Ok(())
    }

    fn step_mut(&mut self, step_id: &str, event: StepEvent) -> Result<&mut StepResult, InvalidTransition> {
        self.steps.iter_mut().find(|s| s.step_id == step_id).ok_or(InvalidTransition {
            what: "a step",
            from: "absent",
            event: event.as_str(),
        })
    }

    fn refusal(&self, event: &'static str) -> InvalidTransition {
        InvalidTransition { what: "an execution", from: self.status.as_str(), event }
    }
}

/// What one step of an execution did. Its id and type are public; its state changes only
/// through its execution's transitions.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// The step's id.
    pub step_id: String,
    /// The step's type.
    pub step_type: StepType,
    status: StepStatus,
    output: Option<Value>,
    error: Option<String>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
}

/// A step's result as stored and shown, every field plain.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    /// The step's id.
    pub step_id: String,
    /// The step's type.
    pub step_type: StepType,
    /// Where it stands.
    pub status: StepStatus,
    /// Its output, once completed.
    pub output: Option<Value>,
    /// Why it failed.
    pub error: Option<String>,
    /// When it started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it finished.
    pub finished_at: Option<DateTime<Utc>>,
}

impl StepResult {
    /// The result of a step that has not started.
    fn pending(step: &Step) -> Self {
        Self {
            step_id: step.id().to_owned(),
            step_type: step.step_type(),
            status: StepStatus::Pending,
            output: None,
            error: None,
            started_at: None,
            finished_at: None,
        }
    }

    fn restore(record: StepRecord) -> Result<Self, InvalidState> {
        let status = record.status;
        let invalid = |problem| InvalidState {
            what: "step",
            id: record.step_id.clone(),
            status: status.as_str(),
            problem,
        };
        let ran = matches!(status, StepStatus::Running | StepStatus::Completed | StepStatus::Failed);
        let ended = matches!(status, StepStatus::Completed | StepStatus::Failed);
        if record.started_at.is_some() != ran {
            return Err(invalid(if ran { "has no start time" } else { "has a start time" }));
        }
        if record.finished_at.is_some() != ended {
            return Err(invalid(if ended { "has no end time" } else { "has an end time" }));
        }
        if record.output.is_some() && status != StepStatus::Completed {
            return Err(invalid("has an output"));
        }
        if record.error.is_some() != (status == StepStatus::Failed) {
            return Err(invalid(if status == StepStatus::Failed { "says not why" } else { "has an error" }));
        }
        Ok(Self {
            step_id: record.step_id,
            step_type: record.step_type,
            status,
            output: record.output,
            error: record.error,
            started_at: record.started_at,
            finished_at: record.finished_at,
        })
    }

    fn into_record(self) -> StepRecord {
        StepRecord {
            step_id: self.step_id,
            step_type: self.step_type,
            status: self.status,
            output: self.output,
            error: self.error,
            started_at: self.started_at,
            finished_at: self.finished_at,
        }
    }

    /// Where it stands.
    pub fn status(&self) -> StepStatus {
        self.status
    }

    /// Its output, once completed.
    pub fn output(&self) -> Option<&Value> {
        self.output.as_ref()
    }

    /// Why it failed.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// When it started.
    pub fn started_at(&self) -> Option<DateTime<Utc>> {
        self.started_at
    }

    /// When it finished.
    pub fn finished_at(&self) -> Option<DateTime<Utc>> {
        self.finished_at
    }

    /// Moves the step on `event` at `at`, keeping its times with its status.
    fn apply(&mut self, event: StepEvent, at: DateTime<Utc>) -> Result<(), InvalidTransition> {
        self.status = step_transition(self.status, event)?;
        match event {
            StepEvent::Start => self.started_at = Some(at),
            StepEvent::Complete | StepEvent::Fail => self.finished_at = Some(at),
            StepEvent::Skip => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

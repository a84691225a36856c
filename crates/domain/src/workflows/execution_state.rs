//! An execution of a workflow and the results of its steps: two small state machines. Only a
//! running or waiting execution moves, and a finished one never changes again (so a late cancel
//! cannot undo a completion, nor a late completion a cancel) — except that a failed one may be
//! retried from a step:
//!
//! ```text
//!  execution   Running ──complete──▶ Completed
//!               │  ▲  ├──fail──────▶ Failed ──retry (from a step)──▶ Running
//!          wait │  │  └──cancel────▶ Cancelled
//!               ▼  │ resume (a claim, when due)    ▲
//!              Waiting ──────cancel────────────────┘
//!
//!  step        Pending ──start──▶ Running ──complete──▶ Completed ─┐
//!               ▲  │                 ├──────fail──────▶ Failed ────┤
//!               │  │                 ├──retry──▶ Pending (backing  │
//!               │  │                 │               off till due) │
//!               │  │                 └──wait──▶ Waiting ─complete─▶│ (its time came)
//!               │  │                              └──fail (cancel)─┤
//!               │  └──────skip──────▶ Skipped ─────────────────────┤
//!               └──rerun (a loop came back, or the execution is retried from here)─┘
//! ```
//!
//! The execution is *at* a step (the one it started last) and *due* at a time: a step that
//! failed an attempt it may retry goes back to pending with the time of its next attempt, and a
//! step that waits (`wait`) keeps waiting until its time; either time becomes the execution's due
//! time, so that it waits as a row in the queue rather than as a task. A waiting execution is
//! resumed by the claim that takes it when it is due. Each start counts as a step run; a loop
//! through `next` or `on_error` may not take an execution past [`MAX_STEP_RUNS`].
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

mod origin;
mod step_result;

pub use self::origin::ExecutionOrigin;

pub use self::step_result::AttemptError;
pub use self::step_result::{StepRecord, StepResult};
use super::steps::Step;
use crate::ids::{ExecutionId, TenantId, WorkflowId};

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
        /// A step waits (for a time): it holds no worker until it is due.
        Waiting => "waiting",
    }
}

impl ExecutionStatus {
    /// Whether it has finished for good.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
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
        /// A step waits.
        Wait => "wait",
        /// A worker took it up when it was due (its claim does this).
        Resume => "resume",
        /// A failed execution runs again from one of its steps.
        Retry => "retry",
    }
}

/// The status an execution in `from` moves to on `event`: a running execution ends or waits,
/// a waiting one resumes or is cancelled, and a finished one never moves.
///
/// # Errors
/// [`InvalidTransition`] for any other pair.
pub fn transition(
    from: ExecutionStatus,
    event: ExecutionEvent,
) -> Result<ExecutionStatus, InvalidTransition> {
    use ExecutionEvent as E;
    use ExecutionStatus as S;
    match (from, event) {
        (S::Running, E::Complete) => Ok(S::Completed),
        (S::Running, E::Fail) => Ok(S::Failed),
        (S::Running | S::Waiting, E::Cancel) => Ok(S::Cancelled),
        (S::Running, E::Wait) => Ok(S::Waiting),
        (S::Waiting, E::Resume) | (S::Failed, E::Retry) => Ok(S::Running),
        _ => Err(InvalidTransition { what: "an execution", from: from.as_str(), event: event.as_str() }),
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
        /// Started, and waits for its time (`next_run_at`) without a worker.
        Waiting => "waiting",
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
        /// It failed an attempt and is tried again later.
        Retry => "retry",
        /// A loop came back to it after it finished, or its failed execution is retried from it
        /// (or an earlier step): it runs again.
        Rerun => "rerun",
        /// It waits for a time.
        Wait => "wait",
    }
}

/// The status a step in `from` moves to on `event`: a pending step starts or is skipped, a
/// running one completes, fails, waits to be retried or waits for a time, a waiting one
/// completes when its time comes (or fails: cancelled), and a finished one (completed, failed
/// or skipped) is made pending again when a loop comes back to it or a failed execution is
/// retried from it or an earlier step.
///
/// # Errors
/// [`InvalidTransition`] for any other pair.
pub fn step_transition(from: StepStatus, event: StepEvent) -> Result<StepStatus, InvalidTransition> {
    use StepEvent as E;
    use StepStatus as S;
    match (from, event) {
        (S::Pending, E::Start) => Ok(S::Running),
        (S::Pending, E::Skip) => Ok(S::Skipped),
        (S::Running | S::Waiting, E::Complete) => Ok(S::Completed),
        (S::Running | S::Waiting, E::Fail) => Ok(S::Failed),
        (S::Running, E::Wait) => Ok(S::Waiting),
        (S::Running, E::Retry) | (S::Completed | S::Failed | S::Skipped, E::Rerun) => Ok(S::Pending),
        _ => Err(InvalidTransition { what: "a step", from: from.as_str(), event: event.as_str() }),
    }
}

/// Most step runs one execution may make (each start of a step counts, a retry's and a
/// loop's too).
pub const MAX_STEP_RUNS: u32 = 10_000;

/// The error a cancelled execution keeps.
pub const CANCELLED_ERROR: &str = "cancelled on request";

/// The error of a step that was waiting when its execution was cancelled.
pub const CANCELLED_WAIT_ERROR: &str = "the execution was cancelled while this step waited";

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
    at_step: Option<String>,
    due_at: DateTime<Utc>,
    step_runs: u32,
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
    /// The step it started last (none before its first).
    pub at_step: Option<String>,
    /// When a worker is to take it up (its start, or when a step backing off is tried again).
    pub due_at: DateTime<Utc>,
    /// Step runs so far.
    pub step_runs: u32,
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
            at_step: None,
            due_at: started_at,
            step_runs: 0,
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
            (ExecutionStatus::Running | ExecutionStatus::Waiting | ExecutionStatus::Completed, Some(_)) => {
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
            at_step: record.at_step,
            due_at: record.due_at,
            step_runs: record.step_runs,
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
            at_step: self.at_step,
            due_at: self.due_at,
            step_runs: self.step_runs,
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

    /// The step it started last (none before its first).
    pub fn at_step(&self) -> Option<&str> {
        self.at_step.as_deref()
    }

    /// When a worker is to take it up.
    pub fn due_at(&self) -> DateTime<Utc> {
        self.due_at
    }

    /// Step runs so far.
    pub fn step_runs(&self) -> u32 {
        self.step_runs
    }

    /// Starts step `step_id` at `at`, counting a step run; the execution is at it now. A step
    /// found running was left so by a worker that died: the same attempt starts over. A step
    /// that completed or failed before runs again (a loop came back to it).
    ///
    /// # Errors
    /// [`InvalidTransition`] when the execution has ended (no further step starts) or the step
    /// was skipped.
    pub fn start_step(&mut self, step_id: &str, at: DateTime<Utc>) -> Result<(), InvalidTransition> {
        if self.status.is_terminal() {
            return Err(self.refusal("start a step of"));
        }
        let step = self.step_mut(step_id, StepEvent::Start)?;
        match step.status {
            StepStatus::Running => {
                step.status = StepStatus::Pending;
                step.started_at = None;
                step.attempts = step.attempts.saturating_sub(1);
            }
            StepStatus::Completed | StepStatus::Failed => step.apply(StepEvent::Rerun, at)?,
            // Refused below: a waiting step completes when its time comes, it does not start.
            StepStatus::Pending | StepStatus::Skipped | StepStatus::Waiting => {}
        }
        step.apply(StepEvent::Start, at)?;
        self.step_runs = self.step_runs.saturating_add(1);
        self.at_step = Some(step_id.to_owned());
        Ok(())
    }

    /// Running step `step_id` failed its attempt at `at` with `error` and is tried again at
    /// `next_run_at`, when the execution is due again.
    ///
    /// # Errors
    /// [`InvalidTransition`] when the execution has ended or the step is not running.
    pub fn retry_step(
        &mut self,
        step_id: &str,
        error: String,
        next_run_at: DateTime<Utc>,
        at: DateTime<Utc>,
    ) -> Result<(), InvalidTransition> {
        if self.status.is_terminal() {
            return Err(self.refusal("retry a step of"));
        }
        let step = self.step_mut(step_id, StepEvent::Retry)?;
        step.apply(StepEvent::Retry, at)?;
        step.attempt_errors.push(AttemptError { attempt: step.attempts, error, at });
        step.next_run_at = Some(next_run_at);
        self.due_at = next_run_at;
        Ok(())
    }

    /// Running step `step_id` waits until `until` (a `wait`), decided at `at` (or a waiting one
    /// whose execution was woken before its time waits on): the execution waits with it, due
    /// then, holding no worker.
    ///
    /// # Errors
    /// [`InvalidTransition`] when the execution is not running or the step neither runs nor
    /// waits.
    pub fn wait_step(
        &mut self,
        step_id: &str,
        until: DateTime<Utc>,
        at: DateTime<Utc>,
    ) -> Result<(), InvalidTransition> {
        let status = transition(self.status, ExecutionEvent::Wait)?;
        let step = self.step_mut(step_id, StepEvent::Wait)?;
        if step.status != StepStatus::Waiting {
            step.apply(StepEvent::Wait, at)?;
        }
        step.next_run_at = Some(until);
        self.status = status;
        self.due_at = until;
        Ok(())
    }

    /// Runs the failed execution again from step `from` at `at` (`POST /executions/{id}/retry`):
    /// running and due at once, at `from`, which and every step listed after it start again
    /// from a fresh slate (and so does any step skipped before it); the steps before keep their
    /// results, whose outputs the later steps read. Its step runs go on counting.
    ///
    /// # Errors
    /// [`InvalidTransition`] when it has not failed, or has no step `from`.
    pub fn retry_from(&mut self, from: &str, at: DateTime<Utc>) -> Result<(), InvalidTransition> {
        let status = transition(self.status, ExecutionEvent::Retry)?;
        let first = self.steps.iter().position(|s| s.step_id == from).ok_or(InvalidTransition {
            what: "a step",
            from: "absent",
            event: ExecutionEvent::Retry.as_str(),
        })?;
        // A step before `from` that was skipped never ran: it is pending again too, so that a
        // jump back to it runs it.
        for (index, step) in self.steps.iter_mut().enumerate() {
            if step.status == StepStatus::Skipped || (index >= first && step.status != StepStatus::Pending) {
                step.apply(StepEvent::Rerun, at)?;
            }
        }
        self.status = status;
        self.output = None;
        self.error = None;
        self.finished_at = None;
        self.due_at = at;
        self.at_step = Some(from.to_owned());
        Ok(())
    }

    /// The execution resumes: a worker took it up when it was due (what its claim stores).
    ///
    /// # Errors
    /// [`InvalidTransition`] when it is not waiting.
    pub fn resume(&mut self) -> Result<(), InvalidTransition> {
        self.status = transition(self.status, ExecutionEvent::Resume)?;
        Ok(())
    }

    /// Records on finished step `step_id` that the execution goes on at step `to` rather than
    /// the next in the list (a `next`, an `on_error` route).
    ///
    /// # Errors
    /// [`InvalidTransition`] when the step has not finished.
    pub fn branch_from(&mut self, step_id: &str, to: &str) -> Result<(), InvalidTransition> {
        let step = self.step_mut(step_id, StepEvent::Complete)?;
        if !matches!(step.status, StepStatus::Completed | StepStatus::Failed) {
            return Err(InvalidTransition {
                what: "a step",
                from: step.status.as_str(),
                event: "branch from",
            });
        }
        step.branch = Some(to.to_owned());
        Ok(())
    }

    /// Completes running (or waiting) step `step_id` with `output` at `at` (also when the
    /// execution was cancelled while it ran: a running step may finish).
    ///
    /// # Errors
    /// [`InvalidTransition`] when the step is neither running nor waiting.
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

    /// Moves to the end `event` leads to, skipping the steps that never started and failing
    /// the one that waited (a waiting execution is cancelled).
    fn end(&mut self, event: ExecutionEvent, at: DateTime<Utc>) -> Result<(), InvalidTransition> {
        self.status = transition(self.status, event)?;
        self.finished_at = Some(at);
        for step in &mut self.steps {
            match step.status {
                StepStatus::Pending => step.apply(StepEvent::Skip, at)?,
                StepStatus::Waiting => {
                    step.apply(StepEvent::Fail, at)?;
                    step.error = Some(CANCELLED_WAIT_ERROR.to_owned());
                }
                _ => {}
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

#[cfg(test)]
mod tests;

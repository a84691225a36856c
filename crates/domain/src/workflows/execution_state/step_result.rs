//! The result of one step of an execution: the data of its state machine (see the
//! [parent module](super) for the transitions).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{InvalidState, InvalidTransition, StepEvent, StepStatus, step_transition};
use crate::workflows::steps::{Step, StepType};

/// A failed attempt of a step that was tried again (stored as JSON with its step's result).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AttemptError {
    /// Which attempt (from 1).
    pub attempt: u32,
    /// Why it failed.
    pub error: String,
    /// When it failed.
    pub at: DateTime<Utc>,
}

/// What one step of an execution did. Its id and type are public; its state changes only
/// through its execution's transitions.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// The step's id.
    pub step_id: String,
    /// The step's type.
    pub step_type: StepType,
    pub(super) status: StepStatus,
    pub(super) output: Option<Value>,
    pub(super) error: Option<String>,
    pub(super) started_at: Option<DateTime<Utc>>,
    pub(super) finished_at: Option<DateTime<Utc>>,
    pub(super) attempts: u32,
    pub(super) next_run_at: Option<DateTime<Utc>>,
    pub(super) branch: Option<String>,
    pub(super) attempt_errors: Vec<AttemptError>,
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
    /// Attempts of its current run (0 before the first).
    pub attempts: u32,
    /// When it is tried again, while it backs off after a failed attempt; when its wait ends,
    /// while it waits.
    pub next_run_at: Option<DateTime<Utc>>,
    /// The step the execution went on at after it, when that was not simply the next one in
    /// the list (a `next`, an `on_error` route).
    pub branch: Option<String>,
    /// The errors of its attempts that were tried again, oldest first.
    pub attempt_errors: Vec<AttemptError>,
}

impl StepResult {
    /// The result of a step that has not started.
    pub(super) fn pending(step: &Step) -> Self {
        Self {
            step_id: step.id().to_owned(),
            step_type: step.step_type(),
            status: StepStatus::Pending,
            output: None,
            error: None,
            started_at: None,
            finished_at: None,
            attempts: 0,
            next_run_at: None,
            branch: None,
            attempt_errors: Vec::new(),
        }
    }

    pub(super) fn restore(record: StepRecord) -> Result<Self, InvalidState> {
        let status = record.status;
        let invalid = |problem| InvalidState {
            what: "step",
            id: record.step_id.clone(),
            status: status.as_str(),
            problem,
        };
        let ran = matches!(
            status,
            StepStatus::Running | StepStatus::Waiting | StepStatus::Completed | StepStatus::Failed
        );
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
        if record.next_run_at.is_some() && !matches!(status, StepStatus::Pending | StepStatus::Waiting) {
            return Err(invalid("has a next run"));
        }
        if record.next_run_at.is_none() && status == StepStatus::Waiting {
            return Err(invalid("waits for no time"));
        }
        if ran && record.attempts == 0 {
            return Err(invalid("counts no attempt"));
        }
        Ok(Self {
            step_id: record.step_id,
            step_type: record.step_type,
            status,
            output: record.output,
            error: record.error,
            started_at: record.started_at,
            finished_at: record.finished_at,
            attempts: record.attempts,
            next_run_at: record.next_run_at,
            branch: record.branch,
            attempt_errors: record.attempt_errors,
        })
    }

    pub(super) fn into_record(self) -> StepRecord {
        StepRecord {
            step_id: self.step_id,
            step_type: self.step_type,
            status: self.status,
            output: self.output,
            error: self.error,
            started_at: self.started_at,
            finished_at: self.finished_at,
            attempts: self.attempts,
            next_run_at: self.next_run_at,
            branch: self.branch,
            attempt_errors: self.attempt_errors,
        }
    }

    /// The result as stored and shown, by reference.
    pub fn to_record(&self) -> StepRecord {
        self.clone().into_record()
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

    /// Attempts of its current run (0 before the first).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// When it is tried again, while it backs off; when its wait ends, while it waits.
    pub fn next_run_at(&self) -> Option<DateTime<Utc>> {
        self.next_run_at
    }

    /// The step the execution went on at after it, when not the next in the list.
    pub fn branch(&self) -> Option<&str> {
        self.branch.as_deref()
    }

    /// The errors of its attempts that were tried again.
    pub fn attempt_errors(&self) -> &[AttemptError] {
        &self.attempt_errors
    }

    /// Moves the step on `event` at `at`, keeping what goes with its status: times, the
    /// attempt count, and a fresh slate for a step run again.
    pub(super) fn apply(&mut self, event: StepEvent, at: DateTime<Utc>) -> Result<(), InvalidTransition> {
        self.status = step_transition(self.status, event)?;
        match event {
            StepEvent::Start => {
                self.started_at = Some(at);
                self.attempts += 1;
                self.next_run_at = None;
            }
            StepEvent::Complete | StepEvent::Fail => {
                self.finished_at = Some(at);
                self.next_run_at = None;
            }
            StepEvent::Retry => {
                self.started_at = None;
            }
            // Its time is set by the execution's transition (`wait_step`).
            StepEvent::Wait => {}
            StepEvent::Rerun => {
                self.output = None;
                self.error = None;
                self.started_at = None;
                self.finished_at = None;
                self.attempts = 0;
                self.next_run_at = None;
                self.branch = None;
                self.attempt_errors.clear();
            }
            StepEvent::Skip => self.next_run_at = None,
        }
        Ok(())
    }
}

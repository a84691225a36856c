//! Workflows, executions with their state machines, webhook triggers and integrations, and the
//! validation of what a request may set on them.
//!
//! An execution and each of its steps move through small state machines; only a running
//! execution moves, and a finished one never changes again (so a late cancel cannot undo a
//! completion, nor a late completion a cancel):
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

use std::fmt;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::steps::{HttpMethod, Step, StepType, steps_to_json};
use crate::ids::{ExecutionId, IntegrationId, TenantId, TriggerId, UserId, WorkflowId};
use crate::tenancy::Role;
use crate::validation::{FieldError, FieldErrorKind, TextKind, check_length, check_long_text, check_text};
use crate::webhooks::SealedSecret;

/// Longest name of a workflow, trigger or integration, in characters.
pub const MAX_NAME_CHARS: usize = 100;
/// Longest workflow description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 2_000;
/// The methods a trigger may accept.
pub const TRIGGER_METHODS: [HttpMethod; 5] =
    [HttpMethod::Get, HttpMethod::Post, HttpMethod::Put, HttpMethod::Patch, HttpMethod::Delete];
/// The methods a trigger accepts when its request does not say.
pub const DEFAULT_TRIGGER_METHODS: [HttpMethod; 1] = [HttpMethod::Post];

/// A workflow: steps run in order on an input.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    /// Its id.
    pub id: WorkflowId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// Its steps, checked (see [`validate_steps`](super::validate_steps)).
    pub steps: Vec<Step>,
    /// Whether it may be executed.
    pub is_active: bool,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

impl Workflow {
    /// The step with this id.
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id() == id)
    }

    /// The steps as stored and shown.
    pub fn steps_json(&self) -> Value {
        steps_to_json(&self.steps)
    }
}

/// Checks the name of a workflow, trigger or integration: single-line text of at most
/// [`MAX_NAME_CHARS`] characters, at least one after trimming; returned trimmed.
///
/// # Errors
/// A [`FieldError`] naming `name`.
pub fn check_name(raw: &str) -> Result<String, FieldError> {
    check_text(raw, "name", TextKind::SingleLine)?;
    check_length(raw, 0, MAX_NAME_CHARS, "name")?;
    let name = raw.trim();
    check_length(name, 1, usize::MAX, "name")?;
    Ok(name.to_owned())
}

/// Checks a workflow description: up to [`MAX_DESCRIPTION_CHARS`] characters, tabs and line
/// breaks allowed; blank text means none.
///
/// # Errors
/// A [`FieldError`] naming `description`.
pub fn check_description(raw: String) -> Result<Option<String>, FieldError> {
    check_long_text(&raw, 0, MAX_DESCRIPTION_CHARS, "description")?;
    Ok(Some(raw).filter(|d| !d.trim().is_empty()))
}

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

/// Where an execution stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutionStatus {
    /// Its steps are running (or waiting for a worker).
    Running,
    /// Every step completed.
    Completed,
    /// A step failed (or the execution could not go on).
    Failed,
    /// Cancelled on request before it finished.
    Cancelled,
}

impl ExecutionStatus {
    /// Every status.
    pub const ALL: [Self; 4] = [Self::Running, Self::Completed, Self::Failed, Self::Cancelled];

    /// The stored and shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parses a name.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == value)
    }

    /// Whether it has finished for good.
    pub fn is_terminal(self) -> bool {
        self != Self::Running
    }
}

impl fmt::Display for ExecutionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happens to an execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutionEvent {
    /// Its last step completed.
    Complete,
    /// A step failed.
    Fail,
    /// A caller cancelled it.
    Cancel,
}

impl ExecutionEvent {
    /// Every event.
    pub const ALL: [Self; 3] = [Self::Complete, Self::Fail, Self::Cancel];

    /// The event's name, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Fail => "fail",
            Self::Cancel => "cancel",
        }
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

/// Where one step of an execution stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepStatus {
    /// Not started yet.
    Pending,
    /// Running.
    Running,
    /// Produced its output.
    Completed,
    /// Failed (its error says why); the execution fails with it.
    Failed,
    /// Never ran: the execution ended (failed or was cancelled) before it.
    Skipped,
}

impl StepStatus {
    /// Every status.
    pub const ALL: [Self; 5] = [Self::Pending, Self::Running, Self::Completed, Self::Failed, Self::Skipped];

    /// The stored and shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
        }
    }

    /// Parses a name.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == value)
    }

    /// Whether it has finished for good.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Skipped)
    }
}

impl fmt::Display for StepStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happens to a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepEvent {
    /// Its turn came.
    Start,
    /// It produced its output.
    Complete,
    /// It failed.
    Fail,
    /// The execution ended before its turn.
    Skip,
}

impl StepEvent {
    /// Every event.
    pub const ALL: [Self; 4] = [Self::Start, Self::Complete, Self::Fail, Self::Skip];

    /// The event's name, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Complete => "complete",
            Self::Fail => "fail",
            Self::Skip => "skip",
        }
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

/// One execution (run) of a workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
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
    /// Why it failed.
    pub error: Option<String>,
    /// What started it.
    pub origin: ExecutionOrigin,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it finished.
    pub finished_at: Option<DateTime<Utc>>,
    /// One result per step, in the workflow's order.
    pub steps: Vec<StepResult>,
}

/// What started an execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutionOrigin {
    /// `POST /workflows/{id}/execute`.
    Api,
    /// A call to a trigger URL.
    Trigger(TriggerId),
    /// An event at an integration's receiver.
    Integration(IntegrationId),
}

impl ExecutionOrigin {
    /// The stored and shown kind: `api`, `trigger` or `integration`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::Trigger(_) => "trigger",
            Self::Integration(_) => "integration",
        }
    }

    /// The trigger's or integration's id.
    pub fn source_id(&self) -> Option<&str> {
        match self {
            Self::Api => None,
            Self::Trigger(id) => Some(id.as_str()),
            Self::Integration(id) => Some(id.as_str()),
        }
    }

    /// Reads a stored kind and source id back.
    pub fn parse(kind: &str, source_id: Option<String>) -> Option<Self> {
        match (kind, source_id) {
            ("api", _) => Some(Self::Api),
            ("trigger", Some(id)) => Some(Self::Trigger(TriggerId::from_string(id))),
            ("integration", Some(id)) => Some(Self::Integration(IntegrationId::from_string(id))),
            _ => None,
        }
    }
}

/// Whose authority an execution's steps act with: the user who started it (for a trigger or
/// an integration, the user who created it) with the role they had then. Steps check their
/// permissions against this role, as the same user's requests would; an API key's scopes
/// govern only what the key may start (`workflows:execute`), not what the workflow's saved
/// steps do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    /// The user.
    pub user_id: UserId,
    /// Their role in the execution's tenant.
    pub role: Role,
}

/// What one step of an execution did.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
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
    pub fn pending(step: &Step) -> Self {
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
}

/// A webhook trigger: a call to its URL (`/api/v1/webhooks/trigger/<path>`) executes its
/// workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct Trigger {
    /// Its id.
    pub id: TriggerId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The workflow it executes.
    pub workflow_id: WorkflowId,
    /// The opaque token of its URL.
    pub path: String,
    /// Its name.
    pub name: String,
    /// The methods it accepts, upper case, without repeats.
    pub allowed_methods: Vec<String>,
    /// The secret a call presents (or signs with), sealed; shown only at creation.
    pub secret: SealedSecret,
    /// Whether calls are accepted.
    pub is_active: bool,
    /// Calls that started an execution.
    pub trigger_count: u64,
    /// Whose authority the executions it starts act with: its creator's.
    pub run_as: RunAs,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

impl Trigger {
    /// Whether it accepts `method` (exact, upper case: HTTP methods are case-sensitive).
    pub fn allows(&self, method: &str) -> bool {
        self.allowed_methods.iter().any(|m| m == method)
    }

    /// The value of the `Allow` header of a `405` answer: `GET, POST`.
    pub fn allow_header(&self) -> String {
        self.allowed_methods.join(", ")
    }
}

/// Checks a trigger's `allowed_methods`: at least one, each one of [`TRIGGER_METHODS`] in any
/// case; returned upper case without repeats, in the order given.
///
/// # Errors
/// [`FieldErrorKind::TooShort`] for an empty list, [`FieldErrorKind::InvalidValue`] naming
/// `allowed_methods[i]` for the first method that is not allowed.
pub fn check_allowed_methods(raw: &[String]) -> Result<Vec<String>, FieldError> {
    if raw.is_empty() {
        return Err(FieldError::new(
            "allowed_methods",
            FieldErrorKind::TooShort,
            "allowed_methods must list at least one method",
        ));
    }
    let mut methods: Vec<String> = Vec::with_capacity(raw.len());
    for (i, name) in raw.iter().enumerate() {
        let method = HttpMethod::parse(name).filter(|m| TRIGGER_METHODS.contains(m)).ok_or_else(|| {
            let allowed: Vec<&str> = TRIGGER_METHODS.iter().map(|m| m.as_str()).collect();
            FieldError::new(
                format!("allowed_methods[{i}]"),
                FieldErrorKind::InvalidValue,
                format!("{name:?} is not an allowed method; expected one of: {}", allowed.join(", ")),
            )
        })?;
        if !methods.iter().any(|m| m == method.as_str()) {
            methods.push(method.as_str().to_owned());
        }
    }
    Ok(methods)
}

/// The kind of service an inbound integration receives events from; each has its receiver at
/// `/api/v1/webhooks/integrations/<kind>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntegrationKind {
    /// Team chat events and slash commands.
    Chat,
    /// Repository events.
    CodeHost,
    /// Issue events.
    IssueTracker,
    /// Issue events of a second tracker.
    IssueTracker2,
    /// Incident events.
    Incident,
    /// Page events.
    Wiki,
}

impl IntegrationKind {
    /// Every kind.
    pub const ALL: [Self; 6] =
        [Self::Chat, Self::CodeHost, Self::IssueTracker, Self::IssueTracker2, Self::Incident, Self::Wiki];

    /// The stored and shown name, also the receiver's path segment.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::CodeHost => "code-host",
            Self::IssueTracker => "issue-tracker",
            Self::IssueTracker2 => "issue-tracker-2",
            Self::Incident => "incident",
            Self::Wiki => "wiki",
        }
    }

    /// Parses a name.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == value)
    }

    /// Parses a request's `kind`.
    ///
    /// # Errors
    /// [`FieldErrorKind::InvalidValue`] naming `kind`, listing the kinds.
    pub fn check(value: &str) -> Result<Self, FieldError> {
        Self::parse(value).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|k| k.as_str()).collect();
            FieldError::new(
                "kind",
                FieldErrorKind::InvalidValue,
                format!("unknown kind {value:?}; expected one of: {}", names.join(", ")),
            )
        })
    }
}

impl fmt::Display for IntegrationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An inbound integration: its kind's receiver, called with `?integration_id=<id>`, verifies
/// the sender's signature and executes the workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct Integration {
    /// Its id.
    pub id: IntegrationId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// Which receiver.
    pub kind: IntegrationKind,
    /// Its name.
    pub name: String,
    /// The workflow an event executes.
    pub workflow_id: WorkflowId,
    /// The secret the sender signs with, sealed.
    pub signing_secret: SealedSecret,
    /// Whose authority the executions it starts act with: its creator's.
    pub run_as: RunAs,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_execution_transition_is_as_drawn() {
        for from in ExecutionStatus::ALL {
            for event in ExecutionEvent::ALL {
                let expected = match (from, event) {
                    (ExecutionStatus::Running, ExecutionEvent::Complete) => Some(ExecutionStatus::Completed),
                    (ExecutionStatus::Running, ExecutionEvent::Fail) => Some(ExecutionStatus::Failed),
                    (ExecutionStatus::Running, ExecutionEvent::Cancel) => Some(ExecutionStatus::Cancelled),
                    _ => None,
                };
                match (transition(from, event), expected) {
                    (Ok(to), Some(want)) => assert_eq!(to, want, "{from} + {}", event.as_str()),
                    (Err(e), None) => {
                        assert!(from.is_terminal());
                        assert_eq!((e.from, e.event), (from.as_str(), event.as_str()));
                    }
                    (got, want) => panic!("{from} + {}: got {got:?}, want {want:?}", event.as_str()),
                }
            }
        }
        let e = transition(ExecutionStatus::Completed, ExecutionEvent::Cancel).unwrap_err();
        assert_eq!(e.to_string(), "cannot cancel an execution that is completed");
    }

    #[test]
    fn every_step_transition_is_as_drawn() {
        for from in StepStatus::ALL {
            for event in StepEvent::ALL {
                let expected = match (from, event) {
                    (StepStatus::Pending, StepEvent::Start) => Some(StepStatus::Running),
                    (StepStatus::Pending, StepEvent::Skip) => Some(StepStatus::Skipped),
                    (StepStatus::Running, StepEvent::Complete) => Some(StepStatus::Completed),
                    (StepStatus::Running, StepEvent::Fail) => Some(StepStatus::Failed),
                    _ => None,
                };
                assert_eq!(step_transition(from, event).ok(), expected, "{from} + {}", event.as_str());
                if from.is_terminal() {
                    assert!(step_transition(from, event).is_err());
                }
            }
        }
    }

    #[test]
    fn statuses_and_kinds_round_trip_through_their_names() {
        for s in ExecutionStatus::ALL {
            assert_eq!(ExecutionStatus::parse(s.as_str()), Some(s));
        }
        for s in StepStatus::ALL {
            assert_eq!(StepStatus::parse(s.as_str()), Some(s));
        }
        for k in IntegrationKind::ALL {
            assert_eq!(IntegrationKind::parse(k.as_str()), Some(k));
            assert_eq!(IntegrationKind::check(k.as_str()).unwrap(), k);
        }
        let names: Vec<&str> = IntegrationKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ["chat", "code-host", "issue-tracker", "issue-tracker-2", "incident", "wiki"]);
        assert_eq!(ExecutionStatus::parse("Running"), None);
        let e = IntegrationKind::check("slack").unwrap_err();
        assert_eq!((e.field.as_str(), e.kind), ("kind", FieldErrorKind::InvalidValue));
    }

    #[test]
    fn allowed_methods_are_checked_upper_cased_and_deduplicated() {
        let list = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(check_allowed_methods(&list(&["post", "GET", "POST"])).unwrap(), ["POST", "GET"]);
        assert_eq!(
            check_allowed_methods(&list(&["GET", "POST", "PUT", "PATCH", "DELETE"])).unwrap().len(),
            5
        );
        assert_eq!(check_allowed_methods(&[]).unwrap_err().kind, FieldErrorKind::TooShort);
        for bad in ["HEAD", "OPTIONS", "", "P OST"] {
            let e = check_allowed_methods(&list(&["GET", bad])).unwrap_err();
            assert_eq!(
                (e.field.as_str(), e.kind),
                ("allowed_methods[1]", FieldErrorKind::InvalidValue),
                "{bad:?}"
            );
        }
        let trigger = Trigger {
            id: TriggerId::from_string("trg_1"),
            tenant_id: TenantId::from_string("ten_1"),
            workflow_id: WorkflowId::from_string("wf_1"),
            path: "p".into(),
            name: "n".into(),
            allowed_methods: list(&["POST", "GET"]),
            secret: SealedSecret("sealed".into()),
            is_active: true,
            trigger_count: 0,
            run_as: RunAs { user_id: UserId::from_string("usr_1"), role: Role::Member },
            created_at: DateTime::UNIX_EPOCH,
        };
        assert!(trigger.allows("POST") && trigger.allows("GET"));
        assert!(!trigger.allows("post") && !trigger.allows("PUT"));
        assert_eq!(trigger.allow_header(), "POST, GET");
    }

    #[test]
    fn names_and_descriptions_are_checked() {
        assert_eq!(check_name("  Nightly digest ").unwrap(), "Nightly digest");
        assert_eq!(check_name("   ").unwrap_err().kind, FieldErrorKind::TooShort);
        assert_eq!(check_name(&"x".repeat(MAX_NAME_CHARS + 1)).unwrap_err().kind, FieldErrorKind::TooLong);
        assert!(check_name(&"é".repeat(MAX_NAME_CHARS)).is_ok());
        assert_eq!(check_name("a\nb").unwrap_err().kind, FieldErrorKind::InvalidFormat);
        assert_eq!(check_name("").unwrap_err().field, "name");
        assert_eq!(check_description("line\nline".into()).unwrap().as_deref(), Some("line\nline"));
        assert_eq!(check_description("  ".into()).unwrap(), None);
        let e = check_description("x".repeat(MAX_DESCRIPTION_CHARS + 1)).unwrap_err();
        assert_eq!((e.field.as_str(), e.kind), ("description", FieldErrorKind::TooLong));
    }
}

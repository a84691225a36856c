//! Workflows, webhook triggers and integrations, and the validation of what a request may set
//! on them. Executions and their state machines are [`execution_state`](super::execution_state).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::steps::{HttpMethod, Step, steps_to_json};
use crate::ids::{IntegrationId, TenantId, TriggerId, UserId, WorkflowId};
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
        let method =
            HttpMethod::parse_any_case(name).filter(|m| TRIGGER_METHODS.contains(m)).ok_or_else(|| {
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

crate::string_enum! {
    /// The kind of service an inbound integration receives events from; each has its receiver at
    /// `/api/v1/webhooks/integrations/<kind>`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum IntegrationKind {
        /// Team chat events and slash commands.
        Chat => "chat",
        /// Repository events.
        CodeHost => "code-host",
        /// Issue events.
        IssueTracker => "issue-tracker",
        /// Issue events of a second tracker.
        IssueTracker2 => "issue-tracker-2",
        /// Incident events.
        Incident => "incident",
        /// Page events.
        Wiki => "wiki",
    }
}

impl IntegrationKind {
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
    fn kinds_round_trip_through_their_names() {
        for k in IntegrationKind::ALL {
            assert_eq!(IntegrationKind::parse(k.as_str()), Some(k));
            assert_eq!(IntegrationKind::check(k.as_str()).unwrap(), k);
        }
        let names: Vec<&str> = IntegrationKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ["chat", "code-host", "issue-tracker", "issue-tracker-2", "incident", "wiki"]);
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

//! Route handlers, one module per area. Handlers are thin: parse, convert to domain types, call
//! one service method, map the result.

pub mod agents;
pub mod api_keys;
pub mod auth;
pub mod automations;
pub mod billing;
pub mod chat;
pub mod executions;
pub mod health;
pub mod integrations;
pub mod knowledge;
pub mod mcp;
pub mod mcp_servers;
pub mod memory;
pub mod openai;
pub mod pages;
pub mod recovery;
pub mod schedules;
mod step_outputs;
pub mod team;
pub mod triggers;
pub mod webhooks;
pub mod workflows;

use agentry_domain::patch::Patch;
use agentry_domain::validation::{Checked, FieldError, FieldErrorKind, Validator};

/// An execution's `input`: a JSON object (what `/execute` and a schedule start workflows with).
pub(crate) fn input_object(
    raw: serde_json::Value,
) -> Result<serde_json::Map<String, serde_json::Value>, FieldError> {
    match raw {
        serde_json::Value::Object(map) => Ok(map),
        _ => Err(FieldError::new("input", FieldErrorKind::InvalidType, "input must be an object")),
    }
}

// The fields of a partial update (PATCH), shared by the routes that take one.

/// A field that may be set but never cleared.
pub(crate) fn not_null<T, U>(
    v: &mut Validator,
    field: &str,
    patch: Patch<T>,
    parse: impl FnOnce(T) -> Result<U, FieldError>,
) -> Checked<Option<U>> {
    match patch {
        Patch::Absent => v.check(field, Ok(None)),
        Patch::Null => v.check(
            field,
            Err(FieldError::new(field, FieldErrorKind::InvalidType, format!("{field} cannot be null"))),
        ),
        Patch::Value(value) => v.check(field, parse(value).map(Some)),
    }
}

/// A field that may be cleared.
pub(crate) fn nullable<T, U>(
    v: &mut Validator,
    field: &str,
    patch: Patch<T>,
    parse: impl FnOnce(T) -> Result<U, FieldError>,
) -> Checked<Patch<U>> {
    match patch {
        Patch::Absent => v.check(field, Ok(Patch::Absent)),
        Patch::Null => v.check(field, Ok(Patch::Null)),
        Patch::Value(value) => v.check(field, parse(value).map(Patch::Value)),
    }
}

//! Reading one step with the API's decoder ([`crate::decode`]): `id`, `type`,
//! `timeout_seconds` and how it leads on (`retry`, `on_error`, `next`) first, then the parameters of the step's kind as that kind's struct (so
//! that paths survive: serde loses them in an internally tagged enum), every refusal of the
//! step at its path (`steps[2].url`), in the order of the step's fields.

use serde_json::{Map, Value};

pub(super) use crate::decode::{Fault, fault, field_names, missing};
use crate::decode::{Object, Refusal, read, read_fields};

use super::condition::ConditionStep;
use super::flow::{OnError, RetryPolicy};
use super::wait::WaitStep;
use super::{
    AgentChatStep, HttpRequestStep, KnowledgeSearchStep, MemoryAddStep, MemorySearchStep, Step, StepId,
    StepKind, StepType, TimeoutSeconds, TransformStep, references,
};
use crate::validation::{FieldError, FieldErrorKind};

/// The fields every step has besides its kind's parameters, in the order they are reported.
const COMMON_FIELDS: [&str; 6] = ["id", "type", "timeout_seconds", "retry", "on_error", "next"];

/// Reads step `index` of a list whose ids (as written) are `ids`.
///
/// # Errors
/// Every refusal of the step, in the order of its fields: `id`, `type`, `timeout_seconds`, its
/// kind's parameters in the order the kind declares them, then unknown ones.
pub(super) fn step(index: usize, item: &Value, ids: &[Option<&str>]) -> Result<Step, Vec<FieldError>> {
    let at = format!("steps[{index}]");
    let Value::Object(object) = item else {
        return Err(vec![FieldError::new(
            &at,
            FieldErrorKind::InvalidType,
            format!("{at} must be an object"),
        )]);
    };
    let mut params = object.clone();
    let mut take = |name: &str| params.remove(name).unwrap_or(Value::Null);
    let (id, step_type, timeout) = (take("id"), take("type"), take("timeout_seconds"));
    let (retry, on_error, next) = (take("retry"), take("on_error"), take("next"));
    let mut refused: Vec<Refusal> = Vec::new();
    let id = read::<StepId>(&id, &at, "id")
        .and_then(|id| {
            let earlier = &ids[..index];
            if earlier.contains(&Some(id.as_str())) {
                let field = format!("{at}.id");
                let message =
                    format!("{field}: step id {:?} is used by an earlier step; ids must be unique", id.0);
                let error = FieldError::new(field, FieldErrorKind::InvalidValue, message);
                return Err(Refusal { field: Some("id".to_owned()), missing: false, error });
            }
            Ok(id)
        })
        .map_err(|r| refused.push(r))
        .ok();
    let step_type = read::<StepType>(&step_type, &at, "type").map_err(|r| refused.push(r)).ok();
    let timeout_seconds =
        read::<Option<TimeoutSeconds>>(&timeout, &at, "timeout_seconds").map_err(|r| refused.push(r)).ok();
    let retry = read::<Option<Object<RetryPolicy>>>(&retry, &at, "retry")
        .map(|r| r.map(|o| o.0))
        .map_err(|r| refused.push(r))
        .ok();
    let on_error = read::<Option<OnError>>(&on_error, &at, "on_error").map_err(|r| refused.push(r)).ok();
    let next = read::<Option<StepId>>(&next, &at, "next").map_err(|r| refused.push(r)).ok();
    let kind = step_type.and_then(|step_type| {
        let (kind, passed) = kind(step_type, params, &at, &mut refused);
        for error in references::check(&at, &passed, index, ids) {
            refused.push(Refusal { field: top_field(&at, &error.field), missing: false, error });
        }
        kind
    });
    if !refused.is_empty() {
        let order: Vec<&str> = COMMON_FIELDS
            .iter()
            .copied()
            .chain(step_type.map_or(&[][..], StepType::parameters).iter().copied())
            .collect();
        let rank = |r: &Refusal| {
            r.field.as_deref().and_then(|f| order.iter().position(|o| *o == f)).unwrap_or(order.len())
        };
        refused.sort_by_key(rank);
        return Err(refused.into_iter().map(|r| r.error).collect());
    }
    match (id, kind, timeout_seconds, retry, on_error, next) {
        (Some(id), Some(kind), Some(timeout_seconds), Some(retry), Some(on_error), Some(next)) => {
            Ok(Step { id, timeout_seconds, retry, on_error, next, kind })
        }
        // Each is None only after a refusal; never a step left out without one.
        _ => Err(vec![FieldError::new(&at, FieldErrorKind::InvalidValue, format!("{at} could not be read"))]),
    }
}

/// The top-level field of a step that `field` (a full path) names.
fn top_field(at: &str, field: &str) -> Option<String> {
    let rest = field.strip_prefix(at)?.strip_prefix('.')?;
    let end = rest.find(['.', '[']).unwrap_or(rest.len());
    Some(rest[..end].to_owned())
}

/// Reads the parameters of a step of `step_type`, pushing every refusal; returns the kind when
/// none was refused, and the parameters that passed.
fn kind(
    step_type: StepType,
    params: Map<String, Value>,
    at: &str,
    refused: &mut Vec<Refusal>,
) -> (Option<StepKind>, Map<String, Value>) {
    let takes = format!(
        " for step type {step_type}; it takes: {} (and timeout_seconds, retry, on_error, next)",
        step_type.parameters().join(", ")
    );
    fn read_as<T: serde::de::DeserializeOwned>(
        params: Map<String, Value>,
        at: &str,
        takes: &str,
        refused: &mut Vec<Refusal>,
        wrap: fn(T) -> StepKind,
    ) -> (Option<StepKind>, Map<String, Value>) {
        let (read, passed) = read_fields::<T>(params, at, takes, refused);
        (read.map(wrap), passed)
    }
    match step_type {
        StepType::Transform => read_as::<TransformStep>(params, at, &takes, refused, StepKind::Transform),
        StepType::AgentChat => read_as::<AgentChatStep>(params, at, &takes, refused, StepKind::AgentChat),
        StepType::HttpRequest => {
            read_as::<HttpRequestStep>(params, at, &takes, refused, StepKind::HttpRequest)
        }
        StepType::MemorySearch => {
            read_as::<MemorySearchStep>(params, at, &takes, refused, StepKind::MemorySearch)
        }
        StepType::MemoryAdd => read_as::<MemoryAddStep>(params, at, &takes, refused, StepKind::MemoryAdd),
        StepType::KnowledgeSearch => {
            read_as::<KnowledgeSearchStep>(params, at, &takes, refused, StepKind::KnowledgeSearch)
        }
        StepType::Condition => read_as::<ConditionStep>(params, at, &takes, refused, StepKind::Condition),
        StepType::Wait => {
            let (read, passed) = read_fields::<WaitStep>(params, at, &takes, refused);
            let read = read.and_then(|wait| match wait.check() {
                Ok(()) => Some(StepKind::Wait(wait)),
                Err(message) => {
                    let field = format!("{at}.seconds");
                    let error =
                        FieldError::new(&field, FieldErrorKind::InvalidValue, format!("{field}: {message}"));
                    refused.push(Refusal { field: Some("seconds".to_owned()), missing: false, error });
                    None
                }
            });
            (read, passed)
        }
    }
}

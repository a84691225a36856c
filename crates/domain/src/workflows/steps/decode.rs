//! Reading one step with serde and reporting its refusals as the API does: each a
//! [`FieldError`] with its kind, named by its path (`steps[2].url`,
//! `steps[0].headers.Accept`), several for one step at once.
//!
//! Three things serde does not do by itself are done here:
//!
//! - **Kinds.** serde's errors are text. A parameter's own `Deserialize` refuses with a
//!   [`Fault`], whose kind travels ahead of its message in that text and is taken off again by
//!   [`refusal`]; serde's own refusals (a missing or unknown field, a wrong JSON type) are
//!   recognised by their wording.
//! - **Paths.** `serde_path_to_error` tracks the path of an error, but not through an internally
//!   tagged enum (it buffers the object; dtolnay/path-to-error#1). So `type` is read first and
//!   the parameters are deserialised as that kind's struct directly.
//! - **Every refusal of a step.** serde stops at the first error. After each one, the parameter
//!   it concerns is set aside and the others are read again, up to [`MAX_REFUSALS`] times; the
//!   refusals are then put in the order of the step's fields.

use std::fmt::Display;

use serde::de::{self, DeserializeOwned, Visitor};
use serde_json::{Map, Value};
use serde_path_to_error::Segment;

use super::{
    AgentChatStep, HttpRequestStep, MemoryAddStep, MemorySearchStep, Step, StepId, StepKind, StepType,
    TimeoutSeconds, TransformStep, references,
};
use crate::validation::{FieldError, FieldErrorKind};

/// Most refusals reported for one step.
const MAX_REFUSALS: usize = 20;

/// The fields every step has besides its kind's parameters, in the order they are reported.
const COMMON_FIELDS: [&str; 3] = ["id", "type", "timeout_seconds"];

/// Separates the kind of a [`Fault`] from its message in a serde error's text. serde's own
/// messages never start with it.
const KIND_MARK: char = '\u{1F}';

/// A value refused inside a `Deserialize` impl: the kind of the field error it becomes, and
/// what is wrong with it (the path is put before it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fault {
    kind: FieldErrorKind,
    message: String,
}

impl Fault {
    pub(super) fn new(kind: FieldErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// The fault as the error of whatever deserialiser reads the value.
    pub(super) fn raise<E: de::Error>(self) -> E {
        E::custom(format_args!("{KIND_MARK}{}{KIND_MARK}{}", self.kind.code(), self.message))
    }
}

/// A refusal of `kind` as the error of whatever deserialiser reads the value.
pub(super) fn fault<E: de::Error>(kind: FieldErrorKind, message: impl Display) -> E {
    Fault::new(kind, message.to_string()).raise()
}

/// The refusal of a required value given as `null`: it counts as absent.
pub(super) fn missing<E: de::Error>() -> E {
    fault(FieldErrorKind::MissingRequiredField, "is required")
}

/// The kind whose code is `code`.
fn kind_of(code: &str) -> Option<FieldErrorKind> {
    use FieldErrorKind::*;
    [MissingRequiredField, InvalidType, InvalidFormat, TooShort, TooLong, OutOfRange, InvalidValue]
        .into_iter()
        .find(|k| k.code() == code)
}

/// One refused field of a step.
#[derive(Debug)]
struct Refusal {
    /// The top-level field of the step it concerns (`headers` for `headers.Accept`).
    field: Option<String>,
    /// Whether serde found that field missing.
    missing: bool,
    error: FieldError,
}

/// `serde`'s error at `path` (within the step at `at`) as the field error the API reports.
/// `step_type` names the kind whose parameters were read, for an unknown parameter's message.
fn refusal(
    at: &str,
    error: serde_path_to_error::Error<serde_json::Error>,
    step_type: Option<StepType>,
) -> Refusal {
    let mut path = at.to_owned();
    let mut field = None;
    for segment in error.path() {
        match segment {
            Segment::Seq { index } => path.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                field.get_or_insert_with(|| key.clone());
                path = child(&path, key);
            }
            Segment::Unknown => path = child(&path, "?"),
        }
    }
    let message = error.into_inner().to_string();
    let error = |kind, message: String| FieldError::new(path.clone(), kind, message);
    if let Some((code, message)) = message.strip_prefix(KIND_MARK).and_then(|m| m.split_once(KIND_MARK)) {
        let kind = kind_of(code).unwrap_or(FieldErrorKind::InvalidValue);
        let missing = kind == FieldErrorKind::MissingRequiredField;
        let error = if missing {
            FieldError::missing(path.clone())
        } else {
            error(kind, format!("{path}: {message}"))
        };
        return Refusal { field, missing, error };
    }
    // serde names a missing field at the object that lacks it.
    if let Some(name) = message.strip_prefix("missing field `").and_then(|m| m.split('`').next()) {
        return Refusal {
            field: Some(field.unwrap_or_else(|| name.to_owned())),
            missing: true,
            error: FieldError::missing(child(&path, name)),
        };
    }
    if let Some(name) = message.strip_prefix("unknown field `").and_then(|m| m.split('`').next()) {
        let takes = step_type.map_or_else(String::new, |t| {
            format!(" for step type {t}; it takes: {} (and timeout_seconds)", t.parameters().join(", "))
        });
        let message = format!("{path}: unknown parameter {name:?}{takes}");
        return Refusal { field, missing: false, error: error(FieldErrorKind::InvalidValue, message) };
    }
    if let Some((unexpected, expected)) =
        message.strip_prefix("invalid type: ").and_then(|m| m.split_once(", expected "))
    {
        let message = format!("{path} must be {expected}, not {}", json_kind(unexpected));
        return Refusal { field, missing: false, error: error(FieldErrorKind::InvalidType, message) };
    }
    Refusal {
        field,
        missing: false,
        error: error(FieldErrorKind::InvalidValue, format!("{path}: {message}")),
    }
}

/// The JSON name of what serde's `Unexpected` describes (`integer `5`` is a number).
fn json_kind(unexpected: &str) -> &str {
    let kinds = [
        ("boolean", "a boolean"),
        ("integer", "a number"),
        ("floating point", "a number"),
        ("string", "a string"),
        ("sequence", "an array"),
        ("map", "an object"),
        ("unit value", "null"),
        ("null", "null"),
    ];
    kinds.iter().find(|(prefix, _)| unexpected.starts_with(prefix)).map_or(unexpected, |(_, kind)| kind)
}

/// `path.key`, or `key` at the top.
fn child(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

/// Deserialises `value` as `T`; a refusal names `field` within the step at `at`.
fn read<T: DeserializeOwned>(value: &Value, at: &str, field: &str) -> Result<T, Refusal> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let mut r = refusal(&child(at, field), e, None);
        r.field = Some(field.to_owned());
        r
    })
}

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
    match (id, kind, timeout_seconds) {
        (Some(id), Some(kind), Some(timeout_seconds)) => Ok(Step { id, timeout_seconds, kind }),
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
    match step_type {
        StepType::Transform => {
            read_params::<TransformStep>(params, at, step_type, refused, StepKind::Transform)
        }
        StepType::AgentChat => {
            read_params::<AgentChatStep>(params, at, step_type, refused, StepKind::AgentChat)
        }
        StepType::HttpRequest => {
            read_params::<HttpRequestStep>(params, at, step_type, refused, StepKind::HttpRequest)
        }
        StepType::MemorySearch => {
            read_params::<MemorySearchStep>(params, at, step_type, refused, StepKind::MemorySearch)
        }
        StepType::MemoryAdd => {
            read_params::<MemoryAddStep>(params, at, step_type, refused, StepKind::MemoryAdd)
        }
    }
}

/// Deserialises `params` as `T`, setting aside each parameter refused and reading the rest
/// again, so that every refused parameter is reported.
fn read_params<T: DeserializeOwned>(
    params: Map<String, Value>,
    at: &str,
    step_type: StepType,
    refused: &mut Vec<Refusal>,
    wrap: fn(T) -> StepKind,
) -> (Option<StepKind>, Map<String, Value>) {
    let mut value = Value::Object(params);
    let mut set_aside: Vec<String> = Vec::new();
    let start = refused.len();
    loop {
        let error = match serde_path_to_error::deserialize::<_, T>(&value) {
            Ok(params) => {
                let kind = (refused.len() == start).then(|| wrap(params));
                return (kind, into_map(value));
            }
            Err(error) => refusal(at, error, Some(step_type)),
        };
        let field = error.field.clone();
        // A parameter set aside is then missing: it has been reported already.
        if error.missing && field.as_ref().is_some_and(|f| set_aside.contains(f)) {
            break;
        }
        refused.push(error);
        let removed = match (&field, &mut value) {
            (Some(f), Value::Object(map)) => map.remove(f).is_some(),
            _ => false,
        };
        if !removed || refused.len() - start >= MAX_REFUSALS {
            break;
        }
        set_aside.extend(field);
    }
    (None, into_map(value))
}

fn into_map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The field names serde's derive declares for `T` (what it tells `deserialize_struct`),
/// found by asking `T` to deserialise itself from a deserializer that only notes them.
pub(super) fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Names(&'static [&'static str]);
    impl<'de> de::Deserializer<'de> for &mut Names {
        type Error = de::value::Error;
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = fields;
            Err(de::Error::custom("noted"))
        }
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut names = Names(&[]);
    let _ = T::deserialize(&mut names);
    names.0
}

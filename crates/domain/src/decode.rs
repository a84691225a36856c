//! Reading a JSON object of the API with serde and reporting its refusals as the API does:
//! each a [`FieldError`] with its kind, named by its path (`steps[2].url`,
//! `config.tools[1].allowed_hosts[0]`), several for one object at once. Workflow steps and
//! agents' tools are read with it.
//!
//! Three things serde does not do by itself are done here:
//!
//! - **Kinds.** serde's errors are text. A field's own `Deserialize` refuses with a [`Fault`],
//!   whose kind travels ahead of its message in that text and is taken off again by
//!   [`refusal`]; serde's own refusals (a missing or unknown field, a wrong JSON type) are
//!   recognised by their wording.
//! - **Paths.** `serde_path_to_error` tracks the path of an error, but not through an internally
//!   tagged enum (it buffers the object; dtolnay/path-to-error#1). So a caller reads `type`
//!   first and deserialises the fields as that kind's struct directly ([`read_fields`]).
//! - **Every refusal of an object.** serde stops at the first error. After each one, the field it
//!   concerns is set aside and the others are read again, up to [`MAX_REFUSALS`] times.

use std::fmt::Display;

use serde::de::{self, DeserializeOwned, Visitor};
use serde_json::{Map, Value};
use serde_path_to_error::Segment;

use crate::validation::{FieldError, FieldErrorKind};

/// Most refusals reported for one object.
pub const MAX_REFUSALS: usize = 20;

/// Separates the kind of a [`Fault`] from its message in a serde error's text. serde's own
/// messages never start with it.
const KIND_MARK: char = '\u{1F}';

/// A value refused inside a `Deserialize` impl: the kind of the field error it becomes, and
/// what is wrong with it (the path is put before it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    kind: FieldErrorKind,
    message: String,
}

impl Fault {
    pub fn new(kind: FieldErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// What is wrong with the value.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The fault as the error of whatever deserialiser reads the value.
    pub fn raise<E: de::Error>(self) -> E {
        E::custom(format_args!("{KIND_MARK}{}{KIND_MARK}{}", self.kind.code(), self.message))
    }
}

/// A refusal of `kind` as the error of whatever deserialiser reads the value.
pub fn fault<E: de::Error>(kind: FieldErrorKind, message: impl Display) -> E {
    Fault::new(kind, message.to_string()).raise()
}

/// A `T` read only from a JSON object: serde's derived `Deserialize` also reads a struct from an
/// array of its fields in order (`[3, 2]` as `{max_attempts: 3, backoff_seconds: 2}`), which the
/// API refuses as the wrong type.
#[derive(Debug, Clone, PartialEq)]
pub struct Object<T>(pub T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> Visitor<'de> for Fields<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Object<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Object)
            }
        }
        deserializer.deserialize_map(Fields(std::marker::PhantomData))
    }
}

/// The refusal of a required value given as `null`: it counts as absent.
pub fn missing<E: de::Error>() -> E {
    fault(FieldErrorKind::MissingRequiredField, "is required")
}

/// The kind whose code is `code`.
fn kind_of(code: &str) -> Option<FieldErrorKind> {
    use FieldErrorKind::*;
    [MissingRequiredField, InvalidType, InvalidFormat, TooShort, TooLong, OutOfRange, InvalidValue]
        .into_iter()
        .find(|k| k.code() == code)
}

/// One refused field of an object.
#[derive(Debug)]
pub struct Refusal {
    /// The top-level field of the object it concerns (`headers` for `headers.Accept`).
    pub field: Option<String>,
    /// Whether serde found that field missing.
    pub missing: bool,
    /// The refusal as the API reports it.
    pub error: FieldError,
}

/// `serde`'s error at `path` (within the object at `at`) as the field error the API reports.
/// `takes` ends an unknown field's message (what the object's kind takes instead).
pub fn refusal(at: &str, error: serde_path_to_error::Error<serde_json::Error>, takes: &str) -> Refusal {
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
pub fn child(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

/// Deserialises `value` as `T`; a refusal names `field` within the object at `at`.
///
/// # Errors
/// The refusal.
pub fn read<T: DeserializeOwned>(value: &Value, at: &str, field: &str) -> Result<T, Refusal> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let mut r = refusal(&child(at, field), e, "");
        r.field = Some(field.to_owned());
        r
    })
}

/// Deserialises `fields` (of the object at `at`) as `T`, setting aside each field refused and
/// reading the rest again, so that every refused field is pushed to `refused`; `takes` ends an
/// unknown field's message. Returns `T` when none was refused, and the fields that passed.
pub fn read_fields<T: DeserializeOwned>(
    fields: Map<String, Value>,
    at: &str,
    takes: &str,
    refused: &mut Vec<Refusal>,
) -> (Option<T>, Map<String, Value>) {
    let mut value = Value::Object(fields);
    let mut set_aside: Vec<String> = Vec::new();
    let start = refused.len();
    loop {
        let error = match serde_path_to_error::deserialize::<_, T>(&value) {
            Ok(read) => {
                let read = (refused.len() == start).then_some(read);
                return (read, into_map(value));
            }
            Err(error) => refusal(at, error, takes),
        };
        let field = error.field.clone();
        // A field set aside is then missing: it has been reported already.
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
pub fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
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

impl Fault {
    /// A value object's refusal (made with the name `value`, as `check_length(raw, 1, 9,
    /// "value")` makes it) as a fault, its path put before it when it is reported.
    pub fn of(error: FieldError) -> Self {
        let message = error.message.strip_prefix("value ").unwrap_or(&error.message).to_owned();
        Self::new(error.kind, message)
    }
}

/// Deserialises a value by checking it as JSON: `null` counts as absent (a required value given
/// as `null` is missing), anything else is `check`ed, whose [`Fault`] keeps its kind. For the
/// fields of the API's objects that are simpler to check whole than to visit.
///
/// # Errors
/// The refusal, as the deserialiser's error.
pub fn checked<'de, D, T>(
    deserializer: D,
    check: impl FnOnce(Value) -> Result<T, Fault>,
) -> Result<T, D::Error>
where
    D: de::Deserializer<'de>,
{
    let value = <Value as serde::Deserialize>::deserialize(deserializer)?;
    if value.is_null() {
        return Err(missing());
    }
    check(value).map_err(Fault::raise)
}

/// The text `value` holds, or a fault: it must be a string.
///
/// # Errors
/// [`FieldErrorKind::InvalidType`] when it is not a string.
pub fn text(value: Value) -> Result<String, Fault> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(Fault::new(
            FieldErrorKind::InvalidType,
            format!("must be a string, not {}", json_type(&other)),
        )),
    }
}

/// The JSON name of a value's type.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

//! Steps: the five step kinds and their typed parameters, how a workflow's steps are read when
//! it is saved (or loaded), and the typed [`StepAction`] a step becomes once its templates are
//! rendered.
//!
//! A step is a JSON object `{id, type, timeout_seconds?, retry?, on_error?, next?, …parameters}`
//! (how a step leads on: [`flow`]):
//!
//! | type | parameters | output |
//! |---|---|---|
//! | `transform` | `output` (any JSON) | the rendered `output` |
//! | `agent_chat` | `agent_id`, `message`, `session_id?` | `{content, usage, session_id}` |
//! | `http_request` | `method`, `url`, `headers?`, `body?` | `{status, headers, body}` |
//! | `memory_search` | `query`, `agent_id?`, `memory_type?`, `top_k?` | `{results}` |
//! | `memory_add` | `content`, `memory_type`, `agent_id?`, `metadata?` | the entry |
//! | `condition` | `cases` (`[{when, next}]`), `default?` | `{case, next}` ([`condition`]) |
//! | `wait` | `seconds` or `until` | `{waited_until}` ([`wait`]) |
//!
//! Each kind is a struct of typed parameters ([`params`]): every string in them is a
//! [`Template`], checked to parse when read; a parameter that takes an object or a number
//! (`headers`, `metadata`, `top_k`) also takes a template rendering to one. Saving a workflow
//! deserialises its steps ([`validate_steps`]): unknown parameters are refused, and every refusal
//! names its field by its path (`steps[2].url`, `steps[0].headers.Accept`). What only the whole
//! list can tell — unique ids, and templates that read nothing but `input` and the outputs of
//! earlier steps — is checked after. So a mistake a machine can see is refused when the workflow
//! is saved, rather than failing an execution later.
//!
//! A step is stored and shown as the object it was read from (optional parameters given as
//! `null` left out): [`Step`] serialises back to it.

pub mod condition;
mod decode;
pub mod flow;
pub mod params;
mod references;
mod render;
pub mod wait;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, de};
use serde_json::Value;

pub use self::condition::{ConditionCase, ConditionStep, Expression};
pub use self::flow::{OnError, RetryOn, RetryPolicy};
pub use self::params::{Headers, JsonTemplate, Metadata, Template, Text, TextValue, TopK};
pub use self::render::StepAction;
pub use self::wait::{WaitFor, WaitSeconds, WaitStep, WaitTime};
use crate::memory::MemoryType;
use crate::validation::{FieldError, FieldErrorKind};

/// Most steps a workflow may have.
pub const MAX_STEPS: usize = 100;
/// Longest step id, in characters.
pub const MAX_STEP_ID_CHARS: usize = 64;
/// How long a step may run when it does not say.
pub const DEFAULT_STEP_TIMEOUT_SECONDS: u32 = 30;
/// The longest `timeout_seconds` a step may ask for.
pub const MAX_STEP_TIMEOUT_SECONDS: u32 = 300;
/// Largest `top_k` of a `memory_search` step (as `POST /memory/search` allows).
pub const MAX_TOP_K: u32 = 100;

crate::string_enum! {
    /// What a step does: the names a step's `type` gives.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum StepType {
        /// Builds a value from the input and earlier outputs.
        Transform => "transform",
        /// Sends a message to an agent.
        AgentChat => "agent_chat",
        /// Calls an HTTP endpoint.
        HttpRequest => "http_request",
        /// Searches memory.
        MemorySearch => "memory_search",
        /// Adds a memory entry.
        MemoryAdd => "memory_add",
        /// Searches knowledge bases.
        KnowledgeSearch => "knowledge_search",
        /// Chooses the step the execution goes on at.
        Condition => "condition",
        /// Pauses the execution for a while or until a time.
        Wait => "wait",
    }
}

impl StepType {
    /// The parameters a step of this type takes, in the order its kind declares them: the
    /// field names of the kind's struct, as serde reads it.
    pub fn parameters(self) -> &'static [&'static str] {
        match self {
            Self::Transform => decode::field_names::<TransformStep>(),
            Self::AgentChat => decode::field_names::<AgentChatStep>(),
            Self::HttpRequest => decode::field_names::<HttpRequestStep>(),
            Self::MemorySearch => decode::field_names::<MemorySearchStep>(),
            Self::MemoryAdd => decode::field_names::<MemoryAddStep>(),
            Self::KnowledgeSearch => decode::field_names::<KnowledgeSearchStep>(),
            Self::Condition => decode::field_names::<ConditionStep>(),
            Self::Wait => decode::field_names::<WaitStep>(),
        }
    }
}

// Serde by hand rather than `impl Serde;`: an unknown type must be a step fault that lists the
// types and keeps its path (`steps[2].type`), as the other step fields' faults do.
impl Serialize for StepType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StepType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl de::Visitor<'_> for Name {
            type Value = StepType;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<StepType, E> {
                StepType::parse(name).ok_or_else(|| {
                    let names: Vec<&str> = StepType::ALL.iter().map(|t| t.as_str()).collect();
                    decode::fault(
                        FieldErrorKind::InvalidValue,
                        format!("unknown step type {name:?}; expected one of: {}", names.join(", ")),
                    )
                })
            }
            fn visit_unit<E: de::Error>(self) -> Result<StepType, E> {
                Err(decode::missing())
            }
        }
        deserializer.deserialize_any(Name)
    }
}

crate::string_enum! {
    /// The method of an `http_request` step, or one a trigger accepts.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum HttpMethod {
        /// `GET`.
        Get => "GET",
        /// `POST`.
        Post => "POST",
        /// `PUT`.
        Put => "PUT",
        /// `PATCH`.
        Patch => "PATCH",
        /// `DELETE`.
        Delete => "DELETE",
        /// `HEAD`.
        Head => "HEAD",
    }
}

impl HttpMethod {
    /// Parses a name in any case (`get`, `Post`): what a tenant writes in a step or a trigger.
    pub fn parse_any_case(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str().eq_ignore_ascii_case(value))
    }
}

/// A step's id: 1–[`MAX_STEP_ID_CHARS`] characters of letters, digits, `_` and `-`. Later
/// templates read the step's output as `steps.<id>.output`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct StepId(String);

impl StepId {
    /// Checks an id.
    fn parse(raw: &str) -> Result<Self, decode::Fault> {
        let chars = raw.chars().count();
        if chars == 0 {
            return Err(decode::Fault::new(FieldErrorKind::TooShort, "must not be empty"));
        }
        if chars > MAX_STEP_ID_CHARS {
            return Err(decode::Fault::new(
                FieldErrorKind::TooLong,
                format!("must be at most {MAX_STEP_ID_CHARS} characters"),
            ));
        }
        if !raw.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(decode::Fault::new(
                FieldErrorKind::InvalidFormat,
                "must be letters, digits, _ and - only",
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StepId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for StepId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Id;
        impl de::Visitor<'_> for Id {
            type Value = StepId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, raw: &str) -> Result<StepId, E> {
                StepId::parse(raw).map_err(decode::Fault::raise)
            }
            fn visit_unit<E: de::Error>(self) -> Result<StepId, E> {
                Err(decode::missing())
            }
        }
        deserializer.deserialize_any(Id)
    }
}

/// A step's `timeout_seconds`: a whole number from 1 to [`MAX_STEP_TIMEOUT_SECONDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
struct TimeoutSeconds(u32);

impl<'de> Deserialize<'de> for TimeoutSeconds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Seconds;
        impl Seconds {
            fn check<E: de::Error>(seconds: Option<u32>) -> Result<TimeoutSeconds, E> {
                match seconds {
                    Some(s) if (1..=MAX_STEP_TIMEOUT_SECONDS).contains(&s) => Ok(TimeoutSeconds(s)),
                    _ => Err(decode::fault(
                        FieldErrorKind::OutOfRange,
                        format!("must be a whole number from 1 to {MAX_STEP_TIMEOUT_SECONDS}"),
                    )),
                }
            }
        }
        impl de::Visitor<'_> for Seconds {
            type Value = TimeoutSeconds;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<TimeoutSeconds, E> {
                Self::check(u32::try_from(n).ok())
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<TimeoutSeconds, E> {
                Self::check(u32::try_from(n).ok())
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<TimeoutSeconds, E> {
                Self::check(None)
            }
        }
        deserializer.deserialize_any(Seconds)
    }
}

/// A step of a workflow, read and checked (see [`validate_steps`]), its templates unrendered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    id: StepId,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_seconds: Option<TimeoutSeconds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry: Option<RetryPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    on_error: Option<OnError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<StepId>,
    #[serde(flatten)]
    kind: StepKind,
}

impl Step {
    /// Its id, unique in the workflow.
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// What it does, with its parameters.
    pub fn kind(&self) -> &StepKind {
        &self.kind
    }

    /// Its type.
    pub fn step_type(&self) -> StepType {
        self.kind.step_type()
    }

    /// The `timeout_seconds` it gives, if any.
    pub fn timeout_seconds(&self) -> Option<u32> {
        self.timeout_seconds.map(|t| t.0)
    }

    /// How long it may run: its `timeout_seconds`, or [`DEFAULT_STEP_TIMEOUT_SECONDS`].
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(u64::from(self.timeout_seconds().unwrap_or(DEFAULT_STEP_TIMEOUT_SECONDS)))
    }

    /// Its `retry`, if any.
    pub fn retry(&self) -> Option<&RetryPolicy> {
        self.retry.as_ref()
    }

    /// What a failure does (after any retries): its `on_error`, or [`OnError::Fail`].
    pub fn on_error(&self) -> &OnError {
        self.on_error.as_ref().unwrap_or(&OnError::Fail)
    }

    /// The step it leads to when it completes, when it names one (`next`); otherwise the next
    /// in the list.
    pub fn next(&self) -> Option<&str> {
        self.next.as_ref().map(StepId::as_str)
    }

    /// The step as stored and shown: `{id, type, timeout_seconds?, retry?, on_error?, next?,
    /// …parameters}`.
    pub fn to_json(&self) -> Value {
        // Cannot fail: every map a step holds is keyed by strings.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A step's kind and its typed parameters; serialised with its name as `type` beside them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StepKind {
    /// `transform`.
    Transform(TransformStep),
    /// `agent_chat`.
    AgentChat(AgentChatStep),
    /// `http_request`.
    HttpRequest(HttpRequestStep),
    /// `memory_search`.
    MemorySearch(MemorySearchStep),
    /// `memory_add`.
    MemoryAdd(MemoryAddStep),
    /// `knowledge_search`.
    KnowledgeSearch(KnowledgeSearchStep),
    /// `condition`.
    Condition(ConditionStep),
    /// `wait`.
    Wait(WaitStep),
}

impl StepKind {
    /// Its type.
    pub fn step_type(&self) -> StepType {
        match self {
            Self::Transform(_) => StepType::Transform,
            Self::AgentChat(_) => StepType::AgentChat,
            Self::HttpRequest(_) => StepType::HttpRequest,
            Self::MemorySearch(_) => StepType::MemorySearch,
            Self::MemoryAdd(_) => StepType::MemoryAdd,
            Self::KnowledgeSearch(_) => StepType::KnowledgeSearch,
            Self::Condition(_) => StepType::Condition,
            Self::Wait(_) => StepType::Wait,
        }
    }
}

/// A `transform` step: outputs `output` rendered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformStep {
    /// Any JSON value (null too), its strings templates.
    pub output: JsonTemplate,
}

/// An `agent_chat` step: sends `message` to an agent as the execution's starter would.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentChatStep {
    /// The agent.
    pub agent_id: Text,
    /// The message.
    pub message: Text,
    /// The conversation to continue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Template>,
}

/// An `http_request` step: calls a URL through the guarded outbound client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpRequestStep {
    /// The method, in any case.
    pub method: Text<HttpMethod>,
    /// An absolute `http` or `https` URL (where it may point is checked when it is sent).
    pub url: Text<params::RequestUrl>,
    /// Request headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Headers>,
    /// The body: a string is sent as text, anything else as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<JsonTemplate>,
}

/// A `memory_search` step: searches the tenant's memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySearchStep {
    /// The text to find memories for.
    pub query: Text,
    /// Only this agent's memories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<Template>,
    /// Only memories of this type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_type: Option<Text<MemoryType>>,
    /// How many results, 1–[`MAX_TOP_K`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<TopK>,
}

/// A `knowledge_search` step: searches knowledge bases of the tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeSearchStep {
    /// The bases: a list of ids, or a template rendering to one (or to one id).
    pub knowledge_base_ids: JsonTemplate,
    /// The text to find.
    pub query: Text,
    /// How many results, 1–[`MAX_KNOWLEDGE_TOP_K`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<TopK>,
}

/// Most results of a `knowledge_search` step (knowledge search's own limit).
pub const MAX_KNOWLEDGE_TOP_K: u32 = 50;

/// A `memory_add` step: adds a memory entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryAddStep {
    /// The text.
    pub content: Text,
    /// Its type.
    pub memory_type: Text<MemoryType>,
    /// The agent whose memory it is; absent: the tenant's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<Template>,
    /// Free-form object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// The steps as stored and shown: an array of [`Step::to_json`].
pub fn steps_to_json(steps: &[Step]) -> Value {
    Value::Array(steps.iter().map(Step::to_json).collect())
}

/// Reads a workflow's `steps` as a request (or storage) gives them: an array of 1 to
/// [`MAX_STEPS`] step objects, each with a unique `id` (see [`StepId`]), a known `type`, its
/// kind's parameters (required ones present, each of its type, no others), an optional
/// `timeout_seconds` (1–[`MAX_STEP_TIMEOUT_SECONDS`]), templates that parse and read only
/// `input` and the outputs of earlier steps, and literal values that can be checked now (an
/// HTTP method, a URL, a memory type, `top_k`).
///
/// # Errors
/// The refused fields of every step, each named by its path (`steps[2].url`,
/// `steps[0].headers.Accept`).
pub fn validate_steps(raw: &Value) -> Result<Vec<Step>, Vec<FieldError>> {
    match raw {
        Value::Array(items) => validate_step_list(items),
        Value::Null => Err(vec![FieldError::missing("steps")]),
        _ => Err(vec![FieldError::new(
            "steps",
            FieldErrorKind::InvalidType,
            "steps must be an array of steps",
        )]),
    }
}

/// [`validate_steps`] for the array's items.
///
/// # Errors
/// As [`validate_steps`].
pub fn validate_step_list(items: &[Value]) -> Result<Vec<Step>, Vec<FieldError>> {
    if items.is_empty() {
        return Err(vec![FieldError::new(
            "steps",
            FieldErrorKind::TooShort,
            "steps must list at least one step",
        )]);
    }
    if items.len() > MAX_STEPS {
        return Err(vec![FieldError::new(
            "steps",
            FieldErrorKind::TooLong,
            format!("steps may list at most {MAX_STEPS} steps"),
        )]);
    }
    // Every id as written, so a reference to a later step can be told from one to no step.
    let ids: Vec<Option<&str>> = items.iter().map(|item| item.get("id").and_then(Value::as_str)).collect();
    let mut steps = Vec::with_capacity(items.len());
    let mut errors = Vec::new();
    for (index, item) in items.iter().enumerate() {
        match decode::step(index, item, &ids) {
            Ok(step) => steps.push(step),
            Err(refused) => errors.extend(refused),
        }
    }
    if errors.is_empty() {
        errors.extend(unknown_targets(&steps));
    }
    if errors.is_empty() { Ok(steps) } else { Err(errors) }
}

/// The refusals of `next` and `on_error` routes that name no step of the list.
fn unknown_targets(steps: &[Step]) -> Vec<FieldError> {
    let known = |id: &StepId| steps.iter().any(|s| s.id == *id);
    let mut errors = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        let routes = [
            ("next", step.next.as_ref()),
            (
                "on_error",
                match &step.on_error {
                    Some(OnError::Goto(id)) => Some(id),
                    _ => None,
                },
            ),
        ];
        let branches = match &step.kind {
            StepKind::Condition(c) => c.targets().collect(),
            _ => Vec::new(),
        };
        let routes = routes
            .into_iter()
            .map(|(f, t)| (f.to_owned(), t))
            .chain(branches.into_iter().map(|(f, t)| (f, Some(t))));
        for (field, target) in routes {
            if let Some(id) = target.filter(|id| !known(id)) {
                let path = format!("steps[{index}].{field}");
                errors.push(FieldError::new(
                    &path,
                    FieldErrorKind::InvalidValue,
                    format!("{path} names step {:?}, which the workflow does not have", id.as_str()),
                ));
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests;

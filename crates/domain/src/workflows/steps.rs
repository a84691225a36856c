//! Steps: the five step types and their parameters, the checks made when a workflow is saved,
//! and the typed [`StepAction`] a step becomes once its templates are rendered.
//!
//! A step is a JSON object `{id, type, timeout_seconds?, …parameters}`:
//!
//! | type | parameters | output |
//! |---|---|---|
//! | `transform` | `output` (any JSON) | the rendered `output` |
//! | `agent_chat` | `agent_id`, `message`, `session_id?` | `{content, usage, session_id}` |
//! | `http_request` | `method`, `url`, `headers?`, `body?` | `{status, headers, body}` |
//! | `memory_search` | `query`, `agent_id?`, `memory_type?`, `top_k?` | `{results}` |
//! | `memory_add` | `content`, `memory_type`, `agent_id?`, `metadata?` | the entry |
//!
//! Every string in the parameters is a template (see [`template`]). Steps are
//! checked when they are saved, so that a mistake a machine can see (an unknown parameter, a
//! template that does not parse, a reference to a step that has not run yet) is refused then,
//! rather than failing an execution later.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::template::{self, RenderError, STEP_OUTPUT_FIELD, TEMPLATE_ROOTS, TemplateContext, child_path};
use crate::agents::MemoryType;
use crate::ids::AgentId;
use crate::validation::{FieldError, FieldErrorKind, check_json_text, check_length};

/// Most steps a workflow may have.
pub const MAX_STEPS: usize = 50;
/// Longest step id, in characters.
pub const MAX_STEP_ID_CHARS: usize = 64;
/// How long a step may run when it does not say.
pub const DEFAULT_STEP_TIMEOUT_SECONDS: u32 = 30;
/// The longest `timeout_seconds` a step may ask for.
pub const MAX_STEP_TIMEOUT_SECONDS: u32 = 300;
/// Largest output a step may produce, serialised as JSON: outputs are stored with the execution
/// and fed to later templates.
pub const MAX_STEP_OUTPUT_BYTES: usize = 256 * 1024;
/// Largest `top_k` of a `memory_search` step (as `POST /memory/search` allows).
pub const MAX_TOP_K: u32 = 100;

/// The keys every step has besides its type's parameters.
const COMMON_KEYS: [&str; 3] = ["id", "type", "timeout_seconds"];

/// What a step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepType {
    /// Builds a value from the input and earlier outputs.
    Transform,
    /// Sends a message to an agent.
    AgentChat,
    /// Calls an HTTP endpoint.
    HttpRequest,
    /// Searches memory.
    MemorySearch,
    /// Adds a memory entry.
    MemoryAdd,
}

impl StepType {
    /// Every type.
    pub const ALL: [Self; 5] =
        [Self::Transform, Self::AgentChat, Self::HttpRequest, Self::MemorySearch, Self::MemoryAdd];

    /// The name a step's `type` gives.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transform => "transform",
            Self::AgentChat => "agent_chat",
            Self::HttpRequest => "http_request",
            Self::MemorySearch => "memory_search",
            Self::MemoryAdd => "memory_add",
        }
    }

    /// Parses a name.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == value)
    }

    /// The parameters a step of this type must have.
    pub fn required_params(self) -> Vec<&'static str> {
        self.params().iter().filter(|p| p.required).map(|p| p.name).collect()
    }

    /// The parameters a step of this type may have.
    pub fn optional_params(self) -> Vec<&'static str> {
        self.params().iter().filter(|p| !p.required).map(|p| p.name).collect()
    }

    fn params(self) -> &'static [Param] {
        match self {
            Self::Transform => TRANSFORM_PARAMS,
            Self::AgentChat => AGENT_CHAT_PARAMS,
            Self::HttpRequest => HTTP_REQUEST_PARAMS,
            Self::MemorySearch => MEMORY_SEARCH_PARAMS,
            Self::MemoryAdd => MEMORY_ADD_PARAMS,
        }
    }
}

const TRANSFORM_PARAMS: &[Param] = &[Param::required("output", Kind::Any)];
const AGENT_CHAT_PARAMS: &[Param] = &[
    Param::required("agent_id", Kind::Text),
    Param::required("message", Kind::Text),
    Param::optional("session_id", Kind::Text),
];
const HTTP_REQUEST_PARAMS: &[Param] = &[
    Param::required("method", Kind::Text),
    Param::required("url", Kind::Text),
    Param::optional("headers", Kind::Object),
    Param::optional("body", Kind::Any),
];
const MEMORY_SEARCH_PARAMS: &[Param] = &[
    Param::required("query", Kind::Text),
    Param::optional("agent_id", Kind::Text),
    Param::optional("memory_type", Kind::Text),
    Param::optional("top_k", Kind::Integer),
];
const MEMORY_ADD_PARAMS: &[Param] = &[
    Param::required("content", Kind::Text),
    Param::required("memory_type", Kind::Text),
    Param::optional("agent_id", Kind::Text),
    Param::optional("metadata", Kind::Object),
];

impl fmt::Display for StepType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What JSON a parameter takes when saved. A string is always a template; where a parameter
/// needs an object or a number, a template string that renders to one is accepted too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A string.
    Text,
    /// Any JSON value.
    Any,
    /// An object, or a template rendering to one.
    Object,
    /// An integer, or a template rendering to one.
    Integer,
}

/// One parameter of a step type.
#[derive(Debug, Clone, Copy)]
struct Param {
    name: &'static str,
    required: bool,
    kind: Kind,
}

impl Param {
    const fn required(name: &'static str, kind: Kind) -> Self {
        Self { name, required: true, kind }
    }

    const fn optional(name: &'static str, kind: Kind) -> Self {
        Self { name, required: false, kind }
    }
}

/// The method of an `http_request` step, or one a trigger accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HttpMethod {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
    /// `PUT`.
    Put,
    /// `PATCH`.
    Patch,
    /// `DELETE`.
    Delete,
    /// `HEAD`.
    Head,
}

impl HttpMethod {
    /// Every method.
    pub const ALL: [Self; 6] = [Self::Get, Self::Post, Self::Put, Self::Patch, Self::Delete, Self::Head];

    /// The method's name, upper case.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
            Self::Head => "HEAD",
        }
    }

    /// Parses a name in any case (`get`, `Post`).
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str().eq_ignore_ascii_case(value))
    }

    fn names(methods: &[Self]) -> String {
        methods.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for HttpMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A checked step, its parameters unrendered.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Its id, unique in the workflow; later templates read its output as `steps.<id>.output`.
    pub id: String,
    /// What it does.
    pub step_type: StepType,
    /// How long it may run, when it says (see [`Step::timeout`]).
    pub timeout_seconds: Option<u32>,
    /// Its type's parameters, as saved (optional ones given as null left out).
    pub params: Map<String, Value>,
}

impl Step {
    /// How long it may run: its `timeout_seconds`, or [`DEFAULT_STEP_TIMEOUT_SECONDS`].
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(u64::from(self.timeout_seconds.unwrap_or(DEFAULT_STEP_TIMEOUT_SECONDS)))
    }

    /// The step as stored and shown: `{id, type, timeout_seconds?, …parameters}`.
    pub fn to_json(&self) -> Value {
        let mut map = self.params.clone();
        map.insert("id".to_owned(), Value::String(self.id.clone()));
        map.insert("type".to_owned(), Value::String(self.step_type.as_str().to_owned()));
        if let Some(timeout) = self.timeout_seconds {
            map.insert("timeout_seconds".to_owned(), Value::from(timeout));
        }
        Value::Object(map)
    }

    /// Renders the parameters with `ctx`, ending by `deadline` (the step's) when one is given,
    /// and reads them as this type's action.
    ///
    /// # Errors
    /// [`RenderError`] naming the parameter (`url`, `headers.Authorization`) whose template
    /// failed, ran past the deadline, or whose rendered value does not fit (a method that is
    /// none, a `top_k` that is no number).
    pub fn render(
        &self,
        ctx: &TemplateContext,
        deadline: Option<Instant>,
    ) -> Result<StepAction, RenderError> {
        let rendered = match template::render(&Value::Object(self.params.clone()), ctx, deadline)? {
            Value::Object(map) => map,
            _ => return Err(RenderError::new("", "the parameters did not render to an object")),
        };
        let p = Rendered(&rendered);
        Ok(match self.step_type {
            StepType::Transform => {
                StepAction::Transform { output: rendered.get("output").cloned().unwrap_or(Value::Null) }
            }
            StepType::AgentChat => StepAction::AgentChat {
                agent_id: AgentId::from_string(p.text("agent_id")?),
                message: p.text("message")?,
                session_id: p.opt_text("session_id")?,
            },
            StepType::HttpRequest => {
                let raw_method = p.text("method")?;
                let method = HttpMethod::parse(raw_method.trim()).ok_or_else(|| {
                    RenderError::new(
                        "method",
                        format!(
                            "{raw_method:?} is not an HTTP method; expected one of: {}",
                            HttpMethod::names(&HttpMethod::ALL)
                        ),
                    )
                })?;
                StepAction::HttpRequest {
                    method,
                    url: p.text("url")?,
                    headers: p.headers()?,
                    body: p.get("body").cloned(),
                }
            }
            StepType::MemorySearch => StepAction::MemorySearch {
                query: p.text("query")?,
                agent_id: p.opt_text("agent_id")?.map(AgentId::from_string),
                memory_type: p
                    .opt_text("memory_type")?
                    .map(|t| memory_type(&t, "memory_type"))
                    .transpose()?,
                top_k: p.top_k()?,
            },
            StepType::MemoryAdd => StepAction::MemoryAdd {
                content: p.text("content")?,
                memory_type: memory_type(&p.text("memory_type")?, "memory_type")?,
                agent_id: p.opt_text("agent_id")?.map(AgentId::from_string),
                metadata: p.metadata()?,
            },
        })
    }
}

/// The steps as stored and shown: an array of [`Step::to_json`].
pub fn steps_to_json(steps: &[Step]) -> Value {
    Value::Array(steps.iter().map(Step::to_json).collect())
}

/// A step with its templates rendered: what the executor runs.
#[derive(Debug, Clone, PartialEq)]
pub enum StepAction {
    /// Output `output` as it is.
    Transform {
        /// The rendered value.
        output: Value,
    },
    /// Send `message` to an agent; output `{content, usage, session_id}`.
    AgentChat {
        /// The agent.
        agent_id: AgentId,
        /// The message.
        message: String,
        /// The conversation to continue, if any (checked by chat as a client's session id).
        session_id: Option<String>,
    },
    /// Call an HTTP endpoint (through the webhooks' outbound guard); output
    /// `{status, headers, body}`.
    HttpRequest {
        /// The method.
        method: HttpMethod,
        /// The URL, not yet checked.
        url: String,
        /// Request headers.
        headers: BTreeMap<String, String>,
        /// The body: a string is sent as text, anything else as JSON.
        body: Option<Value>,
    },
    /// Search memory; output `{results}`.
    MemorySearch {
        /// The text to find memories for.
        query: String,
        /// Only this agent's memories.
        agent_id: Option<AgentId>,
        /// Only memories of this type.
        memory_type: Option<MemoryType>,
        /// How many results, 1–[`MAX_TOP_K`] (default: memory search's).
        top_k: Option<u32>,
    },
    /// Add a memory entry; output the entry.
    MemoryAdd {
        /// The text.
        content: String,
        /// Its type.
        memory_type: MemoryType,
        /// The agent whose memory it is; absent: the tenant's.
        agent_id: Option<AgentId>,
        /// Free-form object.
        metadata: Map<String, Value>,
    },
}

/// Rendered parameters, read as the action's typed fields.
struct Rendered<'a>(&'a Map<String, Value>);

impl Rendered<'_> {
    /// A parameter; rendering to null counts as absent, so `{{ input.x | default(none) }}`
    /// leaves an optional parameter out.
    fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    fn text(&self, name: &str) -> Result<String, RenderError> {
        match self.get(name) {
            Some(value) => scalar_text(value, name),
            None => Err(RenderError::new(name, format!("{name} rendered to nothing"))),
        }
    }

    fn opt_text(&self, name: &str) -> Result<Option<String>, RenderError> {
        self.get(name).map(|v| scalar_text(v, name)).transpose()
    }

    fn headers(&self) -> Result<BTreeMap<String, String>, RenderError> {
        let Some(value) = self.get("headers") else { return Ok(BTreeMap::new()) };
        let Value::Object(map) = value else {
            return Err(RenderError::new("headers", "headers must render to an object"));
        };
        let mut headers = BTreeMap::new();
        for (name, value) in map {
            let path = child_path("headers", name);
            if value.is_null() {
                continue;
            }
            let text = scalar_text(value, &path)?;
            if text.chars().any(char::is_control) {
                return Err(RenderError::new(path, "a header value must not contain control characters"));
            }
            headers.insert(name.clone(), text);
        }
        Ok(headers)
    }

    fn metadata(&self) -> Result<Map<String, Value>, RenderError> {
        match self.get("metadata") {
            None => Ok(Map::new()),
            Some(Value::Object(map)) => Ok(map.clone()),
            Some(_) => Err(RenderError::new("metadata", "metadata must render to an object")),
        }
    }

    fn top_k(&self) -> Result<Option<u32>, RenderError> {
        let Some(value) = self.get("top_k") else { return Ok(None) };
        let number = match value {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        match number.and_then(|n| u32::try_from(n).ok()) {
            Some(n) if (1..=MAX_TOP_K).contains(&n) => Ok(Some(n)),
            _ => Err(RenderError::new(
                "top_k",
                format!("top_k must render to a whole number from 1 to {MAX_TOP_K}"),
            )),
        }
    }
}

/// A rendered value as text: strings as they are, numbers and booleans written out (so
/// `"{{ input.count }}"` works as a message); anything else is refused.
fn scalar_text(value: &Value, path: &str) -> Result<String, RenderError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => Err(RenderError::new(
            path,
            format!(
                "{path} must render to text, not {} (use | tojson to send JSON as text)",
                json_kind(value)
            ),
        )),
    }
}

fn memory_type(raw: &str, path: &str) -> Result<MemoryType, RenderError> {
    raw.trim().parse::<MemoryType>().map_err(|_| RenderError::new(path, memory_type_message(raw, path)))
}

fn memory_type_message(raw: &str, path: &str) -> String {
    let names: Vec<&str> = MemoryType::ALL.iter().map(|t| t.as_str()).collect();
    format!("{path} {raw:?} is not one of: {}", names.join(", "))
}

/// A step output (or rendered value) larger than [`MAX_STEP_OUTPUT_BYTES`] once serialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the output is larger than {MAX_STEP_OUTPUT_BYTES} bytes")]
pub struct OutputTooLarge;

/// The size of `output` serialised as compact JSON, when at most [`MAX_STEP_OUTPUT_BYTES`].
/// Counting stops at the limit, so a huge value is not serialised whole.
///
/// # Errors
/// [`OutputTooLarge`].
pub fn output_size(output: &Value) -> Result<usize, OutputTooLarge> {
    let mut counter = ByteCounter(0);
    match serde_json::to_writer(&mut counter, output) {
        Ok(()) if counter.0 <= MAX_STEP_OUTPUT_BYTES => Ok(counter.0),
        _ => Err(OutputTooLarge),
    }
}

/// Counts bytes written, failing past [`MAX_STEP_OUTPUT_BYTES`].
struct ByteCounter(usize);

impl io::Write for ByteCounter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.0 += data.len();
        if self.0 > MAX_STEP_OUTPUT_BYTES {
            return Err(io::Error::other("output too large"));
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Checks a workflow's `steps` as a request (or storage) gives them: an array of 1 to
/// [`MAX_STEPS`] step objects, each with a unique `id` (1–[`MAX_STEP_ID_CHARS`] characters of
/// letters, digits, `_` and `-`), a known `type`, its type's parameters (required ones present,
/// of the right JSON type, no others), an optional `timeout_seconds` (1–
/// [`MAX_STEP_TIMEOUT_SECONDS`]), templates that parse and read only `input` and the outputs of
/// earlier steps, and literal values that can be checked now (an HTTP method, a URL, a memory
/// type, `top_k`).
///
/// # Errors
/// Every refused field, named by its path (`steps[2].url`, `steps[0].headers.Accept`).
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
    let mut checker = Checker { errors: Vec::new(), ids: &ids };
    let mut steps = Vec::with_capacity(items.len());
    let mut seen: Vec<String> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        if let Some(step) = checker.step(index, item, &seen) {
            steps.push(step);
        }
        if let Some(id) = ids[index]
            && !seen.iter().any(|s| s == id)
        {
            seen.push(id.to_owned());
        }
    }
    if checker.errors.is_empty() { Ok(steps) } else { Err(checker.errors) }
}

/// Collects the errors of every step.
struct Checker<'a> {
    errors: Vec<FieldError>,
    ids: &'a [Option<&'a str>],
}

impl Checker<'_> {
    /// Checks step `index`; `earlier` holds the ids of the steps before it.
    fn step(&mut self, index: usize, item: &Value, earlier: &[String]) -> Option<Step> {
        let at = format!("steps[{index}]");
        let Value::Object(object) = item else {
            self.errors.push(FieldError::new(
                &at,
                FieldErrorKind::InvalidType,
                format!("{at} must be an object"),
            ));
            return None;
        };
        let before = self.errors.len();
        let id = self.id(&at, object.get("id"), earlier);
        let step_type = self.step_type(&at, object.get("type"));
        let timeout_seconds = self.timeout(&at, object.get("timeout_seconds"));
        let mut params = Map::new();
        if let Some(step_type) = step_type {
            for param in step_type.params() {
                let field = format!("{at}.{}", param.name);
                match object.get(param.name) {
                    // A transform's output may be null; any other null is no value.
                    Some(value) if param.kind == Kind::Any && param.required => {
                        self.param(&field, *param, value, index, earlier);
                        params.insert(param.name.to_owned(), value.clone());
                    }
                    None | Some(Value::Null) if param.required => {
                        self.errors.push(FieldError::missing(&field))
                    }
                    None | Some(Value::Null) => {}
                    Some(value) => {
                        self.param(&field, *param, value, index, earlier);
                        params.insert(param.name.to_owned(), value.clone());
                    }
                }
            }
            for key in object.keys() {
                if !COMMON_KEYS.contains(&key.as_str()) && !step_type.params().iter().any(|p| p.name == key) {
                    let takes: Vec<&str> = step_type.params().iter().map(|p| p.name).collect();
                    self.errors.push(FieldError::new(
                        format!("{at}.{key}"),
                        FieldErrorKind::InvalidValue,
                        format!(
                            "unknown parameter {key:?} for step type {step_type}; it takes: {} (and timeout_seconds)",
                            takes.join(", ")
                        ),
                    ));
                }
            }
        }
        if self.errors.len() > before {
            return None;
        }
        Some(Step { id: id?, step_type: step_type?, timeout_seconds: timeout_seconds?, params })
    }

    fn id(&mut self, at: &str, raw: Option<&Value>, earlier: &[String]) -> Option<String> {
        let field = format!("{at}.id");
        let result = match raw {
            None | Some(Value::Null) => Err(FieldError::missing(&field)),
            Some(Value::String(id)) => check_step_id(id, &field).and_then(|()| {
                if earlier.iter().any(|e| e == id) {
                    Err(FieldError::new(
                        &field,
                        FieldErrorKind::InvalidValue,
                        format!("step id {id:?} is used by an earlier step; ids must be unique"),
                    ))
                } else {
                    Ok(id.clone())
                }
            }),
            Some(_) => {
                Err(FieldError::new(&field, FieldErrorKind::InvalidType, format!("{field} must be a string")))
            }
        };
        self.keep(result)
    }

    fn step_type(&mut self, at: &str, raw: Option<&Value>) -> Option<StepType> {
        let field = format!("{at}.type");
        let names = || StepType::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ");
        let result = match raw {
            None | Some(Value::Null) => Err(FieldError::missing(&field)),
            Some(Value::String(name)) => StepType::parse(name).ok_or_else(|| {
                FieldError::new(
                    &field,
                    FieldErrorKind::InvalidValue,
                    format!("unknown step type {name:?}; expected one of: {}", names()),
                )
            }),
            Some(_) => {
                Err(FieldError::new(&field, FieldErrorKind::InvalidType, format!("{field} must be a string")))
            }
        };
        self.keep(result)
    }

    /// `Some(None)` when absent; `None` when refused.
    fn timeout(&mut self, at: &str, raw: Option<&Value>) -> Option<Option<u32>> {
        let field = format!("{at}.timeout_seconds");
        let result = match raw {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(n) if (1..=MAX_STEP_TIMEOUT_SECONDS).contains(&n) => Ok(Some(n)),
                _ => Err(FieldError::new(
                    &field,
                    FieldErrorKind::OutOfRange,
                    format!("{field} must be a whole number from 1 to {MAX_STEP_TIMEOUT_SECONDS}"),
                )),
            },
            Some(_) => {
                Err(FieldError::new(&field, FieldErrorKind::InvalidType, format!("{field} must be a number")))
            }
        };
        self.keep(result)
    }

    fn keep<T>(&mut self, result: Result<T, FieldError>) -> Option<T> {
        result.map_err(|e| self.errors.push(e)).ok()
    }

    /// Checks one parameter's value: its JSON type, the literal values that can be checked
    /// now, its text, and its templates.
    fn param(&mut self, field: &str, param: Param, value: &Value, index: usize, earlier: &[String]) {
        let before = self.errors.len();
        let templated = |v: &Value| v.as_str().is_some_and(template::is_template);
        match (param.kind, value) {
            (Kind::Any, _) => {}
            (Kind::Text, Value::String(s)) => {
                if param.required && s.trim().is_empty() {
                    self.errors.push(FieldError::new(
                        field,
                        FieldErrorKind::TooShort,
                        format!("{field} must not be empty"),
                    ));
                } else if !templated(value) {
                    self.literal(field, param.name, s);
                }
            }
            (Kind::Object, Value::Object(map)) if param.name == "headers" => self.headers(field, map),
            (Kind::Object, Value::Object(_)) => {}
            (Kind::Integer, Value::Number(_)) => self.top_k(field, value),
            (Kind::Integer, Value::String(s)) if !templated(value) => {
                let number = s.trim().parse::<u64>().map(Value::from).unwrap_or(Value::Null);
                self.top_k(field, &number);
            }
            (Kind::Object | Kind::Integer, v) if templated(v) => {}
            (kind, v) => {
                let wanted = match kind {
                    Kind::Text => "a string",
                    Kind::Object => "an object (or a template rendering to one)",
                    Kind::Integer => "a whole number (or a template rendering to one)",
                    Kind::Any => "a JSON value",
                };
                self.errors.push(FieldError::new(
                    field,
                    FieldErrorKind::InvalidType,
                    format!("{field} must be {wanted}, not {}", json_kind(v)),
                ));
            }
        }
        if self.errors.len() > before {
            return;
        }
        if let Err(e) = check_json_text(value, field) {
            self.errors.push(e);
            return;
        }
        self.templates(field, value, index, earlier);
    }

    /// Checks the literal (untemplated) value of a text parameter that has a fixed set of values
    /// or a form.
    fn literal(&mut self, field: &str, name: &str, value: &str) {
        match name {
            "method" if HttpMethod::parse(value.trim()).is_none() => self.errors.push(FieldError::new(
                field,
                FieldErrorKind::InvalidValue,
                format!(
                    "{value:?} is not an HTTP method; expected one of: {}",
                    HttpMethod::names(&HttpMethod::ALL)
                ),
            )),
            "memory_type" if value.trim().parse::<MemoryType>().is_err() => {
                self.errors.push(FieldError::new(
                    field,
                    FieldErrorKind::InvalidValue,
                    memory_type_message(value, field),
                ));
            }
            "url" => {
                let ok = url::Url::parse(value.trim())
                    .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
                if !ok {
                    self.errors.push(FieldError::new(
                        field,
                        FieldErrorKind::InvalidFormat,
                        format!("{field} must be an absolute http or https URL (or a template)"),
                    ));
                }
            }
            _ => {}
        }
    }

    fn headers(&mut self, field: &str, map: &Map<String, Value>) {
        for (name, value) in map {
            let path = child_path(field, name);
            if name.is_empty() || !name.bytes().all(is_token_byte) {
                self.errors.push(FieldError::new(
                    &path,
                    FieldErrorKind::InvalidFormat,
                    format!("{name:?} is not a valid header name"),
                ));
            } else if let Value::String(text) = value {
                if text.contains(['\r', '\n']) {
                    self.errors.push(FieldError::new(
                        &path,
                        FieldErrorKind::InvalidFormat,
                        format!("{path} must not contain line breaks"),
                    ));
                }
            } else {
                self.errors.push(FieldError::new(
                    &path,
                    FieldErrorKind::InvalidType,
                    format!("{path} must be a string, not {}", json_kind(value)),
                ));
            }
        }
    }

    fn top_k(&mut self, field: &str, value: &Value) {
        let ok = value.as_u64().is_some_and(|n| (1..=u64::from(MAX_TOP_K)).contains(&n));
        if !ok {
            self.errors.push(FieldError::new(
                field,
                FieldErrorKind::OutOfRange,
                format!("{field} must be a whole number from 1 to {MAX_TOP_K}"),
            ));
        }
    }

    /// Checks every template in `value`: it parses, reads only `input` and `steps`, and names
    /// only earlier steps, and only their `output`.
    fn templates(&mut self, path: &str, value: &Value, index: usize, earlier: &[String]) {
        match value {
            Value::String(source) if template::is_template(source) => {
                self.template(path, source, index, earlier)
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.templates(&format!("{path}[{i}]"), item, index, earlier);
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    self.templates(&child_path(path, key), item, index, earlier);
                }
            }
            _ => {}
        }
    }

    fn template(&mut self, path: &str, source: &str, index: usize, earlier: &[String]) {
        let refs = match template::analyze(source) {
            Ok(refs) => refs,
            Err(e) => {
                self.errors.push(FieldError::new(
                    path,
                    FieldErrorKind::InvalidFormat,
                    format!("{path} is not a valid template: {e}"),
                ));
                return;
            }
        };
        for variable in &refs.variables {
            if !TEMPLATE_ROOTS.contains(&variable.as_str()) {
                self.errors.push(FieldError::new(
                    path,
                    FieldErrorKind::InvalidValue,
                    format!("{path} reads unknown variable {variable:?}; templates read input and steps"),
                ));
            }
        }
        for step in &refs.steps {
            let id = step.step_id.as_str();
            let problem = if earlier.iter().any(|e| e == id) {
                step.field.as_deref().filter(|f| *f != STEP_OUTPUT_FIELD).map(|f| {
                    format!("{path} reads steps.{id}.{f}; a step offers only steps.{id}.{STEP_OUTPUT_FIELD}")
                })
            } else if self.ids.get(index).copied().flatten() == Some(id) {
                Some(format!("{path} reads the output of its own step {id:?}"))
            } else if self.ids.iter().skip(index + 1).any(|later| *later == Some(id)) {
                Some(format!("{path} reads step {id:?}, which runs after this one"))
            } else {
                let hint = if self.ids.iter().flatten().any(|i| i.contains('-')) {
                    " (write steps['<id>'] for an id with a hyphen)"
                } else {
                    ""
                };
                Some(format!("{path} reads unknown step {id:?}{hint}"))
            };
            if let Some(message) = problem {
                self.errors.push(FieldError::new(path, FieldErrorKind::InvalidValue, message));
            }
        }
    }
}

/// Checks a step id: 1–[`MAX_STEP_ID_CHARS`] characters of letters, digits, `_` and `-`.
///
/// # Errors
/// A [`FieldError`] naming `field`.
pub fn check_step_id(id: &str, field: &str) -> Result<(), FieldError> {
    check_length(id, 1, MAX_STEP_ID_CHARS, field)?;
    if !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(FieldError::new(
            field,
            FieldErrorKind::InvalidFormat,
            format!("{field} must be letters, digits, _ and - only"),
        ));
    }
    Ok(())
}

/// Whether `b` may appear in an HTTP header name (a `token` of RFC 9110).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The name of a JSON value's type, for messages.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn errors(steps: Value) -> Vec<FieldError> {
        validate_steps(&steps).unwrap_err()
    }

    /// The single error of `steps`, as (field, kind).
    fn only_error(steps: Value) -> (String, FieldErrorKind, String) {
        let errors = errors(steps);
        assert_eq!(errors.len(), 1, "{errors:#?}");
        let e = errors.into_iter().next().unwrap();
        (e.field, e.kind, e.message)
    }

    #[test]
    fn a_workflow_of_every_step_type_is_accepted() {
        let raw = json!([
            {"id": "start", "type": "transform", "output": {"who": "{{ input.name | upper }}", "n": 1}},
            {"id": "ask", "type": "agent_chat", "agent_id": "{{ input.agent }}",
             "message": "Hello {{ steps.start.output.who }}", "timeout_seconds": 120},
            {"id": "post-it", "type": "http_request", "method": "post", "url": "https://example.com/x",
             "headers": {"Authorization": "Bearer {{ input.token }}"}, "body": {"answer": "{{ steps.ask.output.content }}"}},
            {"id": "find", "type": "memory_search", "query": "{{ steps['post-it'].output.body }}", "top_k": 5,
             "memory_type": "semantic"},
            {"id": "keep", "type": "memory_add", "content": "{{ steps.find.output.results | tojson }}",
             "memory_type": "{{ input.kind }}", "metadata": {"from": "workflow"}, "agent_id": null},
        ]);
        let steps = validate_steps(&raw).unwrap();
        assert_eq!(steps.len(), 5);
        assert_eq!(steps[1].timeout(), Duration::from_secs(120));
        assert_eq!(steps[0].timeout(), Duration::from_secs(u64::from(DEFAULT_STEP_TIMEOUT_SECONDS)));
        assert_eq!(steps[2].step_type, StepType::HttpRequest);
        // An optional parameter given as null is left out; everything else round-trips.
        assert!(!steps[4].params.contains_key("agent_id"));
        let mut expected = raw.clone();
        expected[4].as_object_mut().unwrap().remove("agent_id");
        assert_eq!(steps_to_json(&steps), expected);
        assert_eq!(validate_steps(&steps_to_json(&steps)).unwrap(), steps);
    }

    #[test]
    fn the_list_itself_is_checked() {
        assert_eq!(only_error(json!([])).1, FieldErrorKind::TooShort);
        assert_eq!(only_error(json!({"id": "a"})).1, FieldErrorKind::InvalidType);
        assert_eq!(only_error(Value::Null).1, FieldErrorKind::MissingRequiredField);
        let many: Vec<Value> = (0..=MAX_STEPS)
            .map(|i| json!({"id": format!("s{i}"), "type": "transform", "output": i}))
            .collect();
        assert_eq!(only_error(Value::Array(many)).1, FieldErrorKind::TooLong);
        let (field, kind, _) = only_error(json!([{"id": "a", "type": "transform", "output": 1}, "x"]));
        assert_eq!((field.as_str(), kind), ("steps[1]", FieldErrorKind::InvalidType));
    }

    #[test]
    fn ids_are_required_well_formed_and_unique() {
        let step = |id: Value| json!({"id": id, "type": "transform", "output": 1});
        let cases = [
            (
                json!([{"type": "transform", "output": 1}]),
                "steps[0].id",
                FieldErrorKind::MissingRequiredField,
            ),
            (json!([step(json!(7))]), "steps[0].id", FieldErrorKind::InvalidType),
            (json!([step(json!(""))]), "steps[0].id", FieldErrorKind::TooShort),
            (json!([step(json!("x".repeat(65)))]), "steps[0].id", FieldErrorKind::TooLong),
            (json!([step(json!("a b"))]), "steps[0].id", FieldErrorKind::InvalidFormat),
            (json!([step(json!("a.b"))]), "steps[0].id", FieldErrorKind::InvalidFormat),
            (
                json!([step(json!("a")), step(json!("b")), step(json!("a"))]),
                "steps[2].id",
                FieldErrorKind::InvalidValue,
            ),
        ];
        for (raw, field, kind) in cases {
            let (f, k, _) = only_error(raw.clone());
            assert_eq!((f.as_str(), k), (field, kind), "{raw}");
        }
        assert!(validate_steps(&json!([step(json!("A-z_09"))])).is_ok());
        assert!(validate_steps(&json!([step(json!("x".repeat(64)))])).is_ok());
    }

    #[test]
    fn types_and_timeouts_are_checked() {
        let (f, k, m) = only_error(json!([{"id": "a", "type": "shell", "command": "ls"}]));
        assert_eq!((f.as_str(), k), ("steps[0].type", FieldErrorKind::InvalidValue));
        assert!(m.contains("http_request"), "{m}");
        let (f, k, _) = only_error(json!([{"id": "a", "output": 1}]));
        assert_eq!((f.as_str(), k), ("steps[0].type", FieldErrorKind::MissingRequiredField));
        let (f, k, _) = only_error(json!([{"id": "a", "type": 3}]));
        assert_eq!((f.as_str(), k), ("steps[0].type", FieldErrorKind::InvalidType));
        for (timeout, kind) in [
            (json!(0), FieldErrorKind::OutOfRange),
            (json!(301), FieldErrorKind::OutOfRange),
            (json!(1.5), FieldErrorKind::OutOfRange),
            (json!(-1), FieldErrorKind::OutOfRange),
            (json!("30"), FieldErrorKind::InvalidType),
        ] {
            let (f, k, _) = only_error(
                json!([{"id": "a", "type": "transform", "output": 1, "timeout_seconds": timeout}]),
            );
            assert_eq!((f.as_str(), k), ("steps[0].timeout_seconds", kind), "{timeout}");
        }
        let ok =
            validate_steps(&json!([{"id": "a", "type": "transform", "output": 1, "timeout_seconds": 300}]));
        assert_eq!(ok.unwrap()[0].timeout_seconds, Some(300));
    }

    #[test]
    fn parameters_are_required_typed_and_known() {
        let cases = [
            (json!({"type": "transform"}), "steps[0].output", FieldErrorKind::MissingRequiredField),
            (
                json!({"type": "agent_chat", "message": "hi"}),
                "steps[0].agent_id",
                FieldErrorKind::MissingRequiredField,
            ),
            (
                json!({"type": "agent_chat", "agent_id": "agt_1", "message": null}),
                "steps[0].message",
                FieldErrorKind::MissingRequiredField,
            ),
            (
                json!({"type": "agent_chat", "agent_id": 5, "message": "hi"}),
                "steps[0].agent_id",
                FieldErrorKind::InvalidType,
            ),
            (
                json!({"type": "agent_chat", "agent_id": "agt_1", "message": "  "}),
                "steps[0].message",
                FieldErrorKind::TooShort,
            ),
            (
                json!({"type": "agent_chat", "agent_id": "a", "message": "m", "session_id": 3}),
                "steps[0].session_id",
                FieldErrorKind::InvalidType,
            ),
            (
                json!({"type": "agent_chat", "agent_id": "a", "message": "m", "temperature": 1}),
                "steps[0].temperature",
                FieldErrorKind::InvalidValue,
            ),
            (
                json!({"type": "http_request", "method": "GET"}),
                "steps[0].url",
                FieldErrorKind::MissingRequiredField,
            ),
            (
                json!({"type": "http_request", "method": "FETCH", "url": "https://x.test"}),
                "steps[0].method",
                FieldErrorKind::InvalidValue,
            ),
            (
                json!({"type": "http_request", "method": "GET", "url": "not a url"}),
                "steps[0].url",
                FieldErrorKind::InvalidFormat,
            ),
            (
                json!({"type": "http_request", "method": "GET", "url": "ftp://x.test/"}),
                "steps[0].url",
                FieldErrorKind::InvalidFormat,
            ),
            (
                json!({"type": "http_request", "method": "GET", "url": "https://x.test", "headers": ["a"]}),
                "steps[0].headers",
                FieldErrorKind::InvalidType,
            ),
            (
                json!({"type": "http_request", "method": "GET", "url": "https://x.test", "headers": "plain"}),
                "steps[0].headers",
                FieldErrorKind::InvalidType,
            ),
            (
                json!({"type": "http_request", "method": "GET", "url": "https://x.test", "headers": {"X-N": 1}}),
                "steps[0].headers.X-N",
                FieldErrorKind::InvalidType,
            ),
            (
                json!({"type": "http_request", "method": "GET", "url": "https://x.test", "headers": {"Bad Name": "v"}}),
                "steps[0].headers.Bad Name",
                FieldErrorKind::InvalidFormat,
            ),
            (
                json!({"type": "http_request", "method": "GET", "url": "https://x.test", "headers": {"X": "a\r\nInjected: 1"}}),
                "steps[0].headers.X",
                FieldErrorKind::InvalidFormat,
            ),
            (
                json!({"type": "memory_search", "query": "q", "memory_type": "short-term"}),
                "steps[0].memory_type",
                FieldErrorKind::InvalidValue,
            ),
            (
                json!({"type": "memory_search", "query": "q", "top_k": 0}),
                "steps[0].top_k",
                FieldErrorKind::OutOfRange,
            ),
            (
                json!({"type": "memory_search", "query": "q", "top_k": 101}),
                "steps[0].top_k",
                FieldErrorKind::OutOfRange,
            ),
            (
                json!({"type": "memory_search", "query": "q", "top_k": "many"}),
                "steps[0].top_k",
                FieldErrorKind::OutOfRange,
            ),
            (
                json!({"type": "memory_search", "query": "q", "top_k": true}),
                "steps[0].top_k",
                FieldErrorKind::InvalidType,
            ),
            (
                json!({"type": "memory_add", "content": "c"}),
                "steps[0].memory_type",
                FieldErrorKind::MissingRequiredField,
            ),
            (
                json!({"type": "memory_add", "content": "c", "memory_type": "episodic", "metadata": 1}),
                "steps[0].metadata",
                FieldErrorKind::InvalidType,
            ),
            (
                json!({"type": "memory_add", "content": "nul\u{0}", "memory_type": "episodic"}),
                "steps[0].content",
                FieldErrorKind::InvalidFormat,
            ),
            (
                json!({"type": "transform", "output": {"a": ["x", "nul\u{0}"]}}),
                "steps[0].output.a[1]",
                FieldErrorKind::InvalidFormat,
            ),
        ];
        for (mut raw, field, kind) in cases {
            raw.as_object_mut().unwrap().insert("id".into(), json!("s"));
            let (f, k, m) = only_error(json!([raw.clone()]));
            assert_eq!((f.as_str(), k), (field, kind), "{raw}: {m}");
        }
        let (_, _, m) = only_error(json!([{"id": "s", "type": "transform", "output": 1, "outptu": 2}]));
        assert!(m.contains("unknown parameter \"outptu\"") && m.contains("output"), "{m}");
        // Templates stand in for values that can only be checked once rendered.
        let templated = json!([{"id": "s", "type": "http_request", "method": "{{ input.method }}",
            "url": "{{ input.url }}", "headers": "{{ input.headers }}"},
            {"id": "t", "type": "memory_search", "query": "q", "top_k": "{{ input.k }}",
             "memory_type": "{{ input.type }}"},
            {"id": "u", "type": "transform", "output": null},
            {"id": "v", "type": "memory_search", "query": "q", "top_k": "7"}]);
        assert!(validate_steps(&templated).is_ok(), "{:?}", validate_steps(&templated));
    }

    #[test]
    fn every_error_of_every_step_is_reported() {
        let errors = errors(json!([
            {"id": "a", "type": "http_request", "method": "FETCH", "url": 3, "extra": 1},
            {"id": "a", "type": "nope"},
            {"type": "transform", "output": "{{ steps.zzz.output }}"},
        ]));
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "steps[0].method",
                "steps[0].url",
                "steps[0].extra",
                "steps[1].id",
                "steps[1].type",
                "steps[2].id",
                "steps[2].output"
            ]
        );
    }

    #[test]
    fn templates_must_parse() {
        let (f, k, m) =
            only_error(json!([{"id": "a", "type": "transform", "output": {"x": ["ok", "{{ input.x "]}}]));
        assert_eq!((f.as_str(), k), ("steps[0].output.x[1]", FieldErrorKind::InvalidFormat));
        assert!(m.contains("syntax error"), "{m}");
        let (f, _, _) = only_error(json!([{"id": "a", "type": "agent_chat", "agent_id": "x",
            "message": "line\n{% if input.x %}unclosed"}]));
        assert_eq!(f, "steps[0].message");
        for source in ["{% include 'other' %}", "{% macro m() %}x{% endmacro %}", "{% extends 'base' %}"] {
            let (f, k, m) = only_error(json!([{"id": "a", "type": "transform", "output": source}]));
            assert_eq!((f.as_str(), k), ("steps[0].output", FieldErrorKind::InvalidFormat), "{source}: {m}");
        }
    }

    #[test]
    fn templates_read_only_input_and_earlier_steps() {
        let with = |second: Value| {
            json!([
                {"id": "first", "type": "transform", "output": "{{ input.x }}"},
                second,
                {"id": "last", "type": "transform", "output": 1},
            ])
        };
        let ok = [
            "{{ steps.first.output }}",
            "{{ steps.first.output.deep.er | default('x') }}",
            "{{ steps['first'].output }}",
            "{{ input.a }}{% for i in range(2) %}{{ loop.index }}{{ i }}{% endfor %}",
            "{% set local = input.a %}{{ local }}",
            "{{ steps | length }}",
        ];
        for template in ok {
            let raw = with(json!({"id": "mid", "type": "transform", "output": template}));
            assert!(validate_steps(&raw).is_ok(), "{template}: {:?}", validate_steps(&raw));
        }
        let refused = [
            ("{{ steps.last.output }}", "runs after this one"),
            ("{{ steps['last'].output }}", "runs after this one"),
            ("{{ steps.mid.output }}", "its own step"),
            ("{{ steps.nope.output }}", "unknown step \"nope\""),
            ("{{ steps.first.outputs }}", "offers only steps.first.output"),
            ("{{ inputs.x }}", "unknown variable \"inputs\""),
            ("{{ env }}", "unknown variable \"env\""),
        ];
        for (template, wanted) in refused {
            let raw = with(json!({"id": "mid", "type": "transform", "output": {"v": template}}));
            let (f, k, m) = only_error(raw);
            assert_eq!((f.as_str(), k), ("steps[1].output.v", FieldErrorKind::InvalidValue), "{template}");
            assert!(m.contains(wanted), "{template}: {m}");
        }
        // A hyphenated id read with a dot parses as a subtraction: both halves are refused, with a hint.
        let raw = json!([
            {"id": "get-user", "type": "transform", "output": 1},
            {"id": "b", "type": "transform", "output": "{{ steps.get-user.output }}"},
        ]);
        let errors = errors(raw);
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(errors.iter().any(|e| e.message.contains("steps['<id>']")), "{errors:#?}");
    }

    #[test]
    fn steps_render_into_typed_actions() {
        let steps = validate_steps(&json!([
            {"id": "t", "type": "transform", "output": {"n": "{{ input.n }}", "s": "n={{ input.n }}"}},
            {"id": "c", "type": "agent_chat", "agent_id": "{{ input.agent }}", "message": "{{ input.n }}",
             "session_id": "{{ input.session | default(none) }}"},
            {"id": "h", "type": "http_request", "method": "{{ input.method }}", "url": "https://x.test/{{ input.n }}",
             "headers": {"X-N": "{{ input.n }}", "X-Skip": "{{ none }}"}, "body": "{{ steps.t.output }}"},
            {"id": "s", "type": "memory_search", "query": "q", "top_k": "{{ input.n }}", "memory_type": "episodic"},
            {"id": "a", "type": "memory_add", "content": "c", "memory_type": "procedural",
             "metadata": "{{ {'k': input.n} }}", "agent_id": "agt_9"},
        ]))
        .unwrap();
        let mut ctx = TemplateContext::new(json!({"n": 4, "agent": "agt_1", "method": "patch"}));
        ctx.add_output("t", json!({"n": 4}));
        let actions: Vec<StepAction> = steps.iter().map(|s| s.render(&ctx, None).unwrap()).collect();
        assert_eq!(actions[0], StepAction::Transform { output: json!({"n": 4, "s": "n=4"}) });
        assert_eq!(
            actions[1],
            StepAction::AgentChat {
                agent_id: AgentId::from_string("agt_1"),
                message: "4".into(),
                session_id: None
            }
        );
        assert_eq!(
            actions[2],
            StepAction::HttpRequest {
                method: HttpMethod::Patch,
                url: "https://x.test/4".into(),
                headers: BTreeMap::from([("X-N".to_owned(), "4".to_owned())]),
                body: Some(json!({"n": 4})),
            }
        );
        assert_eq!(
            actions[3],
            StepAction::MemorySearch {
                query: "q".into(),
                agent_id: None,
                memory_type: Some(MemoryType::Episodic),
                top_k: Some(4)
            }
        );
        assert_eq!(
            actions[4],
            StepAction::MemoryAdd {
                content: "c".into(),
                memory_type: MemoryType::Procedural,
                agent_id: Some(AgentId::from_string("agt_9")),
                metadata: json!({"k": 4}).as_object().unwrap().clone(),
            }
        );
    }

    #[test]
    fn rendered_values_that_do_not_fit_fail_naming_the_parameter() {
        let step = |raw: Value| validate_steps(&json!([raw])).unwrap().remove(0);
        let ctx = TemplateContext::new(json!({"obj": {"a": 1}, "k": 500, "m": "FETCH", "t": "other"}));
        let cases = [
            (
                json!({"id": "x", "type": "agent_chat", "agent_id": "a", "message": "{{ input.obj }}"}),
                "message",
            ),
            (
                json!({"id": "x", "type": "agent_chat", "agent_id": "a", "message": "{{ input.nope }}"}),
                "message",
            ),
            (
                json!({"id": "x", "type": "http_request", "method": "{{ input.m }}", "url": "https://x.test"}),
                "method",
            ),
            (
                json!({"id": "x", "type": "http_request", "method": "GET", "url": "https://x.test", "headers": "{{ input.k }}"}),
                "headers",
            ),
            (
                json!({"id": "x", "type": "http_request", "method": "GET", "url": "https://x.test", "headers": {"A": "{{ input.obj }}"}}),
                "headers.A",
            ),
            (json!({"id": "x", "type": "memory_search", "query": "q", "top_k": "{{ input.k }}"}), "top_k"),
            (
                json!({"id": "x", "type": "memory_search", "query": "q", "memory_type": "{{ input.t }}"}),
                "memory_type",
            ),
            (
                json!({"id": "x", "type": "memory_add", "content": "c", "memory_type": "semantic", "metadata": "{{ input.k }}"}),
                "metadata",
            ),
        ];
        for (raw, path) in cases {
            let e = step(raw.clone()).render(&ctx, None).unwrap_err();
            assert_eq!(e.path, path, "{raw}: {e}");
        }
    }

    #[test]
    fn output_size_is_bounded() {
        assert_eq!(output_size(&json!({"a": 1})).unwrap(), 7);
        let big = json!("x".repeat(MAX_STEP_OUTPUT_BYTES));
        assert_eq!(output_size(&big), Err(OutputTooLarge));
        let just = json!("x".repeat(MAX_STEP_OUTPUT_BYTES - 2));
        assert_eq!(output_size(&just).unwrap(), MAX_STEP_OUTPUT_BYTES);
    }

    #[test]
    fn names_round_trip() {
        for t in StepType::ALL {
            assert_eq!(StepType::parse(t.as_str()), Some(t));
        }
        for m in HttpMethod::ALL {
            assert_eq!(HttpMethod::parse(m.as_str()), Some(m));
            assert_eq!(HttpMethod::parse(&m.as_str().to_lowercase()), Some(m));
        }
        assert_eq!(StepType::HttpRequest.required_params(), ["method", "url"]);
        assert_eq!(StepType::HttpRequest.optional_params(), ["headers", "body"]);
    }
}

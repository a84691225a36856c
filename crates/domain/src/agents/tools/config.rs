//! Reading an agent's `config.tools` with the API's decoder ([`crate::decode`]), as workflow
//! steps are read: `type` first, then the fields of that kind of tool as its own struct, every
//! refusal named by its path (`config.tools[2].allowed_hosts[0]`), several at once, unknown
//! fields refused.

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

use super::{
    AgentTool, DEFAULT_TOOL_TIMEOUT_SECONDS, MAX_ALLOWED_HOSTS, MAX_TOOL_DESCRIPTION_CHARS,
    MAX_TOOL_TIMEOUT_SECONDS, MAX_TOOLS, ToolKind,
};
use crate::decode::{Fault, Refusal, checked, field_names, read, read_fields, text};
use crate::ids::{McpServerId, WorkflowId};
use crate::validation::{
    FieldError, FieldErrorKind, TextKind, check_json_text, check_length, check_long_text, check_text,
};
use crate::workflows::HttpMethod;

/// Most characters of a `run_workflow` tool's input schema, as JSON.
const MAX_INPUT_SCHEMA_CHARS: usize = 16_000;

crate::string_enum! {
    /// The kinds of tool, as `type` names them.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ToolType {
        /// Searches the agent's own memory.
        MemorySearch => "memory_search",
        /// Adds to the agent's own memory.
        MemoryAdd => "memory_add",
        /// Runs a workflow and waits for its output.
        RunWorkflow => "run_workflow",
        /// Calls a URL on an allowed host.
        HttpRequest => "http_request",
        /// The tools of a registered MCP server.
        Mcp => "mcp",
        /// Edits of the agent's own core memory blocks.
        CoreMemory => "core_memory",
    }
}

impl<'de> Deserialize<'de> for ToolType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked(deserializer, |value| {
            let name = text(value)?;
            Self::parse(&name).ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|t| t.as_str()).collect();
                Fault::new(
                    FieldErrorKind::InvalidValue,
                    format!("tool type {name:?} is not one of {}", names.join(", ")),
                )
            })
        })
    }
}

/// A tool's name: 1–64 letters, digits, `_` or `-` (see [`super::tool_name`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ToolName(String);

impl<'de> Deserialize<'de> for ToolName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked(deserializer, |v| Ok(Self(super::tool_name(&text(v)?, "value").map_err(Fault::of)?)))
    }
}

/// What a tool does, for the model: 1–1,000 characters.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Description(String);

impl<'de> Deserialize<'de> for Description {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked(deserializer, |v| {
            let d = text(v)?;
            check_long_text(&d, 1, MAX_TOOL_DESCRIPTION_CHARS, "value").map_err(Fault::of)?;
            Ok(Self(d))
        })
    }
}

/// A workflow's id as a tool names it (whether it is the tenant's is known when it runs).
struct WorkflowRef(WorkflowId);

impl<'de> Deserialize<'de> for WorkflowRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked(deserializer, |v| {
            let id = text(v)?;
            check_text(&id, "value", TextKind::SingleLine).map_err(Fault::of)?;
            check_length(&id, 1, 100, "value").map_err(Fault::of)?;
            Ok(Self(WorkflowId::from_string(id)))
        })
    }
}

/// The `type` of a workflow's input schema: an object, always (see [`object_type`]).
struct ObjectType;

/// An input schema's `type`, when given: `object` (not `null`, which a schema cannot mean).
fn object_type<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<ObjectType>, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::String(s) if s == "object" => Ok(Some(ObjectType)),
        _ => Err(crate::decode::fault(
            FieldErrorKind::InvalidValue,
            "input_schema describes the workflow's input object: its type is \"object\"",
        )),
    }
}

/// A JSON Schema object for a workflow's input, as read: its `type`, if given, is checked at
/// its own path (`input_schema.type`).
#[derive(Deserialize)]
#[serde(expecting = "a JSON Schema object")]
struct InputSchemaFields {
    #[serde(rename = "type", default, deserialize_with = "object_type")]
    _type: Option<ObjectType>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// A JSON Schema object for a workflow's input, its `type` (`object`) filled in when absent.
struct InputSchema(Value);

impl<'de> Deserialize<'de> for InputSchema {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let fields = InputSchemaFields::deserialize(deserializer)?;
        let mut schema = fields.rest;
        schema.insert("type".into(), json!("object"));
        let schema = Value::Object(schema);
        let fault = |f: Fault| f.raise::<D::Error>();
        check_json_text(&schema, "input_schema").map_err(|e| fault(Fault::new(e.kind, e.message)))?;
        if schema.to_string().len() > MAX_INPUT_SCHEMA_CHARS {
            return Err(fault(Fault::new(
                FieldErrorKind::TooLong,
                format!("is at most {MAX_INPUT_SCHEMA_CHARS} characters of JSON"),
            )));
        }
        Ok(Self(schema))
    }
}

/// How long a `run_workflow` tool waits: a whole number of seconds, 1–300 (also written with a
/// fraction of zero, `30.0`).
struct TimeoutSeconds(u32);

impl<'de> Deserialize<'de> for TimeoutSeconds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked(deserializer, |v| {
            v.as_u64()
                .or_else(|| {
                    v.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= 1e9).map(|f| f as u64)
                })
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| (1..=MAX_TOOL_TIMEOUT_SECONDS).contains(n))
                .map(Self)
                .ok_or_else(|| {
                    Fault::new(
                        FieldErrorKind::OutOfRange,
                        format!("must be a whole number from 1 to {MAX_TOOL_TIMEOUT_SECONDS}"),
                    )
                })
        })
    }
}

/// A host of an allow-list: a DNS name or an IPv4 address (letters, digits, `.` and `-`,
/// 1–253 of them), no scheme, port or path; kept in lowercase.
struct Host(String);

impl<'de> Deserialize<'de> for Host {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked(deserializer, |v| {
            let raw = text(v)?;
            let ok = (1..=253).contains(&raw.len())
                && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
            if ok {
                Ok(Self(raw.to_ascii_lowercase()))
            } else {
                Err(Fault::new(
                    FieldErrorKind::InvalidValue,
                    "must be a host name or an IPv4 address (no scheme, port or path)",
                ))
            }
        })
    }
}

/// 1 to [`MAX_ALLOWED_HOSTS`] hosts.
struct AllowedHosts(Vec<String>);

impl<'de> Deserialize<'de> for AllowedHosts {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let hosts = Vec::<Host>::deserialize(deserializer)?;
        if hosts.is_empty() || hosts.len() > MAX_ALLOWED_HOSTS {
            return Err(crate::decode::fault(
                FieldErrorKind::InvalidValue,
                format!("must list 1 to {MAX_ALLOWED_HOSTS} hosts"),
            ));
        }
        Ok(Self(hosts.into_iter().map(|h| h.0).collect()))
    }
}

/// The method of an `http_request` tool: `GET` or `POST`.
struct ToolMethod(HttpMethod);

impl<'de> Deserialize<'de> for ToolMethod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked(deserializer, |v| match text(v)?.as_str() {
            "GET" => Ok(Self(HttpMethod::Get)),
            "POST" => Ok(Self(HttpMethod::Post)),
            _ => Err(Fault::new(FieldErrorKind::InvalidValue, "must be GET or POST")),
        })
    }
}

/// A registered MCP server's id.
struct ServerRef(McpServerId);

impl<'de> Deserialize<'de> for ServerRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked(deserializer, |v| {
            let id = text(v)?;
            check_text(&id, "value", TextKind::SingleLine).map_err(Fault::of)?;
            check_length(&id, 1, 100, "value").map_err(Fault::of)?;
            Ok(Self(McpServerId::from_string(id)))
        })
    }
}

/// The names of an MCP server's tools an agent uses: 1–64 of them.
struct McpToolNames(Vec<String>);

impl<'de> Deserialize<'de> for McpToolNames {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let names = Vec::<Description>::deserialize(deserializer)?;
        if names.is_empty() || names.len() > 64 {
            return Err(crate::decode::fault(FieldErrorKind::InvalidValue, "must list 1 to 64 tool names"));
        }
        Ok(Self(names.into_iter().map(|n| n.0).collect()))
    }
}

/// The fields of an `mcp` entry.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct McpFields {
    server_id: ServerRef,
    #[serde(default)]
    tools: Option<McpToolNames>,
}

/// The fields of a `core_memory` entry: none (its two tools have fixed names).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CoreMemoryFields {}

/// The fields of a `memory_search` or `memory_add` tool.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryToolFields {
    #[serde(default)]
    name: Option<ToolName>,
    #[serde(default)]
    description: Option<Description>,
}

/// The fields of a `run_workflow` tool.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunWorkflowFields {
    name: ToolName,
    #[serde(default)]
    description: Option<Description>,
    workflow_id: WorkflowRef,
    input_schema: InputSchema,
    #[serde(default)]
    timeout_seconds: Option<TimeoutSeconds>,
}

/// The fields of an `http_request` tool.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpRequestFields {
    name: ToolName,
    description: Description,
    allowed_hosts: AllowedHosts,
    #[serde(default)]
    method: Option<ToolMethod>,
}

impl ToolType {
    /// The fields a tool of this type takes besides `type`, in the order its struct declares.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Self::MemorySearch | Self::MemoryAdd => field_names::<MemoryToolFields>(),
            Self::RunWorkflow => field_names::<RunWorkflowFields>(),
            Self::HttpRequest => field_names::<HttpRequestFields>(),
            Self::Mcp => field_names::<McpFields>(),
            Self::CoreMemory => field_names::<CoreMemoryFields>(),
        }
    }
}

/// Reads `config.tools` (see [`AgentTool::parse_list`]).
pub(super) fn tools(raw: &Value) -> Result<Vec<AgentTool>, Vec<FieldError>> {
    let field = "config.tools";
    let invalid = |message: String| vec![FieldError::new(field, FieldErrorKind::InvalidValue, message)];
    let Value::Array(items) = raw else {
        return Err(invalid("config.tools must be a list of tools".into()));
    };
    if items.len() > MAX_TOOLS {
        return Err(invalid(format!("an agent has at most {MAX_TOOLS} tools")));
    }
    let mut errors = Vec::new();
    let mut read_tools: Vec<AgentTool> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("{field}[{i}]");
        match tool(item, &at) {
            Ok(tool) if read_tools.iter().any(|t| t.name == tool.name) => errors.push(FieldError::new(
                format!("{at}.name"),
                FieldErrorKind::InvalidValue,
                format!("two tools are named {:?}; give one a name of its own", tool.name),
            )),
            Ok(tool) => read_tools.push(tool),
            Err(refused) => errors.extend(refused),
        }
    }
    if errors.is_empty() { Ok(read_tools) } else { Err(errors) }
}

/// Reads one tool at `at`: every refusal of it, `type` first, then its fields in the order its
/// kind declares them.
fn tool(item: &Value, at: &str) -> Result<AgentTool, Vec<FieldError>> {
    let Value::Object(object) = item else {
        return Err(vec![FieldError::new(
            at,
            FieldErrorKind::InvalidType,
            format!("{at} must be an object"),
        )]);
    };
    let mut fields = object.clone();
    let tool_type = fields.remove("type").unwrap_or(Value::Null);
    let tool_type = read::<ToolType>(&tool_type, at, "type").map_err(|r| vec![r.error])?;
    let takes = format!(" for tool type {tool_type}; it takes: type, {}", tool_type.fields().join(", "));
    let mut refused: Vec<Refusal> = Vec::new();
    let read_tool = match tool_type {
        ToolType::MemorySearch | ToolType::MemoryAdd => {
            read_fields::<MemoryToolFields>(fields, at, &takes, &mut refused).0.map(|f| {
                let (kind, default) = if tool_type == ToolType::MemorySearch {
                    (ToolKind::MemorySearch, "memory_search")
                } else {
                    (ToolKind::MemoryAdd, "memory_add")
                };
                AgentTool {
                    name: f.name.map_or_else(|| default.to_owned(), |n| n.0),
                    description: f.description.map(|d| d.0),
                    kind,
                }
            })
        }
        ToolType::RunWorkflow => {
            read_fields::<RunWorkflowFields>(fields, at, &takes, &mut refused).0.map(|f| AgentTool {
                name: f.name.0,
                description: f.description.map(|d| d.0),
                kind: ToolKind::RunWorkflow {
                    workflow_id: f.workflow_id.0,
                    input_schema: f.input_schema.0,
                    timeout_seconds: f.timeout_seconds.map_or(DEFAULT_TOOL_TIMEOUT_SECONDS, |t| t.0),
                },
            })
        }
        ToolType::HttpRequest => {
            read_fields::<HttpRequestFields>(fields, at, &takes, &mut refused).0.map(|f| AgentTool {
                name: f.name.0,
                description: Some(f.description.0),
                kind: ToolKind::HttpRequest {
                    allowed_hosts: f.allowed_hosts.0,
                    method: f.method.map_or(HttpMethod::Get, |m| m.0),
                },
            })
        }
        // An entry per server: its id is its name among the agent's tools (two entries for
        // one server are refused as a name used twice).
        ToolType::Mcp => read_fields::<McpFields>(fields, at, &takes, &mut refused).0.map(|f| AgentTool {
            name: f.server_id.0.as_str().to_owned(),
            description: None,
            kind: ToolKind::Mcp { server_id: f.server_id.0, tools: f.tools.map(|t| t.0) },
        }),
        ToolType::CoreMemory => read_fields::<CoreMemoryFields>(fields, at, &takes, &mut refused)
            .0
            .map(|_| AgentTool { name: "core_memory".into(), description: None, kind: ToolKind::CoreMemory }),
    };
    let order = tool_type.fields();
    refused.sort_by_key(|r| {
        r.field.as_deref().and_then(|f| order.iter().position(|o| *o == f)).unwrap_or(order.len())
    });
    match read_tool {
        Some(tool) if refused.is_empty() => Ok(tool),
        _ if refused.is_empty() => {
            Err(vec![FieldError::new(at, FieldErrorKind::InvalidValue, format!("{at} could not be read"))])
        }
        _ => Err(refused.into_iter().map(|r| r.error).collect()),
    }
}

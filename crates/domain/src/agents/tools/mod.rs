//! The tools an agent may call (`config.tools`): what each is, how it is checked when an agent
//! is saved, how it is described to a model, and how a model's call becomes an action of the
//! service. Tools act through the same services as workflow steps (memory, the guarded outbound
//! client) and executions (`run_workflow`), as the caller of the chat: a tool can reach only what
//! its caller's tenant, role and scopes can.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::chat::ToolSpec;
use crate::ids::{AgentId, McpServerId, WorkflowId};
use crate::memory::MemoryType;
use crate::validation::{FieldError, FieldErrorKind};
use crate::workflows::{HttpMethod, StepAction};

mod config;
mod error;

pub use config::ToolType;
pub use error::ToolError;

/// Most tools of one agent.
pub const MAX_TOOLS: usize = 32;
/// Most hosts of an `http_request` tool's allow-list.
pub const MAX_ALLOWED_HOSTS: usize = 32;
/// Most characters of a tool's description.
pub const MAX_TOOL_DESCRIPTION_CHARS: usize = 1_000;
/// Longest a `run_workflow` tool may wait, in seconds.
pub const MAX_TOOL_TIMEOUT_SECONDS: u32 = 300;
/// How long a `run_workflow` tool waits when it does not say.
pub const DEFAULT_TOOL_TIMEOUT_SECONDS: u32 = 30;
/// How long the other tools may take.
pub const BUILTIN_TOOL_TIMEOUT: Duration = Duration::from_secs(30);
/// Most rounds of tool calls in one chat.
pub const MAX_TOOL_ROUNDS: u8 = 20;
/// Rounds of tool calls when an agent does not say.
pub const DEFAULT_TOOL_ROUNDS: u8 = 5;
/// Most results a `memory_search` call returns.
const MAX_SEARCH_RESULTS: u64 = 20;

/// What a tool does.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolKind {
    /// Searches the agent's own memory.
    MemorySearch,
    /// Adds to the agent's own (semantic) memory.
    MemoryAdd,
    /// Runs a workflow of the tenant on the model's arguments and waits for its output.
    RunWorkflow {
        /// The workflow.
        workflow_id: WorkflowId,
        /// Its input, as a JSON Schema object (told to the model).
        input_schema: Value,
        /// Longest wait for the output, 1–300 s.
        timeout_seconds: u32,
    },
    /// Calls a URL on one of the allowed hosts.
    HttpRequest {
        /// Hosts the URL may name (lowercase; exact match).
        allowed_hosts: Vec<String>,
        /// `GET` or `POST`.
        method: HttpMethod,
    },
    /// The tools of a registered MCP server, offered as `<server name>__<tool>`.
    Mcp {
        /// The server.
        server_id: McpServerId,
        /// The server's tools this agent uses; `None`: every tool the server allows.
        tools: Option<Vec<String>>,
    },
    /// `core_memory_append` and `core_memory_replace` over the agent's own memory blocks.
    CoreMemory,
}

impl ToolKind {
    /// The `type` as configured.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::MemorySearch => "memory_search",
            Self::MemoryAdd => "memory_add",
            Self::RunWorkflow { .. } => "run_workflow",
            Self::HttpRequest { .. } => "http_request",
            Self::Mcp { .. } => "mcp",
            Self::CoreMemory => "core_memory",
        }
    }
}

/// One tool of an agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTool {
    /// Its name as the model calls it, unique per agent.
    pub name: String,
    /// What it does, for the model; a default per kind when absent.
    pub description: Option<String>,
    /// What it does.
    pub kind: ToolKind,
}

/// What a tool call becomes: a step the workflow steps' performer runs, or a workflow run.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolAction {
    /// A step (memory search or add, an HTTP request), run as a workflow step is.
    Step(StepAction),
    /// An execution of a workflow, started with origin `agent`.
    Workflow {
        /// The workflow.
        workflow_id: WorkflowId,
        /// The model's arguments.
        input: Value,
    },
}

/// Checks a tool's name: 1–64 letters, digits, `_` or `-`, as OpenAI's API requires of a
/// function's name (the agent's own tools and a client's alike).
///
/// # Errors
/// A [`FieldError`] naming `field`.
pub fn tool_name(raw: &str, field: &str) -> Result<String, FieldError> {
    let ok = (1..=64).contains(&raw.len())
        && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(raw.to_owned())
    } else {
        Err(FieldError::new(
            field,
            FieldErrorKind::InvalidValue,
            format!("{field} must be 1–64 letters, digits, _ or -"),
        ))
    }
}

impl AgentTool {
    /// Reads `config.tools`: a list of at most [`MAX_TOOLS`] tool objects with unique names,
    /// each read as its `type`'s fields (unknown ones refused). Every refused field is named by
    /// its path (`config.tools[1].allowed_hosts[0]`).
    ///
    /// # Errors
    /// Every refused field.
    pub fn parse_list(raw: &Value) -> Result<Vec<Self>, Vec<FieldError>> {
        config::tools(raw)
    }

    /// The tool as configured and shown.
    pub fn to_json(&self) -> Value {
        if let ToolKind::Mcp { server_id, tools } = &self.kind {
            let mut out = json!({"type": "mcp", "server_id": server_id.as_str()});
            if let Some(tools) = tools {
                out["tools"] = json!(tools);
            }
            return out;
        }
        if self.kind == ToolKind::CoreMemory {
            return json!({"type": "core_memory"});
        }
        let mut out = json!({"type": self.kind.type_name(), "name": self.name});
        if let Some(d) = &self.description {
            out["description"] = json!(d);
        }
        match &self.kind {
            ToolKind::MemorySearch | ToolKind::MemoryAdd => {}
            ToolKind::RunWorkflow { workflow_id, input_schema, timeout_seconds } => {
                out["workflow_id"] = json!(workflow_id.as_str());
                out["input_schema"] = input_schema.clone();
                out["timeout_seconds"] = json!(timeout_seconds);
            }
            ToolKind::HttpRequest { allowed_hosts, method } => {
                out["allowed_hosts"] = json!(allowed_hosts);
                out["method"] = json!(method.as_str());
            }
            ToolKind::Mcp { .. } | ToolKind::CoreMemory => {}
        }
        out
    }

    /// The tool as a model is told about it. An `mcp` entry stands for a server's tools, which
    /// their provider describes (this names the entry only).
    pub fn spec(&self) -> ToolSpec {
        let (default_description, parameters) = match &self.kind {
            ToolKind::MemorySearch => (
                "Search your long-term memory for facts that may help. Returns the most relevant memories."
                    .to_owned(),
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "What to look for"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS, "description": "Most results (default 5)"}
                    },
                    "required": ["query"]
                }),
            ),
            ToolKind::MemoryAdd => (
                "Remember a fact for later conversations (adds it to your long-term memory).".to_owned(),
                json!({
                    "type": "object",
                    "properties": {"content": {"type": "string", "description": "The fact to remember"}},
                    "required": ["content"]
                }),
            ),
            ToolKind::RunWorkflow { workflow_id, input_schema, .. } => {
                (format!("Run the workflow {workflow_id} and get its output."), input_schema.clone())
            }
            ToolKind::HttpRequest { allowed_hosts, method } => {
                let mut properties = json!({
                    "url": {"type": "string", "description": format!("An http(s) URL on one of: {}", allowed_hosts.join(", "))}
                });
                if *method == HttpMethod::Post {
                    properties["body"] = json!({"description": "The request body (JSON)"});
                }
                (String::new(), json!({"type": "object", "properties": properties, "required": ["url"]}))
            }
            ToolKind::Mcp { server_id, .. } => {
                (format!("The tools of the MCP server {server_id}."), json!({"type": "object"}))
            }
            ToolKind::CoreMemory => {
                ("Edits of your core memory blocks.".to_owned(), json!({"type": "object"}))
            }
        };
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone().unwrap_or(default_description),
            parameters,
        }
    }

    /// How long a call may take.
    pub fn timeout(&self) -> Duration {
        match &self.kind {
            ToolKind::RunWorkflow { timeout_seconds, .. } => Duration::from_secs(u64::from(*timeout_seconds)),
            _ => BUILTIN_TOOL_TIMEOUT,
        }
    }

    /// What a model's call of this tool (for `agent`) with `args` asks the service to do.
    ///
    /// # Errors
    /// [`ToolError::BadArguments`] for a missing argument, [`ToolError::NotAllowed`] for a host
    /// not on the allow-list.
    pub fn action(&self, agent: &AgentId, args: Map<String, Value>) -> Result<ToolAction, ToolError> {
        let text = |key: &str| -> Result<String, ToolError> {
            args.get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_owned)
                .ok_or_else(|| ToolError::BadArguments(format!("the argument {key:?} (text) is required")))
        };
        Ok(match &self.kind {
            ToolKind::MemorySearch => {
                let limit = args.get("limit").and_then(Value::as_u64).map(|n| n.clamp(1, MAX_SEARCH_RESULTS));
                ToolAction::Step(StepAction::MemorySearch {
                    query: text("query")?,
                    agent_id: Some(agent.clone()),
                    memory_type: None,
                    top_k: limit.and_then(|n| u32::try_from(n).ok()),
                })
            }
            ToolKind::MemoryAdd => ToolAction::Step(StepAction::MemoryAdd {
                content: text("content")?,
                memory_type: MemoryType::Semantic,
                agent_id: Some(agent.clone()),
                metadata: Map::from_iter([("source".to_owned(), json!("agent_tool"))]),
            }),
            ToolKind::RunWorkflow { workflow_id, input_schema, .. } => {
                let missing: Vec<&str> = input_schema
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .filter(|k| !args.contains_key(*k))
                    .collect();
                if !missing.is_empty() {
                    return Err(ToolError::BadArguments(format!(
                        "the input lacks the required field(s): {}",
                        missing.join(", ")
                    )));
                }
                ToolAction::Workflow { workflow_id: workflow_id.clone(), input: Value::Object(args) }
            }
            ToolKind::HttpRequest { allowed_hosts, method } => {
                let raw = text("url")?;
                let url = url::Url::parse(raw.trim())
                    .map_err(|e| ToolError::BadArguments(format!("the url is not an absolute URL: {e}")))?;
                if !matches!(url.scheme(), "http" | "https") {
                    return Err(ToolError::BadArguments("the url must be http or https".into()));
                }
                let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']).to_ascii_lowercase();
                if !allowed_hosts.contains(&host) {
                    return Err(ToolError::NotAllowed(format!(
                        "the host {host:?} is not one this tool may call (allowed: {})",
                        allowed_hosts.join(", ")
                    )));
                }
                let body = if *method == HttpMethod::Post { args.get("body").cloned() } else { None };
                ToolAction::Step(StepAction::HttpRequest {
                    method: *method,
                    url: url.to_string(),
                    headers: Default::default(),
                    body,
                })
            }
            // Their providers perform these themselves.
            ToolKind::Mcp { .. } | ToolKind::CoreMemory => return Err(ToolError::Unknown(self.name.clone())),
        })
    }
}

/// Checks `config.max_tool_rounds`: 0–20.
///
/// # Errors
/// A [`FieldError`] naming `config.max_tool_rounds`.
pub fn max_tool_rounds(raw: i64) -> Result<u8, FieldError> {
    u8::try_from(raw).ok().filter(|n| *n <= MAX_TOOL_ROUNDS).ok_or_else(|| {
        FieldError::new(
            "config.max_tool_rounds",
            FieldErrorKind::OutOfRange,
            format!("config.max_tool_rounds must be between 0 and {MAX_TOOL_ROUNDS}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(arguments: Value) -> Map<String, Value> {
        match arguments {
            Value::Object(map) => map,
            other => panic!("{other}"),
        }
    }

    #[test]
    fn tools_are_read_with_defaults_and_refused_by_path() {
        let tools = AgentTool::parse_list(&json!([
            {"type": "memory_search"},
            {"type": "memory_add", "name": "remember"},
            {"type": "run_workflow", "workflow_id": "wf_1", "name": "summarise", "input_schema": {"properties": {"text": {"type": "string"}}, "required": ["text"]}},
            {"type": "http_request", "name": "weather", "description": "Weather", "allowed_hosts": ["API.example.com"], "method": "POST"}
        ]))
        .unwrap();
        assert_eq!(
            tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["memory_search", "remember", "summarise", "weather"]
        );
        assert_eq!(tools[2].timeout(), Duration::from_secs(30));
        assert_eq!(tools[2].spec().parameters["type"], "object", "a schema is an object's");
        assert_eq!(
            tools[3].kind,
            ToolKind::HttpRequest { allowed_hosts: vec!["api.example.com".into()], method: HttpMethod::Post }
        );
        assert_eq!(
            AgentTool::parse_list(&Value::Array(tools.iter().map(AgentTool::to_json).collect())).unwrap(),
            tools,
            "shown as read"
        );

        let refused = |raw: Value| AgentTool::parse_list(&raw).unwrap_err()[0].field.clone();
        assert_eq!(
            refused(json!([{"type": "memory_search"}, {"type": "memory_search"}])),
            "config.tools[1].name"
        );
        assert_eq!(refused(json!([{"type": "shell"}])), "config.tools[0].type");
        assert_eq!(refused(json!([{"type": "memory_add", "name": "has space"}])), "config.tools[0].name");
        assert_eq!(
            refused(
                json!([{"type": "run_workflow", "name": "x", "workflow_id": "wf", "input_schema": {}, "timeout_seconds": 301}])
            ),
            "config.tools[0].timeout_seconds"
        );
        assert_eq!(
            refused(json!([{"type": "run_workflow", "name": "x", "workflow_id": "wf"}])),
            "config.tools[0].input_schema"
        );
        assert_eq!(
            refused(
                json!([{"type": "run_workflow", "name": "x", "workflow_id": "wf", "input_schema": {"type": "array"}}])
            ),
            "config.tools[0].input_schema.type"
        );
        assert_eq!(
            refused(
                json!([{"type": "http_request", "name": "h", "description": "d", "allowed_hosts": ["https://x.com/"]}])
            ),
            "config.tools[0].allowed_hosts[0]"
        );
        assert_eq!(
            refused(
                json!([{"type": "http_request", "name": "h", "description": "d", "allowed_hosts": ["x.com"], "method": "DELETE"}])
            ),
            "config.tools[0].method"
        );
        assert_eq!(refused(json!([{"type": "memory_add", "url": "x"}])), "config.tools[0].url");
        assert_eq!(refused(json!({"type": "memory_add"})), "config.tools");
        assert_eq!(
            refused(
                json!([{"type": "run_workflow", "name": "x", "workflow_id": "wf", "input_schema": {}, "timeout_seconds": 30.5}])
            ),
            "config.tools[0].timeout_seconds"
        );
        assert_eq!(refused(json!([{"name": "x"}])), "config.tools[0].type");
        assert_eq!(refused(json!([7])), "config.tools[0]");
        assert_eq!(refused(json!([{"type": "mcp"}])), "config.tools[0].server_id");
        assert_eq!(
            refused(
                json!([{"type": "run_workflow", "name": "x", "workflow_id": "wf", "input_schema": {"type": null}}])
            ),
            "config.tools[0].input_schema.type",
            "a null type is no object"
        );
        assert_eq!(
            refused(json!([{"type": "mcp", "server_id": "mcp_1", "tools": []}])),
            "config.tools[0].tools"
        );
        assert_eq!(
            refused(json!([{"type": "mcp", "server_id": "mcp_1"}, {"type": "mcp", "server_id": "mcp_1"}])),
            "config.tools[1].name"
        );
        let mcp = AgentTool::parse_list(&json!([{"type": "mcp", "server_id": "mcp_1", "tools": ["search"]}]))
            .unwrap();
        assert_eq!(
            mcp[0].kind,
            ToolKind::Mcp {
                server_id: McpServerId::from_string("mcp_1"),
                tools: Some(vec!["search".into()])
            }
        );
        assert_eq!(
            mcp[0].to_json(),
            json!({"type": "mcp", "server_id": "mcp_1", "tools": ["search"]}),
            "shown as written"
        );
    }

    #[test]
    fn every_refusal_of_every_tool_is_reported_at_its_path() {
        let errors = AgentTool::parse_list(&json!([
            {"type": "memory_search"},
            {"type": "http_request", "name": "has space", "allowed_hosts": ["ok.example", "https://x/"], "method": "PUT", "colour": "red"},
            {"type": "run_workflow", "name": "w", "workflow_id": 5, "input_schema": "not a schema", "timeout_seconds": 0},
            {"type": "memory_add", "name": "memory_search"},
            {"type": "shell"}
        ]))
        .unwrap_err();
        let fields: Vec<(&str, FieldErrorKind)> = errors.iter().map(|e| (e.field.as_str(), e.kind)).collect();
        assert_eq!(
            fields,
            [
                ("config.tools[1].name", FieldErrorKind::InvalidValue),
                ("config.tools[1].allowed_hosts[1]", FieldErrorKind::InvalidValue),
                ("config.tools[1].method", FieldErrorKind::InvalidValue),
                ("config.tools[1].colour", FieldErrorKind::InvalidValue),
                ("config.tools[2].workflow_id", FieldErrorKind::InvalidType),
                ("config.tools[2].input_schema", FieldErrorKind::InvalidType),
                ("config.tools[2].timeout_seconds", FieldErrorKind::OutOfRange),
                ("config.tools[3].name", FieldErrorKind::InvalidValue),
                ("config.tools[4].type", FieldErrorKind::InvalidValue),
            ],
            "{errors:#?}"
        );
        assert!(
            errors[3].message.contains("it takes: type, name, description, allowed_hosts, method"),
            "{}",
            errors[4].message
        );
        assert!(
            errors[8]
                .message
                .contains("memory_search, memory_add, run_workflow, http_request, mcp, core_memory"),
            "{}",
            errors[8].message
        );
    }

    #[test]
    fn a_call_becomes_an_action_on_the_agents_own_memory_or_an_allowed_host() {
        let agent = AgentId::from_string("agt_1");
        let tools = AgentTool::parse_list(&json!([
            {"type": "memory_search"},
            {"type": "http_request", "name": "weather", "description": "Weather", "allowed_hosts": ["127.0.0.1"]},
            {"type": "run_workflow", "workflow_id": "wf_1", "name": "summarise", "input_schema": {"required": ["text"]}}
        ]))
        .unwrap();
        match tools[0].action(&agent, args(json!({"query": "colour", "limit": 99}))).unwrap() {
            ToolAction::Step(StepAction::MemorySearch { agent_id, top_k, .. }) => {
                assert_eq!(agent_id, Some(agent.clone()), "only the agent's own memory");
                assert_eq!(top_k, Some(20));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            tools[0].action(&agent, args(json!({}))).unwrap_err(),
            ToolError::BadArguments(m) if m.contains("query")
        ));
        assert!(tools[1].action(&agent, args(json!({"url": "http://127.0.0.1:8080/w"}))).is_ok());
        let refused =
            tools[1].action(&agent, args(json!({"url": "http://169.254.169.254/latest"}))).unwrap_err();
        assert!(
            matches!(&refused, ToolError::NotAllowed(m) if m.contains("not one this tool may call")),
            "{refused}"
        );
        assert!(matches!(
            tools[1].action(&agent, args(json!({"url": "file:///etc/passwd"}))).unwrap_err(),
            ToolError::BadArguments(_)
        ));
        assert!(tools[2].action(&agent, args(json!({}))).unwrap_err().to_string().contains("text"));
        assert_eq!(
            tools[2].action(&agent, args(json!({"text": "hi"}))).unwrap(),
            ToolAction::Workflow {
                workflow_id: WorkflowId::from_string("wf_1"),
                input: json!({"text": "hi"})
            }
        );
    }

    #[test]
    fn rounds_are_bounded() {
        assert_eq!(max_tool_rounds(0).unwrap(), 0);
        assert_eq!(max_tool_rounds(20).unwrap(), 20);
        assert!(max_tool_rounds(21).is_err());
        assert!(max_tool_rounds(-1).is_err());
    }
}

//! The `core_memory` tool: an agent configured with `{"type": "core_memory"}` is offered
//! `core_memory_append {label, text}` and `core_memory_replace {label, old, new}` over its own
//! blocks. A change past a block's limit, an unknown label or a passage not found is an error
//! the model reads, and nothing changes.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{BlockError, MemoryBlocks};
use crate::agents::chat::ToolSpec;
use crate::agents::model::Agent;
use crate::agents::providers::{OfferedTool, ToolCallContext, ToolProvider};
use crate::agents::tools::{BUILTIN_TOOL_TIMEOUT, ToolError, ToolKind};
use crate::tenancy::{Permission, Principal};

/// The name of the tool that appends to a block.
pub const APPEND: &str = "core_memory_append";
/// The name of the tool that replaces a passage of a block.
pub const REPLACE: &str = "core_memory_replace";

/// The provider of the `core_memory` tools.
#[derive(Debug, Clone)]
pub struct CoreMemoryTools(pub MemoryBlocks);

/// The position of the agent's `core_memory` entry in its tools, if it has one.
fn configured(agent: &Agent) -> Option<usize> {
    agent.config.tools.iter().position(|t| t.kind == ToolKind::CoreMemory)
}

/// The two tools, as the model is told of them.
pub fn specs() -> [ToolSpec; 2] {
    let label = json!({"type": "string", "description": "The block's label, as your core memory shows it"});
    [
        ToolSpec {
            name: APPEND.into(),
            description: "Append a line to one of your core memory blocks (always in your context). \
                Fails when the block would pass its character limit."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {"label": label, "text": {"type": "string", "description": "What to add"}},
                "required": ["label", "text"]
            }),
        },
        ToolSpec {
            name: REPLACE.into(),
            description: "Replace a passage of one of your core memory blocks with new text (empty \
                new text deletes it). The passage must appear in the block exactly."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "label": label,
                    "old": {"type": "string", "description": "The exact passage to replace"},
                    "new": {"type": "string", "description": "Its replacement"}
                },
                "required": ["label", "old", "new"]
            }),
        },
    ]
}

#[async_trait]
impl ToolProvider for CoreMemoryTools {
    async fn offer(&self, agent: &Agent, _: &Principal) -> Vec<OfferedTool> {
        let Some(position) = configured(agent) else { return Vec::new() };
        specs()
            .into_iter()
            .map(|spec| OfferedTool { spec, timeout: BUILTIN_TOOL_TIMEOUT, kind: "core_memory", position })
            .collect()
    }

    async fn call<'a>(
        &self,
        context: ToolCallContext<'a>,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, ToolError> {
        if configured(context.agent).is_none() || (name != APPEND && name != REPLACE) {
            return Err(ToolError::Unknown(name.to_owned()));
        }
        // The agent edits its own configuration's memory: as its caller could.
        if context.caller.require(Permission::AgentsWrite).is_err() {
            return Err(ToolError::NotAllowed("the caller may not change this agent".into()));
        }
        let text =
            |key: &str| -> Result<String, ToolError> {
                arguments.get(key).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| {
                    ToolError::BadArguments(format!("the argument {key:?} (text) is required"))
                })
            };
        let (tenant, agent) = (&context.agent.tenant_id, &context.agent.id);
        let label = text("label")?;
        let changed = if name == APPEND {
            let added = text("text")?;
            if added.trim().is_empty() {
                return Err(ToolError::BadArguments("the text to append is empty".into()));
            }
            self.0.append(tenant, agent, &label, &added).await
        } else {
            self.0.replace(tenant, agent, &label, &text("old")?, &text("new")?).await
        };
        match changed {
            Ok(block) => Ok(json!({
                "label": block.label,
                "value": block.value,
                "chars": block.value.chars().count(),
                "limit": block.limit,
                "version": block.version,
            })),
            Err(e @ (BlockError::BlockNotFound(_) | BlockError::TextNotFound(_))) => {
                Err(ToolError::BadArguments(e.to_string()))
            }
            Err(e @ BlockError::OverLimit { .. }) => Err(ToolError::Failed(e.to_string())),
            Err(e) => Err(ToolError::Failed(format!("the block could not be changed: {e}"))),
        }
    }
}

//! `knowledge_search`: offered by an agent in `tool` mode that has knowledge bases. The model
//! looks up passages of them, numbered to be cited as a prompt's sources are (the chat
//! renumbers each call's results after those before them).

use std::sync::Arc;
use std::time::Duration;

use agentry_domain::agents::{
    Agent, KNOWLEDGE_TOOL, KnowledgeMode, KnowledgeRetrieval, OfferedTool, ToolCallContext, ToolError,
    ToolProvider, ToolSpec,
};
use agentry_domain::tenancy::Principal;
use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::within;

/// How long a knowledge search may take as a tool.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The agent's bases searched for the model.
pub struct KnowledgeTools(pub Arc<dyn KnowledgeRetrieval>);

impl std::fmt::Debug for KnowledgeTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KnowledgeTools")
    }
}

/// The query and the number of results of a call: at most the agent's `top_k`.
fn arguments_of(agent: &Agent, arguments: &Map<String, Value>) -> Result<(String, usize), ToolError> {
    let query = match arguments.get("query") {
        Some(Value::String(q)) if !q.trim().is_empty() => q.clone(),
        _ => return Err(ToolError::BadArguments("query must be a non-empty string".into())),
    };
    let most = usize::from(agent.config.knowledge.top_k);
    let top_k = match arguments.get("top_k") {
        None | Some(Value::Null) => most,
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => usize::try_from(n).unwrap_or(most).min(most),
            _ => return Err(ToolError::BadArguments("top_k must be a whole number from 1".into())),
        },
    };
    Ok((query, top_k))
}

#[async_trait]
impl ToolProvider for KnowledgeTools {
    async fn offer(&self, agent: &Agent, _caller: &Principal) -> Vec<OfferedTool> {
        let c = &agent.config;
        if c.knowledge.mode != KnowledgeMode::Tool || c.knowledge_bases.is_empty() {
            return Vec::new();
        }
        vec![OfferedTool {
            spec: ToolSpec {
                name: KNOWLEDGE_TOOL.into(),
                description: "Search your knowledge bases (the team's files) for passages that answer a \
                              question. Each result has an index: cite what you use as [index]."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "What to look for, in words"},
                        "top_k": {"type": "integer", "minimum": 1, "maximum": c.knowledge.top_k}
                    },
                    "required": ["query"]
                }),
            },
            timeout: TIMEOUT,
            kind: KNOWLEDGE_TOOL,
            // After the tools the agent lists itself.
            position: usize::MAX,
        }]
    }

    async fn call<'a>(
        &self,
        context: ToolCallContext<'a>,
        _name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, ToolError> {
        let (query, top_k) = arguments_of(context.agent, &arguments)?;
        let found = within(context.timeout, async {
            self.0.sources(context.agent, &query, top_k).await.map_err(|e| ToolError::Failed(e.to_string()))
        })
        .await?;
        let results: Vec<Value> = found
            .into_iter()
            .map(|s| {
                json!({
                    "index": s.index, "chunk_id": s.chunk_id, "file_id": s.file_id, "file_name": s.file_name,
                    "page": s.page, "headings": s.headings, "text": s.text,
                })
            })
            .collect();
        Ok(json!({ "results": results }))
    }
}

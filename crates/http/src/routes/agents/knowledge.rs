//! An agent's knowledge settings in requests and answers: `config.knowledge_bases` and
//! `config.knowledge` (PRODUCT.md §15, docs/knowledge.md).

use agentry_domain::agents::{AgentKnowledge, knowledge_bases};
use agentry_domain::ids::KnowledgeBaseId;
use agentry_domain::patch::Patch;
use agentry_domain::validation::{Checked, FieldError, Validator};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::extract::{JsonInt, JsonObject};

/// `config.knowledge` in a request: every key optional, the defaults fill in.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct KnowledgeConfigRequest {
    /// `auto` (default): the best passages go into the prompt as numbered sources; `tool`: the
    /// model is offered `knowledge_search`.
    #[schema(value_type = Option<String>, pattern = "^(auto|tool)$", example = "auto")]
    pub mode: Option<String>,
    /// Most passages per retrieval or search, 1–50 (default 5).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 50)]
    pub top_k: Option<JsonInt>,
    /// Most tokens of sources in a prompt (`auto`), 100–32,000 (default 1,500).
    #[schema(value_type = Option<i64>, minimum = 100, maximum = 32000)]
    pub max_context_tokens: Option<JsonInt>,
}

/// `config.knowledge` validated, defaults filled in.
fn read(c: KnowledgeConfigRequest) -> Result<AgentKnowledge, Vec<FieldError>> {
    let d = AgentKnowledge::default();
    let mut errors = Vec::new();
    fn keep<T>(errors: &mut Vec<FieldError>, read: Result<T, FieldError>, default: T) -> T {
        read.unwrap_or_else(|e| {
            errors.push(e);
            default
        })
    }
    let mode = c.mode.map_or(d.mode, |m| keep(&mut errors, AgentKnowledge::mode(&m), d.mode));
    let top_k = c.top_k.map_or(d.top_k, |n| keep(&mut errors, AgentKnowledge::top_k(n.0), d.top_k));
    let max_context_tokens = c.max_context_tokens.map_or(d.max_context_tokens, |n| {
        keep(&mut errors, AgentKnowledge::max_context_tokens(n.0), d.max_context_tokens)
    });
    if errors.is_empty() { Ok(AgentKnowledge { mode, top_k, max_context_tokens }) } else { Err(errors) }
}

/// A new agent's `config.knowledge_bases`, checked.
pub(super) fn new_bases(v: &mut Validator, raw: Option<Vec<String>>) -> Checked<Vec<KnowledgeBaseId>> {
    v.check_all(knowledge_bases(&raw.unwrap_or_default()))
}

/// A new agent's `config.knowledge`, checked.
pub(super) fn new_settings(
    v: &mut Validator,
    raw: Option<JsonObject<KnowledgeConfigRequest>>,
) -> Checked<AgentKnowledge> {
    v.check_all(read(raw.map(|c| c.0).unwrap_or_default()))
}

/// A change of `config.knowledge_bases` (null: none).
pub(super) fn changed_bases(
    v: &mut Validator,
    raw: Patch<Vec<String>>,
) -> Checked<Patch<Vec<KnowledgeBaseId>>> {
    v.check_all(match raw {
        Patch::Absent => Ok(Patch::Absent),
        Patch::Null => Ok(Patch::Null),
        Patch::Value(ids) => knowledge_bases(&ids).map(Patch::Value),
    })
}

/// A change of `config.knowledge`, replaced whole (null: the defaults).
pub(super) fn changed_settings(
    v: &mut Validator,
    raw: Patch<JsonObject<KnowledgeConfigRequest>>,
) -> Checked<Patch<AgentKnowledge>> {
    v.check_all(match raw {
        Patch::Absent => Ok(Patch::Absent),
        Patch::Null => Ok(Patch::Null),
        Patch::Value(c) => read(c.0).map(Patch::Value),
    })
}

/// `config.knowledge` as shown.
#[derive(Debug, Serialize, ToSchema)]
pub struct KnowledgeConfigResponse {
    /// `auto` or `tool`.
    pub mode: &'static str,
    /// Most passages per retrieval or search.
    pub top_k: u8,
    /// Most tokens of sources in a prompt.
    pub max_context_tokens: u32,
}

impl From<AgentKnowledge> for KnowledgeConfigResponse {
    fn from(k: AgentKnowledge) -> Self {
        Self { mode: k.mode.as_str(), top_k: k.top_k, max_context_tokens: k.max_context_tokens }
    }
}

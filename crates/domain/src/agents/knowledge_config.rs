//! What an agent sets about its knowledge bases: `config.knowledge_bases` (which) and
//! `config.knowledge` (how chat uses them), and their validation.

use serde_json::{Value, json};

use crate::ids::KnowledgeBaseId;
use crate::validation::{FieldError, FieldErrorKind};

/// Most knowledge bases one agent uses.
pub const MAX_AGENT_KNOWLEDGE_BASES: usize = 20;
/// Most passages one retrieval or tool call gives.
pub const MAX_KNOWLEDGE_TOP_K: u8 = 50;
/// Fewest and most tokens of sources in a prompt.
pub const KNOWLEDGE_CONTEXT_TOKENS: std::ops::RangeInclusive<u32> = 100..=32_000;
/// The name of the tool an agent in `tool` mode offers.
pub const KNOWLEDGE_TOOL: &str = "knowledge_search";

crate::string_enum! {
    /// How chat uses an agent's knowledge bases.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum KnowledgeMode {
        /// The passages best matching the user's message go into the prompt as numbered
        /// sources, before the model is called.
        #[default]
        Auto => "auto",
        /// The model is offered `knowledge_search` and looks up what it needs.
        Tool => "tool",
    }
}

/// `config.knowledge`: how chat uses the agent's knowledge bases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentKnowledge {
    /// `auto` or `tool`.
    pub mode: KnowledgeMode,
    /// Most passages per retrieval or tool call, 1–50.
    pub top_k: u8,
    /// Most tokens of sources put into the prompt in `auto` mode, 100–32,000.
    pub max_context_tokens: u32,
}

impl Default for AgentKnowledge {
    fn default() -> Self {
        Self { mode: KnowledgeMode::Auto, top_k: 5, max_context_tokens: 1500 }
    }
}

impl AgentKnowledge {
    /// Validates `config.knowledge.mode`.
    ///
    /// # Errors
    /// A [`FieldError`] naming it.
    pub fn mode(raw: &str) -> Result<KnowledgeMode, FieldError> {
        KnowledgeMode::parse(raw).ok_or_else(|| {
            FieldError::new(
                "config.knowledge.mode",
                FieldErrorKind::InvalidValue,
                "config.knowledge.mode must be auto or tool",
            )
        })
    }

    /// Validates `config.knowledge.top_k`: 1–50.
    ///
    /// # Errors
    /// A [`FieldError`] naming it.
    pub fn top_k(raw: i64) -> Result<u8, FieldError> {
        u8::try_from(raw).ok().filter(|n| (1..=MAX_KNOWLEDGE_TOP_K).contains(n)).ok_or_else(|| {
            FieldError::new(
                "config.knowledge.top_k",
                FieldErrorKind::OutOfRange,
                format!("config.knowledge.top_k must be between 1 and {MAX_KNOWLEDGE_TOP_K}"),
            )
        })
    }

    /// Validates `config.knowledge.max_context_tokens`: 100–32,000.
    ///
    /// # Errors
    /// A [`FieldError`] naming it.
    pub fn max_context_tokens(raw: i64) -> Result<u32, FieldError> {
        u32::try_from(raw).ok().filter(|n| KNOWLEDGE_CONTEXT_TOKENS.contains(n)).ok_or_else(|| {
            FieldError::new(
                "config.knowledge.max_context_tokens",
                FieldErrorKind::OutOfRange,
                format!(
                    "config.knowledge.max_context_tokens must be between {} and {}",
                    KNOWLEDGE_CONTEXT_TOKENS.start(),
                    KNOWLEDGE_CONTEXT_TOKENS.end()
                ),
            )
        })
    }

    /// Reads a stored `config.knowledge`; what is absent or unreadable is the default.
    pub fn from_stored(value: Option<&Value>) -> Self {
        let d = Self::default();
        let Some(v) = value else { return d };
        Self {
            mode: v.get("mode").and_then(Value::as_str).and_then(KnowledgeMode::parse).unwrap_or(d.mode),
            top_k: v
                .get("top_k")
                .and_then(Value::as_u64)
                .and_then(|n| u8::try_from(n).ok())
                .unwrap_or(d.top_k),
            max_context_tokens: v
                .get("max_context_tokens")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(d.max_context_tokens),
        }
    }

    /// As the API shows it.
    pub fn to_json(&self) -> Value {
        json!({"mode": self.mode.as_str(), "top_k": self.top_k, "max_context_tokens": self.max_context_tokens})
    }
}

/// Validates `config.knowledge_bases`: up to 20 ids, each once. Whether they are the tenant's
/// is checked by the agent service.
///
/// # Errors
/// The [`FieldError`]s, each naming its item.
pub fn knowledge_bases(raw: &[String]) -> Result<Vec<KnowledgeBaseId>, Vec<FieldError>> {
    if raw.len() > MAX_AGENT_KNOWLEDGE_BASES {
        return Err(vec![FieldError::new(
            "config.knowledge_bases",
            FieldErrorKind::TooLong,
            format!("config.knowledge_bases holds at most {MAX_AGENT_KNOWLEDGE_BASES} ids"),
        )]);
    }
    let mut errors = Vec::new();
    let mut ids: Vec<KnowledgeBaseId> = Vec::new();
    for (i, id) in raw.iter().enumerate() {
        let field = format!("config.knowledge_bases[{i}]");
        let well_formed = (1..=128).contains(&id.len())
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !well_formed {
            errors.push(FieldError::new(
                field,
                FieldErrorKind::InvalidFormat,
                "a knowledge base id is 1–128 letters, digits, _ or -",
            ));
        } else if ids.iter().any(|known| known.as_str() == id) {
            errors.push(FieldError::new(
                field,
                FieldErrorKind::InvalidValue,
                format!("{id} is listed twice"),
            ));
        } else {
            ids.push(KnowledgeBaseId::from_string(id.clone()));
        }
    }
    if errors.is_empty() { Ok(ids) } else { Err(errors) }
}

#[cfg(test)]
mod tests;

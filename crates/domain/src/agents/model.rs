//! Agents and their configuration.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::extraction_config::ExtractionMode;
use super::knowledge_config::AgentKnowledge;
use super::tools::AgentTool;
use crate::events::AgentData;
use crate::ids::{AgentId, KnowledgeBaseId, TenantId};
use crate::memory::MemoryType;
use crate::patch::Patch;
use crate::validation::{FieldError, FieldErrorKind, TextKind, check_length, check_long_text, check_text};

crate::string_enum! {
    /// What an agent is for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum AgentType {
        /// A general assistant (the default).
        Assistant => "assistant",
        /// A customer-support agent.
        Support => "support",
        /// Anything else.
        Custom => "custom",
    }
    impl FromStr(field = "type");
}

crate::string_enum! {
    /// Whether an agent answers.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum AgentStatus {
        /// Answers chat messages.
        Active => "active",
        /// Refuses chat messages (409) until set active again.
        Paused => "paused",
    }
    impl FromStr(field = "status");
}

crate::bounded_text!(
    /// An agent's display name: 1–100 characters after trimming.
    AgentName,
    "name",
    1..=100
);

/// Most characters of a description.
pub const MAX_DESCRIPTION_CHARS: usize = 2_000;
/// Most characters of a system prompt.
pub const MAX_SYSTEM_PROMPT_CHARS: usize = 16_000;
/// Most characters of a model name.
pub const MAX_MODEL_CHARS: usize = 200;
/// Largest `max_tokens`.
pub const MAX_COMPLETION_TOKENS: u32 = 32_000;
/// Highest sampling temperature.
pub const MAX_TEMPERATURE: f64 = 2.0;

/// How an agent talks to its model. Every field is optional; the service's defaults fill in.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentConfig {
    /// The model name, e.g. `gpt-4o-mini`; default: the configured model.
    pub model: Option<String>,
    /// Sampling temperature, 0–2.
    pub temperature: Option<f64>,
    /// Instructions sent before every conversation.
    pub system_prompt: Option<String>,
    /// Longest reply in tokens, 1–32,000.
    pub max_tokens: Option<u32>,
    /// The tools it may call.
    pub tools: Vec<AgentTool>,
    /// Most rounds of tool calls per chat, 0–20 (default 5).
    pub max_tool_rounds: Option<u8>,
    /// The tenant's knowledge bases it answers from.
    pub knowledge_bases: Vec<KnowledgeBaseId>,
    /// How chat uses them.
    pub knowledge: AgentKnowledge,
    /// How its memory learns from its conversations.
    pub memory_extraction: ExtractionMode,
}

impl AgentConfig {
    /// Validates a model name: 1–200 characters after trimming, one line.
    ///
    /// # Errors
    /// A [`FieldError`] naming `config.model`.
    pub fn model(raw: &str) -> Result<String, FieldError> {
        check_text(raw, "config.model", TextKind::SingleLine)?;
        check_length(raw.trim(), 1, MAX_MODEL_CHARS, "config.model")?;
        Ok(raw.trim().to_owned())
    }

    /// Validates a sampling temperature: 0–2.
    ///
    /// # Errors
    /// A [`FieldError`] naming `config.temperature`.
    pub fn temperature(raw: f64) -> Result<f64, FieldError> {
        if (0.0..=MAX_TEMPERATURE).contains(&raw) {
            Ok(raw)
        } else {
            Err(FieldError::new(
                "config.temperature",
                FieldErrorKind::OutOfRange,
                "config.temperature must be between 0 and 2",
            ))
        }
    }

    /// Validates a system prompt: up to 16,000 characters; tabs and line breaks allowed.
    ///
    /// # Errors
    /// A [`FieldError`] naming `config.system_prompt`.
    pub fn system_prompt(raw: String) -> Result<String, FieldError> {
        check_long_text(&raw, 0, MAX_SYSTEM_PROMPT_CHARS, "config.system_prompt")?;
        Ok(raw)
    }

    /// Validates `max_tokens`: 1–32,000.
    ///
    /// # Errors
    /// A [`FieldError`] naming `config.max_tokens`.
    pub fn max_tokens(raw: i64) -> Result<u32, FieldError> {
        u32::try_from(raw).ok().filter(|n| (1..=MAX_COMPLETION_TOKENS).contains(n)).ok_or_else(|| {
            FieldError::new(
                "config.max_tokens",
                FieldErrorKind::OutOfRange,
                format!("config.max_tokens must be between 1 and {MAX_COMPLETION_TOKENS}"),
            )
        })
    }

    /// Reads a stored config. Unknown keys are ignored, invalid values dropped: what was stored
    /// was validated on the way in.
    pub fn from_stored(value: &Value) -> Self {
        let text = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_owned);
        Self {
            model: text("model"),
            temperature: value.get("temperature").and_then(Value::as_f64),
            system_prompt: text("system_prompt"),
            max_tokens: value.get("max_tokens").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()),
            tools: value.get("tools").and_then(|t| AgentTool::parse_list(t).ok()).unwrap_or_default(),
            max_tool_rounds: value
                .get("max_tool_rounds")
                .and_then(Value::as_u64)
                .and_then(|n| u8::try_from(n).ok()),
            knowledge_bases: value
                .get("knowledge_bases")
                .and_then(Value::as_array)
                .map(|ids| ids.iter().filter_map(Value::as_str).map(KnowledgeBaseId::from_string).collect())
                .unwrap_or_default(),
            knowledge: AgentKnowledge::from_stored(value.get("knowledge")),
            memory_extraction: value
                .get("memory_extraction")
                .and_then(Value::as_str)
                .and_then(ExtractionMode::parse)
                .unwrap_or_default(),
        }
    }

    /// The config as the API shows it (absent values as null).
    pub fn to_json(&self) -> Value {
        json!({
            "model": self.model,
            "temperature": self.temperature,
            "system_prompt": self.system_prompt,
            "max_tokens": self.max_tokens,
            "tools": self.tools.iter().map(AgentTool::to_json).collect::<Vec<_>>(),
            "max_tool_rounds": self.max_tool_rounds,
            "knowledge_bases": self.knowledge_bases,
            "knowledge": self.knowledge.to_json(),
            "memory_extraction": self.memory_extraction.as_str(),
        })
    }
}

/// Validates a description: up to 2,000 characters, tabs and line breaks allowed; blank text
/// means none.
///
/// # Errors
/// A [`FieldError`] naming `description`.
pub fn description(raw: String) -> Result<Option<String>, FieldError> {
    check_long_text(&raw, 0, MAX_DESCRIPTION_CHARS, "description")?;
    Ok(Some(raw).filter(|d| !d.trim().is_empty()))
}

/// Validates a list of memory types, dropping duplicates.
///
/// # Errors
/// A [`FieldError`] naming `memory_types` for an unknown type.
pub fn memory_types(raw: &[String]) -> Result<Vec<MemoryType>, FieldError> {
    let mut types = raw.iter().map(|t| t.parse::<MemoryType>()).collect::<Result<Vec<_>, _>>()?;
    types.sort();
    types.dedup();
    Ok(types)
}

/// An agent.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    /// Its id.
    pub id: AgentId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// Its name.
    pub name: AgentName,
    /// What it is for.
    pub agent_type: AgentType,
    /// Whether it answers.
    pub status: AgentStatus,
    /// A description, up to 2,000 characters.
    pub description: Option<String>,
    /// Kinds of memory it keeps, without duplicates.
    pub memory_types: Vec<MemoryType>,
    /// Model settings.
    pub config: AgentConfig,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

impl Agent {
    /// The agent as event data shows it.
    pub fn to_data(&self) -> AgentData {
        AgentData {
            id: self.id.clone(),
            tenant_id: self.tenant_id.clone(),
            name: self.name.as_str().to_owned(),
            agent_type: self.agent_type.as_str().to_owned(),
            status: self.status.as_str().to_owned(),
            description: self.description.clone(),
            memory_types: self.memory_types.iter().map(|m| m.as_str().to_owned()).collect(),
            config: self.config.to_json(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A validated new agent.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAgent {
    /// Its name.
    pub name: AgentName,
    /// What it is for (default `assistant`).
    pub agent_type: AgentType,
    /// Whether it answers (default `active`).
    pub status: AgentStatus,
    /// A description.
    pub description: Option<String>,
    /// Kinds of memory it keeps.
    pub memory_types: Vec<MemoryType>,
    /// Model settings.
    pub config: AgentConfig,
}

/// A validated change of an agent's config. `reset` (the request's `config: null`) clears
/// every key first; then each key is kept, cleared or set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigChanges {
    /// Clear every key before applying the others.
    pub reset: bool,
    /// `config.model`.
    pub model: Patch<String>,
    /// `config.temperature`.
    pub temperature: Patch<f64>,
    /// `config.system_prompt`.
    pub system_prompt: Patch<String>,
    /// `config.max_tokens`.
    pub max_tokens: Patch<u32>,
    /// `config.tools` (null: none).
    pub tools: Patch<Vec<AgentTool>>,
    /// `config.max_tool_rounds`.
    pub max_tool_rounds: Patch<u8>,
    /// `config.knowledge_bases` (null: none).
    pub knowledge_bases: Patch<Vec<KnowledgeBaseId>>,
    /// `config.knowledge`, replaced whole (null: the defaults).
    pub knowledge: Patch<AgentKnowledge>,
    /// `config.memory_extraction` (null: `auto`).
    pub memory_extraction: Patch<ExtractionMode>,
}

/// A validated partial update of an agent: absent fields stay as they are. Fields that cannot
/// be empty (`name`, `type`, `status`) have no null state; the request refuses null for them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentChanges {
    /// New name.
    pub name: Option<AgentName>,
    /// New type.
    pub agent_type: Option<AgentType>,
    /// New status.
    pub status: Option<AgentStatus>,
    /// New description; null (or blank text) clears it.
    pub description: Patch<String>,
    /// New memory types; null clears them.
    pub memory_types: Patch<Vec<MemoryType>>,
    /// Config keys to change.
    pub config: ConfigChanges,
}

impl AgentChanges {
    /// `agent` with these changes applied at `now`.
    pub fn apply(&self, agent: &Agent, now: DateTime<Utc>) -> Agent {
        let mut next = agent.clone();
        if let Some(name) = &self.name {
            next.name = name.clone();
        }
        if let Some(t) = self.agent_type {
            next.agent_type = t;
        }
        if let Some(s) = self.status {
            next.status = s;
        }
        next.description = self.description.clone().apply_to(next.description);
        next.memory_types = self.memory_types.clone().apply_to(Some(next.memory_types)).unwrap_or_default();
        let c = &self.config;
        let base = if c.reset { AgentConfig::default() } else { next.config };
        next.config = AgentConfig {
            model: c.model.clone().apply_to(base.model),
            temperature: c.temperature.apply_to(base.temperature),
            system_prompt: c.system_prompt.clone().apply_to(base.system_prompt),
            max_tokens: c.max_tokens.apply_to(base.max_tokens),
            tools: c.tools.clone().apply_to(Some(base.tools)).unwrap_or_default(),
            max_tool_rounds: c.max_tool_rounds.apply_to(base.max_tool_rounds),
            knowledge_bases: c
                .knowledge_bases
                .clone()
                .apply_to(Some(base.knowledge_bases))
                .unwrap_or_default(),
            knowledge: c.knowledge.apply_to(Some(base.knowledge)).unwrap_or_default(),
            memory_extraction: c.memory_extraction.apply_to(Some(base.memory_extraction)).unwrap_or_default(),
        };
        next.updated_at = now;
        next
    }

    /// The names of the fields that differ between `before` and `after`.
    pub fn changed_fields(before: &Agent, after: &Agent) -> Vec<String> {
        [
            ("name", before.name != after.name),
            ("type", before.agent_type != after.agent_type),
            ("status", before.status != after.status),
            ("description", before.description != after.description),
            ("memory_types", before.memory_types != after.memory_types),
            ("config", before.config != after.config),
        ]
        .into_iter()
        .filter(|(_, changed)| *changed)
        .map(|(name, _)| name.to_owned())
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn config_values_are_bounded() {
        assert_eq!(AgentConfig::temperature(-0.1).unwrap_err().field, "config.temperature");
        assert_eq!(AgentConfig::temperature(2.0).unwrap(), 2.0);
        assert!(AgentConfig::temperature(f64::NAN).is_err());
        assert_eq!(AgentConfig::max_tokens(0).unwrap_err().kind, FieldErrorKind::OutOfRange);
        assert_eq!(AgentConfig::max_tokens(i64::MAX).unwrap_err().field, "config.max_tokens");
        assert_eq!(AgentConfig::max_tokens(10).unwrap(), 10);
        assert_eq!(AgentConfig::model("  gpt  ").unwrap(), "gpt");
        assert!(AgentConfig::model("  ").is_err());
        assert!(AgentConfig::model("a\u{0}").is_err());
        assert!(AgentConfig::system_prompt("line\nline".into()).is_ok());
        assert!(AgentConfig::system_prompt("nul\u{0}".into()).is_err());
        assert_eq!(
            memory_types(&["episodic".into(), "semantic".into(), "episodic".into()]).unwrap().len(),
            2
        );
        assert_eq!(memory_types(&["dreams".into()]).unwrap_err().kind, FieldErrorKind::InvalidValue);
        assert_eq!(description("   ".into()).unwrap(), None);
    }

    fn agent() -> Agent {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
        Agent {
            id: AgentId::from_string("agt_1"),
            tenant_id: TenantId::from_string("ten_1"),
            name: AgentName::new("Helper").unwrap(),
            agent_type: AgentType::Assistant,
            status: AgentStatus::Active,
            description: Some("d".into()),
            memory_types: vec![MemoryType::Semantic],
            config: AgentConfig {
                model: Some("m".into()),
                temperature: Some(0.5),
                system_prompt: Some("be brief".into()),
                max_tokens: Some(100),
                ..AgentConfig::default()
            },
            created_at: t0,
            updated_at: t0,
        }
    }

    #[test]
    fn a_patch_keeps_clears_or_sets_each_field() {
        let agent = agent();
        let later = agent.created_at + chrono::Duration::seconds(5);
        let changes = AgentChanges {
            status: Some(AgentStatus::Paused),
            description: Patch::Null,
            config: ConfigChanges {
                temperature: Patch::Value(1.0),
                system_prompt: Patch::Null,
                ..ConfigChanges::default()
            },
            ..AgentChanges::default()
        };
        let next = changes.apply(&agent, later);
        assert_eq!(next.status, AgentStatus::Paused);
        assert_eq!(next.description, None, "null clears");
        assert_eq!(next.config.temperature, Some(1.0));
        assert_eq!(next.config.system_prompt, None, "null clears a config key");
        assert_eq!(next.config.model.as_deref(), Some("m"), "absent config keys are kept");
        assert_eq!(next.memory_types, agent.memory_types, "absent fields are kept");
        assert_eq!(next.name, agent.name);
        assert_eq!(next.updated_at, later);
        assert_eq!(next.created_at, agent.created_at);
        assert_eq!(AgentChanges::changed_fields(&agent, &next), ["status", "description", "config"]);
    }

    #[test]
    fn a_null_config_resets_it_before_the_keys_given() {
        let agent = agent();
        let changes = AgentChanges {
            config: ConfigChanges { reset: true, max_tokens: Patch::Value(5), ..ConfigChanges::default() },
            memory_types: Patch::Null,
            ..AgentChanges::default()
        };
        let next = changes.apply(&agent, agent.created_at);
        assert_eq!(next.config, AgentConfig { max_tokens: Some(5), ..AgentConfig::default() });
        assert!(next.memory_types.is_empty());
    }
}

//! Agents and their configuration.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::ids::{AgentId, TenantId};
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator, check_length};

macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident, $field:literal { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every value.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The stable name.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
        }

        impl FromStr for $name {
            type Err = FieldError;
            fn from_str(s: &str) -> Result<Self, FieldError> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    other => Err(FieldError::new(
                        $field,
                        FieldErrorKind::InvalidValue,
                        format!("{other:?} is not one of: {}", [$($text),+].join(", ")),
                    )),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_enum!(
    /// What an agent is for.
    AgentType, "type" {
        /// A general assistant (the default).
        Assistant = "assistant",
        /// A customer-support agent.
        Support = "support",
        /// Anything else.
        Custom = "custom",
    }
);

string_enum!(
    /// Whether an agent answers.
    AgentStatus, "status" {
        /// Answers chat messages.
        Active = "active",
        /// Refuses chat messages (409) until set active again.
        Paused = "paused",
    }
);

string_enum!(
    /// A kind of memory an agent keeps.
    MemoryType, "memory_types" {
        /// Facts and documents.
        Semantic = "semantic",
        /// What happened in conversations.
        Episodic = "episodic",
        /// How to do things.
        Procedural = "procedural",
    }
);

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
/// Largest `max_tokens`.
pub const MAX_COMPLETION_TOKENS: u32 = 32_000;

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
}

impl AgentConfig {
    /// Validates a raw `config` object. Unknown keys are ignored.
    ///
    /// # Errors
    /// A [`FieldError`] naming `config.<key>` for a value of the wrong type or out of range.
    pub fn from_json(value: &Value) -> Result<Self, FieldError> {
        let object = value.as_object().ok_or_else(|| {
            FieldError::new("config", FieldErrorKind::InvalidType, "config must be an object")
        })?;
        let get = |k: &str| object.get(k).filter(|v| !v.is_null());
        let model = match get("model") {
            None => None,
            Some(Value::String(s)) => {
                check_length(s.trim(), 1, 200, "config.model")?;
                Some(s.trim().to_owned())
            }
            Some(_) => {
                return Err(FieldError::new(
                    "config.model",
                    FieldErrorKind::InvalidType,
                    "config.model must be a string",
                ));
            }
        };
        let temperature = match get("temperature") {
            None => None,
            Some(v) => {
                let t = v.as_f64().ok_or_else(|| {
                    FieldError::new(
                        "config.temperature",
                        FieldErrorKind::InvalidType,
                        "config.temperature must be a number",
                    )
                })?;
                if !(0.0..=2.0).contains(&t) {
                    return Err(FieldError::new(
                        "config.temperature",
                        FieldErrorKind::OutOfRange,
                        "config.temperature must be between 0 and 2",
                    ));
                }
                Some(t)
            }
        };
        let system_prompt = match get("system_prompt") {
            None => None,
            Some(Value::String(s)) => {
                check_length(s, 0, MAX_SYSTEM_PROMPT_CHARS, "config.system_prompt")?;
                Some(s.clone())
            }
            Some(_) => {
                return Err(FieldError::new(
                    "config.system_prompt",
                    FieldErrorKind::InvalidType,
                    "config.system_prompt must be a string",
                ));
            }
        };
        let max_tokens = match get("max_tokens") {
            None => None,
            Some(v) => {
                let n = v.as_u64().ok_or_else(|| {
                    FieldError::new(
                        "config.max_tokens",
                        FieldErrorKind::InvalidType,
                        "config.max_tokens must be a positive integer",
                    )
                })?;
                if !(1..=u64::from(MAX_COMPLETION_TOKENS)).contains(&n) {
                    return Err(FieldError::new(
                        "config.max_tokens",
                        FieldErrorKind::OutOfRange,
                        format!("config.max_tokens must be between 1 and {MAX_COMPLETION_TOKENS}"),
                    ));
                }
                u32::try_from(n).ok()
            }
        };
        Ok(Self { model, temperature, system_prompt, max_tokens })
    }

    /// The config as the API shows it (absent values as null).
    pub fn to_json(&self) -> Value {
        json!({
            "model": self.model,
            "temperature": self.temperature,
            "system_prompt": self.system_prompt,
            "max_tokens": self.max_tokens,
        })
    }
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
    /// The agent as event data and API body share it.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "tenant_id": self.tenant_id,
            "name": self.name.as_str(),
            "type": self.agent_type.as_str(),
            "status": self.status.as_str(),
            "description": self.description,
            "memory_types": self.memory_types.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
            "config": self.config.to_json(),
            "created_at": self.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "updated_at": self.updated_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        })
    }
}

/// The fields of an agent as a client sends them, before validation. `None` means absent.
#[derive(Debug, Clone, Default)]
pub struct AgentFields {
    /// `name`.
    pub name: Option<String>,
    /// `type`.
    pub agent_type: Option<String>,
    /// `status`.
    pub status: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `memory_types`.
    pub memory_types: Option<Vec<String>>,
    /// `config`, a JSON object.
    pub config: Option<Value>,
}

/// A validated change to an agent; absent fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentChanges {
    /// New name.
    pub name: Option<AgentName>,
    /// New type.
    pub agent_type: Option<AgentType>,
    /// New status.
    pub status: Option<AgentStatus>,
    /// New description (an empty string clears it).
    pub description: Option<Option<String>>,
    /// New memory types.
    pub memory_types: Option<Vec<MemoryType>>,
    /// Config keys to change; keys absent from the request keep their value.
    pub config: Option<Value>,
}

impl AgentChanges {
    /// Validates raw fields. With `creating`, `name` is required.
    ///
    /// # Errors
    /// [`ValidationErrors`] naming every bad field.
    pub fn new(fields: AgentFields, creating: bool) -> Result<Self, ValidationErrors> {
        let mut v = Validator::new();
        let name = if creating {
            v.required("name", fields.name, |n| AgentName::new(&n)).map(Some)
        } else {
            v.optional("name", fields.name, |n| AgentName::new(&n))
        };
        let agent_type = v.optional("type", fields.agent_type, |t| t.parse());
        let status = v.optional("status", fields.status, |s| s.parse());
        let description = v.optional("description", fields.description, |d| {
            check_length(&d, 0, MAX_DESCRIPTION_CHARS, "description")?;
            Ok(Some(d).filter(|d| !d.trim().is_empty()))
        });
        let memory_types = v.optional("memory_types", fields.memory_types, |raw| {
            let mut types = raw.iter().map(|t| t.parse::<MemoryType>()).collect::<Result<Vec<_>, _>>()?;
            types.sort();
            types.dedup();
            Ok(types)
        });
        // Checked by hand: its errors name the nested key (`config.temperature`), which the
        // validator would rename to `config`.
        let config = match fields.config {
            Some(c) => match AgentConfig::from_json(&c) {
                Ok(_) => Some(Some(c)),
                Err(e) => {
                    v.push(e);
                    None
                }
            },
            None => Some(None),
        };
        v.finish()?;
        Ok(Self {
            name: name.flatten(),
            agent_type: agent_type.flatten(),
            status: status.flatten(),
            description: description.flatten(),
            memory_types: memory_types.flatten(),
            config: config.flatten(),
        })
    }

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
        if let Some(d) = &self.description {
            next.description = d.clone();
        }
        if let Some(m) = &self.memory_types {
            next.memory_types = m.clone();
        }
        if let Some(patch) = self.config.as_ref().and_then(Value::as_object) {
            let mut merged = agent.config.to_json();
            if let Some(target) = merged.as_object_mut() {
                for (k, v) in patch {
                    target.insert(k.clone(), v.clone());
                }
            }
            // Validated in `new`, and merging validated keys into a valid config keeps it valid.
            if let Ok(config) = AgentConfig::from_json(&merged) {
                next.config = config;
            }
        }
        next.updated_at = now;
        next
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn fields(v: Value) -> AgentFields {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        AgentFields {
            name: s("name"),
            agent_type: s("type"),
            status: s("status"),
            description: s("description"),
            memory_types: v
                .get("memory_types")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect()),
            config: v.get("config").cloned(),
        }
    }

    #[test]
    fn creation_requires_a_name_and_checks_every_field() {
        let err = AgentChanges::new(
            fields(json!({"type": "robot", "memory_types": ["semantic", "dreams"], "config": {"temperature": 9}})),
            true,
        )
        .unwrap_err();
        let got: Vec<(&str, &str)> = err.0.iter().map(|e| (e.field.as_str(), e.kind.code())).collect();
        assert_eq!(
            got,
            [
                ("name", "missing_required_field"),
                ("type", "invalid_value"),
                ("memory_types", "invalid_value"),
                ("config.temperature", "out_of_range")
            ]
        );
    }

    #[test]
    fn config_values_are_typed_and_bounded() {
        for (config, field) in [
            (json!({"temperature": "hot"}), "config.temperature"),
            (json!({"temperature": -0.1}), "config.temperature"),
            (json!({"max_tokens": 0}), "config.max_tokens"),
            (json!({"max_tokens": 1.5}), "config.max_tokens"),
            (json!({"model": 3}), "config.model"),
            (json!({"system_prompt": []}), "config.system_prompt"),
            (json!([1]), "config"),
        ] {
            assert_eq!(AgentConfig::from_json(&config).unwrap_err().field, field, "{config}");
        }
        let ok = AgentConfig::from_json(&json!({"model": "m", "temperature": 2, "max_tokens": 10, "x": 1}))
            .unwrap();
        assert_eq!(ok.temperature, Some(2.0));
    }

    #[test]
    fn a_patch_changes_only_what_it_names_and_merges_config() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
        let agent = Agent {
            id: AgentId::from_string("agt_1"),
            tenant_id: TenantId::from_string("ten_1"),
            name: AgentName::new("Helper").unwrap(),
            agent_type: AgentType::Assistant,
            status: AgentStatus::Active,
            description: Some("d".into()),
            memory_types: vec![MemoryType::Semantic],
            config: AgentConfig { model: Some("m".into()), temperature: Some(0.5), ..AgentConfig::default() },
            created_at: t0,
            updated_at: t0,
        };
        let changes =
            AgentChanges::new(fields(json!({"status": "paused", "config": {"temperature": 1.0}})), false)
                .unwrap();
        let next = changes.apply(&agent, t0 + chrono::Duration::seconds(5));
        assert_eq!(next.status, AgentStatus::Paused);
        assert_eq!(next.config.temperature, Some(1.0));
        assert_eq!(next.config.model.as_deref(), Some("m"), "unnamed config keys are kept");
        assert_eq!(next.name, agent.name);
        assert_eq!(next.updated_at, t0 + chrono::Duration::seconds(5));
        assert_eq!(next.created_at, t0);
    }
}

//! Rendering a step: its templates rendered with the execution's context, and the results read
//! as the typed [`StepAction`] the executor performs.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{Map, Value};

use super::params::{Headers, JsonTemplate, Metadata, Template, Text, TextValue, TopK};
use super::wait::WaitFor;
use super::{HttpMethod, MAX_KNOWLEDGE_TOP_K, MAX_TOP_K, Step, StepKind};
use crate::ids::{AgentId, KnowledgeBaseId};
use crate::memory::MemoryType;
use crate::workflows::template::{RenderError, Renderer, TemplateContext};

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
    /// Search knowledge bases; output `{results}`.
    KnowledgeSearch {
        /// The bases (at least one).
        knowledge_base_ids: Vec<KnowledgeBaseId>,
        /// The text to find.
        query: String,
        /// How many results, 1–[`MAX_KNOWLEDGE_TOP_K`] (default: knowledge search's).
        top_k: Option<u32>,
    },
    /// Go on at another step: a `condition` decided, with the case that held (none: its
    /// default) and the step it leads to (none: the next listed). Decided by the executor
    /// itself, never performed.
    Condition {
        /// The index of the case that held.
        case: Option<usize>,
        /// The step it leads to.
        next: Option<String>,
    },
    /// Pause the execution: decided by the executor, which keeps the time the wait ends with
    /// the step, never performed.
    Wait(WaitFor),
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

impl Step {
    /// Renders the parameters with `ctx`, ending by `deadline` (the step's) when one is given,
    /// and reads them as this kind's action. A parameter rendering to `null` counts as absent,
    /// so `{{ input.x | default(none) }}` leaves an optional parameter out.
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
        let r = Renderer::new(ctx, deadline);
        Ok(match &self.kind {
            StepKind::Transform(s) => StepAction::Transform { output: s.output.render(&r, "output")? },
            StepKind::AgentChat(s) => StepAction::AgentChat {
                agent_id: AgentId::from_string(s.agent_id.render(&r, "agent_id")?),
                message: s.message.render(&r, "message")?,
                session_id: optional_text(&r, s.session_id.as_ref(), "session_id")?,
            },
            StepKind::HttpRequest(s) => StepAction::HttpRequest {
                method: s.method.render(&r, "method")?,
                url: s.url.render(&r, "url")?.0,
                headers: s.headers.as_ref().map_or(Ok(BTreeMap::new()), |h| h.render(&r))?,
                body: s.body.as_ref().map(|b| b.render(&r, "body")).transpose()?.filter(|b| !b.is_null()),
            },
            StepKind::MemorySearch(s) => StepAction::MemorySearch {
                query: s.query.render(&r, "query")?,
                agent_id: optional_text(&r, s.agent_id.as_ref(), "agent_id")?.map(AgentId::from_string),
                memory_type: s
                    .memory_type
                    .as_ref()
                    .map(|t| t.render_optional(&r, "memory_type"))
                    .transpose()?
                    .flatten(),
                top_k: s.top_k.as_ref().map(|k| k.render(&r)).transpose()?.flatten(),
            },
            StepKind::KnowledgeSearch(s) => StepAction::KnowledgeSearch {
                knowledge_base_ids: base_ids(&s.knowledge_base_ids.render(&r, "knowledge_base_ids")?)?,
                query: s.query.render(&r, "query")?,
                top_k: match s.top_k.as_ref().map(|k| k.render(&r)).transpose()?.flatten() {
                    Some(k) if k > MAX_KNOWLEDGE_TOP_K => {
                        return Err(RenderError::new(
                            "top_k",
                            format!("top_k must be from 1 to {MAX_KNOWLEDGE_TOP_K}"),
                        ));
                    }
                    k => k,
                },
            },
            StepKind::Condition(c) => {
                let (case, next) = c.decide(&r)?;
                StepAction::Condition { case, next }
            }
            StepKind::Wait(w) => StepAction::Wait(match (&w.seconds, &w.until) {
                (Some(seconds), _) => WaitFor::Seconds(seconds.get()),
                (None, Some(until)) => WaitFor::Until(until.render(&r, "until")?.0),
                (None, None) => {
                    return Err(RenderError::new("seconds", "a wait step takes seconds or until"));
                }
            }),
            StepKind::MemoryAdd(s) => StepAction::MemoryAdd {
                content: s.content.render(&r, "content")?,
                memory_type: s.memory_type.render(&r, "memory_type")?,
                agent_id: optional_text(&r, s.agent_id.as_ref(), "agent_id")?.map(AgentId::from_string),
                metadata: s.metadata.as_ref().map_or(Ok(Map::new()), |m| m.render(&r))?,
            },
        })
    }
}

/// The bases a `knowledge_search` step names: a list of ids (or one id), 1–20 of them.
fn base_ids(value: &Value) -> Result<Vec<KnowledgeBaseId>, RenderError> {
    const PATH: &str = "knowledge_base_ids";
    let wrong = || RenderError::new(PATH, "knowledge_base_ids must be a list of knowledge base ids");
    let ids: Vec<&str> = match value {
        Value::String(id) => vec![id.as_str()],
        Value::Array(items) => {
            items.iter().map(|v| v.as_str().ok_or_else(wrong)).collect::<Result<_, _>>()?
        }
        _ => return Err(wrong()),
    };
    if ids.is_empty() || ids.len() > 20 {
        return Err(RenderError::new(PATH, "knowledge_base_ids must name 1 to 20 bases"));
    }
    ids.into_iter()
        .map(|id| {
            crate::validation::check_path_id(id, PATH)
                .map(|()| KnowledgeBaseId::from_string(id))
                .map_err(|e| RenderError::new(PATH, e.message))
        })
        .collect()
}

impl<T: TextValue> Text<T> {
    /// Renders the parameter at `path` and reads it as a `T`; `None` when it renders to null.
    fn render_optional(&self, r: &Renderer<'_>, path: &str) -> Result<Option<T>, RenderError> {
        let text = optional_text(r, Some(self.template()), path)?;
        text.map(|t| T::read(t).map_err(|message| RenderError::new(path, message))).transpose()
    }

    /// Renders the parameter at `path` and reads it as a `T`.
    fn render(&self, r: &Renderer<'_>, path: &str) -> Result<T, RenderError> {
        self.render_optional(r, path)?
            .ok_or_else(|| RenderError::new(path, format!("{path} rendered to nothing")))
    }
}

/// Renders an optional text parameter: `None` when absent or rendered to null.
fn optional_text(
    r: &Renderer<'_>,
    template: Option<&Template>,
    path: &str,
) -> Result<Option<String>, RenderError> {
    match template {
        None => Ok(None),
        Some(t) => match r.string(t.as_str(), path)? {
            Value::Null => Ok(None),
            value => scalar_text(&value, path).map(Some),
        },
    }
}

impl Headers {
    /// The headers, each value rendered to text; a value rendering to null is left out.
    fn render(&self, r: &Renderer<'_>) -> Result<BTreeMap<String, String>, RenderError> {
        let rendered = match self {
            Self::Map(map) => {
                let mut rendered = Map::new();
                for (name, value) in map {
                    rendered.insert(name.clone(), r.string(value.as_str(), &format!("headers.{name}"))?);
                }
                rendered
            }
            Self::Template(t) => match r.string(t.as_str(), "headers")? {
                Value::Object(map) => map,
                Value::Null => Map::new(),
                _ => return Err(RenderError::new("headers", "headers must render to an object")),
            },
        };
        let mut headers = BTreeMap::new();
        for (name, value) in rendered {
            if value.is_null() {
                continue;
            }
            let path = format!("headers.{name}");
            let text = scalar_text(&value, &path)?;
            if text.chars().any(char::is_control) {
                return Err(RenderError::new(path, "a header value must not contain control characters"));
            }
            headers.insert(name, text);
        }
        Ok(headers)
    }
}

impl Metadata {
    fn render(&self, r: &Renderer<'_>) -> Result<Map<String, Value>, RenderError> {
        let rendered = match self {
            Self::Object(object) => r.value(&Value::Object(object.clone()), "metadata")?,
            Self::Template(t) => r.string(t.as_str(), "metadata")?,
        };
        match rendered {
            Value::Object(map) => Ok(map),
            Value::Null => Ok(Map::new()),
            _ => Err(RenderError::new("metadata", "metadata must render to an object")),
        }
    }
}

impl TopK {
    fn render(&self, r: &Renderer<'_>) -> Result<Option<u32>, RenderError> {
        let value = match self {
            Self::Number(n) => return Ok(Some(*n)),
            Self::Text(t) => r.string(t.as_str(), "top_k")?,
        };
        let number = match &value {
            Value::Null => return Ok(None),
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

impl JsonTemplate {
    /// The value with its templates rendered, at `path`.
    fn render(&self, r: &Renderer<'_>, path: &str) -> Result<Value, RenderError> {
        r.value(&self.0, path)
    }
}

/// A rendered value as text: strings as they are, numbers and booleans written out (so
/// `"{{ input.count }}"` works as a message); anything else is refused.
fn scalar_text(value: &Value, path: &str) -> Result<String, RenderError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => {
            let kind = match value {
                Value::Null => "null",
                Value::Array(_) => "an array",
                _ => "an object",
            };
            Err(RenderError::new(
                path,
                format!("{path} must render to text, not {kind} (use | tojson to send JSON as text)"),
            ))
        }
    }
}

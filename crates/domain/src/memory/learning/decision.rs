//! Deciding what a candidate fact changes (mem0's decision): `ADD` it, `UPDATE` a known fact
//! with merged wording, `INVALIDATE` a fact it contradicts, or `NONE`. The rule extractor's
//! decisions are made here from topics and similarity; a model's are read from its answer and
//! validated here before anything is stored: one malformed or foreign item rejects the answer.

use serde::Deserialize;
use serde_json::{Value, json};

use super::Candidate;
use crate::ids::MemoryId;
use crate::memory::model::{MAX_CONTENT_CHARS, MemoryEntry};

/// Similarity above which a candidate is a fact already known (MiniLM: the same statement in
/// other words scores above it, a different city does not).
pub const DUPLICATE_SIMILARITY: f32 = 0.92;

/// Longest fact a model may add, in characters: facts are sentences.
pub const MAX_FACT_CHARS: usize = 1_000;

/// What one decision changes.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// A new fact.
    Add {
        /// Its text.
        text: String,
        /// Its topic, if any.
        topic: Option<String>,
    },
    /// A known fact, reworded (merged with what was said).
    Update {
        /// The fact.
        id: MemoryId,
        /// Its new text.
        text: String,
    },
    /// A known fact that no longer holds.
    Invalidate {
        /// The fact.
        id: MemoryId,
        /// Why, as the history shows it.
        reason: String,
    },
}

/// The rule extractor's decisions for `candidate`. On a topic, what is known on it decides:
/// the same words change nothing, anything else is replaced (invalidated) by the candidate,
/// however alike the two read ("lives in Lyon" and "lives in Porto" are close in meaning and
/// contradict each other). Without a topic, a near-identical fact (or the same words) changes
/// nothing, and anything else is added beside what is known.
pub fn by_rules(
    candidate: &Candidate,
    on_topic: &[MemoryEntry],
    similar: &[(MemoryEntry, f32)],
) -> Vec<Decision> {
    let same = |e: &MemoryEntry| e.content.trim().eq_ignore_ascii_case(candidate.text.trim());
    let add = Decision::Add { text: candidate.text.clone(), topic: candidate.topic.clone() };
    if candidate.topic.is_some() {
        if on_topic.iter().any(same) {
            return Vec::new();
        }
        let mut decisions: Vec<Decision> = on_topic
            .iter()
            .map(|old| Decision::Invalidate {
                id: old.id.clone(),
                reason: format!("replaced by a later statement: {}", candidate.text),
            })
            .collect();
        decisions.push(add);
        return decisions;
    }
    if similar.iter().any(|(e, s)| same(e) || *s >= DUPLICATE_SIMILARITY) {
        return Vec::new();
    }
    vec![add]
}

/// The JSON schema a model's answer must follow (sent as the request's response schema, so a
/// model that supports it is held to it; every answer is validated against it here anyway).
pub fn answer_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "facts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "event": {"type": "string", "enum": ["ADD", "UPDATE", "INVALIDATE", "NONE"]},
                        "text": {"type": "string"},
                        "id": {"type": "string"},
                        "reason": {"type": "string"}
                    },
                    "required": ["event"]
                }
            }
        },
        "required": ["facts"]
    })
}

/// One item of a model's answer, as read before it is checked.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerItem {
    event: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    facts: Vec<AnswerItem>,
}

/// The decisions of a model's `answer`, checked against the facts it was shown (`shown`: the
/// agent's own current facts; an id it was not shown — another agent's, another tenant's, made
/// up — rejects the answer).
///
/// # Errors
/// Why the answer is rejected, for the log: not JSON, not the schema's shape, an unknown event,
/// a missing or overlong text, an id it was not shown.
pub fn from_model(answer: &str, shown: &[MemoryEntry]) -> Result<Vec<Decision>, String> {
    let json = answer.trim().trim_start_matches("```json").trim_start_matches("```").trim_end_matches("```");
    let answer: Answer =
        serde_json::from_str(json.trim()).map_err(|e| format!("the answer is not the expected JSON: {e}"))?;
    let known = |id: Option<String>, n: usize| -> Result<MemoryId, String> {
        let id = id.ok_or_else(|| format!("fact {n}: an id is required"))?;
        shown
            .iter()
            .find(|e| e.id.as_str() == id)
            .map(|e| e.id.clone())
            .ok_or_else(|| format!("fact {n}: {id:?} is not one of the memories it was shown"))
    };
    let text = |text: Option<String>, n: usize| -> Result<String, String> {
        let text = text.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        let text = text.ok_or_else(|| format!("fact {n}: a text is required"))?;
        if text.chars().count() > MAX_FACT_CHARS.min(MAX_CONTENT_CHARS) {
            return Err(format!("fact {n}: the text is longer than {MAX_FACT_CHARS} characters"));
        }
        Ok(text)
    };
    let mut decisions = Vec::new();
    for (n, item) in answer.facts.into_iter().enumerate() {
        match item.event.as_str() {
            "ADD" => decisions.push(Decision::Add { text: text(item.text, n)?, topic: None }),
            "UPDATE" => {
                let id = known(item.id, n)?;
                decisions.push(Decision::Update { id, text: text(item.text, n)? });
            }
            "INVALIDATE" => {
                let id = known(item.id, n)?;
                let reason =
                    item.reason.filter(|r| !r.trim().is_empty()).unwrap_or_else(|| "contradicted".into());
                decisions.push(Decision::Invalidate { id, reason: reason.chars().take(500).collect() });
            }
            "NONE" => {}
            other => return Err(format!("fact {n}: unknown event {other:?}")),
        }
    }
    Ok(decisions)
}

#[cfg(test)]
mod tests;

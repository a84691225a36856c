//! What the steps that use the service's own operations output: an `agent_chat` step the
//! reply, a `memory_search` step the hits, a `memory_add` step the entry, each in the shape the
//! API answers the same operation with (`POST /agents/{id}/chat`, `POST /memory/search`,
//! `POST /memory`), so a template reads `steps.ask.output.content` as a client reads the chat
//! answer. The HTTP layer's answers are made from these (its own types only add the OpenAPI
//! schema), and its tests check that both serialise alike.
//!
//! Whatever a step outputs is bounded: [`MAX_STEP_OUTPUT_BYTES`] as JSON ([`output_size`]),
//! since outputs are stored with the execution and fed to later templates.

use std::io;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::agents::{ChatReply, Citation};
use crate::ids::{AgentId, DocumentId, MemoryId, MessageId};
use crate::knowledge::KnowledgeHit;
use crate::memory::SearchHit;
use crate::memory::model::MemoryEntry;
use crate::time::rfc3339;

/// Largest output a step may produce, serialised as JSON: outputs are stored with the execution
/// and fed to later templates.
pub const MAX_STEP_OUTPUT_BYTES: usize = 256 * 1024;

/// A step output (or rendered value) larger than [`MAX_STEP_OUTPUT_BYTES`] once serialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the output is larger than {MAX_STEP_OUTPUT_BYTES} bytes")]
pub struct OutputTooLarge;

/// The size of `output` serialised as compact JSON, when at most [`MAX_STEP_OUTPUT_BYTES`].
/// Counting stops at the limit, so a huge value is not serialised whole.
///
/// # Errors
/// [`OutputTooLarge`].
pub fn output_size(output: &Value) -> Result<usize, OutputTooLarge> {
    let mut counter = ByteCounter(0);
    match serde_json::to_writer(&mut counter, output) {
        Ok(()) if counter.0 <= MAX_STEP_OUTPUT_BYTES => Ok(counter.0),
        _ => Err(OutputTooLarge),
    }
}

/// Counts bytes written, failing past [`MAX_STEP_OUTPUT_BYTES`].
struct ByteCounter(usize);

impl io::Write for ByteCounter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.0 += data.len();
        if self.0 > MAX_STEP_OUTPUT_BYTES {
            return Err(io::Error::other("output too large"));
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An `agent_chat` step's output: the reply.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatOutput {
    /// The reply's message id.
    pub id: String,
    /// The reply.
    pub content: String,
    /// Always `assistant`.
    pub role: &'static str,
    /// Token usage.
    pub usage: TokenUsage,
    /// When the reply was made.
    #[serde(serialize_with = "rfc3339::serialize")]
    pub created_at: DateTime<Utc>,
    /// The conversation.
    pub session_id: String,
    /// Credits charged and left.
    pub credits: Credits,
    /// The sources of the agent's knowledge bases the reply cites (`[1]`).
    pub citations: Vec<Citation>,
    /// Why the model stopped: `stop`, `length` (cut off at the token limit), `tool_calls` or
    /// `cancelled`.
    pub finish_reason: &'static str,
}

/// Tokens of an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TokenUsage {
    /// Of the prompt.
    pub prompt_tokens: u64,
    /// Of the reply.
    pub completion_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
}

/// Credits of an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Credits {
    /// Charged for it.
    pub charged: i64,
    /// The balance after it.
    pub remaining: i64,
}

impl From<ChatReply> for ChatOutput {
    fn from(r: ChatReply) -> Self {
        let m = r.message;
        Self {
            id: m.id.into_string(),
            role: "assistant",
            usage: TokenUsage {
                prompt_tokens: m.prompt_tokens,
                completion_tokens: m.completion_tokens,
                total_tokens: m.prompt_tokens + m.completion_tokens,
            },
            content: m.content,
            created_at: m.created_at,
            session_id: r.session_id.into_string(),
            credits: Credits { charged: r.charged, remaining: r.remaining },
            citations: m.citations,
            finish_reason: r.finish.as_str(),
        }
    }
}

/// A `memory_search` step's output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemorySearchOutput {
    /// Best first.
    pub results: Vec<MemoryHit>,
}

/// A `knowledge_search` step's output: what `POST /knowledge/search` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KnowledgeSearchOutput {
    /// Best first.
    pub results: Vec<KnowledgeHitOutput>,
}

/// One chunk a knowledge search found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KnowledgeHitOutput {
    /// The chunk.
    pub chunk_id: String,
    /// Its base.
    pub knowledge_base_id: String,
    /// Its file.
    pub file_id: String,
    /// The file's name.
    pub file_name: String,
    /// The page, for paged formats.
    pub page: Option<u32>,
    /// The headings it sits under.
    pub headings: Vec<String>,
    /// Its text.
    pub text: String,
    /// 0–1, higher is better.
    pub score: f64,
    /// Its place among the nearest vectors.
    pub vector_rank: Option<usize>,
    /// Its place in the full-text ranking.
    pub lexical_rank: Option<usize>,
}

impl From<KnowledgeHit> for KnowledgeHitOutput {
    fn from(h: KnowledgeHit) -> Self {
        Self {
            chunk_id: h.chunk.id.into_string(),
            knowledge_base_id: h.chunk.knowledge_base_id.into_string(),
            file_id: h.chunk.file_id.into_string(),
            file_name: h.file_name,
            page: h.chunk.page,
            headings: h.chunk.headings,
            text: h.chunk.text,
            score: h.ranking.score,
            vector_rank: h.ranking.candidate.vector_rank,
            lexical_rank: h.ranking.candidate.lexical_rank,
        }
    }
}

/// One search result with the parts of its score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryHit {
    /// Entry id.
    pub id: String,
    /// The text.
    pub content: String,
    /// 0–1, higher is better.
    pub score: f64,
    /// Free-form object.
    pub metadata: Map<String, Value>,
    /// Its type.
    pub memory_type: &'static str,
    /// Its agent, or null.
    pub agent_id: Option<String>,
    /// Labels.
    pub tags: Vec<String>,
    /// The parts of the score.
    pub explanation: ScoreParts,
}

/// How a search result's score was made.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ScoreParts {
    /// Cosine similarity to the query, when the vector search found it.
    pub similarity: Option<f32>,
    /// Its place (from 1) among the nearest vectors.
    pub vector_rank: Option<usize>,
    /// Its place (from 1) in the full-text ranking.
    pub lexical_rank: Option<usize>,
    /// The similarity calibrated to 0–1 (0 at the embedder's floor, 1 at its ceiling).
    pub semantic: f64,
    /// The share of the query's terms it contains, when that match counts, 0–1.
    pub lexical: f64,
    /// Meaning and words combined, 0–1: semantic + (1 − semantic) · 0.4 · lexical.
    pub relevance: f64,
    /// Its importance, 0–1.
    pub importance: f64,
    /// Recency, 0–1.
    pub recency: f64,
}

impl From<SearchHit> for MemoryHit {
    fn from(h: SearchHit) -> Self {
        let r = h.ranking;
        Self {
            explanation: ScoreParts {
                similarity: r.candidate.similarity,
                vector_rank: r.candidate.vector_rank,
                lexical_rank: r.candidate.lexical_rank,
                semantic: r.semantic,
                lexical: r.lexical,
                relevance: r.relevance,
                importance: r.candidate.importance,
                recency: r.recency,
            },
            score: r.score,
            id: h.entry.id.into_string(),
            content: h.entry.content,
            metadata: h.entry.metadata,
            memory_type: h.entry.memory_type.as_str(),
            agent_id: h.entry.agent_id.map(AgentId::into_string),
            tags: h.entry.tags,
        }
    }
}

/// A `memory_add` step's output: the stored entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryEntryOutput {
    /// Entry id.
    pub id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// Its agent, or null for a tenant-wide entry.
    pub agent_id: Option<String>,
    /// The document it is a chunk of, if any.
    pub document_id: Option<String>,
    /// Its type.
    pub memory_type: &'static str,
    /// Its key, if any.
    pub key: Option<String>,
    /// The text.
    pub content: String,
    /// Where it came from.
    pub source: String,
    /// Free-form object.
    pub metadata: Map<String, Value>,
    /// Labels.
    pub tags: Vec<String>,
    /// 0–1.
    pub importance_score: f64,
    /// How many searches returned it.
    pub access_count: u64,
    /// Creation time.
    #[serde(serialize_with = "rfc3339::serialize")]
    pub created_at: DateTime<Utc>,
    /// Last change.
    #[serde(serialize_with = "rfc3339::serialize")]
    pub updated_at: DateTime<Utc>,
    /// Expiry, or null.
    #[serde(serialize_with = "serialize_optional_time")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Since when it holds.
    #[serde(serialize_with = "rfc3339::serialize")]
    pub valid_from: DateTime<Utc>,
    /// When a later fact contradicted it, or null while it holds.
    #[serde(serialize_with = "serialize_optional_time")]
    pub invalid_at: Option<DateTime<Utc>>,
    /// The entry that replaced it, or null.
    pub superseded_by: Option<String>,
    /// What wrote it: `api`, `extraction`, `tool`, `consolidation` or `document`.
    pub origin: &'static str,
    /// The chat messages it was learned from.
    pub source_message_ids: Vec<String>,
}

impl From<MemoryEntry> for MemoryEntryOutput {
    fn from(e: MemoryEntry) -> Self {
        Self {
            id: e.id.into_string(),
            tenant_id: e.tenant_id.into_string(),
            agent_id: e.agent_id.map(AgentId::into_string),
            document_id: e.document_id.map(DocumentId::into_string),
            memory_type: e.memory_type.as_str(),
            key: e.key,
            content: e.content,
            source: e.source,
            metadata: e.metadata,
            tags: e.tags,
            importance_score: e.importance,
            access_count: e.access_count,
            created_at: e.created_at,
            updated_at: e.updated_at,
            expires_at: e.expires_at,
            valid_from: e.valid_from,
            invalid_at: e.invalid_at,
            superseded_by: e.superseded_by.map(MemoryId::into_string),
            origin: e.origin.as_str(),
            source_message_ids: e.source_message_ids.into_iter().map(MessageId::into_string).collect(),
        }
    }
}

fn serialize_optional_time<S: serde::Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => rfc3339::serialize(t, s),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn output_size_is_bounded() {
        assert_eq!(output_size(&json!({"a": 1})).unwrap(), 7);
        let big = json!("x".repeat(MAX_STEP_OUTPUT_BYTES));
        assert_eq!(output_size(&big), Err(OutputTooLarge));
        let just = json!("x".repeat(MAX_STEP_OUTPUT_BYTES - 2));
        assert_eq!(output_size(&just).unwrap(), MAX_STEP_OUTPUT_BYTES);
    }
}

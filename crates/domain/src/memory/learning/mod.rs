//! Memory that learns from conversations: facts extracted from each stored exchange, each
//! compared with what the agent already knows and decided on (add it, update a fact, invalidate
//! a contradicted one, or nothing), applied with its history in one transaction.

pub mod decision;
pub mod rules;

/// A fact found in an exchange, before it is compared with what is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The fact, as the agent will read it.
    pub text: String,
    /// What it is about (`home`, `name`, …) when its kind has one: a new fact on a topic
    /// replaces the current one.
    pub topic: Option<String>,
}

use chrono::{DateTime, Utc};

use crate::billing::Settlement;
use crate::events::Event;
use crate::ids::{AgentId, MemoryId, MessageId, TenantId};
use crate::memory::model::{EmbeddedEntry, Embedding};

crate::string_enum! {
    /// What a version of an entry's history changed.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum MemoryChange {
        /// The entry was written.
        Added => "added",
        /// Its text changed.
        Updated => "updated",
        /// A later fact contradicted it.
        Invalidated => "invalidated",
    }
    impl FromStr(field = "change");
}

/// One version of an entry, as `GET /memory/{id}/history` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryVersion {
    /// From 1, in order.
    pub version: u32,
    /// The text of this version.
    pub content: String,
    /// What it changed.
    pub change: MemoryChange,
    /// Why, when something said so.
    pub reason: Option<String>,
    /// The chat messages it came from.
    pub source_message_ids: Vec<MessageId>,
    /// When.
    pub at: DateTime<Utc>,
}

/// A known fact reworded.
#[derive(Debug, Clone, PartialEq)]
pub struct Reworded {
    /// The fact.
    pub id: MemoryId,
    /// Its new text.
    pub content: String,
    /// The new text's embedding.
    pub embedding: Embedding,
    /// The messages it now comes from (its earlier ones and this exchange's).
    pub source_message_ids: Vec<MessageId>,
}

/// A known fact that no longer holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalidation {
    /// The fact.
    pub id: MemoryId,
    /// The fact that replaced it, when one did.
    pub superseded_by: Option<MemoryId>,
    /// Why.
    pub reason: String,
}

/// What learning from one exchange changes, applied at once with its history and events.
#[derive(Debug, Clone, PartialEq)]
pub struct Learned {
    /// The tenant.
    pub tenant_id: TenantId,
    /// The agent whose memory it is.
    pub agent_id: AgentId,
    /// The exchange's user message: applied once per message, whatever happens twice.
    pub exchange: MessageId,
    /// The exchange's messages, as each change's source.
    pub source_message_ids: Vec<MessageId>,
    /// New facts.
    pub added: Vec<EmbeddedEntry>,
    /// Reworded facts.
    pub updated: Vec<Reworded>,
    /// Facts that no longer hold.
    pub invalidated: Vec<Invalidation>,
    /// `memory.created`, `memory.updated`, `memory.invalidated`.
    pub events: Vec<Event>,
    /// When.
    pub at: DateTime<Utc>,
    /// The model calls that decided it, settled with it (`None` for the rule extractor, which
    /// costs nothing). The store charges it only when it applies the exchange.
    pub charge: Option<Settlement>,
}

impl Learned {
    /// How many facts it changes.
    pub fn changes(&self) -> usize {
        self.added.len() + self.updated.len() + self.invalidated.len()
    }
}

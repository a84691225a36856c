//! The one memory model both HTTP variants, chat and workflows share: entries, documents and
//! their chunks, and the values a request may set, validated.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::ids::{AgentId, DocumentId, MemoryId, MessageId, TenantId};
use crate::validation::{
    FieldError, FieldErrorKind, TextKind, check_json_text, check_length, check_long_text, check_text,
};

crate::string_enum! {
    /// A kind of memory an agent keeps.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum MemoryType {
        /// Facts and documents.
        Semantic => "semantic",
        /// What happened in conversations.
        Episodic => "episodic",
        /// How to do things.
        Procedural => "procedural",
    }
    impl FromStr(field = "memory_types");
}

crate::string_enum! {
    /// What wrote an entry.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum MemoryOrigin {
        /// A client, through the memory routes.
        Api => "api",
        /// Learned from a conversation: an extracted fact, or the episodic note of an exchange.
        Extraction => "extraction",
        /// An agent's memory tool during a chat.
        Tool => "tool",
        /// Consolidation merged it from near-duplicates.
        Consolidation => "consolidation",
        /// A chunk of a document.
        Document => "document",
    }
    impl FromStr(field = "origin");
}

/// Most characters of an entry's content (and of a search query).
pub const MAX_CONTENT_CHARS: usize = 32_000;
/// Most characters of a key.
pub const MAX_KEY_CHARS: usize = 256;
/// Most characters of a source.
pub const MAX_SOURCE_CHARS: usize = 100;
/// Most tags on one entry.
pub const MAX_TAGS: usize = 50;
/// Most characters of one tag.
pub const MAX_TAG_CHARS: usize = 64;
/// Importance when a request gives none.
pub const DEFAULT_IMPORTANCE: f64 = 0.5;
/// Source of entries written through the API when the request names none.
pub const DEFAULT_SOURCE: &str = "api";

/// One thing remembered.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryEntry {
    /// Its id (`mem_…`).
    pub id: MemoryId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The agent whose memory it is; absent for a tenant-wide entry.
    pub agent_id: Option<AgentId>,
    /// The document it is a chunk of, if any.
    pub document_id: Option<DocumentId>,
    /// Semantic, episodic or procedural.
    pub memory_type: MemoryType,
    /// A client's key: one entry per `(memory_type, key)` in a tenant.
    pub key: Option<String>,
    /// The text.
    pub content: String,
    /// Where it came from: `api`, `chat`, `document`, or what the client says.
    pub source: String,
    /// Free-form object; search filters on its top-level keys.
    pub metadata: Map<String, Value>,
    /// Labels; search may require all of some.
    pub tags: Vec<String>,
    /// 0–1; weighs into ranking.
    pub importance: f64,
    /// How many searches returned it.
    pub access_count: u64,
    /// When it was first written.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
    /// After this instant it is never returned.
    pub expires_at: Option<DateTime<Utc>>,
    /// Since when it holds (its creation, for everything written so far).
    pub valid_from: DateTime<Utc>,
    /// When it stopped holding: a later fact contradicted it. Such an entry is kept, with its
    /// history, and returned only when asked for (`include_invalid`, `as_of`).
    pub invalid_at: Option<DateTime<Utc>>,
    /// The entry that replaced it, when one did.
    pub superseded_by: Option<MemoryId>,
    /// What wrote it.
    pub origin: MemoryOrigin,
    /// The chat messages it was learned from (none for what a client wrote).
    pub source_message_ids: Vec<MessageId>,
}

impl MemoryEntry {
    /// Whether it holds at `now`: not invalidated (by then).
    pub fn is_valid(&self, now: DateTime<Utc>) -> bool {
        self.invalid_at.is_none_or(|t| t > now)
    }

    /// Whether it has expired at `now`.
    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|t| t <= now)
    }

    /// The facets search filters and ranks on.
    pub fn facets(&self) -> Facets {
        Facets {
            agent_id: self.agent_id.clone(),
            memory_type: self.memory_type,
            tags: self.tags.clone(),
            metadata: self.metadata.clone(),
            importance: self.importance,
            updated_at: self.updated_at,
            expires_at: self.expires_at,
            valid_from: self.valid_from,
            invalid_at: self.invalid_at,
        }
    }
}

/// An embedding as stored beside its entry: the vector and the model that made it.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    /// The model's id ([`crate::memory::EmbeddingModel::id`]).
    pub model_id: String,
    /// Unit-length vector.
    pub vector: Vec<f32>,
}

/// An entry with its embedding, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedEntry {
    /// The entry.
    pub entry: MemoryEntry,
    /// Its embedding.
    pub embedding: Embedding,
}

/// What search filters on and ranks by, besides the text: kept beside each cached vector so
/// that the vector scan filters without reading rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Facets {
    /// See [`MemoryEntry::agent_id`].
    pub agent_id: Option<AgentId>,
    /// See [`MemoryEntry::memory_type`].
    pub memory_type: MemoryType,
    /// See [`MemoryEntry::tags`].
    pub tags: Vec<String>,
    /// See [`MemoryEntry::metadata`].
    pub metadata: Map<String, Value>,
    /// See [`MemoryEntry::importance`].
    pub importance: f64,
    /// See [`MemoryEntry::updated_at`].
    pub updated_at: DateTime<Utc>,
    /// See [`MemoryEntry::expires_at`].
    pub expires_at: Option<DateTime<Utc>>,
    /// See [`MemoryEntry::valid_from`].
    pub valid_from: DateTime<Utc>,
    /// See [`MemoryEntry::invalid_at`].
    pub invalid_at: Option<DateTime<Utc>>,
}

/// Which entries a search or list considers, within the caller's tenant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryFilter {
    /// Only this agent's entries; absent: the whole tenant's.
    pub agent_id: Option<AgentId>,
    /// Only these types; empty: every type.
    pub memory_types: Vec<MemoryType>,
    /// Only entries carrying all of these tags.
    pub tags: Vec<String>,
    /// Only entries whose metadata has each of these top-level keys with an equal value.
    pub metadata: Map<String, Value>,
    /// Invalidated entries too (they are left out otherwise).
    pub include_invalid: bool,
    /// Only what held at this instant: entries valid then, whether or not they still are.
    pub as_of: Option<DateTime<Utc>>,
}

impl MemoryFilter {
    /// Whether an entry with `facets` passes at `now`; expired entries never do.
    pub fn matches(&self, facets: &Facets, now: DateTime<Utc>) -> bool {
        if facets.expires_at.is_some_and(|t| t <= now) {
            return false;
        }
        if !self.holds(facets.valid_from, facets.invalid_at) {
            return false;
        }
        if self.agent_id.as_ref().is_some_and(|a| facets.agent_id.as_ref() != Some(a)) {
            return false;
        }
        if !self.memory_types.is_empty() && !self.memory_types.contains(&facets.memory_type) {
            return false;
        }
        self.tags.iter().all(|t| facets.tags.contains(t))
            && self.metadata.iter().all(|(k, v)| facets.metadata.get(k) == Some(v))
    }
}

impl MemoryFilter {
    /// Whether an entry valid from `valid_from` and invalidated at `invalid_at` passes the
    /// filter's time condition: it held at `as_of`, or it holds now (unless invalid ones are
    /// asked for too).
    pub fn holds(&self, valid_from: DateTime<Utc>, invalid_at: Option<DateTime<Utc>>) -> bool {
        match self.as_of {
            Some(t) => valid_from <= t && invalid_at.is_none_or(|i| i > t),
            None => self.include_invalid || invalid_at.is_none(),
        }
    }

    /// Whether the filter asks only for entries that hold now: the common case, which the
    /// stores' fast paths serve.
    pub fn current_only(&self) -> bool {
        self.as_of.is_none() && !self.include_invalid
    }
}

/// Which entries a list shows by their validity: those that hold now (the default), every one
/// (`include_invalid`), or those that held at a time (`as_of`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Validity {
    /// Invalidated entries too.
    pub include_invalid: bool,
    /// What held then (and was written by then).
    pub as_of: Option<DateTime<Utc>>,
}

/// A document added to an agent's memory; its text lives on as chunk entries.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryDocument {
    /// Its id (`doc_…`).
    pub id: DocumentId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The agent.
    pub agent_id: AgentId,
    /// Its title.
    pub title: String,
    /// Free-form object, copied onto each chunk with `title` and `document_id`.
    pub metadata: Map<String, Value>,
    /// How many chunks it was stored as.
    pub chunk_count: u64,
    /// When it was added.
    pub created_at: DateTime<Utc>,
}

/// Validates content: 1–32,000 characters, not only white space, no control characters but
/// tab and line breaks.
///
/// # Errors
/// A [`FieldError`] naming `field`.
pub fn content(raw: &str, field: &str) -> Result<String, FieldError> {
    check_long_text(raw, 1, MAX_CONTENT_CHARS, field)?;
    if raw.trim().is_empty() {
        return Err(FieldError::new(field, FieldErrorKind::TooShort, format!("{field} must not be empty")));
    }
    Ok(raw.to_owned())
}

/// Validates a key: 1–256 characters on one line.
///
/// # Errors
/// A [`FieldError`] naming `key`.
pub fn key(raw: &str) -> Result<String, FieldError> {
    check_text(raw, "key", TextKind::SingleLine)?;
    check_length(raw, 1, MAX_KEY_CHARS, "key")?;
    Ok(raw.to_owned())
}

/// Validates a source: 1–100 characters on one line.
///
/// # Errors
/// A [`FieldError`] naming `source`.
pub fn source(raw: &str) -> Result<String, FieldError> {
    check_text(raw, "source", TextKind::SingleLine)?;
    check_length(raw.trim(), 1, MAX_SOURCE_CHARS, "source")?;
    Ok(raw.trim().to_owned())
}

/// Validates tags: at most 50, each 1–64 characters on one line; duplicates dropped, order
/// kept.
///
/// # Errors
/// A [`FieldError`] naming `tags` or the offending `tags[i]`.
pub fn tags(raw: &[String]) -> Result<Vec<String>, FieldError> {
    if raw.len() > MAX_TAGS {
        return Err(FieldError::new("tags", FieldErrorKind::TooLong, format!("at most {MAX_TAGS} tags")));
    }
    let mut out: Vec<String> = Vec::with_capacity(raw.len());
    for (i, t) in raw.iter().enumerate() {
        let field = format!("tags[{i}]");
        check_text(t, &field, TextKind::SingleLine)?;
        check_length(t, 1, MAX_TAG_CHARS, &field)?;
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    Ok(out)
}

/// Validates importance: a number from 0 to 1.
///
/// # Errors
/// A [`FieldError`] naming `importance_score`.
pub fn importance(raw: f64) -> Result<f64, FieldError> {
    if (0.0..=1.0).contains(&raw) {
        Ok(raw)
    } else {
        Err(FieldError::new(
            "importance_score",
            FieldErrorKind::OutOfRange,
            "importance_score must be from 0 to 1",
        ))
    }
}

/// Validates free-form metadata: an object whose strings hold no control characters.
///
/// # Errors
/// A [`FieldError`] naming `field` or a path inside it.
pub fn metadata(raw: Value, field: &str) -> Result<Map<String, Value>, FieldError> {
    match raw {
        Value::Object(map) => {
            for (k, v) in &map {
                let path = format!("{field}.{k}");
                check_text(k, &path, TextKind::SingleLine)?;
                check_json_text(v, &path)?;
            }
            Ok(map)
        }
        Value::Null => Ok(Map::new()),
        _ => Err(FieldError::new(field, FieldErrorKind::InvalidType, format!("{field} must be an object"))),
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone};
    use serde_json::json;

    use super::*;

    fn facets() -> Facets {
        Facets {
            agent_id: Some(AgentId::from_string("agt_1")),
            memory_type: MemoryType::Semantic,
            tags: vec!["a".into(), "b".into()],
            metadata: json!({"lang": "en", "n": 1}).as_object().cloned().unwrap_or_default(),
            importance: 0.5,
            updated_at: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            expires_at: None,
            valid_from: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            invalid_at: None,
        }
    }

    #[test]
    fn the_filter_needs_every_condition() {
        let now = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap();
        let f = facets();
        assert!(MemoryFilter::default().matches(&f, now));
        let mut by_agent =
            MemoryFilter { agent_id: Some(AgentId::from_string("agt_2")), ..Default::default() };
        assert!(!by_agent.matches(&f, now));
        by_agent.agent_id = Some(AgentId::from_string("agt_1"));
        assert!(by_agent.matches(&f, now));
        let types = MemoryFilter { memory_types: vec![MemoryType::Episodic], ..Default::default() };
        assert!(!types.matches(&f, now));
        let tags = MemoryFilter { tags: vec!["a".into(), "c".into()], ..Default::default() };
        assert!(!tags.matches(&f, now));
        let tags = MemoryFilter { tags: vec!["b".into(), "a".into()], ..Default::default() };
        assert!(tags.matches(&f, now));
        let meta = |v: Value| MemoryFilter {
            metadata: v.as_object().cloned().unwrap_or_default(),
            ..Default::default()
        };
        assert!(meta(json!({"lang": "en"})).matches(&f, now));
        assert!(!meta(json!({"lang": "de"})).matches(&f, now));
        assert!(!meta(json!({"n": "1"})).matches(&f, now), "equality keeps JSON types");
        assert!(!meta(json!({"missing": null})).matches(&f, now));
    }

    #[test]
    fn expired_entries_never_match() {
        let now = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap();
        let mut f = facets();
        f.expires_at = Some(now);
        assert!(!MemoryFilter::default().matches(&f, now));
        f.expires_at = Some(now + Duration::seconds(1));
        assert!(MemoryFilter::default().matches(&f, now));
    }

    #[test]
    fn invalidated_entries_match_only_when_asked_for_or_as_of_a_time_they_held() {
        let now = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap();
        let moved = Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap();
        let mut lyon = facets();
        lyon.invalid_at = Some(moved);
        let mut porto = facets();
        porto.valid_from = moved;
        let current = MemoryFilter::default();
        assert!(current.current_only());
        assert!(!current.matches(&lyon, now) && current.matches(&porto, now));
        let all = MemoryFilter { include_invalid: true, ..Default::default() };
        assert!(all.matches(&lyon, now) && all.matches(&porto, now));
        let before = MemoryFilter { as_of: Some(moved - Duration::days(1)), ..Default::default() };
        assert!(before.matches(&lyon, now) && !before.matches(&porto, now));
        let at = MemoryFilter { as_of: Some(moved), ..Default::default() };
        assert!(!at.matches(&lyon, now) && at.matches(&porto, now), "the change takes effect at its instant");
    }

    #[test]
    fn values_are_validated() {
        assert!(content("  ", "content").is_err());
        assert!(content(&"x".repeat(MAX_CONTENT_CHARS + 1), "content").is_err());
        assert_eq!(content("hello\nworld", "content").unwrap(), "hello\nworld");
        assert!(key("").is_err());
        assert!(key("a\nb").is_err());
        assert_eq!(tags(&["x".into(), "x".into(), "y".into()]).unwrap(), vec!["x", "y"]);
        assert_eq!(tags(&["".into()]).unwrap_err().field, "tags[0]");
        assert!(importance(1.5).is_err());
        assert!(importance(-0.1).is_err());
        assert!(metadata(json!([1]), "metadata").is_err());
        assert!(metadata(Value::Null, "metadata").unwrap().is_empty());
        assert_eq!(metadata(json!({"a": "\u{0}"}), "metadata").unwrap_err().field, "metadata.a");
    }
}

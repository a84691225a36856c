//! The memory table's rows: an entry as read, as written (with its embedding and the version
//! of its write), and as the vector cache keeps it.

use agentry_domain::ids::{AgentId, DocumentId, MemoryId, MessageId, TenantId};
use agentry_domain::memory::{EmbeddedEntry, Facets, MemoryEntry};
use diesel::prelude::*;
use serde_json::{Map, Value};

use crate::schema::memory_entries;
use crate::types::{DbJsonAs, DbTime, parse_stored};
use crate::vectors::CachedVector;

/// An entry as read (without its embedding).
#[derive(Queryable, Selectable)]
#[diesel(table_name = memory_entries, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(crate) struct EntryRow {
    id: String,
    tenant_id: String,
    agent_id: Option<String>,
    document_id: Option<String>,
    memory_type: String,
    key: Option<String>,
    content: String,
    source: String,
    metadata: DbJsonAs<Map<String, Value>>,
    tags: DbJsonAs<Vec<String>>,
    importance: f64,
    access_count: i64,
    created_at: DbTime,
    updated_at: DbTime,
    expires_at: Option<DbTime>,
    valid_from: DbTime,
    invalid_at: Option<DbTime>,
    superseded_by: Option<String>,
    origin: String,
    source_message_ids: DbJsonAs<Vec<String>>,
}

impl EntryRow {
    pub(crate) fn into_domain(self) -> anyhow::Result<MemoryEntry> {
        Ok(MemoryEntry {
            id: MemoryId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            agent_id: self.agent_id.map(AgentId::from_string),
            document_id: self.document_id.map(DocumentId::from_string),
            memory_type: parse_stored(&self.memory_type, "memory type")?,
            key: self.key,
            content: self.content,
            source: self.source,
            metadata: self.metadata.0,
            tags: self.tags.0,
            importance: self.importance,
            access_count: u64::try_from(self.access_count).unwrap_or(0),
            created_at: self.created_at.0,
            updated_at: self.updated_at.0,
            expires_at: self.expires_at.map(|t| t.0),
            valid_from: self.valid_from.0,
            invalid_at: self.invalid_at.map(|t| t.0),
            superseded_by: self.superseded_by.map(MemoryId::from_string),
            origin: parse_stored(&self.origin, "memory origin")?,
            source_message_ids: self.source_message_ids.0.into_iter().map(MessageId::from_string).collect(),
        })
    }
}

/// An entry as written, with its embedding and the memory version of the write.
#[derive(Clone, Insertable, AsChangeset)]
#[diesel(table_name = memory_entries, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(crate) struct NewEntryRow {
    pub(crate) id: String,
    pub(crate) tenant_id: String,
    #[diesel(treat_none_as_null = true)]
    pub(crate) agent_id: Option<String>,
    #[diesel(treat_none_as_null = true)]
    pub(crate) document_id: Option<String>,
    pub(crate) memory_type: String,
    #[diesel(treat_none_as_null = true)]
    pub(crate) key: Option<String>,
    pub(crate) content: String,
    pub(crate) source: String,
    pub(crate) metadata: DbJsonAs<Map<String, Value>>,
    pub(crate) tags: DbJsonAs<Vec<String>>,
    pub(crate) importance: f64,
    pub(crate) access_count: i64,
    pub(crate) created_at: DbTime,
    pub(crate) updated_at: DbTime,
    #[diesel(treat_none_as_null = true)]
    pub(crate) expires_at: Option<DbTime>,
    pub(crate) valid_from: DbTime,
    #[diesel(treat_none_as_null = true)]
    pub(crate) invalid_at: Option<DbTime>,
    #[diesel(treat_none_as_null = true)]
    pub(crate) superseded_by: Option<String>,
    pub(crate) origin: String,
    pub(crate) source_message_ids: DbJsonAs<Vec<String>>,
    pub(crate) embedding: Vec<u8>,
    pub(crate) embedding_dim: i32,
    pub(crate) embedding_model: String,
    pub(crate) seq: i64,
}

impl NewEntryRow {
    /// The row of `e`; its `seq` is set to the version of the transaction that writes it.
    pub(crate) fn from_domain(e: &EmbeddedEntry) -> Self {
        let m = &e.entry;
        Self {
            id: m.id.to_string(),
            tenant_id: m.tenant_id.to_string(),
            agent_id: m.agent_id.as_ref().map(ToString::to_string),
            document_id: m.document_id.as_ref().map(ToString::to_string),
            memory_type: m.memory_type.as_str().to_owned(),
            key: m.key.clone(),
            content: m.content.clone(),
            source: m.source.clone(),
            metadata: DbJsonAs(m.metadata.clone()),
            tags: DbJsonAs(m.tags.clone()),
            importance: m.importance,
            access_count: i64::try_from(m.access_count).unwrap_or(i64::MAX),
            created_at: m.created_at.into(),
            updated_at: m.updated_at.into(),
            expires_at: m.expires_at.map(DbTime),
            valid_from: m.valid_from.into(),
            invalid_at: m.invalid_at.map(DbTime),
            superseded_by: m.superseded_by.as_ref().map(ToString::to_string),
            origin: m.origin.as_str().to_owned(),
            source_message_ids: DbJsonAs(m.source_message_ids.iter().map(ToString::to_string).collect()),
            embedding: vector_bytes(&e.embedding.vector),
            embedding_dim: i32::try_from(e.embedding.vector.len()).unwrap_or(i32::MAX),
            embedding_model: e.embedding.model_id.clone(),
            seq: 0,
        }
    }
}

/// What the vector cache keeps of a row.
#[derive(Queryable, Selectable)]
#[diesel(table_name = memory_entries, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(super) struct VectorRow {
    id: String,
    agent_id: Option<String>,
    memory_type: String,
    tags: DbJsonAs<Vec<String>>,
    metadata: DbJsonAs<Map<String, Value>>,
    importance: f64,
    updated_at: DbTime,
    expires_at: Option<DbTime>,
    valid_from: DbTime,
    invalid_at: Option<DbTime>,
    embedding: Vec<u8>,
}

impl VectorRow {
    pub(super) fn into_cached(self) -> anyhow::Result<CachedVector> {
        Ok(CachedVector {
            id: MemoryId::from_string(self.id),
            facets: Facets {
                agent_id: self.agent_id.map(AgentId::from_string),
                memory_type: parse_stored(&self.memory_type, "memory type")?,
                tags: self.tags.0,
                metadata: self.metadata.0,
                importance: self.importance,
                updated_at: self.updated_at.0,
                expires_at: self.expires_at.map(|t| t.0),
                valid_from: self.valid_from.0,
                invalid_at: self.invalid_at.map(|t| t.0),
            },
            vector: vector_from_bytes(&self.embedding),
        })
    }
}

/// Little-endian `f32`s: the embedding column's format.
pub(crate) fn vector_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn vector_from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

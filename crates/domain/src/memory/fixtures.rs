//! Values the memory tests share (here and in the modules built on memory): an entry of
//! `agt_1` in `ten_1`, written through the API at [`t0`].
#![allow(clippy::unwrap_used)]

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Map;

use super::model::{MemoryEntry, MemoryOrigin, MemoryType};
use crate::ids::{AgentId, MemoryId, TenantId};

/// The time the entries are written.
pub(crate) fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
}

/// Semantic entry `id` of agent `agt_1` in `ten_1` reading `content`, current since [`t0`].
pub(crate) fn entry(id: &str, content: &str) -> MemoryEntry {
    MemoryEntry {
        id: MemoryId::from_string(id),
        tenant_id: TenantId::from_string("ten_1"),
        agent_id: Some(AgentId::from_string("agt_1")),
        document_id: None,
        memory_type: MemoryType::Semantic,
        key: None,
        content: content.into(),
        source: "api".into(),
        metadata: Map::new(),
        tags: Vec::new(),
        importance: 0.5,
        access_count: 0,
        created_at: t0(),
        updated_at: t0(),
        expires_at: None,
        valid_from: t0(),
        invalid_at: None,
        superseded_by: None,
        origin: MemoryOrigin::Api,
        source_message_ids: Vec::new(),
    }
}

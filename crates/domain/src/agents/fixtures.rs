//! Values the agents module's tests share: an agent of `ten_1` and one stored exchange of it.
#![allow(clippy::unwrap_used)]

use chrono::{DateTime, TimeZone, Utc};

use super::chat::{ChatRole, Message};
use super::model::{Agent, AgentConfig, AgentName, AgentStatus, AgentType};
use super::ports::StoredExchange;
use crate::ids::{AgentId, MessageId, SessionId, TenantId};
use crate::memory::MemoryType;

/// The time everything here happens.
pub(super) fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
}

/// Agent `agt_1` of `ten_1`, keeping `types` of memory.
pub(super) fn agent(types: Vec<MemoryType>) -> Agent {
    Agent {
        id: AgentId::from_string("agt_1"),
        tenant_id: TenantId::from_string("ten_1"),
        name: AgentName::new("Helper").unwrap(),
        agent_type: AgentType::Assistant,
        status: AgentStatus::Active,
        description: None,
        memory_types: types,
        config: AgentConfig::default(),
        created_at: t0(),
        updated_at: t0(),
    }
}

/// `agt_1`'s exchange in `ses_1`: "hi" (`msg_01a`), answered "hello" (`msg_01b`).
pub(super) fn exchange() -> StoredExchange {
    let parts =
        || (TenantId::from_string("ten_1"), AgentId::from_string("agt_1"), SessionId::from_string("ses_1"));
    let message = |id: &str, role, text: &str| {
        Message::plain(MessageId::from_string(id), parts(), role, text.into(), t0())
    };
    StoredExchange {
        message: message("msg_01a", ChatRole::User, "hi"),
        reply: message("msg_01b", ChatRole::Assistant, "hello"),
    }
}

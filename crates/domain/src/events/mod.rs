//! Domain events and their envelope. Events are written to an outbox in the same transaction
//! as the change that causes them, so an event exists exactly when its change committed;
//! delivery to subscribers reads the outbox later.

use std::fmt;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::ids::{EventId, IdGenerator, TenantId};

/// The `api_version` every envelope carries.
pub const API_VERSION: &str = "2026-11-01";

/// Every event type of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// A message was sent to an agent.
    AgentMessageCreated,
    /// An agent answered a message.
    AgentMessageCompleted,
    /// An agent was created.
    AgentCreated,
    /// An agent's configuration changed.
    AgentUpdated,
    /// A workflow execution began.
    WorkflowExecutionStarted,
    /// A workflow execution finished successfully.
    WorkflowExecutionCompleted,
    /// A workflow execution failed.
    WorkflowExecutionFailed,
    /// Memory consolidation completed.
    MemoryConsolidated,
    /// The credit balance fell below the threshold.
    BillingCreditsLow,
    /// A credit purchase succeeded.
    BillingPurchaseCompleted,
}

impl EventType {
    /// The type's name in envelopes and subscriptions.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AgentMessageCreated => "agent.message.created",
            Self::AgentMessageCompleted => "agent.message.completed",
            Self::AgentCreated => "agent.created",
            Self::AgentUpdated => "agent.updated",
            Self::WorkflowExecutionStarted => "workflow.execution.started",
            Self::WorkflowExecutionCompleted => "workflow.execution.completed",
            Self::WorkflowExecutionFailed => "workflow.execution.failed",
            Self::MemoryConsolidated => "memory.consolidated",
            Self::BillingCreditsLow => "billing.credits.low",
            Self::BillingPurchaseCompleted => "billing.purchase.completed",
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One event, as written to the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Its id; the same on every delivery attempt.
    pub id: EventId,
    /// The tenant it belongs to.
    pub tenant_id: TenantId,
    /// Its type.
    pub event_type: EventType,
    /// The type-specific payload.
    pub data: Value,
    /// When the change happened.
    pub created_at: DateTime<Utc>,
}

impl Event {
    /// A new event of `event_type` with `data`.
    pub fn new(
        ids: &dyn IdGenerator,
        tenant_id: &TenantId,
        event_type: EventType,
        data: Value,
        created_at: DateTime<Utc>,
    ) -> Self {
        Self { id: EventId::generate(ids), tenant_id: tenant_id.clone(), event_type, data, created_at }
    }

    /// The envelope: `{id, type, created_at, data, tenant_id, api_version}`.
    pub fn envelope(&self) -> Value {
        json!({
            "id": self.id,
            "type": self.event_type.as_str(),
            "created_at": self.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "data": self.data,
            "tenant_id": self.tenant_id,
            "api_version": API_VERSION,
        })
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn the_envelope_has_the_six_fields() {
        let e = Event {
            id: EventId::from_string("evt_1"),
            tenant_id: TenantId::from_string("ten_1"),
            event_type: EventType::AgentCreated,
            data: json!({"agent_id": "agt_1"}),
            created_at: Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap(),
        };
        assert_eq!(
            e.envelope(),
            json!({"id": "evt_1", "type": "agent.created", "created_at": "2026-11-01T00:00:00.000Z",
                "data": {"agent_id": "agt_1"}, "tenant_id": "ten_1", "api_version": "2026-11-01"})
        );
    }
}

/// Reads the outbox.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait::async_trait]
pub trait EventLog: Send + Sync {
    /// The tenant's most recent events, newest first.
    async fn recent(&self, tenant: &TenantId, limit: u32) -> anyhow::Result<Vec<Event>>;
}

impl EventType {
    /// Every type of the catalogue.
    pub const ALL: [Self; 10] = [
        Self::AgentMessageCreated,
        Self::AgentMessageCompleted,
        Self::AgentCreated,
        Self::AgentUpdated,
        Self::WorkflowExecutionStarted,
        Self::WorkflowExecutionCompleted,
        Self::WorkflowExecutionFailed,
        Self::MemoryConsolidated,
        Self::BillingCreditsLow,
        Self::BillingPurchaseCompleted,
    ];

    /// Parses a type name.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == value)
    }
}

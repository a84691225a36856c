//! Domain events and their envelope. Events are written to an outbox in the same transaction
//! as the change that causes them, so an event exists exactly when its change committed;
//! delivery to subscribers reads the outbox later.
//!
//! Each event type has one [`EventPayload`] variant with a typed data object; the envelope
//! (`{id, type, created_at, data, tenant_id, api_version}`) is made in one place,
//! [`Event::envelope`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{
    AgentId, EventId, ExecutionId, IdGenerator, KnowledgeBaseId, KnowledgeFileId, MemoryId, MessageId,
    PurchaseId, SessionId, TenantId, UserId, WorkflowId,
};
use crate::tenancy::Automation;

pub mod consumers;
mod ports;
pub use ports::EventLog;
#[cfg(any(test, feature = "mock"))]
pub use ports::MockEventLog;

/// The `api_version` every envelope carries.
pub const API_VERSION: &str = "2026-11-01";

crate::string_enum! {
    /// Every event type of the catalogue.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum EventType {
        /// A message was sent to an agent.
        AgentMessageCreated => "agent.message.created",
        /// An agent answered a message.
        AgentMessageCompleted => "agent.message.completed",
        /// An agent was created.
        AgentCreated => "agent.created",
        /// An agent's configuration changed.
        AgentUpdated => "agent.updated",
        /// An agent called one of its tools during a chat.
        AgentToolCalled => "agent.tool.called",
        /// A workflow execution began.
        WorkflowExecutionStarted => "workflow.execution.started",
        /// A workflow execution finished successfully.
        WorkflowExecutionCompleted => "workflow.execution.completed",
        /// A workflow execution failed.
        WorkflowExecutionFailed => "workflow.execution.failed",
        /// Memory consolidation completed.
        MemoryConsolidated => "memory.consolidated",
        /// A memory was learned from a conversation.
        MemoryCreated => "memory.created",
        /// A learned memory was reworded.
        MemoryUpdated => "memory.updated",
        /// A later fact contradicted a memory, which no longer holds.
        MemoryInvalidated => "memory.invalidated",
        /// The credit balance fell below the threshold.
        BillingCreditsLow => "billing.credits.low",
        /// A credit purchase succeeded.
        BillingPurchaseCompleted => "billing.purchase.completed",
        /// Someone joined the tenant (accepted an invitation).
        TenantMemberAdded => "tenant.member.added",
        /// A member left or was removed from the tenant.
        TenantMemberRemoved => "tenant.member.removed",
        /// A member's role changed.
        TenantMemberRoleChanged => "tenant.member.role_changed",
        /// A knowledge file was indexed and is searchable.
        KnowledgeFileIndexed => "knowledge.file.indexed",
        /// A knowledge file could not be read.
        KnowledgeFileFailed => "knowledge.file.failed",
        /// A workflow execution waits (a `wait` step), holding no worker.
        WorkflowExecutionWaiting => "workflow.execution.waiting",
    }
}

/// An agent as event data shows it (the API's agent object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentData {
    /// Agent id.
    pub id: AgentId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// Name.
    pub name: String,
    /// `assistant`, `support` or `custom`.
    #[serde(rename = "type")]
    pub agent_type: String,
    /// `active` or `paused`.
    pub status: String,
    /// Description, if any.
    pub description: Option<String>,
    /// Memory types.
    pub memory_types: Vec<String>,
    /// `{model, temperature, system_prompt, max_tokens}`.
    pub config: Value,
    /// Creation time.
    #[serde(with = "crate::time::rfc3339")]
    pub created_at: DateTime<Utc>,
    /// Last change.
    #[serde(with = "crate::time::rfc3339")]
    pub updated_at: DateTime<Utc>,
}

/// Data of `agent.message.created`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageCreatedData {
    /// The agent.
    pub agent_id: AgentId,
    /// The conversation (the chat's `session_id`).
    pub conversation_id: SessionId,
    /// The user's message.
    pub message_id: MessageId,
    /// Its text.
    pub content: String,
    /// Always `user`.
    pub role: String,
}

/// Data of `agent.message.completed`: the spec's fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageCompletedData {
    /// The agent.
    pub agent_id: AgentId,
    /// The conversation (the chat's `session_id`).
    pub conversation_id: SessionId,
    /// The reply.
    pub message_id: MessageId,
    /// Its text.
    pub content: String,
    /// Prompt and completion tokens of the exchange.
    pub tokens_used: u64,
    /// How long the model took, in milliseconds.
    pub latency_ms: u64,
}

/// Data of `agent.tool.called`: a tool an agent called while answering a chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCalledData {
    /// The agent.
    pub agent_id: AgentId,
    /// The conversation.
    pub session_id: SessionId,
    /// The tool's name.
    pub tool: String,
    /// The model's id of the call.
    pub call_id: String,
    /// Whether it gave an output (rather than an error).
    pub ok: bool,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
}

/// Data of `memory.created`, `memory.updated` and `memory.invalidated`: the memory as the
/// change left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryChangedData {
    /// The memory.
    pub memory_id: MemoryId,
    /// The agent whose memory it is.
    pub agent_id: Option<AgentId>,
    /// Its text (after the change).
    pub content: String,
    /// What wrote it (`extraction` for what a conversation taught).
    pub origin: String,
    /// Why it changed, when something said so.
    pub reason: Option<String>,
    /// The memory that replaced it (`memory.invalidated`).
    pub superseded_by: Option<MemoryId>,
    /// The chat messages the change came from.
    pub source_message_ids: Vec<MessageId>,
}

/// `workflow.execution.started`: an execution was created (it runs in the background).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionStartedData {
    /// The execution.
    pub execution_id: ExecutionId,
    /// Its workflow.
    pub workflow_id: WorkflowId,
    /// What started it: `api`, `trigger` or `integration`.
    pub origin: String,
    /// Its input.
    pub input: Value,
}

/// `workflow.execution.completed`: every step of an execution completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionCompletedData {
    /// The execution.
    pub execution_id: ExecutionId,
    /// Its workflow.
    pub workflow_id: WorkflowId,
    /// The last step's output.
    pub output: Value,
    /// From start to finish, in milliseconds.
    pub duration_ms: u64,
}

/// `workflow.execution.failed`: a step of an execution failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionFailedData {
    /// The execution.
    pub execution_id: ExecutionId,
    /// Its workflow.
    pub workflow_id: WorkflowId,
    /// The step that failed.
    pub step_id: String,
    /// Why.
    pub error: String,
    /// From start to failure, in milliseconds.
    pub duration_ms: u64,
}

/// `workflow.execution.waiting`: an execution waits at a step until a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionWaitingData {
    /// The execution.
    pub execution_id: ExecutionId,
    /// Its workflow.
    pub workflow_id: WorkflowId,
    /// The step that waits.
    pub step_id: String,
    /// Until when.
    #[serde(with = "crate::time::rfc3339")]
    pub until: DateTime<Utc>,
}

/// The type and data of an event: one variant per event type of the catalogue that the
/// service emits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum EventPayload {
    /// `agent.created`: the new agent.
    #[serde(rename = "agent.created")]
    AgentCreated(AgentData),
    /// `agent.updated`: the agent after the change and the names of the changed fields.
    #[serde(rename = "agent.updated")]
    AgentUpdated {
        /// The agent after the change.
        agent: AgentData,
        /// Names of the fields that changed.
        changed: Vec<String>,
    },
    /// `agent.message.created`: a message sent to an agent.
    #[serde(rename = "agent.message.created")]
    AgentMessageCreated(MessageCreatedData),
    /// `agent.message.completed`: the agent's reply.
    #[serde(rename = "agent.message.completed")]
    AgentMessageCompleted(MessageCompletedData),
    /// `agent.tool.called`: a tool an agent called during a chat.
    #[serde(rename = "agent.tool.called")]
    AgentToolCalled(ToolCalledData),
    /// `workflow.execution.started`.
    #[serde(rename = "workflow.execution.started")]
    WorkflowExecutionStarted(ExecutionStartedData),
    /// `workflow.execution.completed`.
    #[serde(rename = "workflow.execution.completed")]
    WorkflowExecutionCompleted(ExecutionCompletedData),
    /// `workflow.execution.failed`.
    #[serde(rename = "workflow.execution.failed")]
    WorkflowExecutionFailed(ExecutionFailedData),
    /// `workflow.execution.waiting`.
    #[serde(rename = "workflow.execution.waiting")]
    WorkflowExecutionWaiting(ExecutionWaitingData),
    /// `memory.consolidated`: near-duplicate memories of an agent were merged.
    #[serde(rename = "memory.consolidated")]
    MemoryConsolidated {
        /// The agent whose memory was consolidated.
        agent_id: AgentId,
        /// Entries compared.
        examined: u64,
        /// Entries merged into another and removed.
        merged: u64,
        /// Entries that absorbed at least one other.
        kept: u64,
        /// The similarity at or above which two entries were merged.
        threshold: f32,
    },
    /// `memory.created`: a memory was learned from a conversation.
    #[serde(rename = "memory.created")]
    MemoryCreated(MemoryChangedData),
    /// `memory.updated`: a learned memory was reworded.
    #[serde(rename = "memory.updated")]
    MemoryUpdated(MemoryChangedData),
    /// `memory.invalidated`: a memory no longer holds.
    #[serde(rename = "memory.invalidated")]
    MemoryInvalidated(MemoryChangedData),
    /// `billing.credits.low`: the settled balance fell below the threshold.
    #[serde(rename = "billing.credits.low")]
    BillingCreditsLow {
        /// The balance after the change.
        credits: i64,
        /// The configured threshold.
        threshold: i64,
    },
    /// `billing.purchase.completed`: credits were bought.
    #[serde(rename = "billing.purchase.completed")]
    BillingPurchaseCompleted {
        /// The purchase.
        purchase_id: PurchaseId,
        /// Credits bought.
        credits: i64,
        /// The payment provider.
        provider: String,
    },
    /// `tenant.member.added`: someone accepted an invitation and joined the tenant.
    #[serde(rename = "tenant.member.added")]
    TenantMemberAdded {
        /// The new member.
        user_id: UserId,
        /// Their address.
        email: String,
        /// Their role: `owner`, `admin`, `member` or `viewer`.
        role: String,
        /// Who invited them.
        invited_by: UserId,
    },
    /// `tenant.member.removed`: a member left (removed by themself) or was removed.
    #[serde(rename = "tenant.member.removed")]
    TenantMemberRemoved {
        /// The former member.
        user_id: UserId,
        /// Who removed them (the member themself when they left).
        removed_by: UserId,
        /// What acted as them and stopped with the removal (see `tenancy::automations`).
        #[serde(default)]
        paused: Vec<Automation>,
    },
    /// `tenant.member.role_changed`: a member's role changed.
    #[serde(rename = "tenant.member.role_changed")]
    TenantMemberRoleChanged {
        /// The member.
        user_id: UserId,
        /// The role before.
        from: String,
        /// The role after.
        to: String,
        /// Who changed it.
        changed_by: UserId,
        /// What acted as them and stopped because the new role does not allow it.
        #[serde(default)]
        paused: Vec<Automation>,
    },
    /// `knowledge.file.indexed`: an uploaded file is searchable, whole.
    #[serde(rename = "knowledge.file.indexed")]
    KnowledgeFileIndexed {
        /// Its knowledge base.
        knowledge_base_id: KnowledgeBaseId,
        /// The file.
        file_id: KnowledgeFileId,
        /// Its name.
        name: String,
        /// Its pages, for paged formats.
        pages: Option<u32>,
        /// Its chunks.
        chunks: u32,
    },
    /// `knowledge.file.failed`: an uploaded file could not be read; nothing of it is searchable.
    #[serde(rename = "knowledge.file.failed")]
    KnowledgeFileFailed {
        /// Its knowledge base.
        knowledge_base_id: KnowledgeBaseId,
        /// The file.
        file_id: KnowledgeFileId,
        /// Its name.
        name: String,
        /// Why.
        error: String,
    },
}

impl EventPayload {
    /// A membership change's payload with what it paused (found in the change's transaction);
    /// any other payload unchanged.
    #[must_use]
    pub fn with_paused(mut self, stopped: Vec<Automation>) -> Self {
        if let Self::TenantMemberRemoved { paused, .. } | Self::TenantMemberRoleChanged { paused, .. } =
            &mut self
        {
            *paused = stopped;
        }
        self
    }

    /// The event type of this payload.
    pub fn event_type(&self) -> EventType {
        match self {
            Self::AgentCreated(_) => EventType::AgentCreated,
            Self::AgentUpdated { .. } => EventType::AgentUpdated,
            Self::AgentMessageCreated(_) => EventType::AgentMessageCreated,
            Self::AgentMessageCompleted(_) => EventType::AgentMessageCompleted,
            Self::AgentToolCalled(_) => EventType::AgentToolCalled,
            Self::WorkflowExecutionStarted(_) => EventType::WorkflowExecutionStarted,
            Self::WorkflowExecutionCompleted(_) => EventType::WorkflowExecutionCompleted,
            Self::WorkflowExecutionFailed(_) => EventType::WorkflowExecutionFailed,
            Self::WorkflowExecutionWaiting(_) => EventType::WorkflowExecutionWaiting,
            Self::MemoryConsolidated { .. } => EventType::MemoryConsolidated,
            Self::MemoryCreated(_) => EventType::MemoryCreated,
            Self::MemoryUpdated(_) => EventType::MemoryUpdated,
            Self::MemoryInvalidated(_) => EventType::MemoryInvalidated,
            Self::BillingCreditsLow { .. } => EventType::BillingCreditsLow,
            Self::BillingPurchaseCompleted { .. } => EventType::BillingPurchaseCompleted,
            Self::TenantMemberAdded { .. } => EventType::TenantMemberAdded,
            Self::TenantMemberRemoved { .. } => EventType::TenantMemberRemoved,
            Self::TenantMemberRoleChanged { .. } => EventType::TenantMemberRoleChanged,
            Self::KnowledgeFileIndexed { .. } => EventType::KnowledgeFileIndexed,
            Self::KnowledgeFileFailed { .. } => EventType::KnowledgeFileFailed,
        }
    }

    /// The data object alone, as stored beside the type.
    ///
    /// # Errors
    /// Never for the shipped payloads (they serialise to JSON objects).
    pub fn data(&self) -> anyhow::Result<Value> {
        match serde_json::to_value(self)? {
            Value::Object(mut map) => Ok(map.remove("data").unwrap_or(Value::Null)),
            other => anyhow::bail!("event payload serialised to {other}"),
        }
    }

    /// Reads a payload back from its stored type and data.
    ///
    /// # Errors
    /// For an unknown type or data that does not fit it.
    pub fn from_stored(event_type: &str, data: Value) -> anyhow::Result<Self> {
        let tagged = serde_json::json!({ "type": event_type, "data": data });
        serde_json::from_value(tagged).map_err(|e| anyhow::anyhow!("stored event {event_type:?}: {e}"))
    }
}

/// One event, as written to the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Its id; the same on every delivery attempt.
    pub id: EventId,
    /// The tenant it belongs to.
    pub tenant_id: TenantId,
    /// Its type and data.
    pub payload: EventPayload,
    /// When the change happened.
    pub created_at: DateTime<Utc>,
}

impl Event {
    /// A new event with a fresh id.
    pub fn new(
        ids: &dyn IdGenerator,
        tenant_id: &TenantId,
        payload: EventPayload,
        created_at: DateTime<Utc>,
    ) -> Self {
        Self { id: EventId::generate(ids), tenant_id: tenant_id.clone(), payload, created_at }
    }

    /// Its type.
    pub fn event_type(&self) -> EventType {
        self.payload.event_type()
    }

    /// The envelope: `{id, type, created_at, data, tenant_id, api_version}`.
    ///
    /// # Errors
    /// Never for the shipped payloads.
    pub fn envelope(&self) -> anyhow::Result<Value> {
        Ok(envelope(&self.id, self.event_type(), self.created_at, self.payload.data()?, &self.tenant_id))
    }
}

/// The envelope every payload is sent in: `{id, type, created_at, data, tenant_id,
/// api_version}`. [`Event::envelope`] makes it for stored events; a webhook's test send makes it
/// for sample data of any type.
pub fn envelope(
    id: &EventId,
    event_type: EventType,
    created_at: DateTime<Utc>,
    data: Value,
    tenant_id: &TenantId,
) -> Value {
    serde_json::json!({
        "id": id,
        "type": event_type.as_str(),
        "created_at": crate::time::rfc3339::format(&created_at),
        "data": data,
        "tenant_id": tenant_id,
        "api_version": API_VERSION,
    })
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
    }

    #[test]
    fn the_envelope_has_the_six_fields() {
        let e = Event {
            id: EventId::from_string("evt_1"),
            tenant_id: TenantId::from_string("ten_1"),
            payload: EventPayload::BillingCreditsLow { credits: 99, threshold: 100 },
            created_at: t0(),
        };
        assert_eq!(
            e.envelope().unwrap(),
            json!({"id": "evt_1", "type": "billing.credits.low", "created_at": "2026-11-01T00:00:00.000Z",
                "data": {"credits": 99, "threshold": 100}, "tenant_id": "ten_1", "api_version": "2026-11-01"})
        );
    }

    #[test]
    fn payloads_round_trip_through_their_stored_form() {
        let payloads = [
            EventPayload::AgentMessageCompleted(MessageCompletedData {
                agent_id: AgentId::from_string("agt_1"),
                conversation_id: SessionId::from_string("s-1"),
                message_id: MessageId::from_string("msg_1"),
                content: "hi".into(),
                tokens_used: 12,
                latency_ms: 3,
            }),
            EventPayload::AgentToolCalled(ToolCalledData {
                agent_id: AgentId::from_string("agt_1"),
                session_id: SessionId::from_string("s-1"),
                tool: "memory_search".into(),
                call_id: "call_1".into(),
                ok: true,
                duration_ms: 4,
            }),
            EventPayload::BillingPurchaseCompleted {
                purchase_id: PurchaseId::from_string("pur_1"),
                credits: 5,
                provider: "manual".into(),
            },
        ];
        for payload in payloads {
            let t = payload.event_type();
            let back = EventPayload::from_stored(t.as_str(), payload.data().unwrap()).unwrap();
            assert_eq!(back, payload);
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
        assert!(EventPayload::from_stored("agent.deleted", json!({})).is_err());
    }
}

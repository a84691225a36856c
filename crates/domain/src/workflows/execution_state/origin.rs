//! What started an execution, stored as a kind and the id of what started it.

use crate::ids::{AgentId, IntegrationId, ScheduleId, TriggerId};

/// What started an execution. Written by hand rather than with `string_enum!`: its variants
/// carry the id of what started it, stored in a column of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutionOrigin {
    /// `POST /workflows/{id}/execute`.
    Api,
    /// A call to a trigger URL.
    Trigger(TriggerId),
    /// An event at an integration's receiver.
    Integration(IntegrationId),
    /// An agent's `run_workflow` tool, during a chat.
    Agent(AgentId),
    /// A due tick of a schedule.
    Schedule(ScheduleId),
}

impl ExecutionOrigin {
    /// The stored and shown kind: `api`, `trigger`, `integration`, `agent` or `schedule`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::Trigger(_) => "trigger",
            Self::Integration(_) => "integration",
            Self::Agent(_) => "agent",
            Self::Schedule(_) => "schedule",
        }
    }

    /// The trigger's, integration's, agent's or schedule's id.
    pub fn source_id(&self) -> Option<&str> {
        match self {
            Self::Api => None,
            Self::Trigger(id) => Some(id.as_str()),
            Self::Integration(id) => Some(id.as_str()),
            Self::Agent(id) => Some(id.as_str()),
            Self::Schedule(id) => Some(id.as_str()),
        }
    }

    /// Reads a stored kind and source id back.
    pub fn parse(kind: &str, source_id: Option<String>) -> Option<Self> {
        match (kind, source_id) {
            ("api", _) => Some(Self::Api),
            ("trigger", Some(id)) => Some(Self::Trigger(TriggerId::from_string(id))),
            ("integration", Some(id)) => Some(Self::Integration(IntegrationId::from_string(id))),
            ("agent", Some(id)) => Some(Self::Agent(AgentId::from_string(id))),
            ("schedule", Some(id)) => Some(Self::Schedule(ScheduleId::from_string(id))),
            _ => None,
        }
    }
}

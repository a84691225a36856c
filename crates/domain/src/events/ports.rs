//! What reading events needs from outside: the outbox.

use super::Event;
use crate::ids::TenantId;

/// Reads the outbox.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait::async_trait]
pub trait EventLog: Send + Sync {
    /// The tenant's most recent events, newest first.
    async fn recent(&self, tenant: &TenantId, limit: u32) -> anyhow::Result<Vec<Event>>;
}

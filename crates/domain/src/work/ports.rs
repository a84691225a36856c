//! The ports of the durable-work core: the one lease queue every kind of work is claimed from,
//! and the registry of running instances whose heartbeats keep their leases held.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Claimed, Lease};

/// A table of work items claimed with leases (jobs, webhook deliveries, workflow executions):
/// the one port of the core, implemented once per table over one claim statement.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait LeaseQueue<T: Send + Sync + 'static>: Send + Sync {
    /// Claims up to `limit` items due at `now` — waiting with their time come, or held under a
    /// lease that ran out or whose instance went silent — writing `lease` and counting a claim
    /// on each. MUST never hand one item to two holders of live leases, also across processes.
    async fn claim(&self, lease: &Lease, now: DateTime<Utc>, limit: u32) -> anyhow::Result<Vec<Claimed<T>>>;

    /// When the earliest item not yet due at `now` comes due (an execution waiting for a time,
    /// a step backing off), so that a worker that found nothing to claim looks again then
    /// rather than at its next poll; `None`: nothing waits for a time, or the queue cannot
    /// tell (its worker polls).
    ///
    /// # Errors
    /// When the queue fails.
    async fn next_due(&self, now: DateTime<Utc>) -> anyhow::Result<Option<DateTime<Utc>>> {
        let _ = now;
        Ok(None)
    }
}

/// The running instances of the service, as the leases they take know them: each instance
/// beats a heartbeat, and a lease whose instance has been silent for longer than the instance
/// timeout is free at once (in every lease queue).
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait InstanceRegistry: Send + Sync {
    /// Records instance `id`'s heartbeat at `now` (registering it on its first beat), forgets
    /// instances silent for long, and returns the ids of the instances silent since
    /// `silent_before` (whose leases are free): a new one among them is work to take over.
    async fn beat(
        &self,
        id: &str,
        now: DateTime<Utc>,
        silent_before: DateTime<Utc>,
    ) -> anyhow::Result<Vec<String>>;

    /// Removes instance `id` (it is stopping): what it still holds is free at once.
    async fn leave(&self, id: &str) -> anyhow::Result<()>;
}

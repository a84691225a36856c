//! The durable-work core: every piece of background work (a mail job, a webhook delivery, a
//! workflow execution) is first a row of a *lease queue*, then a worker's task, and all of them
//! run through the one mechanism here.
//!
//! - A worker *claims* due items with a [`Lease`]: for the lease's duration no other worker
//!   takes them, and every state change afterwards is applied only while the row still carries
//!   that lease, so a worker that stalled past its lease cannot overwrite the outcome of the one
//!   that took over. [`LeaseQueue`] is the one port every queue implements; the store builds
//!   every claim with one statement per backend.
//! - Every claim is counted. An item claimed more than its kind allows without recording an
//!   outcome (its worker crashed, stalled past its lease or was stopped each time) is given up
//!   with the reason instead of run again ([`Worker::process`]): an input that crashes its
//!   worker cannot make a crash loop.
//! - A lease held by an instance whose heartbeat went silent is free at once
//!   ([`InstanceRegistry`]), so a killed instance's work is taken over in seconds.
//! - What each kind does with an item it holds is its [`WorkKind`]; the server runs one
//!   generic loop over every kind, and its tests drain due work through the same claims
//!   ([`Worker::run_due`] is that drain for one kind, as the domain's own tests use it).

mod load;
mod ports;

#[cfg(test)]
mod tests;

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};

pub use self::load::{InRequest, RequestLoad};
pub use self::ports::{InstanceRegistry, LeaseQueue};
#[cfg(any(test, feature = "mock"))]
pub use self::ports::{MockInstanceRegistry, MockLeaseQueue};
use crate::ids::IdGenerator;
use crate::time::Clock;

/// Proof that a worker holds an item: the token its claim wrote, and until when it holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Random, unique per claim.
    pub token: String,
    /// When the item may be claimed by another worker if this one has not finished.
    pub until: DateTime<Utc>,
}

impl Lease {
    /// A new lease, from `now` for `length`.
    pub fn new(ids: &dyn IdGenerator, now: DateTime<Utc>, length: Duration) -> Self {
        Self { token: ids.generate("lease"), until: now + length }
    }
}

/// An item a worker holds: the item, how many times it has been claimed (this claim included)
/// and the lease its changes are made under. It reads as the item it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed<T> {
    /// What was claimed.
    pub item: T,
    /// Claims so far, this one included (from 1). More than one means a worker before this one
    /// recorded no outcome, or the item was tried again after a failure.
    pub claims: u32,
    /// The lease under which its outcome is recorded.
    pub lease: Lease,
}

impl<T> Deref for Claimed<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.item
    }
}

impl<T> DerefMut for Claimed<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.item
    }
}

crate::string_enum! {
    /// What a run of one claimed item came to, as metrics count it (the `outcome` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Outcome {
        /// It did its work (a job, an execution whose steps all completed).
        Done => "done",
        /// The receiver accepted a delivery.
        Delivered => "delivered",
        /// It failed this time and is due again later.
        Retry => "retry",
        /// It waits for a time (a workflow's `wait`), holding no worker.
        Waiting => "waiting",
        /// It failed for good.
        Failed => "failed",
        /// An execution cancelled while it ran.
        Cancelled => "cancelled",
        /// A stopping worker gave it back unfinished, for any worker to take up.
        Released => "released",
        /// Another worker took it over (this one stalled past its lease): what it did was
        /// not recorded.
        LostLease => "lost_lease",
    }
}

/// What a run of one claimed item came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ran {
    /// The outcome, as metrics count it.
    pub outcome: Outcome,
    /// When the item is due again, when the run scheduled another attempt: the worker looks
    /// again then rather than at its next safety-net poll.
    pub due_again: Option<DateTime<Utc>>,
}

impl Ran {
    /// A run that scheduled nothing further.
    pub fn ended(outcome: Outcome) -> Self {
        Self { outcome, due_again: None }
    }
}

/// One kind of durable work: the queue it is claimed from, how it is held, and what a worker
/// does with an item it holds.
#[async_trait]
pub trait WorkKind: Send + Sync + 'static {
    /// What one claim hands over.
    type Item: Send + Sync + 'static;

    /// The kind's name, in logs and as the queue label of metrics.
    fn name(&self) -> &'static str;

    /// The queue label an item's outcome is counted under (its kind's name unless the kind
    /// keeps several queues in one table, as jobs do).
    fn metric_queue(&self, _item: &Self::Item) -> &'static str {
        self.name()
    }

    /// The queue its items are claimed from.
    fn queue(&self) -> &dyn LeaseQueue<Self::Item>;

    /// How long a claim holds an item before another worker may take it.
    fn lease(&self) -> Duration;

    /// Most items one instance runs at once.
    fn concurrency(&self) -> u32;

    /// Claims after which an item that recorded no outcome is given up instead of run again.
    fn max_claims(&self) -> u32;

    /// Runs a claimed item and records its outcome under its lease. `keep_going` turns false
    /// when the service is stopping: a long item gives itself back between two steps. Must be
    /// safe to run again after a crash part-way through.
    ///
    /// # Errors
    /// When storage fails; the lease then runs out and the item is claimed again.
    async fn run(
        &self,
        claimed: Claimed<Self::Item>,
        keep_going: &(dyn Fn() -> bool + Send + Sync),
    ) -> anyhow::Result<Ran>;

    /// Records that the item ends as failed with `reason`, without running it (it was claimed
    /// more than [`WorkKind::max_claims`] times without an outcome).
    ///
    /// # Errors
    /// When storage fails.
    async fn give_up(&self, claimed: Claimed<Self::Item>, reason: String) -> anyhow::Result<Ran>;
}

/// Claims and runs the items of one [`WorkKind`]: the rules every kind shares (the lease, the
/// count of claims, the outcome metrics). The server's loop and the tests' drain both go through
/// it.
pub struct Worker<K: WorkKind> {
    kind: Arc<K>,
    ids: Arc<dyn IdGenerator>,
    clock: Arc<dyn Clock>,
}

impl<K: WorkKind> Clone for Worker<K> {
    fn clone(&self) -> Self {
        Self { kind: self.kind.clone(), ids: self.ids.clone(), clock: self.clock.clone() }
    }
}

impl<K: WorkKind> std::fmt::Debug for Worker<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("kind", &self.kind.name()).finish_non_exhaustive()
    }
}

impl<K: WorkKind> Worker<K> {
    /// A worker of `kind`.
    pub fn new(kind: Arc<K>, ids: Arc<dyn IdGenerator>, clock: Arc<dyn Clock>) -> Self {
        Self { kind, ids, clock }
    }

    /// The kind it works.
    pub fn kind(&self) -> &K {
        &self.kind
    }

    /// Claims up to `limit` due items under one new lease.
    ///
    /// # Errors
    /// When the queue fails.
    pub async fn claim(&self, limit: u32) -> anyhow::Result<Vec<Claimed<K::Item>>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let now = self.clock.now();
        let lease = Lease::new(self.ids.as_ref(), now, self.kind.lease());
        self.kind.queue().claim(&lease, now, limit).await
    }

    /// When the earliest item that is not due yet comes due, as its queue tells.
    ///
    /// # Errors
    /// When the queue fails.
    pub async fn next_due(&self) -> anyhow::Result<Option<DateTime<Utc>>> {
        self.kind.queue().next_due(self.clock.now()).await
    }

    /// Runs one claimed item — or gives it up, when it has been claimed more often than its kind
    /// allows — and counts the outcome. A failure to record is logged: the lease runs out and
    /// the item is claimed again (and counted again, so that too ends).
    pub async fn process(
        &self,
        claimed: Claimed<K::Item>,
        keep_going: &(dyn Fn() -> bool + Send + Sync),
    ) -> Option<Ran> {
        let queue = self.kind.metric_queue(&claimed.item);
        let max = self.kind.max_claims();
        let ran = if claimed.claims > max {
            let reason = format!(
                "given up after {} claims by workers that recorded no outcome (each crashed, stalled past its lease or was stopped)",
                claimed.claims - 1
            );
            tracing::warn!(queue, claims = claimed.claims, "{reason}");
            self.kind.give_up(claimed, reason).await
        } else {
            self.kind.run(claimed, keep_going).await
        };
        match ran {
            Ok(ran) => {
                crate::metrics::queue_outcome(queue, ran.outcome.as_str());
                Some(ran)
            }
            Err(e) => {
                tracing::error!(queue, error = ?e, "recording the outcome of background work failed; it is claimed again when its lease ends");
                None
            }
        }
    }

    /// Claims up to `limit` due items and runs them all at once, to their recorded outcomes;
    /// how many it claimed: due work drained without waiting for a worker loop.
    ///
    /// # Errors
    /// When claiming fails.
    pub async fn run_due(&self, limit: u32) -> anyhow::Result<usize> {
        let claimed = self.claim(limit).await?;
        let count = claimed.len();
        let keep_going = || true;
        futures_util::future::join_all(claimed.into_iter().map(|c| self.process(c, &keep_going))).await;
        Ok(count)
    }
}

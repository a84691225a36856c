//! Event consumers: each reads the outbox in order from its own cursor (the webhook fan-out,
//! the episodic note of a chat, memory extraction), so that work following a change runs after
//! its transaction committed, never inside the request that made it.
//!
//! - **Order and settled reads.** The stream gives each event a position; a consumer reads the
//!   events after its cursor, and only those no earlier transaction can still add to (the store
//!   answers for that: see [`EventStream::read_after`]).
//! - **One holder.** A pass holds its consumer's lease, so each consumer runs on one instance
//!   at a time; another instance takes over when the lease runs out.
//! - **At least once.** The cursor moves after the handler returned: a crash in between hands
//!   the same events to the next pass, so every handler is idempotent.
//! - **A failure never blocks.** An event a handler fails is recorded for that consumer alone
//!   and tried again with backoff ([`retry_delay`]); after [`MAX_ATTEMPTS`] it is *parked*,
//!   visible in `agentry events consumers`, until someone retries it. The cursor moves on, and
//!   the other consumers never see the failure.
//! - **Background work yields.** A consumer nobody waits on ([`EventConsumer::yields`]: memory
//!   extraction) defers its passes while requests queue for the cores, at most
//!   [`MAX_DEFERRAL_MS`] at a time, so its CPU comes from the service's spare time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};

use super::{Event, EventType};
use crate::ids::{EventId, IdGenerator, TenantId};
use crate::time::Clock;
use crate::work::{Lease, RequestLoad};

/// Failed attempts after which an event is parked rather than tried again.
pub const MAX_ATTEMPTS: u32 = 6;

/// Longest wait between two attempts at a failed event.
pub const MAX_RETRY_DELAY_SECONDS: i64 = 600;

/// How long a pass holds its consumer: passes are batches, far shorter.
pub const PASS_LEASE_SECONDS: i64 = 300;

/// Longest a yielding consumer's pass waits for the requests to stop queueing: under a load
/// that never ends it still makes a pass this often.
pub const MAX_DEFERRAL_MS: i64 = 1_000;

/// How long after its `attempts`-th failure an event is tried again: 2, 4, 8, … seconds, at
/// most [`MAX_RETRY_DELAY_SECONDS`]; `None` once it has failed [`MAX_ATTEMPTS`] times (it is
/// parked).
pub fn retry_delay(attempts: u32) -> Option<Duration> {
    if attempts >= MAX_ATTEMPTS {
        return None;
    }
    let seconds = 1_i64.checked_shl(attempts.min(30)).unwrap_or(i64::MAX).min(MAX_RETRY_DELAY_SECONDS);
    Some(Duration::seconds(seconds))
}

/// Where an event stands in the stream: events are read in the order of these, and a cursor is
/// the last one a consumer has passed.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct StreamPosition {
    /// The order of the transaction that wrote it (the store's).
    pub position: i64,
    /// The event's id, which orders the events of one transaction.
    pub event_id: String,
}

/// An event as the stream hands it over: where it stands, and the event, or why it cannot be
/// read (a type this version does not know): such an event is passed over, logged.
#[derive(Debug, Clone)]
pub struct StreamedEvent {
    /// Its place in the stream.
    pub at: StreamPosition,
    /// The event.
    pub event: Result<Event, String>,
}

/// What one read of the stream found.
#[derive(Debug, Clone, Default)]
pub struct StreamBatch {
    /// The settled events after the cursor, in order.
    pub events: Vec<StreamedEvent>,
    /// Whether events after these are committed but not settled yet (a transaction that
    /// began before theirs still runs and may add one before them): read again shortly.
    pub unsettled: bool,
}

/// What a pass, or a pass of every consumer, came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Passed {
    /// Events handled or passed (0: nothing was due).
    pub handled: usize,
    /// Whether events wait to settle: another pass is due shortly, not at the next poll.
    pub unsettled: bool,
    /// When the pass a yielding consumer deferred is due at the latest (the loop looks again
    /// then, if nothing wakes it before).
    pub deferred_until: Option<DateTime<Utc>>,
}

/// An event a consumer failed, as recorded for it.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedEvent {
    /// The event.
    pub event_id: EventId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// Failed attempts so far.
    pub attempts: u32,
    /// The last failure.
    pub error: String,
    /// When it is tried again; `None`: parked.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When it failed last.
    pub failed_at: DateTime<Utc>,
}

/// What a pass changes for its consumer, applied at once under its lease.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    /// The new cursor, when the pass read new events.
    pub cursor: Option<StreamPosition>,
    /// Events that failed (first time or again), with their new state.
    pub failed: Vec<FailedEvent>,
    /// Earlier failures that succeeded this time.
    pub recovered: Vec<EventId>,
}

/// A consumer's state, as `agentry events consumers` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerStatus {
    /// Its name.
    pub name: String,
    /// The last event it passed.
    pub cursor: StreamPosition,
    /// Events after its cursor.
    pub behind: u64,
    /// Its failed events: waiting for another attempt, or parked.
    pub failures: Vec<FailedEvent>,
}

/// The outbox as a stream with a cursor per consumer.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait EventStream: Send + Sync {
    /// Takes `consumer`'s lease (registering it at the start of the stream if it is new) and
    /// returns its cursor; `None` while another holder's lease is live.
    async fn acquire(
        &self,
        consumer: &str,
        lease: &Lease,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<StreamPosition>>;

    /// Up to `limit` events after `after`, in stream order. MUST hand over only *settled*
    /// events: no transaction still running may later add one before the last it returns; and
    /// MUST say when committed events wait behind such a transaction.
    async fn read_after(&self, after: &StreamPosition, limit: u32) -> anyhow::Result<StreamBatch>;

    /// `consumer`'s failed events due at `now` (not parked), oldest first, with their events.
    async fn due_failures(
        &self,
        consumer: &str,
        now: DateTime<Utc>,
        limit: u32,
    ) -> anyhow::Result<Vec<(FailedEvent, Event)>>;

    /// Applies `progress` and gives the lease back at `now`, in one transaction; `false`
    /// (nothing applied) when `lease` no longer holds the consumer.
    async fn commit(
        &self,
        consumer: &str,
        lease: &Lease,
        progress: &Progress,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool>;

    /// Every registered consumer's state.
    async fn status(&self) -> anyhow::Result<Vec<ConsumerStatus>>;

    /// Makes `consumer`'s parked events (or only `event`) due at `now` again; how many.
    async fn retry_parked(
        &self,
        consumer: &str,
        event: Option<EventId>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<u64>;
}

/// One consumer of the outbox: which events it wants and what it does with them. Handlers
/// MUST be idempotent: an event may be handed over again after a crash.
#[async_trait]
pub trait EventConsumer: Send + Sync {
    /// Its name: the key of its cursor, stable across versions.
    fn name(&self) -> &'static str;

    /// Whether it handles events of this type (the others only move its cursor).
    fn wants(&self, event_type: EventType) -> bool;

    /// Most events one pass reads.
    fn batch(&self) -> u32 {
        100
    }

    /// Whether nobody waits on its work, so that its passes wait while requests queue for the
    /// cores (see [`ConsumerRunner::yielding_to`]), at most [`MAX_DEFERRAL_MS`] each.
    fn yields(&self) -> bool {
        false
    }

    /// Handles one event.
    ///
    /// # Errors
    /// Anything: the event is tried again later, then parked.
    async fn handle(&self, event: &Event) -> anyhow::Result<()>;

    /// Handles the wanted events of one pass, in order; one result per event. A consumer that
    /// does a batch's work at once (the fan-out: one transaction) overrides it.
    async fn handle_batch(&self, events: &[Event]) -> Vec<anyhow::Result<()>> {
        let mut results = Vec::with_capacity(events.len());
        for event in events {
            results.push(self.handle(event).await);
        }
        results
    }
}

/// Runs passes of consumers over one stream: the rules every consumer shares (the lease, the
/// cursor, retries and parking). The server's loop and the tests' drain both go through it.
#[derive(Clone)]
pub struct ConsumerRunner {
    stream: Arc<dyn EventStream>,
    consumers: Vec<Arc<dyn EventConsumer>>,
    ids: Arc<dyn IdGenerator>,
    clock: Arc<dyn Clock>,
    /// The requests yielding consumers leave the cores to; none: they never wait.
    load: Option<Arc<RequestLoad>>,
    /// When each yielding consumer's last pass started.
    last_pass: Arc<Mutex<HashMap<&'static str, DateTime<Utc>>>>,
}

impl std::fmt::Debug for ConsumerRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.consumers.iter().map(|c| c.name()).collect();
        f.debug_struct("ConsumerRunner").field("consumers", &names).finish_non_exhaustive()
    }
}

impl ConsumerRunner {
    /// A runner of `consumers` over `stream`.
    pub fn new(
        stream: Arc<dyn EventStream>,
        consumers: Vec<Arc<dyn EventConsumer>>,
        ids: Arc<dyn IdGenerator>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self { stream, consumers, ids, clock, load: None, last_pass: Arc::default() }
    }

    /// Defers the passes of yielding consumers while `load` is busy (the server's requests).
    #[must_use]
    pub fn yielding_to(mut self, load: Arc<RequestLoad>) -> Self {
        self.load = Some(load);
        self
    }

    /// The stream it reads.
    pub fn stream(&self) -> &Arc<dyn EventStream> {
        &self.stream
    }

    /// One pass of every consumer, side by side: the events they handled or passed in all,
    /// and whether any waits for events to settle. A consumer whose pass fails is logged and
    /// does not stop the others.
    pub async fn run_all(&self) -> Passed {
        let passes = self.consumers.iter().map(|c| async move {
            if let Some(until) = self.defers(c.as_ref()) {
                return Passed { deferred_until: Some(until), ..Passed::default() };
            }
            self.pass(c.as_ref()).await.unwrap_or_else(|e| {
                tracing::error!(consumer = c.name(), error = ?e, "an event consumer's pass failed");
                Passed::default()
            })
        });
        futures_util::future::join_all(passes).await.into_iter().fold(Passed::default(), |all, p| Passed {
            handled: all.handled + p.handled,
            unsettled: all.unsettled || p.unsettled,
            deferred_until: match (all.deferred_until, p.deferred_until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        })
    }

    /// Until when `consumer` waits this time, if it does: it yields, requests queue, and its
    /// last pass started less than [`MAX_DEFERRAL_MS`] ago. A pass that goes ahead is recorded
    /// as its last.
    fn defers(&self, consumer: &dyn EventConsumer) -> Option<DateTime<Utc>> {
        let load = self.load.as_ref().filter(|_| consumer.yields())?;
        let now = self.clock.now();
        let mut last_pass = self.last_pass.lock().unwrap_or_else(PoisonError::into_inner);
        let until = last_pass
            .get(consumer.name())
            .map(|&at| at + Duration::milliseconds(MAX_DEFERRAL_MS))
            .filter(|&until| now < until);
        if let Some(until) = until.filter(|_| load.busy()) {
            metrics::counter!(crate::metrics::CONSUMER_PASSES_DEFERRED, "consumer" => consumer.name())
                .increment(1);
            return Some(until);
        }
        last_pass.insert(consumer.name(), now);
        None
    }

    /// One pass of `consumer`: its due retries, then up to a batch of new events; how many
    /// events it handled or passed (none also when another instance holds it).
    ///
    /// # Errors
    /// When the stream fails (the lease then runs out, and a later pass does the work again).
    pub async fn pass(&self, consumer: &dyn EventConsumer) -> anyhow::Result<Passed> {
        let name = consumer.name();
        let now = self.clock.now();
        let lease = Lease::new(self.ids.as_ref(), now, Duration::seconds(PASS_LEASE_SECONDS));
        let Some(cursor) = self.stream.acquire(name, &lease, now).await? else {
            return Ok(Passed::default());
        };
        let mut progress = Progress::default();
        let due = self.stream.due_failures(name, now, consumer.batch()).await?;
        let retried = due.len();
        for (failure, event) in due {
            match consumer.handle(&event).await {
                Ok(()) => progress.recovered.push(failure.event_id),
                Err(e) => progress.failed.push(self.failed(name, &event, failure.attempts + 1, &e)),
            }
        }
        let StreamBatch { events: read, unsettled } =
            self.stream.read_after(&cursor, consumer.batch()).await?;
        progress.cursor = read.last().map(|s| s.at.clone());
        let wanted: Vec<Event> = read
            .iter()
            .filter_map(|s| match &s.event {
                Ok(event) => consumer.wants(event.event_type()).then(|| event.clone()),
                Err(reason) => {
                    tracing::error!(consumer = name, event = %s.at.event_id, %reason, "passing over an event that cannot be read");
                    None
                }
            })
            .collect();
        if !wanted.is_empty() {
            let results = consumer.handle_batch(&wanted).await;
            for (event, result) in wanted.iter().zip(results) {
                if let Err(e) = result {
                    progress.failed.push(self.failed(name, event, 1, &e));
                }
            }
        }
        if !self.stream.commit(name, &lease, &progress, self.clock.now()).await? {
            tracing::warn!(
                consumer = name,
                "another instance took the consumer over; its pass is done again there"
            );
        }
        Ok(Passed { handled: retried + read.len(), unsettled, deferred_until: None })
    }

    /// The record of `event`'s `attempts`-th failure, logged.
    fn failed(&self, consumer: &str, event: &Event, attempts: u32, error: &anyhow::Error) -> FailedEvent {
        let now = self.clock.now();
        let next_attempt_at = retry_delay(attempts).map(|d| now + d);
        if next_attempt_at.is_some() {
            tracing::warn!(consumer, event = %event.id, attempts, error = ?error, "an event consumer failed an event; it is tried again");
        } else {
            tracing::error!(consumer, event = %event.id, attempts, error = ?error, "an event consumer failed an event for good; it is parked");
        }
        FailedEvent {
            event_id: event.id.clone(),
            tenant_id: event.tenant_id.clone(),
            attempts,
            error: format!("{error:#}"),
            next_attempt_at,
            failed_at: now,
        }
    }
}

#[cfg(test)]
mod tests;

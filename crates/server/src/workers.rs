//! Background work: one loop for every kind ([`spawn_loop`]), the instance's heartbeat, and
//! the drain tests use instead of waiting ([`WorkSet::drain`]).
//!
//! Work is always a row first (see `agentry_domain::work`), so a loop that dies loses nothing.
//! A loop takes as much work as it has free slots, runs each unit as a task, and then waits for
//! the first of: a wake-up (work was stored: by this process, or by another instance through
//! PostgreSQL's `NOTIFY`), a slot coming free, the time a retry it scheduled is due, or its
//! safety-net poll. On stop it takes nothing more and lets the units it runs finish.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentry_domain::billing::BillingService;
use agentry_domain::events::consumers::ConsumerRunner;
use agentry_domain::time::Clock;
use agentry_domain::work::{InstanceRegistry, WorkKind, Worker};
use agentry_domain::workflows::ScheduleService;
use agentry_store::WorkSignals;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

/// Whether the service is still running: long units give themselves back between two steps
/// when it says no.
pub(crate) type KeepGoing = Arc<dyn Fn() -> bool + Send + Sync>;

/// One unit of work taken by a loop, as a task; it resolves to when something it scheduled is
/// due (a retry), if anything.
pub(crate) type Unit = BoxFuture<'static, Option<DateTime<Utc>>>;

/// Where a loop takes its work from.
#[async_trait]
pub(crate) trait Source: Send + Sync + 'static {
    /// Its name, in logs.
    fn name(&self) -> &'static str;

    /// Most units it runs at once.
    fn concurrency(&self) -> usize;

    /// Takes up to `limit` units of due work (claiming them).
    ///
    /// # Errors
    /// When the work cannot be taken (the database is down).
    async fn take(&self, limit: usize, keep_going: KeepGoing) -> anyhow::Result<Vec<Unit>>;

    /// When its earliest work that is not due yet comes due, if it knows: a loop that took
    /// nothing looks again then (a restarted instance resumes a wait on time, not at its poll).
    async fn next_due(&self) -> Option<DateTime<Utc>> {
        None
    }
}

/// A kind of durable work is a source: its units are the items it claims.
#[async_trait]
impl<K: WorkKind> Source for Worker<K> {
    fn name(&self) -> &'static str {
        self.kind().name()
    }

    fn concurrency(&self) -> usize {
        usize::try_from(self.kind().concurrency()).unwrap_or(1).max(1)
    }

    async fn take(&self, limit: usize, keep_going: KeepGoing) -> anyhow::Result<Vec<Unit>> {
        let claimed = self.claim(u32::try_from(limit).unwrap_or(u32::MAX)).await?;
        Ok(claimed
            .into_iter()
            .map(|item| {
                let (worker, keep_going) = (self.clone(), keep_going.clone());
                async move { worker.process(item, keep_going.as_ref()).await.and_then(|ran| ran.due_again) }
                    .boxed()
            })
            .collect())
    }

    async fn next_due(&self) -> Option<DateTime<Utc>> {
        Worker::next_due(self).await.unwrap_or_else(|e| {
            tracing::error!(source = self.kind().name(), error = ?e, "reading when work comes due failed; the loop polls");
            None
        })
    }
}

/// The outbox's consumers as a source (the webhook fan-out, the episodic memory of chats, memory
/// extraction): each take is one pass of every consumer. A pass that handled any event is a
/// unit (more may wait, and what it handled may have written events of its own: the loop, and
/// [`WorkSet::drain`], take again at once); the deliveries the fan-out made wake the delivery
/// loop through the store.
#[derive(Debug, Clone)]
pub(crate) struct Consumers {
    runner: ConsumerRunner,
    /// When the pass a yielding consumer deferred is due (what [`Source::next_due`] tells the
    /// loop: a deferral is no unit, so [`WorkSet::drain`] never waits on one).
    deferred_until: Arc<std::sync::Mutex<Option<DateTime<Utc>>>>,
}

impl Consumers {
    pub(crate) fn new(runner: ConsumerRunner) -> Self {
        Self { runner, deferred_until: Arc::default() }
    }
}

#[async_trait]
impl Source for Consumers {
    fn name(&self) -> &'static str {
        "event_consumers"
    }

    fn concurrency(&self) -> usize {
        1
    }

    async fn take(&self, _limit: usize, _keep_going: KeepGoing) -> anyhow::Result<Vec<Unit>> {
        let passed = self.runner.run_all().await;
        *self.deferred_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            passed.deferred_until;
        Ok(if passed.handled > 0 {
            vec![async { None }.boxed()]
        } else if passed.unsettled {
            // Committed events wait behind a transaction that began before theirs (PostgreSQL):
            // it ends in moments, so the loop looks again shortly, not at its next poll.
            vec![tokio::time::sleep(UNSETTLED_RETRY).map(|()| None).boxed()]
        } else {
            Vec::new()
        })
    }

    /// A consumer that deferred its pass while requests queued is due when its deferral ends
    /// (each new event wakes the loop before that, and the pass goes ahead once they stop).
    async fn next_due(&self) -> Option<DateTime<Utc>> {
        *self.deferred_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How soon the consumers look again at events that wait to settle.
const UNSETTLED_RETRY: Duration = Duration::from_millis(5);

/// Starts the executions of due schedules: one pass per take. A pass that handled any comes
/// back at once (more may be due, and the executions it started are work for the other loops,
/// which [`WorkSet::drain`] then runs); one that handled none waits for the next poll.
pub(crate) struct ScheduleTicks(pub(crate) ScheduleService);

/// Most due schedules one pass reads.
const SCHEDULE_BATCH: u32 = 100;

#[async_trait]
impl Source for ScheduleTicks {
    fn name(&self) -> &'static str {
        "schedules"
    }

    fn concurrency(&self) -> usize {
        1
    }

    async fn take(&self, _limit: usize, _keep_going: KeepGoing) -> anyhow::Result<Vec<Unit>> {
        let handled = self.0.run_due(SCHEDULE_BATCH).await?;
        Ok(if handled > 0 { vec![async { None }.boxed()] } else { Vec::new() })
    }
}

/// Returns the credits of chats that never settled (the process died mid-chat) once they are
/// older than any chat can take.
#[derive(Debug, Clone)]
pub(crate) struct HoldSweep {
    /// The billing service.
    pub(crate) billing: BillingService,
    /// How old a hold must be.
    pub(crate) max_age: chrono::Duration,
}

#[async_trait]
impl Source for HoldSweep {
    fn name(&self) -> &'static str {
        "credit_hold_sweep"
    }

    fn concurrency(&self) -> usize {
        1
    }

    async fn take(&self, _limit: usize, _keep_going: KeepGoing) -> anyhow::Result<Vec<Unit>> {
        let released = self.billing.release_stale_holds(self.max_age).await?;
        if released > 0 {
            tracing::warn!(released, "returned the credits of unfinished chats");
        }
        Ok(Vec::new())
    }
}

/// Removes the stored parts of knowledge uploads that a crash cut off, once they are a day old.
pub(crate) struct UploadSweep(pub(crate) agentry_domain::knowledge::KnowledgeService);

#[async_trait]
impl Source for UploadSweep {
    fn name(&self) -> &'static str {
        "knowledge_upload_sweep"
    }

    fn concurrency(&self) -> usize {
        1
    }

    async fn take(&self, _limit: usize, _keep_going: KeepGoing) -> anyhow::Result<Vec<Unit>> {
        let swept = self.0.sweep_unfinished_uploads().await?;
        if swept > 0 {
            tracing::warn!(swept, "removed the stored parts of uploads that never finished");
        }
        Ok(Vec::new())
    }
}

/// When a loop looks for work besides the slots coming free.
#[derive(Debug, Clone)]
pub(crate) struct Cadence {
    /// The safety net: how often it looks when nothing woke it.
    pub(crate) poll: Duration,
    /// What wakes it when work is stored, if anything.
    pub(crate) wake: Option<Arc<Notify>>,
    /// How long it waits after a wake-up before it looks (mail: apart from the request that
    /// stored the job, so the job's work never shows in that request's timing).
    pub(crate) wake_delay: Duration,
}

/// A source with the count of what its loop has in flight (a take, and the units taken), which
/// [`WorkSet::drain`] waits on.
#[derive(Clone)]
struct Tracked {
    source: Arc<dyn Source>,
    running: Arc<AtomicUsize>,
}

/// Runs `source` until `stop` turns true (see the module's documentation); `running` counts the
/// units in flight. `clock` turns the due times units report into delays.
fn spawn_tracked(
    tracked: Tracked,
    cadence: Cadence,
    clock: Arc<dyn Clock>,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let Tracked { source, running } = tracked;
        let stopping = stop.clone();
        let keep_going: KeepGoing = Arc::new(move || !*stopping.borrow());
        let mut units = tokio::task::JoinSet::new();
        let mut next_due: Option<DateTime<Utc>> = None;
        loop {
            if *stop.borrow() {
                break;
            }
            while let Some(done) = units.try_join_next() {
                next_due = earliest(next_due, due_of(source.name(), done));
            }
            let free = source.concurrency().saturating_sub(units.len());
            if free > 0 {
                // Taking is work in flight too: the fan-out does its work inside its take, and a
                // claim holds rows that other takers skip until it commits. Counted, so that
                // `WorkSet::drain` never ends while this loop holds what drain's own take
                // could not see; released once the units it took are counted themselves.
                let taking = InFlight::enter(&running);
                match source.take(free, keep_going.clone()).await {
                    Ok(taken) if taken.is_empty() && units.is_empty() => {
                        // Idle: look again when the earliest waiting work comes due.
                        next_due = earliest(next_due, source.next_due().await);
                    }
                    Ok(taken) => {
                        for unit in taken {
                            let in_flight = InFlight::enter(&running);
                            units.spawn(async move {
                                let _in_flight = in_flight;
                                unit.await
                            });
                        }
                    }
                    Err(e) => {
                        tracing::error!(source = source.name(), error = ?e, "taking background work failed")
                    }
                }
                drop(taking);
            }
            let now = clock.now();
            let until_due = next_due.map(|due| (due - now).to_std().unwrap_or(Duration::ZERO));
            let wait = until_due.map_or(cadence.poll, |d| d.min(cadence.poll));
            let woken = async {
                match &cadence.wake {
                    Some(wake) => wake.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {
                    if until_due.is_some_and(|d| d <= wait) {
                        next_due = None;
                    }
                }
                () = woken => {
                    if !cadence.wake_delay.is_zero() {
                        tokio::time::sleep(cadence.wake_delay).await;
                    }
                }
                // A dropped sender (the service failed to start) stops the loop as `true` does.
                changed = stop.changed() => if changed.is_err() { break },
                Some(done) = units.join_next(), if !units.is_empty() => next_due = earliest(next_due, due_of(source.name(), done)),
            }
        }
        while units.join_next().await.is_some() {}
    })
}

/// Counts a take or a unit in flight until it is dropped: also when the unit panics, so
/// [`WorkSet::drain`] never waits for a unit that is gone.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn enter(running: &Arc<AtomicUsize>) -> Self {
        running.fetch_add(1, Ordering::SeqCst);
        Self(running.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// When a finished unit's next work is due; a unit that panicked is logged (its item stays
/// leased, and is claimed again once the lease expires, counted as a claim).
fn due_of(
    source: &'static str,
    done: Result<Option<DateTime<Utc>>, tokio::task::JoinError>,
) -> Option<DateTime<Utc>> {
    done.unwrap_or_else(|e| {
        tracing::error!(source, error = %e, "a unit of background work panicked");
        None
    })
}

/// The earlier of two due times.
fn earliest(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Runs `source` until `stop` turns true, as every background loop runs.
pub(crate) fn spawn_loop(
    source: Arc<dyn Source>,
    cadence: Cadence,
    clock: Arc<dyn Clock>,
    stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    spawn_tracked(Tracked { source, running: Arc::default() }, cadence, clock, stop)
}

/// The queues of durable work an instance runs, each with its loop: what tests drain.
#[derive(Clone, Default)]
#[allow(missing_debug_implementations)] // trait objects
pub struct WorkSet {
    sources: Vec<Tracked>,
}

impl WorkSet {
    /// Adds `source` and starts its loop (unless `stop` is `None`: the instance runs no
    /// background work, and only [`WorkSet::drain`] runs it).
    pub(crate) fn start(
        &mut self,
        source: Arc<dyn Source>,
        cadence: Cadence,
        clock: Arc<dyn Clock>,
        stop: Option<watch::Receiver<bool>>,
    ) -> Option<JoinHandle<()>> {
        let tracked = Tracked { source, running: Arc::default() };
        self.sources.push(tracked.clone());
        stop.map(|stop| spawn_tracked(tracked, cadence, clock, stop))
    }

    /// Runs the work that is due now to its end, in this task, until none is left and none is
    /// running in this process's loops: a test that drains has seen every consequence of what it
    /// did (the fan-out of its events, the attempts of their deliveries, its executions, its
    /// mail). Retries scheduled for later are not due, and are left.
    ///
    /// # Errors
    /// When work cannot be taken.
    pub async fn drain(&self) -> anyhow::Result<()> {
        let keep_going: KeepGoing = Arc::new(|| true);
        loop {
            let mut took = 0;
            for tracked in &self.sources {
                let units = tracked.source.take(tracked.source.concurrency(), keep_going.clone()).await?;
                took += units.len();
                futures_util::future::join_all(units).await;
            }
            if took > 0 {
                continue;
            }
            if self.sources.iter().all(|t| t.running.load(Ordering::SeqCst) == 0) {
                return Ok(());
            }
            // A loop of this process holds work: what it does may make more.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// This instance's heartbeat: while it beats, the leases the instance takes are its own; once
/// it is silent for the instance timeout (the process was killed), any instance may take them
/// over — and every instance that sees another go silent wakes its loops to do so at once.
/// It beats until [`Heartbeat::stop`], which comes after the loops have finished what they
/// hold, and then leaves the registry so nothing waits for the timeout.
#[allow(missing_debug_implementations)] // trait objects
pub(crate) struct Heartbeat {
    registry: Arc<dyn InstanceRegistry>,
    id: String,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Heartbeat {
    /// Beats once (so the instance is known before it takes any lease), then every `every`;
    /// an instance silent for `timeout` wakes `signals`.
    ///
    /// # Errors
    /// When the first beat cannot be recorded.
    pub async fn start(
        registry: Arc<dyn InstanceRegistry>,
        id: String,
        clock: Arc<dyn Clock>,
        every: Duration,
        timeout: chrono::Duration,
        signals: Arc<WorkSignals>,
    ) -> anyhow::Result<Self> {
        let now = clock.now();
        let mut silent = registry.beat(&id, now, now - timeout).await?;
        let (stop, mut stopped) = watch::channel(false);
        let task = {
            let (registry, id) = (registry.clone(), id.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = tick.tick() => {}
                        _ = stopped.changed() => return,
                    }
                    let now = clock.now();
                    match registry.beat(&id, now, now - timeout).await {
                        Ok(now_silent) => {
                            if now_silent.iter().any(|i| !silent.contains(i)) {
                                tracing::info!("an instance went silent; taking over its work");
                                signals.notify_all();
                            }
                            silent = now_silent;
                        }
                        Err(e) => tracing::error!(error = ?e, "recording this instance's heartbeat failed"),
                    }
                }
            })
        };
        Ok(Self { registry, id, stop, task })
    }

    /// Stops beating and leaves the registry: what this instance still holds is free at once.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        if let Err(e) = self.registry.leave(&self.id).await {
            tracing::warn!(error = ?e, "leaving the instance registry failed; its leases free when its heartbeat goes stale");
        }
    }
}

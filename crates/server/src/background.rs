//! The background work of an instance: one loop per queue of durable work (jobs, webhook
//! deliveries, workflow executions, knowledge ingestion), the outbox's event consumers (the webhook
//! fan-out among them), the schedules' ticker and the sweep
//! of stale credit holds,
//! all run by [`crate::workers::spawn_loop`], and the listener that wakes them when another
//! instance stores work (PostgreSQL).

use std::sync::Arc;
use std::time::Duration;

use agentry_store::{Database, WorkQueue};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::services::Services;
use crate::workers::{Cadence, Consumers, HoldSweep, ScheduleTicks, Source, WorkSet, spawn_loop};

/// How long the mail loop waits after a wake-up: a mail request's job never runs alongside the
/// request that stored it, so its work (more for an address with an account) cannot show in
/// that request's timing.
const MAIL_WAKE_DELAY: Duration = Duration::from_millis(100);

/// Starts the loops over `services` (unless `AGENTRY_BACKGROUND_WORK` is off: then only
/// [`WorkSet::drain`] runs the queues) and, on PostgreSQL, the listener for other instances'
/// work. Returns what drains the queues and the tasks to wait for at shutdown.
pub(crate) fn start_background_work(
    config: &Config,
    db: &Database,
    services: &Services,
    stop: &watch::Receiver<bool>,
) -> (WorkSet, Vec<JoinHandle<()>>) {
    let signals = db.signals();
    let running = config.background_work.then(|| stop.clone());
    let clock = services.clock.clone();
    let poll = |ms: u64| Duration::from_millis(ms);
    let woken = |queue, poll_ms: u64| Cadence {
        poll: poll(poll_ms),
        wake: Some(signals.waiter(queue)),
        wake_delay: Duration::ZERO,
    };
    let queues: [(Arc<dyn Source>, Cadence); 6] = [
        (
            Arc::new(services.jobs.clone()),
            Cadence { wake_delay: MAIL_WAKE_DELAY, ..woken(WorkQueue::Jobs, config.job_poll_interval_ms) },
        ),
        (
            Arc::new(Consumers::new(services.consumers.clone())),
            woken(WorkQueue::Outbox, config.webhook_poll_interval_ms),
        ),
        (
            Arc::new(services.deliveries.clone()),
            woken(WorkQueue::Deliveries, config.webhook_poll_interval_ms),
        ),
        (
            Arc::new(services.executions.clone()),
            woken(WorkQueue::Executions, config.workflow_poll_interval_ms),
        ),
        (Arc::new(services.ingestion.clone()), woken(WorkQueue::Knowledge, config.job_poll_interval_ms)),
        (
            Arc::new(ScheduleTicks(services.state.schedules.clone())),
            Cadence { poll: poll(config.schedule_poll_interval_ms), wake: None, wake_delay: Duration::ZERO },
        ),
    ];
    let mut work = WorkSet::default();
    let mut tasks: Vec<JoinHandle<()>> = queues
        .into_iter()
        .filter_map(|(source, cadence)| work.start(source, cadence, clock.clone(), running.clone()))
        .collect();
    if let Some(stop) = running {
        // A live chat refreshes its hold before each model call and each tool call: between two
        // refreshes it waits at most two model calls' timeouts or one tool's (a workflow may
        // take up to its tool's 300 s).
        let tool = i64::from(agentry_domain::agents::tools::MAX_TOOL_TIMEOUT_SECONDS);
        let max_age =
            chrono::Duration::seconds(i64::try_from(config.llm_timeout_secs).unwrap_or(60) * 2 + tool + 120);
        let sweep = HoldSweep { billing: services.state.billing.clone(), max_age };
        let every_minute = Cadence { poll: Duration::from_secs(60), wake: None, wake_delay: Duration::ZERO };
        tasks.push(spawn_loop(Arc::new(sweep), every_minute.clone(), clock.clone(), stop.clone()));
        let hourly = Cadence { poll: Duration::from_secs(3600), ..every_minute };
        let uploads = crate::workers::UploadSweep(services.state.knowledge.clone());
        tasks.push(spawn_loop(Arc::new(uploads), hourly, clock, stop));
        // Not among the tasks awaited at shutdown: it only wakes loops, and ends with the process.
        let _listener = db.listen_for_work();
    }
    (work, tasks)
}

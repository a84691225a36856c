//! Background workers. Each loop lives here; what it decides lives in the domain
//! ([`JobRunner`], the stale-hold sweep). Work is always a row first (see
//! `agentry_domain::jobs`), so a worker that dies loses nothing: another claims the row when
//! its lease ends.

use std::sync::Arc;
use std::time::Duration;

use agentry_domain::billing::BillingService;
use agentry_domain::ids::JobId;
use agentry_domain::jobs::{ClaimedJob, JobKind, JobOutcome, JobQueue, JobRunner, Lease, NewJob};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

/// A job queue that wakes this instance's workers when it stores a job, so a job made here
/// starts at once instead of at the next poll.
pub struct WakingQueue {
    inner: Arc<dyn JobQueue>,
    wake: Arc<Notify>,
}

impl std::fmt::Debug for WakingQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WakingQueue { .. }")
    }
}

impl WakingQueue {
    /// Wraps `inner`; `wake` is notified after each stored job.
    pub fn new(inner: Arc<dyn JobQueue>, wake: Arc<Notify>) -> Self {
        Self { inner, wake }
    }
}

#[async_trait]
impl JobQueue for WakingQueue {
    async fn enqueue(&self, job: &NewJob) -> anyhow::Result<()> {
        self.inner.enqueue(job).await?;
        self.wake.notify_one();
        Ok(())
    }

    async fn claim(
        &self,
        kinds: &[JobKind],
        lease: &Lease,
        now: DateTime<Utc>,
        limit: u32,
    ) -> anyhow::Result<Vec<ClaimedJob>> {
        self.inner.claim(kinds, lease, now, limit).await
    }

    async fn finish(
        &self,
        job: &JobId,
        lease: &Lease,
        outcome: &JobOutcome,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        self.inner.finish(job, lease, outcome, now).await
    }
}

/// Runs due jobs until `stop` turns true: at once when woken, else every `poll`. A batch that
/// started is finished before the loop looks at `stop` again.
pub fn spawn_job_worker(
    runner: JobRunner,
    wake: Arc<Notify>,
    poll: Duration,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if *stop.borrow() {
                return;
            }
            match runner.run_due().await {
                Ok(0) => {}
                // More may be due: look again at once.
                Ok(_) => continue,
                Err(e) => tracing::error!(error = ?e, "claiming jobs failed"),
            }
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(poll) => {}
                _ = stop.changed() => {}
            }
        }
    })
}

/// Returns the credits of chats that never settled (the process died mid-chat) once they are
/// older than any chat can take.
pub fn spawn_hold_sweeper(
    billing: BillingService,
    llm_timeout_secs: u64,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let max_age = chrono::Duration::seconds(i64::try_from(llm_timeout_secs).unwrap_or(60) * 2 + 120);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            match billing.release_stale_holds(max_age).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(released = n, "returned the credits of unfinished chats"),
                Err(e) => tracing::error!(error = ?e, "releasing stale credit holds failed"),
            }
        }
    })
}

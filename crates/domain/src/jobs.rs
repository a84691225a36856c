//! Durable background work: anything that must happen after a request and must not be lost
//! (e-mail today; webhook deliveries and workflow steps reuse the same rules) is first a row in
//! a job table, then a worker's task.
//!
//! A worker *claims* due jobs with a lease: for the lease's duration no other worker takes
//! them, and every state change afterwards is applied only if the row still carries that
//! lease, so a worker that stalled past its lease cannot overwrite the outcome of the one that
//! took over. A job whose worker died is claimed again once its lease expires. The decisions —
//! what to do after a failure, when to try again — are the pure functions here.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::ids::{IdGenerator, JobId};
use crate::time::Clock;

/// What a job does; each kind has one [`JobHandler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    /// Resolve an address and send it a password-reset or magic-link e-mail.
    Mail,
}

impl JobKind {
    /// Every kind.
    pub const ALL: [Self; 1] = [Self::Mail];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mail => "mail",
        }
    }

    /// Parses a stored name.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == value)
    }
}

impl fmt::Display for JobKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A job to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// Its id.
    pub id: JobId,
    /// What it does.
    pub kind: JobKind,
    /// Its input, as its handler reads it.
    pub payload: Value,
    /// When it may first run.
    pub run_at: DateTime<Utc>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
}

/// Proof that a worker holds a job: the token its claim wrote, and until when it holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Random, unique per claim.
    pub token: String,
    /// When the job may be claimed by another worker if this one has not finished.
    pub until: DateTime<Utc>,
}

/// The running instances of the service, as the leases they take know them: each instance
/// beats a heartbeat, and a lease whose instance has been silent for longer than the instance
/// timeout is free at once (in every lease queue: jobs, webhook deliveries, executions).
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait InstanceRegistry: Send + Sync {
    /// Records instance `id`'s heartbeat at `now` (registering it on its first beat), and
    /// forgets instances silent for long.
    async fn beat(&self, id: &str, now: DateTime<Utc>) -> anyhow::Result<()>;

    /// Removes instance `id` (it is stopping): what it still holds is free at once.
    async fn leave(&self, id: &str) -> anyhow::Result<()>;

    /// Frees every lease of every queue; how many. Only for a database one process uses
    /// (SQLite), at that process's start: whatever is held was held by a process now gone.
    async fn free_all_leases(&self) -> anyhow::Result<u64>;
}

/// A job a worker holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedJob {
    /// Its id.
    pub id: JobId,
    /// What it does.
    pub kind: JobKind,
    /// Its input.
    pub payload: Value,
    /// Which attempt this is, from 1.
    pub attempt: u32,
    /// The lease under which its outcome is recorded.
    pub lease: Lease,
}

/// The job table.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Stores a job (one insert: it is the whole cost of a request that asks for background
    /// work).
    async fn enqueue(&self, job: &NewJob) -> anyhow::Result<()>;

    /// Claims up to `limit` jobs of `kinds` that are due at `now` — queued with `run_at` passed,
    /// or running under a lease that expired — writing `lease` and counting an attempt on each.
    /// MUST never hand one job to two workers under the same lease period, also across
    /// processes.
    async fn claim(
        &self,
        kinds: &[JobKind],
        lease: &Lease,
        now: DateTime<Utc>,
        limit: u32,
    ) -> anyhow::Result<Vec<ClaimedJob>>;

    /// Records the outcome of a claimed job, only if it still carries `lease`; `false` when it
    /// does not (another worker took it over).
    async fn finish(
        &self,
        job: &JobId,
        lease: &Lease,
        outcome: &JobOutcome,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool>;
}

/// What became of an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// Done; the job is kept as `done`.
    Done,
    /// Failed; try again at the given time.
    RetryAt {
        /// When.
        at: DateTime<Utc>,
        /// Why this attempt failed.
        error: String,
    },
    /// Failed for good; kept as `failed` with the reason.
    Failed {
        /// Why.
        error: String,
    },
}

/// Why an attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Worth another attempt (a mail server that did not answer).
    #[error(transparent)]
    Transient(anyhow::Error),
    /// Will fail the same way every time (a payload this version cannot read).
    #[error(transparent)]
    Permanent(anyhow::Error),
}

/// Does one kind of job.
#[async_trait]
pub trait JobHandler: Send + Sync {
    /// The kind it does.
    fn kind(&self) -> JobKind;

    /// Does one attempt of a job. Must be safe to run again after a crash part-way through.
    ///
    /// # Errors
    /// [`JobError`] saying whether another attempt makes sense.
    async fn run(&self, payload: &Value) -> Result<(), JobError>;
}

/// When to try a failed job again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Delay before the second attempt; each further one doubles it.
    pub first_delay: Duration,
    /// Longest delay between attempts.
    pub max_delay: Duration,
    /// Attempts in all, the first included.
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { first_delay: Duration::seconds(5), max_delay: Duration::minutes(30), max_attempts: 10 }
    }
}

impl RetryPolicy {
    /// What to record after `attempt` (from 1) ended with `error` at `now`.
    pub fn after_failure(&self, attempt: u32, error: &JobError, now: DateTime<Utc>) -> JobOutcome {
        let message = format!("{error:#}");
        match error {
            JobError::Transient(_) if attempt < self.max_attempts => {
                let doublings = attempt.saturating_sub(1).min(30);
                let delay = self
                    .first_delay
                    .checked_mul(1_i32 << doublings)
                    .map_or(self.max_delay, |d| d.min(self.max_delay));
                JobOutcome::RetryAt { at: now + delay, error: message }
            }
            _ => JobOutcome::Failed { error: message },
        }
    }
}

/// Settings of the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerSettings {
    /// How long a claim holds a job.
    pub lease: Duration,
    /// Most jobs claimed at once.
    pub batch: u32,
    /// Retries.
    pub retry: RetryPolicy,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self { lease: Duration::seconds(60), batch: 16, retry: RetryPolicy::default() }
    }
}

/// Claims due jobs and runs them with their handlers.
#[derive(Clone)]
pub struct JobRunner {
    queue: Arc<dyn JobQueue>,
    handlers: Vec<Arc<dyn JobHandler>>,
    ids: Arc<dyn IdGenerator>,
    clock: Arc<dyn Clock>,
    settings: WorkerSettings,
}

impl std::fmt::Debug for JobRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobRunner").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl JobRunner {
    /// A runner over `queue` for the kinds `handlers` do.
    pub fn new(
        queue: Arc<dyn JobQueue>,
        handlers: Vec<Arc<dyn JobHandler>>,
        ids: Arc<dyn IdGenerator>,
        clock: Arc<dyn Clock>,
        settings: WorkerSettings,
    ) -> Self {
        Self { queue, handlers, ids, clock, settings }
    }

    /// Claims one batch of due jobs and runs them one after the other; returns how many ran.
    ///
    /// # Errors
    /// When the queue fails; a failing job is recorded, not returned.
    pub async fn run_due(&self) -> anyhow::Result<usize> {
        let kinds: Vec<JobKind> = self.handlers.iter().map(|h| h.kind()).collect();
        let now = self.clock.now();
        let lease = Lease { token: self.ids.generate("lease"), until: now + self.settings.lease };
        let jobs = self.queue.claim(&kinds, &lease, now, self.settings.batch).await?;
        for job in &jobs {
            let outcome = match self.handler(job.kind) {
                // Every attempt is counted when it is claimed: one past the limit means the
                // attempts before it never recorded their outcome (their worker crashed).
                Some(_) if job.attempt > self.settings.retry.max_attempts => JobOutcome::Failed {
                    error: format!(
                        "given up after {} attempts whose outcome was never recorded (the worker crashed or stalled)",
                        job.attempt - 1
                    ),
                },
                Some(handler) => match handler.run(&job.payload).await {
                    Ok(()) => JobOutcome::Done,
                    Err(e) => {
                        tracing::warn!(job_id = %job.id, kind = %job.kind, attempt = job.attempt, error = %e, "job failed");
                        self.settings.retry.after_failure(job.attempt, &e, self.clock.now())
                    }
                },
                None => JobOutcome::Failed { error: format!("no handler for {}", job.kind) },
            };
            let label = match outcome {
                JobOutcome::Done => "done",
                JobOutcome::RetryAt { .. } => "retry",
                JobOutcome::Failed { .. } => "failed",
            };
            if self.queue.finish(&job.id, &job.lease, &outcome, self.clock.now()).await? {
                crate::metrics::queue_outcome(job.kind.as_str(), label);
            } else {
                tracing::warn!(job_id = %job.id, "job was taken over by another worker; outcome dropped");
                crate::metrics::queue_outcome(job.kind.as_str(), "lost_lease");
            }
        }
        Ok(jobs.len())
    }

    fn handler(&self, kind: JobKind) -> Option<&Arc<dyn JobHandler>> {
        self.handlers.iter().find(|h| h.kind() == kind)
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::ids::MockIdGenerator;
    use crate::time::MockClock;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
    }

    #[test]
    fn failures_back_off_exponentially_up_to_a_ceiling_then_give_up() {
        let policy = RetryPolicy {
            first_delay: Duration::seconds(5),
            max_delay: Duration::seconds(60),
            max_attempts: 6,
        };
        let transient = || JobError::Transient(anyhow::anyhow!("smtp down"));
        let delays: Vec<Option<i64>> = (1..=6)
            .map(|attempt| match policy.after_failure(attempt, &transient(), t0()) {
                JobOutcome::RetryAt { at, .. } => Some((at - t0()).num_seconds()),
                _ => None,
            })
            .collect();
        assert_eq!(delays, [Some(5), Some(10), Some(20), Some(40), Some(60), None]);
        let permanent = JobError::Permanent(anyhow::anyhow!("unreadable"));
        assert!(matches!(policy.after_failure(1, &permanent, t0()), JobOutcome::Failed { .. }));
        assert!(matches!(policy.after_failure(u32::MAX - 1, &transient(), t0()), JobOutcome::Failed { .. }));
        let long = RetryPolicy { max_attempts: u32::MAX, ..policy };
        assert!(matches!(long.after_failure(200, &transient(), t0()), JobOutcome::RetryAt { .. }));
    }

    struct Failing;

    #[async_trait]
    impl JobHandler for Failing {
        fn kind(&self) -> JobKind {
            JobKind::Mail
        }
        async fn run(&self, _: &Value) -> Result<(), JobError> {
            Err(JobError::Transient(anyhow::anyhow!("down")))
        }
    }

    #[tokio::test]
    async fn a_failed_attempt_is_recorded_under_its_lease_with_the_next_time() {
        let mut queue = MockJobQueue::new();
        queue
            .expect_claim()
            .withf(|kinds, lease, _, _| kinds == [JobKind::Mail] && lease.token == "lease_1")
            .returning(|_, lease, _, _| {
                Ok(vec![ClaimedJob {
                    id: JobId::from_string("job_1"),
                    kind: JobKind::Mail,
                    payload: Value::Null,
                    attempt: 2,
                    lease: lease.clone(),
                }])
            });
        queue
            .expect_finish()
            .withf(|id, lease, outcome, _| {
                id.as_str() == "job_1"
                    && lease.token == "lease_1"
                    && matches!(outcome, JobOutcome::RetryAt { at, .. } if *at == t0() + Duration::seconds(10))
            })
            .times(1)
            .returning(|_, _, _, _| Ok(true));
        let mut ids = MockIdGenerator::new();
        ids.expect_generate().returning(|p| format!("{p}_1"));
        let mut clock = MockClock::new();
        clock.expect_now().returning(t0);
        let runner = JobRunner::new(
            Arc::new(queue),
            vec![Arc::new(Failing)],
            Arc::new(ids),
            Arc::new(clock),
            WorkerSettings {
                retry: RetryPolicy { first_delay: Duration::seconds(5), ..RetryPolicy::default() },
                ..WorkerSettings::default()
            },
        );
        assert_eq!(runner.run_due().await.unwrap(), 1);
    }
}

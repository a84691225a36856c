//! Jobs: durable background work that a request asks for and must not be lost (e-mail today),
//! as one kind of the durable-work core ([`crate::work`]).
//!
//! A job is a typed value ([`BackgroundJob`]: a serde type with its [`JobKind`]), stored as
//! JSON in the job table and read back as that type by its [`JobHandler`]. The decisions — what
//! to do after a failure, when to try again — are the pure functions here.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ids::{IdGenerator, JobId};
use crate::time::Clock;
use crate::work::{Claimed, Lease, LeaseQueue, Outcome, Ran, WorkKind};

crate::string_enum! {
    /// What a job does; each kind has one [`JobHandler`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum JobKind {
        /// Resolve an address and send it a password-reset or magic-link e-mail.
        Mail => "mail",
        /// Send an invitation into a tenant, with a fresh link.
        Invitation => "invitation",
    }
}

/// A typed job: its fields are its input, stored as JSON.
pub trait BackgroundJob: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The kind it is stored as.
    const KIND: JobKind;
}

/// A job to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// Its id.
    pub id: JobId,
    /// What it does.
    pub kind: JobKind,
    /// Its input, serialised from its [`BackgroundJob`] type.
    pub payload: Value,
    /// When it may first run.
    pub run_at: DateTime<Utc>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
}

impl NewJob {
    /// `job`, to run from `now`.
    ///
    /// # Errors
    /// When the job does not serialise (a map with keys that are not strings).
    pub fn new<J: BackgroundJob>(ids: &dyn IdGenerator, job: &J, now: DateTime<Utc>) -> anyhow::Result<Self> {
        Ok(Self {
            id: JobId::generate(ids),
            kind: J::KIND,
            payload: serde_json::to_value(job)?,
            run_at: now,
            created_at: now,
        })
    }
}

/// A job as the queue hands it over: its kind and its stored input, read as its type by its
/// handler.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedJob {
    /// Its id.
    pub id: JobId,
    /// What it does.
    pub kind: JobKind,
    /// Its stored input.
    pub payload: Value,
}

/// The job table (claims go through its [`LeaseQueue`]).
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Stores a job (one insert: it is the whole cost of a request that asks for background
    /// work).
    async fn enqueue(&self, job: &NewJob) -> anyhow::Result<()>;

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
    /// Done; the job is removed.
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

impl JobOutcome {
    /// The outcome as metrics count it.
    pub fn label(&self) -> Outcome {
        match self {
            Self::Done => Outcome::Done,
            Self::RetryAt { .. } => Outcome::Retry,
            Self::Failed { .. } => Outcome::Failed,
        }
    }
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

/// Does the jobs of one [`BackgroundJob`] type.
#[async_trait]
pub trait JobHandler<J: BackgroundJob>: Send + Sync {
    /// Does one attempt of `job`. Must be safe to run again after a crash part-way through.
    ///
    /// # Errors
    /// [`JobError`] saying whether another attempt makes sense.
    async fn run(&self, job: J) -> Result<(), JobError>;
}

/// A handler of some job type, reached by its kind: reads the stored input as its type.
#[async_trait]
trait StoredJobHandler: Send + Sync {
    async fn run(&self, payload: &Value) -> Result<(), JobError>;
}

struct Typed<J>(Arc<dyn JobHandler<J>>);

#[async_trait]
impl<J: BackgroundJob> StoredJobHandler for Typed<J> {
    async fn run(&self, payload: &Value) -> Result<(), JobError> {
        let job: J = serde_json::from_value(payload.clone())
            .map_err(|e| JobError::Permanent(anyhow::anyhow!("unreadable {} job: {e}", J::KIND)))?;
        self.0.run(job).await
    }
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

/// Settings of the job worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSettings {
    /// How long a claim holds a job.
    pub lease: Duration,
    /// Most jobs one instance runs at once.
    pub concurrency: u32,
    /// Retries (their number also bounds the claims of a job: every attempt is a claim).
    pub retry: RetryPolicy,
}

impl Default for JobSettings {
    fn default() -> Self {
        Self { lease: Duration::seconds(60), concurrency: 16, retry: RetryPolicy::default() }
    }
}

/// The jobs as a kind of work: claims due jobs and runs each with its kind's handler.
#[derive(Clone)]
pub struct Jobs {
    queue: Arc<dyn JobQueue>,
    claims: Arc<dyn LeaseQueue<QueuedJob>>,
    handlers: HashMap<JobKind, Arc<dyn StoredJobHandler>>,
    clock: Arc<dyn Clock>,
    settings: JobSettings,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl Jobs {
    /// Jobs stored in `queue` and claimed from `claims` (the same table).
    pub fn new(
        queue: Arc<dyn JobQueue>,
        claims: Arc<dyn LeaseQueue<QueuedJob>>,
        clock: Arc<dyn Clock>,
        settings: JobSettings,
    ) -> Self {
        Self { queue, claims, handlers: HashMap::new(), clock, settings }
    }

    /// Runs the jobs of type `J` with `handler`.
    #[must_use]
    pub fn with_handler<J: BackgroundJob>(mut self, handler: Arc<dyn JobHandler<J>>) -> Self {
        self.handlers.insert(J::KIND, Arc::new(Typed(handler)));
        self
    }

    async fn finish(&self, claimed: &Claimed<QueuedJob>, outcome: JobOutcome) -> anyhow::Result<Ran> {
        let due_again = match &outcome {
            JobOutcome::RetryAt { at, .. } => Some(*at),
            _ => None,
        };
        if self.queue.finish(&claimed.id, &claimed.lease, &outcome, self.clock.now()).await? {
            Ok(Ran { outcome: outcome.label(), due_again })
        } else {
            tracing::warn!(job_id = %claimed.id, "job was taken over by another worker; outcome dropped");
            Ok(Ran::ended(Outcome::LostLease))
        }
    }
}

#[async_trait]
impl WorkKind for Jobs {
    type Item = QueuedJob;

    fn name(&self) -> &'static str {
        "jobs"
    }

    fn metric_queue(&self, job: &QueuedJob) -> &'static str {
        job.kind.as_str()
    }

    fn queue(&self) -> &dyn LeaseQueue<QueuedJob> {
        self.claims.as_ref()
    }

    fn lease(&self) -> Duration {
        self.settings.lease
    }

    fn concurrency(&self) -> u32 {
        self.settings.concurrency
    }

    fn max_claims(&self) -> u32 {
        self.settings.retry.max_attempts
    }

    async fn run(
        &self,
        claimed: Claimed<QueuedJob>,
        _keep_going: &(dyn Fn() -> bool + Send + Sync),
    ) -> anyhow::Result<Ran> {
        let outcome = match self.handlers.get(&claimed.kind) {
            Some(handler) => match handler.run(&claimed.payload).await {
                Ok(()) => JobOutcome::Done,
                Err(e) => {
                    tracing::warn!(job_id = %claimed.id, kind = %claimed.kind, attempt = claimed.claims, error = %e, "job failed");
                    self.settings.retry.after_failure(claimed.claims, &e, self.clock.now())
                }
            },
            None => JobOutcome::Failed { error: format!("no handler for {}", claimed.kind) },
        };
        self.finish(&claimed, outcome).await
    }

    async fn give_up(&self, claimed: Claimed<QueuedJob>, reason: String) -> anyhow::Result<Ran> {
        self.finish(&claimed, JobOutcome::Failed { error: reason }).await
    }
}

#[cfg(test)]
mod tests;

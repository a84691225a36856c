//! The service's metrics: their names, in one place, and the port through which background
//! queues report their backlog.
//!
//! Every crate records through the `metrics` facade — like `tracing`, a facade with no output
//! of its own: without a recorder installed a recording does nothing. The composition root
//! installs the Prometheus recorder, describes each name below and serves `/metrics`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// Counter: HTTP requests, by `method`, `route` (the route's template, never the raw path) and
/// `status`.
pub const HTTP_REQUESTS: &str = "agentry_http_requests_total";
/// Histogram: HTTP request latency in seconds, by `method`, `route` and `status`.
pub const HTTP_REQUEST_DURATION: &str = "agentry_http_request_duration_seconds";
/// Gauge: most database connections that may be open (SQLite: reader connections).
pub const DB_CONNECTIONS_MAX: &str = "agentry_db_connections_max";
/// Gauge: database connections open.
pub const DB_CONNECTIONS_OPEN: &str = "agentry_db_connections_open";
/// Gauge: database connections lent to a request or a unit of work.
pub const DB_CONNECTIONS_IN_USE: &str = "agentry_db_connections_in_use";
/// Gauge: callers waiting for a database connection.
pub const DB_CONNECTIONS_WAITING: &str = "agentry_db_connections_waiting";
/// Histogram: seconds a caller waited for a database connection.
pub const DB_ACQUIRE_DURATION: &str = "agentry_db_acquire_duration_seconds";
/// Gauge: SQLite units of work waiting for the writer thread.
pub const SQLITE_WRITE_QUEUE_DEPTH: &str = "agentry_sqlite_write_queue_depth";
/// Counter: SQLite transactions committed by the writer (each may hold several units).
pub const SQLITE_COMMITS: &str = "agentry_sqlite_commits_total";
/// Counter: SQLite units of work run by the writer.
pub const SQLITE_WRITE_UNITS: &str = "agentry_sqlite_write_units_total";
/// Histogram: seconds a knowledge file's ingestion spent in each `stage` (`read`, `parse`,
/// `chunk`, `embed`, `index`), per file.
pub const KNOWLEDGE_STAGE_DURATION: &str = "agentry_knowledge_stage_duration_seconds";
/// Histogram: seconds a chat model took to answer, by `provider` and `outcome`.
pub const CHAT_MODEL_DURATION: &str = "agentry_chat_model_duration_seconds";
/// Counter: tokens of chat completions, by `provider` and `kind` (`prompt`, `completion`).
pub const CHAT_TOKENS: &str = "agentry_chat_tokens_total";
/// Counter: tools agents called, by `tool` (its type) and `ok` (`true`, `false`).
pub const TOOL_CALLS: &str = "agentry_agent_tool_calls_total";
/// Counter: credits charged for usage.
pub const CREDITS_CHARGED: &str = "agentry_credits_charged_total";
/// Counter: requests refused by a rate limit, by `limit` (`plan`, `auth_per_ip`,
/// `failed_auth_per_ip`).
pub const RATE_LIMIT_REJECTIONS: &str = "agentry_rate_limit_rejections_total";
/// Counter: requests whose rate-limit store failed, by `policy` (`open`: let through
/// uncounted; `closed`: refused with 503).
pub const RATE_LIMIT_STORE_ERRORS: &str = "agentry_rate_limit_store_errors_total";
/// Gauge: items waiting in a background queue, by `queue`.
pub const QUEUE_DEPTH: &str = "agentry_queue_depth";
/// Gauge: age in seconds of the oldest item due in a background queue, by `queue`.
pub const QUEUE_OLDEST_AGE: &str = "agentry_queue_oldest_age_seconds";
/// Counter: items a background worker finished, by `queue` and `outcome` (`done`, `retry`,
/// `failed`, `lost_lease`).
pub const QUEUE_OUTCOMES: &str = "agentry_queue_outcomes_total";
/// Counter: workflow step runs, by step `type` and what the run led to (`done`, `retry`,
/// `recovered`, `failed`, `waiting`).
pub const WORKFLOW_STEP_RUNS: &str = "agentry_workflow_step_runs_total";
/// Counter: passes a yielding event consumer deferred while requests queued, by `consumer`.
pub const CONSUMER_PASSES_DEFERRED: &str = "agentry_consumer_passes_deferred_total";

/// Counts one item a background worker finished: the hook every worker calls.
pub fn queue_outcome(queue: &'static str, outcome: &'static str) {
    metrics::counter!(QUEUE_OUTCOMES, "queue" => queue, "outcome" => outcome).increment(1);
}

/// The backlog of one background queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Backlog {
    /// The queue's name (a label value: a constant, never input).
    pub queue: &'static str,
    /// Items waiting or running.
    pub depth: u64,
    /// Age in seconds of the oldest item that is due and not yet done; 0 when none is.
    pub oldest_age_secs: f64,
}

impl Backlog {
    /// The backlog of `queue`: `depth` items, the oldest due one due since `oldest_due` (if any).
    pub fn new(
        queue: &'static str,
        depth: i64,
        oldest_due: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Self {
        #[allow(clippy::cast_precision_loss)]
        let oldest_age_secs = oldest_due.map_or(0.0, |t| (now - t).num_milliseconds().max(0) as f64 / 1000.0);
        Self { queue, depth: u64::try_from(depth).unwrap_or(0), oldest_age_secs }
    }
}

/// A store of background work that can tell its backlog. Each queue (mail jobs today; webhook
/// deliveries and workflow executions later) implements it, and `/metrics` asks each when
/// scraped.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait QueueBacklog: Send + Sync {
    /// The backlog of each queue this store holds, ages measured to `now`.
    async fn backlog(&self, now: DateTime<Utc>) -> anyhow::Result<Vec<Backlog>>;
}

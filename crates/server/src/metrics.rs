//! `/metrics`: the Prometheus recorder behind the `metrics` facade, the gauges read when
//! scraped, and the chat model's timing.
//!
//! Counters and histograms are recorded where things happen (the HTTP middleware, the
//! repositories, the services); gauges that describe a state — the database's connections, the
//! SQLite writer's queue, the background queues' backlogs — are read at each scrape.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use agentry_domain::agents::{ChatModel, Completion, CompletionRequest, DeltaSink, ModelError};
use agentry_domain::metrics::{self as names, QueueBacklog};
use agentry_domain::time::Clock;
use agentry_store::{Backend, Database};
use async_trait::async_trait;
use metrics::{Unit, describe_counter, describe_gauge, describe_histogram, gauge};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Latency buckets of HTTP requests and connection waits, in seconds: from 100 µs (a cached
/// read) to 10 s (the slowest a request should ever be).
const FAST_BUCKETS: &[f64] =
    &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Latency buckets of chat models, in seconds: up to their two-minute timeout.
const MODEL_BUCKETS: &[f64] = &[0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

/// The process's recorder. The `metrics` facade has one global recorder, so it is installed
/// once per process and shared by every service built in it (tests build several).
fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(names::CHAT_MODEL_DURATION.into()), MODEL_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(names::KNOWLEDGE_STAGE_DURATION.into()), MODEL_BUCKETS)
            })
            .and_then(|b| b.set_buckets(FAST_BUCKETS))
            .expect("the bucket lists are not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        // A program embedding the service may have installed a recorder of its own: then the
        // service's figures go to that one, and `/metrics` has only the gauges it reads itself.
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("another metrics recorder is installed; /metrics shows only gauges");
        }
        describe();
        // Histogram samples wait in a buffer until upkeep folds them into buckets: run it
        // between scrapes too, so the buffer stays small under load.
        let upkeep = handle.clone();
        let _ = std::thread::Builder::new().name("metrics-upkeep".into()).spawn(move || {
            loop {
                std::thread::sleep(Duration::from_secs(5));
                upkeep.run_upkeep();
            }
        });
        handle
    })
}

fn describe() {
    describe_counter!(names::HTTP_REQUESTS, "HTTP requests by method, route template and status.");
    describe_histogram!(names::HTTP_REQUEST_DURATION, Unit::Seconds, "HTTP request latency.");
    describe_gauge!(
        names::DB_CONNECTIONS_MAX,
        "Most database connections (SQLite: readers) that may be open."
    );
    describe_gauge!(names::DB_CONNECTIONS_OPEN, "Database connections open.");
    describe_gauge!(names::DB_CONNECTIONS_IN_USE, "Database connections in use.");
    describe_gauge!(names::DB_CONNECTIONS_WAITING, "Callers waiting for a database connection.");
    describe_histogram!(names::DB_ACQUIRE_DURATION, Unit::Seconds, "Wait for a database connection.");
    describe_gauge!(names::SQLITE_WRITE_QUEUE_DEPTH, "SQLite units of work waiting for the writer.");
    describe_counter!(names::SQLITE_COMMITS, "SQLite transactions committed by the writer.");
    describe_counter!(names::SQLITE_WRITE_UNITS, "SQLite units of work run by the writer.");
    describe_histogram!(names::CHAT_MODEL_DURATION, Unit::Seconds, "Chat model answer time.");
    describe_histogram!(
        names::KNOWLEDGE_STAGE_DURATION,
        Unit::Seconds,
        "Time of each stage of a knowledge file's ingestion (read, parse, chunk, embed, index)."
    );
    describe_counter!(names::CHAT_TOKENS, "Tokens of chat completions, by kind.");
    describe_counter!(names::CREDITS_CHARGED, "Credits charged for usage.");
    describe_counter!(names::TOOL_CALLS, "Tools agents called during chats, by tool type and outcome.");
    describe_counter!(names::RATE_LIMIT_REJECTIONS, "Requests refused by a rate limit.");
    describe_counter!(
        names::RATE_LIMIT_STORE_ERRORS,
        "Requests whose rate-limit store failed, by the failure policy applied."
    );
    describe_gauge!(names::QUEUE_DEPTH, "Items waiting or running in a background queue.");
    describe_gauge!(names::QUEUE_OLDEST_AGE, Unit::Seconds, "Age of the oldest due item of a queue.");
    describe_counter!(names::QUEUE_OUTCOMES, "Items background workers finished, by outcome.");
    describe_counter!(
        names::WORKFLOW_STEP_RUNS,
        "Workflow step runs, by step type and what the run led to (done, retry, recovered, failed, waiting)."
    );
    describe_counter!(
        names::CONSUMER_PASSES_DEFERRED,
        "Passes a background event consumer (memory extraction) deferred while requests queued."
    );
}

/// Installs the recorder (once per process). Call before anything records.
pub fn install() {
    let _ = recorder();
}

/// What `/metrics` renders: the recorder's counters and histograms, and the gauges read from
/// the database and the background queues at each scrape.
pub struct PrometheusMetrics {
    db: Database,
    queues: Vec<Arc<dyn QueueBacklog>>,
    clock: Arc<dyn Clock>,
}

impl PrometheusMetrics {
    /// Metrics of the service over `db`, with the backlogs of `queues`.
    pub fn new(db: Database, queues: Vec<Arc<dyn QueueBacklog>>, clock: Arc<dyn Clock>) -> Self {
        install();
        Self { db, queues, clock }
    }

    async fn refresh_gauges(&self) {
        let backend = match self.db.backend() {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        };
        let pool = self.db.pool_stats();
        let as_f64 = |n: usize| n as f64;
        gauge!(names::DB_CONNECTIONS_MAX, "backend" => backend).set(as_f64(pool.max));
        gauge!(names::DB_CONNECTIONS_OPEN, "backend" => backend).set(as_f64(pool.open));
        gauge!(names::DB_CONNECTIONS_IN_USE, "backend" => backend).set(as_f64(pool.in_use));
        gauge!(names::DB_CONNECTIONS_WAITING, "backend" => backend).set(as_f64(pool.waiting));
        if self.db.backend() == Backend::Sqlite {
            gauge!(names::SQLITE_WRITE_QUEUE_DEPTH).set(as_f64(pool.queued_writes));
            metrics::counter!(names::SQLITE_COMMITS).absolute(pool.commits);
            metrics::counter!(names::SQLITE_WRITE_UNITS).absolute(pool.write_units);
        }
        let now = self.clock.now();
        for queue in &self.queues {
            match queue.backlog(now).await {
                Ok(backlogs) => {
                    for b in backlogs {
                        gauge!(names::QUEUE_DEPTH, "queue" => b.queue).set(b.depth as f64);
                        gauge!(names::QUEUE_OLDEST_AGE, "queue" => b.queue).set(b.oldest_age_secs);
                    }
                }
                // A scrape still answers with what it has; the gauges keep their last values.
                Err(e) => tracing::warn!(error = %e, "reading a queue's backlog for /metrics failed"),
            }
        }
    }
}

impl std::fmt::Debug for PrometheusMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusMetrics").field("db", &self.db).finish_non_exhaustive()
    }
}

impl PrometheusMetrics {
    /// The Prometheus text of every metric, the gauges read afresh.
    pub async fn render(&self) -> String {
        self.refresh_gauges().await;
        recorder().render()
    }
}

/// A chat model whose answers are timed and whose tokens are counted in `/metrics`.
pub struct MeteredModel {
    inner: Arc<dyn ChatModel>,
    provider: &'static str,
}

impl MeteredModel {
    /// Wraps `inner`, labelling its figures with `provider` (`builtin`, `openai`).
    pub fn new(inner: Arc<dyn ChatModel>, provider: &'static str) -> Self {
        Self { inner, provider }
    }
}

impl std::fmt::Debug for MeteredModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeteredModel").field("provider", &self.provider).finish_non_exhaustive()
    }
}

impl MeteredModel {
    fn record(&self, started: Instant, result: &Result<Completion, ModelError>) {
        let outcome = if result.is_ok() { "ok" } else { "error" };
        metrics::histogram!(names::CHAT_MODEL_DURATION, "provider" => self.provider, "outcome" => outcome)
            .record(started.elapsed());
        if let Ok(completion) = result {
            metrics::counter!(names::CHAT_TOKENS, "provider" => self.provider, "kind" => "prompt")
                .increment(completion.prompt_tokens);
            metrics::counter!(names::CHAT_TOKENS, "provider" => self.provider, "kind" => "completion")
                .increment(completion.completion_tokens);
        }
    }
}

#[async_trait]
impl ChatModel for MeteredModel {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError> {
        let started = Instant::now();
        let result = self.inner.complete(request).await;
        self.record(started, &result);
        result
    }

    async fn stream(
        &self,
        request: &CompletionRequest,
        sink: Arc<dyn DeltaSink>,
    ) -> Result<Completion, ModelError> {
        let started = Instant::now();
        let result = self.inner.stream(request, sink).await;
        self.record(started, &result);
        result
    }
}

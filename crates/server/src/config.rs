//! Configuration: built-in defaults, then `agentry.toml` (or the file named by `--config` /
//! `AGENTRY_CONFIG`), then `AGENTRY_*` environment variables — the later source wins. Every
//! setting is documented in `docs/configuration.md`.

use std::path::{Path, PathBuf};

use figment::providers::{Env, Format as _, Serialized, Toml};
use figment::value::{Dict, Value};
use figment::{Figment, Metadata, Profile, Provider};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

/// Log line format.
/// The shape of success and error bodies (see `PRODUCT.md` §1): the setting as written; the
/// HTTP layer's `Envelope` is made from it where the layers meet (`app.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApiEnvelope {
    /// Bare resources; flat errors `{error, message, details}`.
    Bare,
    /// `{success: true, data}`; errors `{success: false, error: {code, message, details}}`.
    Wrapped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable `key=value` lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where rate-limit counters live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RateLimitStore {
    /// Redis when `AGENTRY_REDIS_URL` is set; else the database on PostgreSQL, memory on
    /// SQLite.
    Auto,
    /// The `rate_limit_counters` table: one limit across all instances.
    Database,
    /// This process's memory.
    Memory,
    /// Redis (`AGENTRY_REDIS_URL`): one limit across all instances, one round trip per
    /// request, no database write.
    Redis,
}

/// What a request gets when the rate-limit store fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RateLimitFailure {
    /// Let it through uncounted (logged, counted in `/metrics`).
    Open,
    /// Refuse it: 503 with `Retry-After: 1`.
    Closed,
}

/// Which chat model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmProvider {
    /// `smollm` when its model file is present, else `builtin`.
    Auto,
    /// A GGUF chat model in process (`AGENTRY_LLM_MODEL_PATH`; SmolLM2-135M-Instruct by default).
    Smollm,
    /// The offline built-in responder.
    Builtin,
    /// An OpenAI-compatible server.
    Openai,
}

impl LlmProvider {
    /// The name `/readyz`, the log and the metrics use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Smollm => "smollm",
            Self::Builtin => "builtin",
            Self::Openai => "openai",
        }
    }
}

/// Which sentence-embedding model memory uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingProvider {
    /// all-MiniLM-L6-v2 when its files are in the model directory, else `hashing` (with a
    /// warning).
    Auto,
    /// all-MiniLM-L6-v2 in process; refuses to start without its files.
    Minilm,
    /// An OpenAI-compatible `/v1/embeddings` server.
    Openai,
    /// The lexical fallback: feature hashing of words and word pieces.
    Hashing,
}

/// Which payment provider takes purchases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PaymentProviderKind {
    /// Purchases are disabled.
    None,
    /// Purchases complete at once, without payment.
    Manual,
}

/// Every setting of the service.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Address to listen on.
    pub bind: String,
    /// `sqlite://<path>` or `postgres://…`.
    pub database_url: String,
    /// Most pooled database connections.
    pub database_max_connections: usize,
    /// Longest wait for a pooled connection, in milliseconds.
    pub database_acquire_timeout_ms: u64,
    /// Longest a statement may run (PostgreSQL) or wait for a lock (SQLite), in milliseconds.
    pub database_statement_timeout_ms: u64,
    /// Apply pending migrations at start. Unset: yes on SQLite, no on PostgreSQL (run
    /// `agentry migrate` once per deployment instead).
    pub auto_migrate: Option<bool>,
    /// Where the service keeps its files (the generated JWT key, the SQLite default).
    pub data_dir: PathBuf,
    /// The JWT signing key (at least 32 bytes). Unset: generated once and kept in `data_dir`.
    #[serde(skip_serializing)]
    pub jwt_secret: Option<SecretString>,
    /// The service's public base URL, used in links it generates and as the JWT issuer. Unset:
    /// `http://` and the bound address (`127.0.0.1` for an unspecified one such as `0.0.0.0`).
    pub public_url: Option<String>,
    /// `bare` or `wrapped` response bodies.
    pub api_envelope: ApiEnvelope,
    /// Status of validation errors: 422 or 400. Unset: 422 with `bare`, 400 with `wrapped`.
    pub validation_status: Option<u16>,
    /// Largest accepted request body in bytes.
    pub max_body_bytes: usize,
    /// Credits granted to each new tenant.
    pub welcome_credits: i64,
    /// Access token lifetime in seconds.
    pub access_token_ttl_secs: i64,
    /// Refresh token lifetime in days.
    pub refresh_token_ttl_days: i64,
    /// Most password hashes computed at once. Unset: the number of CPUs.
    pub password_hash_concurrency: Option<usize>,
    /// HTTP worker threads. Unset: the number of CPUs.
    pub workers: Option<usize>,
    /// A second address that serves only `GET /metrics` (for a scraper on a private network).
    /// `/metrics` is served on `bind` as well.
    pub metrics_bind: Option<String>,
    /// `smtp://user:pass@host:port`, `smtp://…?tls=starttls` or `smtps://…`. Unset: e-mails are
    /// written to `<data_dir>/outbox` as `.eml` files.
    #[serde(skip_serializing)]
    pub smtp_url: Option<SecretString>,
    /// The sender of every e-mail.
    pub mail_from: String,
    /// Longest an SMTP conversation may take, in seconds.
    pub smtp_timeout_secs: u64,
    /// Most e-mails of one kind (reset, magic link) sent to one address per hour.
    pub mail_per_address_per_hour: u64,
    /// Lifetime of a password-reset link, in minutes.
    pub password_reset_ttl_minutes: i64,
    /// Lifetime of a magic sign-in link, in minutes.
    pub magic_link_ttl_minutes: i64,
    /// Requests per minute and client address to the unauthenticated auth routes.
    pub auth_rate_per_minute: u64,
    /// Failed bearer authentications per minute and client address before the address is
    /// refused (429) for the rest of the minute.
    pub auth_failures_per_minute: u64,
    /// Comma-separated IP addresses of reverse proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: String,
    /// Which published plan-limit table applies: 1 or 2.
    pub plan_table: u8,
    /// Where rate-limit counters live: `redis` or `database` (shared by every instance),
    /// `memory` (this process only) or `auto` (redis when `redis_url` is set, else database on
    /// PostgreSQL and memory on SQLite).
    pub rate_limit_store: RateLimitStore,
    /// What a request gets when the rate-limit store fails: `open` (through, uncounted) or
    /// `closed` (503).
    pub rate_limit_failure: RateLimitFailure,
    /// The Redis of the `redis` rate-limit store: `redis://[user:password@]host:port[/db]`.
    #[serde(skip_serializing)]
    pub redis_url: Option<SecretString>,
    /// Prepended to every Redis key, so that several services can share one Redis.
    pub redis_key_prefix: String,
    /// The most one Redis count may take, connecting included, in milliseconds.
    pub redis_timeout_ms: u64,
    /// The chat model: `auto` (default: `smollm` when its file is present, else `builtin`),
    /// `smollm` (the GGUF model in process), `builtin` (offline, deterministic) or
    /// `openai` (any OpenAI-compatible server).
    pub llm_provider: LlmProvider,
    /// The GGUF chat model run in process (`make model` fetches SmolLM2-135M-Instruct).
    pub llm_model_path: std::path::PathBuf,
    /// In-process generations at once.
    pub llm_concurrency: usize,
    /// In-process generations waiting for a turn; beyond, 503 `model_busy`.
    pub llm_queue: usize,
    /// Base URL of the OpenAI-compatible server.
    pub llm_base_url: String,
    /// Its API key, if it needs one.
    #[serde(skip_serializing)]
    pub llm_api_key: Option<SecretString>,
    /// The model agents use when their config names none.
    pub llm_model: Option<String>,
    /// Longest wait for a model answer, in seconds.
    pub llm_timeout_secs: u64,
    /// Longest reply, in tokens, when an agent sets no `max_tokens`.
    pub chat_max_tokens: u32,
    /// The embedding model: `auto` (default: `minilm` when its files are present, else
    /// `hashing`), `minilm`, `openai` or `hashing`.
    pub embedding_provider: EmbeddingProvider,
    /// Directory of all-MiniLM-L6-v2 (`config.json`, `model.safetensors`, `tokenizer.json`).
    pub embedding_model_dir: std::path::PathBuf,
    /// Base URL of the OpenAI-compatible embeddings server.
    pub embedding_base_url: String,
    /// Its API key, if it needs one.
    #[serde(skip_serializing)]
    pub embedding_api_key: Option<SecretString>,
    /// The embeddings model of that server.
    pub embedding_model: String,
    /// The length of its vectors.
    pub embedding_dimension: usize,
    /// Longest wait for an embeddings answer, in seconds.
    pub embedding_timeout_secs: u64,
    /// Search queries whose vectors each process keeps (least recently used first out), so a
    /// repeated query skips the model; 0 keeps none.
    pub embedding_cache_size: usize,
    /// How long, in milliseconds, a batch of texts to embed waits for more texts after its
    /// first arrived (a full batch of 32 goes at once); 0 sends what is waiting at once.
    pub embedding_batch_wait_ms: u64,
    /// Age, in days, at which a memory's recency weight has halved in search ranking.
    pub memory_recency_half_life_days: f64,
    /// Cosine similarity at and under which search counts a text as unrelated; unset: the
    /// embedder's own calibration (docs/memory.md, Ranking).
    pub embedding_similarity_floor: Option<f64>,
    /// Cosine similarity at and over which search counts a text as the same meaning; unset: the
    /// embedder's own calibration.
    pub embedding_similarity_ceiling: Option<f64>,
    /// Most bytes of one file uploaded into a knowledge base.
    pub knowledge_max_file_bytes: u64,
    /// Knowledge files one instance ingests at once.
    pub knowledge_ingestion_concurrency: u32,
    /// Most tokens of conversation history sent with a message.
    pub chat_history_tokens: u64,
    /// Balance below which `billing.credits.low` is emitted.
    pub credits_low_threshold: i64,
    /// `manual` enables purchases that complete at once (self-hosting, tests); `none` disables
    /// purchases.
    pub payment_provider: PaymentProviderKind,
    /// Seconds in-flight requests get to finish after SIGTERM.
    pub shutdown_timeout_secs: u64,
    /// Delay before the second attempt of a failed mail job, in seconds; each further attempt
    /// waits twice as long (at most 30 minutes).
    pub mail_retry_first_delay_secs: u64,
    /// Attempts of a mail job before it is given up.
    pub mail_max_attempts: u32,
    /// How often the mail worker looks for due jobs when nothing woke it, in milliseconds: a
    /// safety net, as storing a job wakes the workers (on PostgreSQL, of every instance).
    pub job_poll_interval_ms: u64,
    /// How long a worker holds a claimed job or workflow execution before another instance
    /// may take it over, in seconds. Webhook deliveries hold it too, but never less than the
    /// webhook timeout plus 5 s.
    pub job_lease_secs: u64,
    /// Claims after which a workflow execution that has not ended is failed with the reason
    /// instead of run again (its worker crashed, stalled or was stopped each time). Jobs and
    /// deliveries count their claims against their own limits (`mail_max_attempts`, the retry
    /// schedule).
    pub work_max_claims: u32,
    /// How long an instance's heartbeat may be silent before the work it holds (jobs, webhook
    /// deliveries, executions) is taken over by another instance, in seconds. Instances beat
    /// four times per timeout.
    pub instance_timeout_secs: u64,
    /// The key that seals secrets needed in clear later (webhook signing secrets), 32 bytes
    /// as base64 (standard or URL-safe) or 64 hex digits. Unset: generated once into
    /// `<data_dir>/secret-key`. Every instance of one database needs the same key.
    #[serde(skip_serializing)]
    pub secret_key: Option<SecretString>,
    /// Accept `http://` webhook URLs (development, tests).
    pub webhook_allow_insecure: bool,
    /// Allow webhook deliveries to loopback, private, link-local and other internal addresses.
    pub webhook_allow_private: bool,
    /// When set, the only hosts webhooks may be sent to (comma-separated names or addresses).
    pub webhook_allowed_hosts: String,
    /// Seconds before each delivery attempt, comma-separated; their number is the attempt limit.
    /// (A single number, `5`, arrives from the environment as a number: read as its text.)
    #[serde(deserialize_with = "text_or_number")]
    pub webhook_retry_schedule: String,
    /// Longest a delivery attempt may take, in seconds.
    pub webhook_timeout_secs: u64,
    /// How often the webhook workers look for new events and due deliveries when nothing woke
    /// them, in milliseconds: a safety net, as storing events or deliveries wakes them.
    pub webhook_poll_interval_ms: u64,
    /// Deliveries attempted at once by one instance.
    pub webhook_concurrency: u32,
    /// How often the execution worker looks for executions when nothing woke it, in
    /// milliseconds: a safety net, as storing an execution wakes the workers (on PostgreSQL, of
    /// every instance), and so does an instance going silent.
    pub workflow_poll_interval_ms: u64,
    /// Workflow executions one instance runs at once.
    pub workflow_concurrency: u32,
    /// Most executions of one tenant that run at once, on all instances together: one
    /// tenant's burst never takes every worker.
    pub workflow_tenant_share: u32,
    /// How often the schedules' ticker looks for due ticks, in milliseconds (a tick starts at
    /// most this late).
    pub schedule_poll_interval_ms: u64,
    /// Whether this instance runs background work (mail, webhook deliveries, executions). Off,
    /// it only serves requests, and another instance on the same database does the work.
    pub background_work: bool,
    /// Log filter, e.g. `info` or `agentry=debug,info`.
    pub log: String,
    /// `text` or `json`.
    pub log_format: LogFormat,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:8080".into(),
            database_url: "sqlite://data/agentry.db".into(),
            database_max_connections: 16,
            database_acquire_timeout_ms: 5_000,
            database_statement_timeout_ms: 10_000,
            auto_migrate: None,
            data_dir: PathBuf::from("data"),
            jwt_secret: None,
            public_url: None,
            api_envelope: ApiEnvelope::Bare,
            validation_status: None,
            max_body_bytes: 1024 * 1024,
            welcome_credits: 1000,
            access_token_ttl_secs: 3600,
            refresh_token_ttl_days: 30,
            password_hash_concurrency: None,
            workers: None,
            metrics_bind: None,
            smtp_url: None,
            mail_from: "Agentry <no-reply@agentry.local>".into(),
            smtp_timeout_secs: 10,
            mail_per_address_per_hour: 3,
            password_reset_ttl_minutes: 60,
            magic_link_ttl_minutes: 15,
            auth_rate_per_minute: 20,
            auth_failures_per_minute: 30,
            trusted_proxies: String::new(),
            plan_table: 1,
            rate_limit_store: RateLimitStore::Auto,
            rate_limit_failure: RateLimitFailure::Open,
            redis_url: None,
            redis_key_prefix: "agentry:".into(),
            redis_timeout_ms: 250,
            llm_provider: LlmProvider::Auto,
            llm_model_path: "data/models/SmolLM2-135M-Instruct.Q4_1.gguf".into(),
            llm_concurrency: 1,
            llm_queue: 16,
            llm_base_url: "https://api.openai.com".into(),
            llm_api_key: None,
            llm_model: None,
            llm_timeout_secs: 60,
            embedding_provider: EmbeddingProvider::Auto,
            embedding_model_dir: "data/models/all-MiniLM-L6-v2".into(),
            embedding_base_url: "https://api.openai.com".into(),
            embedding_api_key: None,
            embedding_model: "text-embedding-3-small".into(),
            embedding_dimension: 1536,
            embedding_timeout_secs: 30,
            embedding_cache_size: 10_000,
            embedding_batch_wait_ms: 0,
            memory_recency_half_life_days: 30.0,
            embedding_similarity_floor: None,
            embedding_similarity_ceiling: None,
            knowledge_max_file_bytes: 20 * 1024 * 1024,
            knowledge_ingestion_concurrency: 2,
            chat_max_tokens: 512,
            chat_history_tokens: 4000,
            credits_low_threshold: 100,
            payment_provider: PaymentProviderKind::None,
            shutdown_timeout_secs: 30,
            mail_retry_first_delay_secs: 5,
            mail_max_attempts: 10,
            job_poll_interval_ms: 5000,
            job_lease_secs: 60,
            work_max_claims: agentry_domain::workflows::DEFAULT_MAX_CLAIMS,
            instance_timeout_secs: 10,
            secret_key: None,
            webhook_allow_insecure: false,
            webhook_allow_private: false,
            webhook_allowed_hosts: String::new(),
            webhook_retry_schedule: "0,60,300,1800,7200".into(),
            webhook_timeout_secs: 15,
            webhook_poll_interval_ms: 5000,
            webhook_concurrency: 32,
            workflow_poll_interval_ms: 5000,
            schedule_poll_interval_ms: 1000,
            workflow_concurrency: 16,
            workflow_tenant_share: 8,
            background_work: true,
            log: "info".into(),
            log_format: LogFormat::Text,
        }
    }
}

impl Config {
    /// Reads the configuration: defaults, then `file` if it exists, then the environment.
    ///
    /// # Errors
    /// When a source has a value of the wrong type or an unknown enum member, or the result
    /// fails [`Config::validate`].
    pub fn load(file: &Path) -> anyhow::Result<Self> {
        let config: Self = Figment::from(Serialized::defaults(Self::default()))
            .merge(Toml::file(file))
            .merge(EnvAsWritten(
                Env::prefixed("AGENTRY_").ignore(&["config"]).map(|k| k.as_str().to_lowercase().into()),
            ))
            // Numbers and booleans are read from the environment's text where a setting is one.
            .extract_lossy()
            .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks values that types alone do not constrain.
    ///
    /// # Errors
    /// Naming the first invalid setting.
    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(status) = self.validation_status {
            anyhow::ensure!(
                status == 400 || status == 422,
                "AGENTRY_VALIDATION_STATUS must be 400 or 422, got {status}"
            );
        }
        anyhow::ensure!(self.welcome_credits >= 0, "AGENTRY_WELCOME_CREDITS must not be negative");
        anyhow::ensure!(self.access_token_ttl_secs > 0, "AGENTRY_ACCESS_TOKEN_TTL_SECS must be positive");
        anyhow::ensure!(self.refresh_token_ttl_days > 0, "AGENTRY_REFRESH_TOKEN_TTL_DAYS must be positive");
        anyhow::ensure!(self.max_body_bytes >= 1024, "AGENTRY_MAX_BODY_BYTES must be at least 1024");
        anyhow::ensure!(
            self.database_max_connections >= 1,
            "AGENTRY_DATABASE_MAX_CONNECTIONS must be at least 1"
        );
        anyhow::ensure!(self.plan_table == 1 || self.plan_table == 2, "AGENTRY_PLAN_TABLE must be 1 or 2");
        anyhow::ensure!(
            self.rate_limit_store != RateLimitStore::Redis || self.redis_url.is_some(),
            "AGENTRY_RATE_LIMIT_STORE=redis needs AGENTRY_REDIS_URL"
        );
        anyhow::ensure!(
            (1..=60_000).contains(&self.redis_timeout_ms),
            "AGENTRY_REDIS_TIMEOUT_MS must be from 1 to 60000"
        );
        anyhow::ensure!(
            self.embedding_batch_wait_ms <= 1000,
            "AGENTRY_EMBEDDING_BATCH_WAIT_MS must be from 0 to 1000"
        );
        anyhow::ensure!(self.auth_rate_per_minute >= 1, "AGENTRY_AUTH_RATE_PER_MINUTE must be at least 1");
        anyhow::ensure!(
            self.auth_failures_per_minute >= 1,
            "AGENTRY_AUTH_FAILURES_PER_MINUTE must be at least 1"
        );
        anyhow::ensure!(self.mail_max_attempts >= 1, "AGENTRY_MAIL_MAX_ATTEMPTS must be at least 1");
        anyhow::ensure!(self.job_poll_interval_ms >= 10, "AGENTRY_JOB_POLL_INTERVAL_MS must be at least 10");
        anyhow::ensure!(self.job_lease_secs >= 1, "AGENTRY_JOB_LEASE_SECS must be at least 1");
        anyhow::ensure!(self.work_max_claims >= 1, "AGENTRY_WORK_MAX_CLAIMS must be at least 1");
        anyhow::ensure!(
            (1..=3600).contains(&self.instance_timeout_secs),
            "AGENTRY_INSTANCE_TIMEOUT_SECS must be between 1 and 3600"
        );
        self.webhook_schedule()?;
        anyhow::ensure!(self.webhook_timeout_secs >= 1, "AGENTRY_WEBHOOK_TIMEOUT_SECS must be at least 1");
        anyhow::ensure!(
            self.webhook_poll_interval_ms >= 10,
            "AGENTRY_WEBHOOK_POLL_INTERVAL_MS must be at least 10"
        );
        anyhow::ensure!(
            (1..=1000).contains(&self.webhook_concurrency),
            "AGENTRY_WEBHOOK_CONCURRENCY must be from 1 to 1000"
        );
        anyhow::ensure!(
            self.workflow_poll_interval_ms >= 10,
            "AGENTRY_WORKFLOW_POLL_INTERVAL_MS must be at least 10"
        );
        anyhow::ensure!(
            (10..=60_000).contains(&self.schedule_poll_interval_ms),
            "AGENTRY_SCHEDULE_POLL_INTERVAL_MS must be from 10 to 60000"
        );
        anyhow::ensure!(
            (1..=1000).contains(&self.workflow_concurrency),
            "AGENTRY_WORKFLOW_CONCURRENCY must be from 1 to 1000"
        );
        anyhow::ensure!(
            (1..=1000).contains(&self.workflow_tenant_share),
            "AGENTRY_WORKFLOW_TENANT_SHARE must be from 1 to 1000"
        );
        if let Some(url) = &self.public_url {
            let parsed = url::Url::parse(url)
                .map_err(|e| anyhow::anyhow!("AGENTRY_PUBLIC_URL {url:?} is not a URL: {e}"))?;
            anyhow::ensure!(
                matches!(parsed.scheme(), "http" | "https"),
                "AGENTRY_PUBLIC_URL must be an http:// or https:// URL"
            );
        }
        anyhow::ensure!(
            self.password_reset_ttl_minutes > 0,
            "AGENTRY_PASSWORD_RESET_TTL_MINUTES must be positive"
        );
        anyhow::ensure!(self.magic_link_ttl_minutes > 0, "AGENTRY_MAGIC_LINK_TTL_MINUTES must be positive");
        self.trusted_proxy_addrs()?;
        anyhow::ensure!(self.llm_timeout_secs >= 1, "AGENTRY_LLM_TIMEOUT_SECS must be at least 1");
        anyhow::ensure!(
            (1..=64).contains(&self.llm_concurrency),
            "AGENTRY_LLM_CONCURRENCY must be from 1 to 64"
        );
        anyhow::ensure!(self.llm_queue <= 10_000, "AGENTRY_LLM_QUEUE must be at most 10000");
        anyhow::ensure!(
            self.embedding_timeout_secs >= 1,
            "AGENTRY_EMBEDDING_TIMEOUT_SECS must be at least 1"
        );
        anyhow::ensure!(
            (1..=8192).contains(&self.embedding_dimension),
            "AGENTRY_EMBEDDING_DIMENSION must be from 1 to 8192"
        );
        anyhow::ensure!(
            self.memory_recency_half_life_days > 0.0 && self.memory_recency_half_life_days.is_finite(),
            "AGENTRY_MEMORY_RECENCY_HALF_LIFE_DAYS must be a positive number"
        );
        for (name, value) in [
            ("AGENTRY_EMBEDDING_SIMILARITY_FLOOR", self.embedding_similarity_floor),
            ("AGENTRY_EMBEDDING_SIMILARITY_CEILING", self.embedding_similarity_ceiling),
        ] {
            anyhow::ensure!(
                value.is_none_or(|x| (-1.0..=1.0).contains(&x)),
                "{name} must be a number from -1 to 1"
            );
        }
        if let (Some(floor), Some(ceiling)) =
            (self.embedding_similarity_floor, self.embedding_similarity_ceiling)
        {
            anyhow::ensure!(
                floor < ceiling,
                "AGENTRY_EMBEDDING_SIMILARITY_FLOOR must be under AGENTRY_EMBEDDING_SIMILARITY_CEILING"
            );
        }
        anyhow::ensure!(
            (1024..=1024 * 1024 * 1024).contains(&self.knowledge_max_file_bytes)
                && (1..=64).contains(&self.knowledge_ingestion_concurrency),
            "AGENTRY_KNOWLEDGE_MAX_FILE_BYTES must be from 1024 to 1073741824, and \
             AGENTRY_KNOWLEDGE_INGESTION_CONCURRENCY from 1 to 64"
        );
        anyhow::ensure!(
            (1..=agentry_domain::agents::MAX_COMPLETION_TOKENS).contains(&self.chat_max_tokens),
            "AGENTRY_CHAT_MAX_TOKENS must be between 1 and {}",
            agentry_domain::agents::MAX_COMPLETION_TOKENS
        );
        agentry_store::backend_of(&self.database_url)?;
        Ok(())
    }

    /// The parsed `trusted_proxies`.
    ///
    /// # Errors
    /// Naming the entry that is not an IP address.
    pub fn trusted_proxy_addrs(&self) -> anyhow::Result<Vec<std::net::IpAddr>> {
        self.trusted_proxies
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse().map_err(|_| anyhow::anyhow!("AGENTRY_TRUSTED_PROXIES: {s:?} is not an IP address"))
            })
            .collect()
    }

    /// The webhook retry schedule.
    ///
    /// # Errors
    /// When `AGENTRY_WEBHOOK_RETRY_SCHEDULE` does not parse.
    pub fn webhook_schedule(&self) -> anyhow::Result<agentry_domain::webhooks::RetrySchedule> {
        agentry_domain::webhooks::RetrySchedule::parse(&self.webhook_retry_schedule)
            .map_err(|e| anyhow::anyhow!("AGENTRY_WEBHOOK_RETRY_SCHEDULE: {e}"))
    }

    /// The chat model that answers: `auto` resolved by whether the model file is there.
    pub fn llm(&self) -> LlmProvider {
        match self.llm_provider {
            LlmProvider::Auto if self.llm_model_path.is_file() => LlmProvider::Smollm,
            LlmProvider::Auto => LlmProvider::Builtin,
            chosen => chosen,
        }
    }

    /// The model agents use when their config names none.
    pub fn default_model(&self) -> String {
        self.llm_model.clone().unwrap_or_else(|| match self.llm() {
            LlmProvider::Smollm => agentry_llm::gguf_model_name(&self.llm_model_path),
            LlmProvider::Auto | LlmProvider::Builtin => "builtin".into(),
            LlmProvider::Openai => "gpt-4o-mini".into(),
        })
    }

    /// The public base URL: the configured one, else `http://` and `bound` (the address the
    /// listener got; an unspecified address becomes `127.0.0.1` or `[::1]`).
    pub fn public_url_for(&self, bound: std::net::SocketAddr) -> String {
        if let Some(url) = &self.public_url {
            return url.trim_end_matches('/').to_owned();
        }
        let ip = match bound.ip() {
            std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
            ip => ip,
        };
        format!("http://{}", std::net::SocketAddr::new(ip, bound.port()))
    }

    /// The `iss` of access tokens: the configured public URL, else `agentry`. Not the bound
    /// address: instances on other ports (or a restart on another port) must accept each
    /// other's tokens.
    pub fn jwt_issuer(&self) -> String {
        self.public_url
            .as_deref()
            .map_or_else(|| "agentry".to_owned(), |u| u.trim_end_matches('/').to_owned())
    }

    /// Where rate-limit counters live, `auto` resolved.
    pub fn rate_limit_backend(&self) -> RateLimitStore {
        match self.rate_limit_store {
            RateLimitStore::Auto if self.redis_url.is_some() => RateLimitStore::Redis,
            RateLimitStore::Auto => {
                if matches!(
                    agentry_store::backend_of(&self.database_url),
                    Ok(agentry_store::Backend::Postgres)
                ) {
                    RateLimitStore::Database
                } else {
                    RateLimitStore::Memory
                }
            }
            store => store,
        }
    }

    /// Whether pending migrations run at start.
    pub fn migrates_on_start(&self) -> bool {
        self.auto_migrate.unwrap_or_else(|| {
            matches!(agentry_store::backend_of(&self.database_url), Ok(agentry_store::Backend::Sqlite))
        })
    }
}

/// The environment as written: every value stays the text it is. Figment's own `Env` parses
/// values, so `AGENTRY_REDIS_KEY_PREFIX=2026` became a number that a text setting refused, and a
/// secret of digits lost its leading zeros; [`Config::load`] reads numbers and booleans back
/// from this text only where the setting is one (PRODUCT.md §10: every setting is read as
/// written).
struct EnvAsWritten(Env);

impl Provider for EnvAsWritten {
    fn metadata(&self) -> Metadata {
        self.0.metadata()
    }

    fn data(&self) -> Result<figment::value::Map<Profile, Dict>, figment::Error> {
        let dict: Dict =
            self.0.iter().map(|(key, value)| (key.as_str().to_owned(), Value::from(value))).collect();
        Ok(self.0.profile.collect(dict))
    }
}

/// A setting that is text but may be written as one number in the TOML file
/// (`webhook_retry_schedule = 5`).
fn text_or_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum TextOrNumber {
        Text(String),
        Unsigned(u64),
        Signed(i64),
        Float(f64),
    }
    Ok(match TextOrNumber::deserialize(deserializer)? {
        TextOrNumber::Text(text) => text,
        TextOrNumber::Unsigned(n) => n.to_string(),
        TextOrNumber::Signed(n) => n.to_string(),
        TextOrNumber::Float(n) => n.to_string(),
    })
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's closures return its large error type.
mod tests;

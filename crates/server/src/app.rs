//! Wiring: configuration in, a running HTTP server out. The only place that knows every
//! adapter.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::web;
use agentry_auth::{
    AesGcmCipher, Argon2Hasher, HashingParams, JwtAccessTokens, JwtSettings, RingHmac, RingSecrets,
};
use agentry_domain::agents::{AgentService, ChatModel, ChatService, ChatServiceDeps, ChatSettings};
use agentry_domain::billing::{BillingService, ManualPayments, PaymentProvider};
use agentry_domain::identity::{
    AccessService, AccessServiceDeps, AccountPolicy, AccountService, AccountServiceDeps, RecoveryPolicy,
    RecoveryService, RecoveryServiceDeps,
};
use agentry_domain::ids::IdGenerator;
use agentry_domain::jobs::{InstanceRegistry, JobHandler, JobQueue, JobRunner, RetryPolicy, WorkerSettings};
use agentry_domain::mail::Mailer;
use agentry_domain::memory::ranking::RankingSettings;
use agentry_domain::memory::{Embedder, MemoryService, MemoryServiceDeps, MemorySettings};
use agentry_domain::ratelimit::{FailurePolicy, PlanTable, Quota, RateCounter, RateLimiter};
use agentry_domain::time::Clock;
use agentry_domain::webhooks::{WebhookService, WebhookServiceDeps, WebhookSettings};
use agentry_domain::workflows::{
    ExecutionService, ExecutionServiceDeps, ExecutionSettings, IntegrationService, IntegrationServiceDeps,
    TriggerService, TriggerServiceDeps, WorkflowService, WorkflowServiceDeps,
};
use agentry_embed::{
    HashingEmbedder, MiniLmEmbedder, MiniLmSettings, OpenAiEmbedder, OpenAiEmbedderSettings,
};
use agentry_http::{AppState, Envelope, HttpSettings, MetricsExport, RateLimits, Readiness};
use agentry_llm::{BuiltinModel, Cl100kTokens, OpenAiModel, OpenAiSettings};
use agentry_mailer::{FileOutbox, SmtpMailer};
use agentry_store::{
    AccountStore, AgentStore, ApiKeyStore, Backend, ConversationStore, CreditStore, Database,
    DatabaseSettings, DbRateCounter, ExecutionStore, InstanceStore, IntegrationStore, JobStore, MemoryStore,
    OneTimeTokenStore, RefreshTokenStore, TriggerStore, WebhookStore, WorkflowStore, redact,
};
use anyhow::Context as _;
use async_trait::async_trait;
use secrecy::ExposeSecret as _;
use tokio::sync::watch;

use crate::config::{
    ApiEnvelope, Config, EmbeddingProvider, LlmProvider, PaymentProviderKind, RateLimitFailure,
    RateLimitStore,
};
use crate::keys;
use crate::metrics::{MeteredModel, PrometheusMetrics};
use crate::steps::ServiceSteps;
use crate::system::{InProcessRateCounter, SystemClock, UlidIds};
use crate::workers::{
    Heartbeat, NotifyWaker, spawn_execution_worker, spawn_hold_sweeper, spawn_job_worker,
    spawn_webhook_workers,
};

/// Opens the database described by `config`.
///
/// # Errors
/// When the URL is invalid or the database cannot be reached.
pub async fn open_database(config: &Config) -> anyhow::Result<Database> {
    let settings = DatabaseSettings {
        url: config.database_url.clone(),
        max_connections: config.database_max_connections,
        acquire_timeout: Duration::from_millis(config.database_acquire_timeout_ms),
        statement_timeout: Duration::from_millis(config.database_statement_timeout_ms),
        threads: config.workers.unwrap_or_else(cpus),
    };
    Database::connect(&settings).await
}

struct DatabaseReadiness(Database);

/// `/metrics` of the HTTP layer, served from the Prometheus recorder.
#[async_trait]
impl MetricsExport for PrometheusMetrics {
    async fn render(&self) -> String {
        PrometheusMetrics::render(self).await
    }
}

#[async_trait]
impl Readiness for DatabaseReadiness {
    async fn check(&self) -> anyhow::Result<()> {
        self.0.ping().await
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(2, usize::from)
}

/// The mailer the configuration asks for: SMTP when `AGENTRY_SMTP_URL` is set, else the file
/// outbox under the data directory. Mail jobs call it, and retry when it fails.
///
/// # Errors
/// For an invalid SMTP URL or sender address.
pub fn build_mailer(config: &Config) -> anyhow::Result<Arc<dyn Mailer>> {
    let inner: Arc<dyn Mailer> = match &config.smtp_url {
        Some(url) => Arc::new(SmtpMailer::new(
            url.expose_secret(),
            &config.mail_from,
            Duration::from_secs(config.smtp_timeout_secs),
        )?),
        None => {
            let outbox = FileOutbox::new(config.data_dir.join("outbox"), &config.mail_from)?;
            tracing::info!(dir = %outbox.dir().display(), "no AGENTRY_SMTP_URL: e-mails go to the outbox directory");
            Arc::new(outbox)
        }
    };
    Ok(inner)
}

/// The chat model the configuration asks for.
///
/// # Errors
/// When the HTTP client of the OpenAI-compatible model cannot be built.
pub fn build_model(config: &Config) -> anyhow::Result<Arc<dyn ChatModel>> {
    let (model, provider): (Arc<dyn ChatModel>, _) = match config.llm_provider {
        LlmProvider::Builtin => (Arc::new(BuiltinModel::new()), "builtin"),
        LlmProvider::Openai => (
            Arc::new(OpenAiModel::new(OpenAiSettings {
                base_url: config.llm_base_url.clone(),
                api_key: config.llm_api_key.clone(),
                timeout: Duration::from_secs(config.llm_timeout_secs),
            })?),
            "openai",
        ),
    };
    Ok(Arc::new(MeteredModel::new(model, provider)))
}

/// What a test (or an embedding program) may put in place of the real thing.
#[derive(Default)]
pub struct Overrides {
    /// A clock other than the system's (a [`crate::system::ManualClock`]).
    pub clock: Option<Arc<dyn Clock>>,
    /// An embedding model other than the configured one.
    pub embedder: Option<Arc<dyn Embedder>>,
}

impl std::fmt::Debug for Overrides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Overrides")
            .field("clock", &self.clock.is_some())
            .field("embedder", &self.embedder.is_some())
            .finish()
    }
}

/// The embedding model the configuration asks for. all-MiniLM-L6-v2 is loaded once per
/// process and directory (about 90 MB), however many apps a test process starts.
///
/// # Errors
/// When `minilm` is asked for and its files are missing or unreadable, or the OpenAI client
/// cannot be built.
pub fn build_embedder(config: &Config) -> anyhow::Result<Arc<dyn Embedder>> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static LOADED: OnceLock<Mutex<HashMap<std::path::PathBuf, MiniLmEmbedder>>> = OnceLock::new();
    let dir = &config.embedding_model_dir;
    let minilm = || -> anyhow::Result<Arc<dyn Embedder>> {
        let mut loaded =
            LOADED.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(model) = loaded.get(dir) {
            return Ok(Arc::new(model.clone()));
        }
        let model = MiniLmEmbedder::load(dir, MiniLmSettings::default())
            .with_context(|| format!("loading the embedding model from {}", dir.display()))?;
        loaded.insert(dir.clone(), model.clone());
        Ok(Arc::new(model))
    };
    match config.embedding_provider {
        EmbeddingProvider::Minilm => minilm(),
        EmbeddingProvider::Auto if MiniLmEmbedder::files_present(dir) => minilm(),
        EmbeddingProvider::Auto | EmbeddingProvider::Hashing => {
            if config.embedding_provider == EmbeddingProvider::Auto {
                tracing::warn!(
                    model_dir = %dir.display(),
                    "no embedding model found: memory search uses the lexical `hashing` fallback, which \
                     matches words, not meanings. Run `make model` to fetch all-MiniLM-L6-v2, then \
                     `agentry memory reindex`"
                );
            }
            Ok(Arc::new(HashingEmbedder::default()))
        }
        EmbeddingProvider::Openai => Ok(Arc::new(OpenAiEmbedder::new(OpenAiEmbedderSettings {
            base_url: config.embedding_base_url.clone(),
            api_key: config.embedding_api_key.clone(),
            model: config.embedding_model.clone(),
            dimension: config.embedding_dimension,
            timeout: Duration::from_secs(config.embedding_timeout_secs),
        })?)),
    }
}

/// The memory service over `db` with `embedder`.
pub fn memory_service(
    config: &Config,
    db: &Database,
    embedder: Arc<dyn Embedder>,
    clock: Option<Arc<dyn Clock>>,
) -> MemoryService {
    MemoryService::new(
        MemoryServiceDeps {
            memories: Arc::new(MemoryStore::new(db.clone(), embedder.model().dimension)),
            agents: Arc::new(AgentStore::new(db.clone())),
            embedder,
            tokens: Arc::new(Cl100kTokens::default()),
            ids: Arc::new(UlidIds::default()),
            clock: clock.unwrap_or_else(|| Arc::new(SystemClock)),
        },
        MemorySettings {
            ranking: RankingSettings {
                half_life_secs: config.memory_recency_half_life_days * 86_400.0,
                ..RankingSettings::default()
            },
            ..MemorySettings::default()
        },
    )
}

/// The webhook service: subscriptions and deliveries in `store`, secrets sealed with the
/// service's secret key, sent through the outbound guard.
///
/// # Errors
/// When the secret key is invalid or cannot be read or written, or the HTTP client cannot be
/// built.
pub fn webhook_service(
    config: &Config,
    store: Arc<WebhookStore>,
    secrets: Arc<RingSecrets>,
    ids: Arc<dyn IdGenerator>,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<WebhookService> {
    let sender = agentry_outbound::WebhookClient::new(
        agentry_outbound::OutboundSettings {
            allow_private: config.webhook_allow_private,
            timeout: Duration::from_secs(config.webhook_timeout_secs),
            max_response_bytes: agentry_domain::webhooks::model::RESPONSE_BODY_BYTES,
            user_agent: format!("Agentry-Webhooks/{}", env!("CARGO_PKG_VERSION")),
        },
        config.webhook_allowed_hosts.split(',').map(str::to_owned).collect(),
    )?;
    let seconds = |s: u64| chrono::Duration::seconds(i64::try_from(s).unwrap_or(60));
    Ok(WebhookService::new(
        WebhookServiceDeps {
            webhooks: store,
            cipher: secret_cipher(config)?,
            sender: Arc::new(sender),
            hmac: Arc::new(RingHmac),
            secrets,
            ids,
            clock,
        },
        WebhookSettings {
            allow_insecure: config.webhook_allow_insecure,
            schedule: config.webhook_schedule()?,
            // The job lease, but always long enough for a batch's attempts (sent together) to
            // time out and be recorded.
            lease: seconds(config.job_lease_secs).max(seconds(config.webhook_timeout_secs) + seconds(5)),
            batch: config.webhook_concurrency,
            ..WebhookSettings::default()
        },
    ))
}

/// The cipher of the secrets the service must use in clear (webhook signing secrets, trigger
/// secrets, integrations' signing secrets), keyed with `AGENTRY_SECRET_KEY` or the key
/// generated once into the data directory.
///
/// # Errors
/// When the key is invalid or cannot be read or written.
pub fn secret_cipher(config: &Config) -> anyhow::Result<Arc<AesGcmCipher>> {
    let key = keys::secret_key(config.secret_key.as_ref(), &config.data_dir)?;
    Ok(Arc::new(AesGcmCipher::new(key.expose_secret())?))
}

/// The services and the background work over `db`.
pub struct Services {
    /// What the HTTP handlers call.
    pub state: AppState,
    /// Runs the durable jobs (mail).
    pub jobs: JobRunner,
    /// Wakes this process's execution worker when an execution is stored.
    pub execution_wake: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Services { .. }")
    }
}

/// Builds the services over `db`; links the service makes start with `public_url`.
///
/// # Errors
/// When the JWT key is invalid or cannot be read or written, or the mail settings are invalid.
pub fn build_services(
    config: &Config,
    db: &Database,
    public_url: &str,
    overrides: Overrides,
) -> anyhow::Result<Services> {
    let clock: Arc<dyn Clock> = overrides.clock.unwrap_or_else(|| Arc::new(SystemClock));
    let jwt = Arc::new(JwtAccessTokens::new(JwtSettings {
        secret: keys::jwt_key(config.jwt_secret.as_ref(), &config.data_dir)?,
        issuer: config.jwt_issuer(),
        audience: "agentry-api".into(),
        ttl: chrono::Duration::seconds(config.access_token_ttl_secs),
    })?);
    let hasher = Arc::new(Argon2Hasher::new(
        HashingParams::OWASP,
        config.password_hash_concurrency.unwrap_or_else(cpus),
    )?);
    let accounts_repo = Arc::new(AccountStore::new(db.clone()));
    let secrets: Arc<RingSecrets> = Arc::new(RingSecrets::new());
    let ids: Arc<dyn IdGenerator> = Arc::new(UlidIds::default());
    let job_store = Arc::new(JobStore::new(db.clone()));
    let job_queue: Arc<dyn JobQueue> = job_store.clone();
    let webhook_store = Arc::new(WebhookStore::new(db.clone()));
    let execution_store = Arc::new(ExecutionStore::new(db.clone()));
    let metrics = Arc::new(PrometheusMetrics::new(
        db.clone(),
        vec![job_store, webhook_store.clone(), execution_store.clone()],
        clock.clone(),
    ));

    let accounts = AccountService::new(
        AccountServiceDeps {
            accounts: accounts_repo.clone(),
            refresh_tokens: Arc::new(RefreshTokenStore::new(db.clone())),
            hasher: hasher.clone(),
            access_tokens: jwt.clone(),
            secrets: secrets.clone(),
            ids: ids.clone(),
            clock: clock.clone(),
        },
        AccountPolicy {
            welcome_credits: config.welcome_credits,
            refresh_token_ttl: chrono::Duration::days(config.refresh_token_ttl_days),
        },
    );
    let access = AccessService::new(AccessServiceDeps {
        accounts: accounts_repo.clone(),
        api_keys: Arc::new(ApiKeyStore::new(db.clone())),
        access_tokens: jwt,
        secrets: secrets.clone(),
        ids: ids.clone(),
        clock: clock.clone(),
    });
    let recovery = RecoveryService::new(
        RecoveryServiceDeps {
            accounts: accounts_repo,
            tokens: Arc::new(OneTimeTokenStore::new(db.clone())),
            hasher,
            mailer: build_mailer(config)?,
            jobs: job_queue.clone(),
            sessions: accounts.clone(),
            secrets: secrets.clone(),
            ids: ids.clone(),
            clock: clock.clone(),
        },
        RecoveryPolicy {
            public_url: public_url.to_owned(),
            reset_ttl: chrono::Duration::minutes(config.password_reset_ttl_minutes),
            magic_link_ttl: chrono::Duration::minutes(config.magic_link_ttl_minutes),
            max_emails_per_hour: config.mail_per_address_per_hour,
        },
    );
    let counter: Arc<dyn RateCounter> = match config.rate_limit_backend() {
        RateLimitStore::Redis => {
            let url = config
                .redis_url
                .as_ref()
                .context("AGENTRY_RATE_LIMIT_STORE=redis needs AGENTRY_REDIS_URL")?;
            Arc::new(agentry_redis::RedisRateCounter::new(&agentry_redis::RedisSettings {
                url: url.expose_secret().to_owned(),
                key_prefix: config.redis_key_prefix.clone(),
                timeout: Duration::from_millis(config.redis_timeout_ms),
            })?)
        }
        RateLimitStore::Database => Arc::new(DbRateCounter::new(db.clone())),
        RateLimitStore::Memory | RateLimitStore::Auto => Arc::new(InProcessRateCounter::default()),
    };
    let plans = if config.plan_table == 2 { PlanTable::Two } else { PlanTable::One };
    let agent_store = Arc::new(AgentStore::new(db.clone()));
    let credit_store = Arc::new(CreditStore::new(db.clone()));
    let agents = AgentService::new(agent_store.clone(), ids.clone(), clock.clone());
    let embedder = match overrides.embedder {
        Some(e) => e,
        None => build_embedder(config)?,
    };
    let tokens = Arc::new(Cl100kTokens::default());
    let memory = memory_service(config, db, embedder, Some(clock.clone()));
    let chat = ChatService::new(
        ChatServiceDeps {
            agents: agent_store,
            conversations: Arc::new(ConversationStore::new(db.clone())),
            credits: credit_store.clone(),
            model: build_model(config)?,
            tokens,
            memory: Arc::new(memory.clone()),
            ids: ids.clone(),
            clock: clock.clone(),
        },
        ChatSettings {
            default_model: config.default_model(),
            default_max_tokens: config.chat_max_tokens,
            history_messages: 50,
            history_token_budget: config.chat_history_tokens,
            credits_low_threshold: config.credits_low_threshold,
        },
    );
    let payments: Option<Arc<dyn PaymentProvider>> = match config.payment_provider {
        PaymentProviderKind::None => None,
        PaymentProviderKind::Manual => Some(Arc::new(ManualPayments)),
    };
    let billing = BillingService::new(credit_store, payments, plans, ids.clone(), clock.clone());
    let limits = RateLimits {
        plans,
        auth_per_ip: Quota::per_minute(config.auth_rate_per_minute),
        failed_auth_per_ip: Quota::per_minute(config.auth_failures_per_minute),
        trusted_proxies: config.trusted_proxy_addrs()?,
    };
    let webhooks = webhook_service(config, webhook_store, secrets.clone(), ids.clone(), clock.clone())?;
    let handlers: Vec<Arc<dyn JobHandler>> = vec![Arc::new(recovery.clone())];
    let jobs = JobRunner::new(
        job_queue,
        handlers,
        ids.clone(),
        clock.clone(),
        WorkerSettings {
            lease: chrono::Duration::seconds(i64::try_from(config.job_lease_secs).unwrap_or(60)),
            batch: 16,
            retry: RetryPolicy {
                first_delay: chrono::Duration::seconds(
                    i64::try_from(config.mail_retry_first_delay_secs).unwrap_or(5),
                ),
                max_delay: chrono::Duration::minutes(30),
                max_attempts: config.mail_max_attempts,
            },
        },
    );
    let workflow_store = Arc::new(WorkflowStore::new(db.clone()));
    let workflows = WorkflowService::new(WorkflowServiceDeps {
        workflows: workflow_store.clone(),
        clock: clock.clone(),
        ids: ids.clone(),
    });
    let execution_wake = Arc::new(tokio::sync::Notify::new());
    let step_client = agentry_outbound::WebhookClient::new(
        agentry_outbound::OutboundSettings {
            allow_private: config.webhook_allow_private,
            timeout: Duration::from_secs(u64::from(agentry_domain::workflows::MAX_STEP_TIMEOUT_SECONDS)),
            max_response_bytes: agentry_domain::workflows::MAX_STEP_OUTPUT_BYTES,
            user_agent: format!("Agentry-Workflows/{}", env!("CARGO_PKG_VERSION")),
        },
        config.webhook_allowed_hosts.split(',').map(str::to_owned).collect(),
    )?;
    let executions = ExecutionService::new(
        ExecutionServiceDeps {
            workflows: workflow_store.clone(),
            executions: execution_store,
            performer: Arc::new(ServiceSteps::new(
                chat.clone(),
                memory.clone(),
                step_client,
                config.webhook_allow_insecure,
            )),
            waker: Arc::new(NotifyWaker(execution_wake.clone())),
            clock: clock.clone(),
            ids: ids.clone(),
        },
        ExecutionSettings {
            lease: chrono::Duration::seconds(i64::try_from(config.job_lease_secs).unwrap_or(60)),
            batch: config.workflow_concurrency,
            max_claims: config.work_max_claims,
        },
    );
    let limiter =
        RateLimiter::new(counter, clock.clone()).with_failure_policy(match config.rate_limit_failure {
            RateLimitFailure::Open => FailurePolicy::Open,
            RateLimitFailure::Closed => FailurePolicy::Closed,
        });
    let cipher = secret_cipher(config)?;
    let triggers = TriggerService::new(TriggerServiceDeps {
        triggers: Arc::new(TriggerStore::new(db.clone())),
        workflows: workflow_store.clone(),
        executions: executions.clone(),
        cipher: cipher.clone(),
        hmac: Arc::new(RingHmac),
        secrets: secrets.clone(),
        limiter: limiter.clone(),
        plans,
        ids: ids.clone(),
        clock: clock.clone(),
    });
    let integrations = IntegrationService::new(IntegrationServiceDeps {
        integrations: Arc::new(IntegrationStore::new(db.clone())),
        workflows: workflow_store,
        executions: executions.clone(),
        cipher,
        hmac: Arc::new(RingHmac),
        limiter: limiter.clone(),
        plans,
        ids: ids.clone(),
        clock: clock.clone(),
    });
    let state = AppState {
        accounts,
        access,
        recovery,
        agents,
        chat,
        memory,
        billing,
        webhooks,
        workflows,
        executions,
        triggers,
        integrations,
        limiter,
        limits,
        readiness: Arc::new(DatabaseReadiness(db.clone())),
        metrics,
        failed_auth: Arc::new(agentry_http::access::FailedAuthGate::default()),
        clock,
    };
    Ok(Services { state, jobs, execution_wake })
}

/// The HTTP layer's settings from the configuration.
pub fn http_settings(config: &Config) -> HttpSettings {
    let mut settings = HttpSettings::new(match config.api_envelope {
        ApiEnvelope::Bare => Envelope::Bare,
        ApiEnvelope::Wrapped => Envelope::Wrapped,
    });
    if let Some(status) = config.validation_status {
        settings.validation_status = status;
    }
    settings.max_body_bytes = config.max_body_bytes;
    settings
}

/// The HTTP server on `listener`: actix-web's application over actix-http, with each connection
/// wrapped so that requests too malformed to parse get the JSON error of the configured
/// envelope (see [`agentry_http::connection`]). SIGTERM and SIGINT stop it gracefully.
fn serve(
    config: &Config,
    listener: TcpListener,
    state: web::Data<AppState>,
    settings: HttpSettings,
) -> anyhow::Result<Server> {
    use actix_http::{HttpService, Protocol};
    use actix_service::{IntoServiceFactory as _, ServiceFactoryExt as _, fn_service, map_config};
    use actix_web::dev::AppConfig;

    let addr = listener.local_addr()?;
    let data = web::Data::new(settings.clone());
    let server = actix_server::Server::build()
        .workers(config.workers.unwrap_or_else(cpus))
        .shutdown_timeout(config.shutdown_timeout_secs)
        .listen("agentry-http", listener, move || {
            let state = state.clone();
            let data = data.clone();
            let settings = settings.clone();
            let app = agentry_http::build_app(state, data).into_factory();
            fn_service(move |io: actix_web::rt::net::TcpStream| {
                let settings = settings.clone();
                async move {
                    let _ = io.set_nodelay(true);
                    let peer = io.peer_addr().ok();
                    Ok::<_, actix_http::error::DispatchError>((
                        agentry_http::connection::MalformedAsJson::new(io, settings),
                        Protocol::Http1,
                        peer,
                    ))
                }
            })
            .and_then(
                HttpService::build()
                    .local_addr(addr)
                    // The application reads neither the configured host nor the address.
                    .finish(map_config(app, |()| AppConfig::default())),
            )
        })?
        .run();
    Ok(server)
}

/// The listener of `AGENTRY_METRICS_BIND`: the `/metrics` route of the main app and nothing
/// else, one worker, stopped with the service.
fn serve_metrics(
    listener: TcpListener,
    state: web::Data<AppState>,
    mut stopped: watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use actix_web::{App, HttpServer};
    use agentry_http::routes::health;
    let server = HttpServer::new(move || {
        App::new().app_data(state.clone()).route("/metrics", web::get().to(health::metrics))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)?
    .run();
    let handle = server.handle();
    Ok(tokio::spawn(async move {
        let serving = tokio::spawn(server);
        let _ = stopped.wait_for(|stop| *stop).await;
        handle.stop(true).await;
        let _ = serving.await;
    }))
}

/// A bound, not yet running, service.
pub struct Application {
    server: Server,
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    db: Database,
    public_url: String,
    stop: watch::Sender<bool>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    heartbeat: Heartbeat,
    shutdown_timeout: Duration,
}

impl std::fmt::Debug for Application {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Application").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Application {
    /// Opens the database (migrating it when configured to), binds the listener, builds the
    /// services and starts the workers. Port 0 binds a free port; see [`Application::addr`].
    ///
    /// # Errors
    /// When any of those steps fails.
    pub async fn build(config: &Config) -> anyhow::Result<Self> {
        Self::build_with(config, Overrides::default()).await
    }

    /// [`Application::build`] with some parts replaced.
    ///
    /// # Errors
    /// As [`Application::build`].
    pub async fn build_with(config: &Config, overrides: Overrides) -> anyhow::Result<Self> {
        // TLS (SMTP, outbound HTTP) uses rustls with ring; install it before any client exists.
        let _ = rustls::crypto::ring::default_provider().install_default();
        keys::create_private_dir(&config.data_dir)?;
        let db = open_database(config).await?;
        if config.migrates_on_start() {
            let applied = db.migrate().await.context("migrating the database")?;
            if applied > 0 {
                tracing::info!(applied, "applied database migrations");
            }
        }
        let instance = UlidIds::default().generate("ins");
        let db = db.for_instance(
            instance.clone(),
            chrono::Duration::seconds(i64::try_from(config.instance_timeout_secs).unwrap_or(10)),
        );
        let instances: Arc<dyn InstanceRegistry> = Arc::new(InstanceStore::new(db.clone()));
        if db.backend() == Backend::Sqlite {
            // One process uses an SQLite file: whatever is held was held by a process now gone.
            let freed = instances.free_all_leases().await.context("freeing the leases of the last run")?;
            if freed > 0 {
                tracing::info!(freed, "took over the work the last run held");
            }
        }
        let listener = TcpListener::bind(&config.bind).with_context(|| format!("binding {}", config.bind))?;
        let addr = listener.local_addr()?;
        let public_url = config.public_url_for(addr);
        let services = build_services(config, &db, &public_url, overrides)?;
        let heartbeat = Heartbeat::start(
            instances,
            instance,
            // Wall-clock time, whatever clock the services read: whether a process is alive
            // is not a matter of the domain's time (tests move that at will).
            Arc::new(SystemClock),
            Duration::from_millis(config.instance_timeout_secs.saturating_mul(1000) / 4)
                .max(Duration::from_millis(250)),
        )
        .await
        .context("registering this instance")?;
        let (stop, stopped) = watch::channel(false);
        let stopped_metrics = stopped.clone();
        let mut workers = vec![
            spawn_job_worker(
                services.jobs.clone(),
                Duration::from_millis(config.job_poll_interval_ms),
                stopped.clone(),
            ),
            spawn_hold_sweeper(services.state.billing.clone(), config.llm_timeout_secs, stopped.clone()),
        ];
        workers.push(spawn_execution_worker(
            services.state.executions.clone(),
            services.execution_wake.clone(),
            Duration::from_millis(config.workflow_poll_interval_ms),
            usize::try_from(config.workflow_concurrency).unwrap_or(16),
            stopped.clone(),
        ));
        workers.extend(spawn_webhook_workers(
            services.state.webhooks.clone(),
            Duration::from_millis(config.webhook_poll_interval_ms),
            stopped,
        ));
        let state = web::Data::new(services.state);
        let mut metrics_addr = None;
        if let Some(bind) = &config.metrics_bind {
            let metrics_listener =
                TcpListener::bind(bind).with_context(|| format!("binding AGENTRY_METRICS_BIND {bind}"))?;
            metrics_addr = Some(metrics_listener.local_addr()?);
            tracing::info!(addr = %metrics_listener.local_addr()?, "serving /metrics");
            workers.push(serve_metrics(metrics_listener, state.clone(), stopped_metrics)?);
        }
        let server = serve(config, listener, state, http_settings(config))?;
        tracing::info!(%addr, %public_url, database = %redact(&config.database_url), "listening");
        Ok(Self {
            server,
            addr,
            metrics_addr,
            db,
            public_url,
            stop,
            workers,
            heartbeat,
            shutdown_timeout: Duration::from_secs(config.shutdown_timeout_secs),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address of `AGENTRY_METRICS_BIND`'s listener, when set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The base of the links the service makes.
    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    /// The database the service uses.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// A handle to stop the server gracefully.
    pub fn handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    /// Serves until the server is stopped. SIGTERM and SIGINT stop accepting connections and
    /// let in-flight requests finish within `shutdown_timeout_secs`; then the workers finish
    /// the jobs they hold and stop.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let result = self.server.await.context("HTTP server failed");
        let _ = self.stop.send(true);
        let workers = futures_util::future::join_all(self.workers);
        if tokio::time::timeout(self.shutdown_timeout, workers).await.is_err() {
            tracing::warn!(
                "workers did not stop in time; what they hold is taken over once this instance's heartbeat stops"
            );
        }
        self.heartbeat.stop().await;
        result
    }
}

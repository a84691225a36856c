//! The domain's services wired to their adapters, area by area, and the kinds of background
//! work over them.

use std::sync::Arc;
use std::time::Duration;

use agentry_crypto::{Argon2Hasher, HashingParams, JwtAccessTokens, JwtSettings, RingHmac, RingSecrets};
use agentry_domain::agents::{
    AgentService, ChatModel, ChatService, ChatServiceDeps, ChatSettings, CoreMemoryTools, EpisodicMemory,
    ExchangeReader, KnowledgeRetrieval, MemoryBlocks, MemoryExtraction, ModelExtractor, ModelExtractorDeps,
    ToolRegistry,
};
use agentry_domain::billing::{BillingService, ManualPayments, PaymentProvider};
use agentry_domain::events::consumers::{ConsumerRunner, EventConsumer};
use agentry_domain::identity::{
    AccessService, AccessServiceDeps, AccountPolicy, AccountService, AccountServiceDeps, MailRequest,
    RecoveryPolicy, RecoveryService, RecoveryServiceDeps,
};
use agentry_domain::ids::IdGenerator;
use agentry_domain::jobs::{JobQueue, JobSettings, Jobs, RetryPolicy};
use agentry_domain::knowledge::KnowledgeService;
use agentry_domain::mcp::{McpServerService, McpServiceDeps, McpTools};
use agentry_domain::memory::MemoryService;
use agentry_domain::ratelimit::{FailurePolicy, PlanTable, Quota, RateCounter, RateLimiter};
use agentry_domain::team::{InvitationMail, TeamPolicy, TeamService, TeamServiceDeps};
use agentry_domain::time::Clock;
use agentry_domain::webhooks::WebhookService;
use agentry_domain::work::{RequestLoad, Worker};
use agentry_domain::workflows::{
    ExecutionService, ExecutionServiceDeps, ExecutionSettings, IntegrationService, IntegrationServiceDeps,
    ScheduleService, ScheduleServiceDeps, StepPerformer, TriggerService, TriggerServiceDeps, WorkflowRunner,
    WorkflowService, WorkflowServiceDeps,
};
use agentry_http::{AppState, RateLimits};
use agentry_llm::Cl100kTokens;
use agentry_store::{
    AccountStore, AgentStore, ApiKeyStore, ConsumerStore, ConversationStore, CreditStore, Database,
    DbRateCounter, ExecutionStore, InstanceStore, IntegrationStore, JobStore, McpServerStore,
    MemoryBlockStore, OneTimeTokenStore, RefreshTokenStore, ScheduleStore, TeamStore, TriggerStore,
    WebhookStore, WorkflowStore,
};
use anyhow::Context as _;
use secrecy::ExposeSecret as _;

use crate::config::{Config, LlmProvider, PaymentProviderKind, RateLimitFailure, RateLimitStore};
use crate::keys;
use crate::metrics::PrometheusMetrics;
use crate::runner::HeldRunner;
use crate::steps::ServiceSteps;
use crate::steps::basic::BasicSteps;
use crate::system::{InProcessRateCounter, SystemClock, UlidIds};
use crate::tools::knowledge::KnowledgeTools;
use crate::tools::workflows::WorkflowTools;
use crate::tools::{HttpTools, MemoryTools};

use crate::adapters::*;

/// The services and the background work over `db`.
pub struct Services {
    /// What the HTTP handlers call.
    pub state: AppState,
    /// The durable jobs (mail).
    pub jobs: Worker<Jobs>,
    /// The webhook deliveries.
    pub deliveries: Worker<WebhookService>,
    /// The workflow executions.
    pub executions: Worker<ExecutionService>,
    /// The ingestion of knowledge files.
    pub ingestion: Worker<agentry_domain::knowledge::Ingestion>,
    /// The outbox's consumers: the webhook fan-out and the memory of chats.
    pub consumers: ConsumerRunner,
    /// The clock the services read.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Services { .. }")
    }
}

/// What every service shares: the clock, identifiers, randomness, the database, the password
/// hasher and the mailer.
#[derive(Clone)]
struct Shared {
    db: Database,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    secrets: Arc<RingSecrets>,
    /// The cipher of the secrets kept to be used in clear (read from the key once).
    cipher: Arc<agentry_crypto::AesGcmCipher>,
    /// The one password hasher: its concurrency (`AGENTRY_PASSWORD_HASH_CONCURRENCY`) bounds
    /// every service's hashing together.
    hasher: Arc<Argon2Hasher>,
    /// The one mailer (its SMTP connections), for recovery's and the team's mail.
    mailer: Arc<dyn agentry_domain::mail::Mailer>,
}

/// Builds the services over `db`; links the service makes start with `public_url`.
///
/// # Errors
/// When the JWT key is invalid or cannot be read or written, or the mail settings are invalid.
pub fn build_services(
    config: &Config,
    db: &Database,
    public_url: &str,
    instances: &InstanceStore,
    overrides: Overrides,
) -> anyhow::Result<Services> {
    let shared = Shared {
        db: db.clone(),
        clock: overrides.clock.unwrap_or_else(|| Arc::new(SystemClock)),
        ids: Arc::new(UlidIds::default()),
        secrets: Arc::new(RingSecrets::new()),
        cipher: secret_cipher(config)?,
        hasher: Arc::new(Argon2Hasher::new(
            HashingParams::OWASP,
            config.password_hash_concurrency.unwrap_or_else(cpus),
        )?),
        mailer: build_mailer(config)?,
    };
    let Shared { clock, ids, .. } = shared.clone();
    let job_store = Arc::new(JobStore::new(db.clone()));
    let webhook_store = Arc::new(WebhookStore::new(db.clone()));
    let execution_store =
        Arc::new(ExecutionStore::new(db.clone()).with_tenant_share(config.workflow_tenant_share));
    let metrics = Arc::new(PrometheusMetrics::new(
        db.clone(),
        vec![job_store.clone(), webhook_store.clone(), execution_store.clone()],
        clock.clone(),
    ));
    let (accounts, access, recovery) = identity(config, &shared, public_url, job_store.clone())?;
    let team = team_service(&shared, public_url, &accounts);
    let (limiter, limits, plans) = rate_limits(config, &shared)?;
    let embedder = match overrides.embedder {
        Some(e) => e,
        None => build_embedder(config)?,
    };
    let (knowledge, ingestion) =
        crate::knowledge::knowledge_services(config, db, embedder.clone(), ids.clone(), clock.clone());
    let memory = memory_service(config, db, embedder, Some(clock.clone()));
    let members: Arc<dyn agentry_domain::tenancy::MemberRoles> = Arc::new(TeamStore::new(shared.db.clone()));
    let basic_steps = BasicSteps::new(
        memory.clone(),
        knowledge.clone(),
        guarded_client(
            config,
            Duration::from_secs(u64::from(agentry_domain::workflows::MAX_STEP_TIMEOUT_SECONDS)),
            agentry_domain::workflows::MAX_STEP_OUTPUT_BYTES,
            "Agentry-Workflows",
        )?,
        config.webhook_allow_insecure,
    );
    let mcp_servers = mcp_servers(config, &shared)?;
    // Chat's tools but the workflows': those are added where the executions exist (below, and
    // per `agent_chat` step), so that chat is never held through its own tools.
    let blocks = MemoryBlocks::new(
        Arc::new(MemoryBlockStore::new(db.clone())),
        Arc::new(AgentStore::new(db.clone())),
        clock.clone(),
    );
    let tools = ToolRegistry::new(Some(members))
        .with(Arc::new(CoreMemoryTools(blocks.clone())))
        .with(Arc::new(MemoryTools(basic_steps.clone())))
        .with(Arc::new(HttpTools(basic_steps.clone())))
        .with(Arc::new(mcp_servers.1))
        .with(Arc::new(KnowledgeTools(Arc::new(knowledge.clone()))));
    let mcp_servers = mcp_servers.0;
    // One model for chat and memory extraction (the local one is loaded once).
    let model = build_model(config)?;
    let (agents, chat, billing) =
        agents_and_billing(config, &shared, (&memory, &knowledge, &blocks), plans, (tools, model.clone()))?;
    let webhooks = webhook_service(
        config,
        webhook_store,
        (shared.secrets.clone(), shared.cipher.clone()),
        ids.clone(),
        clock.clone(),
    )?;
    let steps = Arc::new(ServiceSteps::new(chat.clone(), basic_steps));
    let WorkflowServices { workflows, executions, triggers, integrations, schedules } =
        workflows(config, &shared, execution_store, steps, &limiter, plans);
    let runner: Arc<dyn WorkflowRunner> = Arc::new(HeldRunner::new(executions.clone()));
    let chat = chat.with_tools(Arc::new(WorkflowTools::new(runner.clone())));
    let jobs = Worker::new(
        Arc::new(mail_jobs(config, &shared, job_store, &recovery, &team)),
        ids.clone(),
        clock.clone(),
    );
    let deliveries = Worker::new(Arc::new(webhooks.clone()), ids.clone(), clock.clone());
    let extractor = ModelExtractor::new(ModelExtractorDeps {
        model,
        credits: Arc::new(CreditStore::new(db.clone())),
        tokens: Arc::new(Cl100kTokens::default()),
        memory: memory.clone(),
        ids: ids.clone(),
        clock: clock.clone(),
        default_model: config.default_model(),
        credits_low_threshold: config.credits_low_threshold,
    });
    // `auto` extraction asks the model only when it is a remote OpenAI-compatible one: the
    // offline models learn by the rules.
    let extraction = (extractor, config.llm() == LlmProvider::Openai);
    // Requests in flight, counted by the HTTP layer: memory extraction yields to them.
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let load = Arc::new(RequestLoad::new(cores));
    let consumers = event_consumers(db, &webhooks, &memory, extraction, (ids.clone(), clock.clone()))
        .yielding_to(load.clone());
    let executions_worker = Worker::new(Arc::new(executions.clone()), ids, clock.clone());
    let state = AppState {
        accounts,
        access,
        recovery,
        agents,
        chat,
        memory,
        blocks,
        knowledge,
        billing,
        webhooks,
        workflows,
        executions,
        runner,
        triggers,
        integrations,
        schedules,
        mcp_servers,
        team,
        limiter,
        limits,
        readiness: Arc::new(DatabaseReadiness { db: db.clone(), instances: instances.clone() }),
        chat_model: agentry_http::routes::health::ChatModelStatus {
            provider: config.llm().as_str().into(),
            model: config.default_model(),
        },
        metrics,
        failed_auth: Arc::new(agentry_http::access::FailedAuthGate::default()),
        load,
        clock: clock.clone(),
    };
    Ok(Services { state, jobs, deliveries, executions: executions_worker, ingestion, consumers, clock })
}

/// The outbox's consumers, in the order their passes start: the webhook fan-out, the episodic
/// memory of each stored exchange, and the facts memory learns from it.
fn event_consumers(
    db: &Database,
    webhooks: &WebhookService,
    memory: &MemoryService,
    (extractor, model_by_default): (ModelExtractor, bool),
    (ids, clock): (Arc<dyn IdGenerator>, Arc<dyn Clock>),
) -> ConsumerRunner {
    let reader = ExchangeReader {
        agents: Arc::new(AgentStore::new(db.clone())),
        conversations: Arc::new(ConversationStore::new(db.clone())),
    };
    let consumers: Vec<Arc<dyn EventConsumer>> = vec![
        Arc::new(webhooks.clone()),
        Arc::new(EpisodicMemory::new(reader.clone(), Arc::new(memory.clone()))),
        Arc::new(MemoryExtraction::new(reader, memory.clone()).with_model(extractor, model_by_default)),
    ];
    ConsumerRunner::new(Arc::new(ConsumerStore::new(db.clone())), consumers, ids, clock)
}

/// Accounts, API keys and access, and recovery by e-mail (whose mail goes out as `jobs`).
fn identity(
    config: &Config,
    shared: &Shared,
    public_url: &str,
    jobs: Arc<dyn JobQueue>,
) -> anyhow::Result<(AccountService, AccessService, RecoveryService)> {
    let Shared { db, clock, ids, secrets, hasher, mailer, .. } = shared.clone();
    let jwt = Arc::new(JwtAccessTokens::new(JwtSettings {
        secret: keys::jwt_key(config.jwt_secret.as_ref(), &config.data_dir)?,
        issuer: config.jwt_issuer(),
        audience: "agentry-api".into(),
        ttl: chrono::Duration::seconds(config.access_token_ttl_secs),
    })?);
    let accounts_repo = Arc::new(AccountStore::new(db.clone()));
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
            tokens: Arc::new(OneTimeTokenStore::new(db)),
            hasher,
            mailer,
            jobs,
            sessions: accounts.clone(),
            secrets,
            ids,
            clock,
        },
        RecoveryPolicy {
            public_url: public_url.to_owned(),
            reset_ttl: chrono::Duration::minutes(config.password_reset_ttl_minutes),
            magic_link_ttl: chrono::Duration::minutes(config.magic_link_ttl_minutes),
            max_emails_per_hour: config.mail_per_address_per_hour,
        },
    );
    Ok((accounts, access, recovery))
}

/// The rate limiter over the configured store, the limits of requests and the plan table.
fn rate_limits(config: &Config, shared: &Shared) -> anyhow::Result<(RateLimiter, RateLimits, PlanTable)> {
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
        RateLimitStore::Database => Arc::new(DbRateCounter::new(shared.db.clone())),
        RateLimitStore::Memory | RateLimitStore::Auto => Arc::new(InProcessRateCounter::default()),
    };
    let plans = if config.plan_table == 2 { PlanTable::Two } else { PlanTable::One };
    let limits = RateLimits {
        plans,
        auth_per_ip: Quota::per_minute(config.auth_rate_per_minute),
        failed_auth_per_ip: Quota::per_minute(config.auth_failures_per_minute),
        trusted_proxies: config.trusted_proxy_addrs()?,
    };
    let limiter = RateLimiter::new(counter, shared.clock.clone()).with_failure_policy(
        match config.rate_limit_failure {
            RateLimitFailure::Open => FailurePolicy::Open,
            RateLimitFailure::Closed => FailurePolicy::Closed,
        },
    );
    Ok((limiter, limits, plans))
}

/// Agents, chat (with its model and memory) and billing.
fn agents_and_billing(
    config: &Config,
    shared: &Shared,
    (memory, knowledge, blocks): (&MemoryService, &KnowledgeService, &MemoryBlocks),
    plans: PlanTable,
    (tools, model): (ToolRegistry, Arc<dyn ChatModel>),
) -> anyhow::Result<(AgentService, ChatService, BillingService)> {
    let Shared { db, clock, ids, .. } = shared.clone();
    let agent_store = Arc::new(AgentStore::new(db.clone()));
    let credit_store = Arc::new(CreditStore::new(db.clone()));
    let knowledge: Arc<dyn KnowledgeRetrieval> = Arc::new(knowledge.clone());
    let agents =
        AgentService::new(agent_store.clone(), ids.clone(), clock.clone()).with_knowledge(knowledge.clone());
    let chat = ChatService::new(
        ChatServiceDeps {
            agents: agent_store,
            conversations: Arc::new(ConversationStore::new(db)),
            credits: credit_store.clone(),
            model,
            tokens: Arc::new(Cl100kTokens::default()),
            memory: Arc::new(memory.clone()),
            blocks: blocks.repository(),
            knowledge,
            tools,
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
    let billing = BillingService::new(credit_store, payments, plans, ids, clock);
    Ok((agents, chat, billing))
}

/// What [`workflows`] builds.
struct WorkflowServices {
    workflows: WorkflowService,
    executions: ExecutionService,
    triggers: TriggerService,
    integrations: IntegrationService,
    schedules: ScheduleService,
}

/// Workflows, their executions (whose `steps` chat, search memory and call out through the
/// guarded client), triggers, integrations and schedules.
fn workflows(
    config: &Config,
    shared: &Shared,
    execution_store: Arc<ExecutionStore>,
    steps: Arc<dyn StepPerformer>,
    limiter: &RateLimiter,
    plans: PlanTable,
) -> WorkflowServices {
    let Shared { db, clock, ids, secrets, cipher, .. } = shared.clone();
    let workflow_store = Arc::new(WorkflowStore::new(db.clone()));
    let workflows = WorkflowService::new(WorkflowServiceDeps {
        workflows: workflow_store.clone(),
        clock: clock.clone(),
        ids: ids.clone(),
    });
    let executions = ExecutionService::new(
        ExecutionServiceDeps {
            workflows: workflow_store.clone(),
            executions: execution_store.clone(),
            due: execution_store,
            performer: steps,
            clock: clock.clone(),
            ids: ids.clone(),
            members: Arc::new(TeamStore::new(db.clone())),
        },
        ExecutionSettings {
            lease: chrono::Duration::seconds(i64::try_from(config.job_lease_secs).unwrap_or(60)),
            concurrency: config.workflow_concurrency,
            max_claims: config.work_max_claims,
        },
    );
    let triggers = TriggerService::new(TriggerServiceDeps {
        triggers: Arc::new(TriggerStore::new(db.clone())),
        workflows: workflow_store.clone(),
        executions: executions.clone(),
        cipher: cipher.clone(),
        hmac: Arc::new(RingHmac),
        secrets,
        limiter: limiter.clone(),
        plans,
        ids: ids.clone(),
        clock: clock.clone(),
    });
    let integrations = IntegrationService::new(IntegrationServiceDeps {
        integrations: Arc::new(IntegrationStore::new(db.clone())),
        workflows: workflow_store.clone(),
        executions: executions.clone(),
        cipher,
        hmac: Arc::new(RingHmac),
        limiter: limiter.clone(),
        plans,
        ids: ids.clone(),
        clock: clock.clone(),
    });
    let schedules = ScheduleService::new(ScheduleServiceDeps {
        schedules: Arc::new(ScheduleStore::new(db)),
        workflows: workflow_store,
        executions: executions.clone(),
        limiter: limiter.clone(),
        plans,
        ids,
        clock,
    });
    WorkflowServices { workflows, executions, triggers, integrations, schedules }
}

/// Remote MCP servers (through the guarded client, the webhooks' rules) and their tools as
/// agents' tools.
fn mcp_servers(config: &Config, shared: &Shared) -> anyhow::Result<(McpServerService, McpTools)> {
    let Shared { db, clock, ids, cipher, .. } = shared.clone();
    let client: Arc<dyn agentry_domain::mcp::McpClient> = Arc::new(guarded_client(
        config,
        Duration::from_secs(u64::from(agentry_domain::mcp::MAX_TIMEOUT_SECONDS)),
        1024 * 1024,
        "Agentry-MCP",
    )?);
    let store = Arc::new(McpServerStore::new(db));
    let service = McpServerService::new(
        McpServiceDeps { servers: store.clone(), client: client.clone(), cipher: cipher.clone(), ids, clock },
        config.webhook_allow_insecure,
    );
    Ok((service, McpTools::new(store, client, cipher)))
}

/// Team members and invitations (whose mail goes out as `jobs`).
fn team_service(shared: &Shared, public_url: &str, accounts: &AccountService) -> TeamService {
    let Shared { db, clock, ids, secrets, hasher, mailer, .. } = shared.clone();
    TeamService::new(
        TeamServiceDeps {
            team: Arc::new(TeamStore::new(db.clone())),
            accounts: Arc::new(AccountStore::new(db)),
            hasher,
            sessions: accounts.clone(),
            mailer,
            secrets,
            ids,
            clock,
        },
        TeamPolicy { public_url: public_url.to_owned(), invitation_ttl: chrono::Duration::days(7) },
    )
}

/// The mail jobs: recovery's, and the team's invitations.
fn mail_jobs(
    config: &Config,
    shared: &Shared,
    store: Arc<JobStore>,
    recovery: &RecoveryService,
    team: &TeamService,
) -> Jobs {
    Jobs::new(
        store.clone(),
        store,
        shared.clock.clone(),
        JobSettings {
            lease: chrono::Duration::seconds(i64::try_from(config.job_lease_secs).unwrap_or(60)),
            // One at a time, as before the core: an address's hourly mail budget is counted
            // and then spent by the job, so two of its jobs at once could both see room.
            concurrency: 1,
            retry: RetryPolicy {
                first_delay: chrono::Duration::seconds(
                    i64::try_from(config.mail_retry_first_delay_secs).unwrap_or(5),
                ),
                max_delay: chrono::Duration::minutes(30),
                max_attempts: config.mail_max_attempts,
            },
        },
    )
    .with_handler::<MailRequest>(Arc::new(recovery.clone()))
    .with_handler::<InvitationMail>(Arc::new(team.clone()))
}

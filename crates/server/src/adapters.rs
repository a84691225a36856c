//! The outside systems the configuration chooses: the database, the mailer, the chat and
//! embedding models, the webhook sender and the cipher of secrets at rest.

use std::sync::Arc;
use std::time::Duration;

use agentry_crypto::{AesGcmCipher, RingHmac, RingSecrets};
use agentry_domain::agents::ChatModel;
use agentry_domain::ids::IdGenerator;
use agentry_domain::mail::Mailer;
use agentry_domain::memory::ranking::{RankingSettings, SimilarityScale};
use agentry_domain::memory::{Embedder, MemoryService, MemoryServiceDeps, MemorySettings};
use agentry_domain::time::Clock;
use agentry_domain::webhooks::{WebhookService, WebhookServiceDeps, WebhookSettings};
use agentry_embed::{
    BatchSettings, BatchingEmbedder, CachedEmbedder, HashingEmbedder, MiniLmEmbedder, MiniLmSettings,
    OpenAiEmbedder, OpenAiEmbedderSettings,
};
use agentry_http::{MetricsExport, NotReady, Readiness};
use agentry_llm::{BuiltinModel, Cl100kTokens, LocalModel, LocalSettings, OpenAiModel, OpenAiSettings};
use agentry_mailer::{FileOutbox, SmtpMailer};
use agentry_store::{AgentStore, Database, DatabaseSettings, InstanceStore, MemoryStore, WebhookStore};
use anyhow::Context as _;
use async_trait::async_trait;
use secrecy::ExposeSecret as _;

use crate::config::{Config, EmbeddingProvider, LlmProvider};
use crate::keys;
use crate::metrics::{MeteredModel, PrometheusMetrics};
use crate::system::{SystemClock, UlidIds};

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

/// `/readyz`: the database answers, and the live instances on it agree on the settings they
/// must share (see [`crate::keys::setting_fingerprints`]).
pub(crate) struct DatabaseReadiness {
    pub(crate) db: Database,
    pub(crate) instances: InstanceStore,
}

/// `/metrics` of the HTTP layer, served from the Prometheus recorder.
#[async_trait]
impl MetricsExport for PrometheusMetrics {
    async fn render(&self) -> String {
        PrometheusMetrics::render(self).await
    }
}

#[async_trait]
impl Readiness for DatabaseReadiness {
    async fn check(&self) -> Result<(), NotReady> {
        self.db.ping().await.map_err(NotReady::Unreachable)?;
        let differing = self.instances.disagreements().await.map_err(NotReady::Unreachable)?;
        if differing.is_empty() { Ok(()) } else { Err(NotReady::Disagreement(differing)) }
    }
}

pub(crate) fn cpus() -> usize {
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

/// The chat model the configuration asks for. A local model is loaded once per process and file,
/// however many apps a test process starts.
///
/// # Errors
/// When the HTTP client of the OpenAI-compatible model cannot be built, or `smollm` is asked
/// for and its file is missing or unreadable.
pub fn build_model(config: &Config) -> anyhow::Result<Arc<dyn ChatModel>> {
    let provider = config.llm().as_str();
    let model: Arc<dyn ChatModel> = match config.llm() {
        LlmProvider::Smollm => Arc::new(load_local(config)?),
        LlmProvider::Auto | LlmProvider::Builtin => Arc::new(BuiltinModel::new()),
        LlmProvider::Openai => Arc::new(OpenAiModel::new(OpenAiSettings {
            base_url: config.llm_base_url.clone(),
            api_key: config.llm_api_key.clone(),
            timeout: Duration::from_secs(config.llm_timeout_secs),
        })?),
    };
    match provider {
        "builtin" if config.llm_provider == LlmProvider::Auto => tracing::info!(
            path = %config.llm_model_path.display(),
            "chat model: the built-in responder (no language model file; `make model` fetches SmolLM2)"
        ),
        _ => tracing::info!(provider, model = %config.default_model(), "chat model"),
    }
    Ok(Arc::new(MeteredModel::new(model, provider)))
}

fn load_local(config: &Config) -> anyhow::Result<LocalModel> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static LOADED: OnceLock<Mutex<HashMap<std::path::PathBuf, LocalModel>>> = OnceLock::new();
    let mut loaded =
        LOADED.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(model) = loaded.get(&config.llm_model_path) {
        return Ok(model.clone());
    }
    let started = std::time::Instant::now();
    let model = LocalModel::load(
        &config.llm_model_path,
        &LocalSettings {
            concurrency: config.llm_concurrency,
            queue: config.llm_queue,
            timeout: Duration::from_secs(config.llm_timeout_secs),
            ..LocalSettings::default()
        },
    )?;
    let info = model.info();
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis(),
        model = %info.name,
        architecture = %info.architecture,
        own_chat_template = info.own_template,
        "loaded the language model"
    );
    loaded.insert(config.llm_model_path.clone(), model.clone());
    Ok(model)
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
/// A real model (`minilm`, `openai`) is reached through a batcher, which embeds the texts of
/// concurrent calls together, and a cache of recent search queries'
/// vectors (`AGENTRY_EMBEDDING_CACHE_SIZE`); the `hashing` fallback costs less than either
/// would save. Call it inside the tokio runtime the batcher is to run on.
///
/// # Errors
/// When `minilm` is asked for and its files are missing or unreadable, or the OpenAI client
/// cannot be built.
pub fn build_embedder(config: &Config) -> anyhow::Result<Arc<dyn Embedder>> {
    let model = match model_embedder(config)? {
        Model::Real(model) => model,
        Model::Lexical(hashing) => return Ok(hashing),
    };
    // The cache outside the batcher: a query found in it does not wait for a batch.
    let settings = BatchSettings {
        max_wait: std::time::Duration::from_millis(config.embedding_batch_wait_ms),
        ..BatchSettings::default()
    };
    let batched: Arc<dyn Embedder> = Arc::new(BatchingEmbedder::new(model, settings));
    Ok(Arc::new(CachedEmbedder::new(batched, config.embedding_cache_size)))
}

/// An embedder as [`build_embedder`] finds it, before batching and caching.
enum Model {
    /// A sentence-embedding model: worth batching and caching.
    Real(Arc<dyn Embedder>),
    /// The `hashing` fallback: microseconds a text, nothing to save.
    Lexical(Arc<dyn Embedder>),
}

fn model_embedder(config: &Config) -> anyhow::Result<Model> {
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
    Ok(match config.embedding_provider {
        EmbeddingProvider::Minilm => Model::Real(minilm()?),
        EmbeddingProvider::Auto if MiniLmEmbedder::files_present(dir) => Model::Real(minilm()?),
        EmbeddingProvider::Auto | EmbeddingProvider::Hashing => {
            if config.embedding_provider == EmbeddingProvider::Auto {
                tracing::warn!(
                    model_dir = %dir.display(),
                    "no embedding model found: memory search uses the lexical `hashing` fallback, which \
                     matches words, not meanings. Run `make model` to fetch all-MiniLM-L6-v2, then \
                     `agentry memory reindex`"
                );
            }
            Model::Lexical(Arc::new(HashingEmbedder::default()))
        }
        EmbeddingProvider::Openai => Model::Real(Arc::new(OpenAiEmbedder::new(OpenAiEmbedderSettings {
            base_url: config.embedding_base_url.clone(),
            api_key: config.embedding_api_key.clone(),
            model: config.embedding_model.clone(),
            dimension: config.embedding_dimension,
            timeout: Duration::from_secs(config.embedding_timeout_secs),
        })?)),
    })
}

/// How search maps the similarities of the embedder of `provider` onto 0–1: each adapter's
/// own calibration, unless the configuration sets it (for another OpenAI-compatible model).
pub fn similarity_scale(config: &Config, provider: &str) -> SimilarityScale {
    let own = match provider {
        "hashing" => HashingEmbedder::SIMILARITY,
        "openai" => OpenAiEmbedder::SIMILARITY,
        _ => SimilarityScale::MINILM,
    };
    let floor = config.embedding_similarity_floor.unwrap_or(own.floor);
    let ceiling = config.embedding_similarity_ceiling.unwrap_or(own.ceiling);
    // Only one of the two set, past the other's default: the default gives way.
    if floor < ceiling { SimilarityScale { floor, ceiling } } else { own }
}

/// The memory service over `db` with `embedder`.
pub fn memory_service(
    config: &Config,
    db: &Database,
    embedder: Arc<dyn Embedder>,
    clock: Option<Arc<dyn Clock>>,
) -> MemoryService {
    let embedder_provider = embedder.model().provider.clone();
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
                similarity: similarity_scale(config, &embedder_provider),
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
pub(crate) fn webhook_service(
    config: &Config,
    store: Arc<WebhookStore>,
    sealing: (Arc<RingSecrets>, Arc<AesGcmCipher>),
    ids: Arc<dyn IdGenerator>,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<WebhookService> {
    let sender = guarded_client(
        config,
        Duration::from_secs(config.webhook_timeout_secs),
        agentry_domain::webhooks::model::RESPONSE_BODY_BYTES,
        "Agentry-Webhooks",
    )?;
    let (secrets, cipher) = sealing;
    let seconds = |s: u64| chrono::Duration::seconds(i64::try_from(s).unwrap_or(60));
    Ok(WebhookService::new(
        WebhookServiceDeps {
            webhooks: store.clone(),
            due: store,
            cipher,
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
            concurrency: config.webhook_concurrency,
            ..WebhookSettings::default()
        },
    ))
}

/// The guarded client every call to a tenant's URL goes through (webhooks, `http_request`
/// steps): the address rules and host allow-list of `config`, with the caller's deadline,
/// answer size and user agent (`<agent>/<version>`).
///
/// # Errors
/// When the HTTP client cannot be built.
pub fn guarded_client(
    config: &Config,
    timeout: Duration,
    max_response_bytes: usize,
    agent: &str,
) -> anyhow::Result<agentry_egress::WebhookClient> {
    Ok(agentry_egress::WebhookClient::new(
        agentry_egress::EgressSettings {
            allow_private: config.webhook_allow_private,
            timeout,
            max_response_bytes,
            user_agent: format!("{agent}/{}", env!("CARGO_PKG_VERSION")),
        },
        config.webhook_allowed_hosts.split(',').map(str::to_owned).collect(),
    )?)
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

//! Wiring: configuration in, a running HTTP server out. The only place that knows every
//! adapter.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::web;
use agentry_domain::ids::IdGenerator;
use agentry_http::{AppState, Envelope, HttpSettings};
use agentry_store::{Backend, Database, InstanceStore, redact};
use anyhow::Context as _;
use tokio::sync::watch;

use crate::background::start_background_work;
use crate::config::{ApiEnvelope, Config};
use crate::keys;
use crate::system::{SystemClock, UlidIds};
use crate::workers::{Heartbeat, WorkSet};

pub use crate::adapters::Overrides;
use crate::adapters::{cpus, open_database};
pub use crate::services::Services;
use crate::services::build_services;

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
    work: WorkSet,
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
        let instance_store =
            InstanceStore::new(db.clone()).with_fingerprints(keys::setting_fingerprints(config)?);
        if db.backend() == Backend::Sqlite {
            // One process uses an SQLite file: whatever is held was held by a process now gone.
            let freed =
                instance_store.free_all_leases().await.context("freeing the leases of the last run")?;
            if freed > 0 {
                tracing::info!(freed, "took over the work the last run held");
            }
        }
        let listener = TcpListener::bind(&config.bind).with_context(|| format!("binding {}", config.bind))?;
        let addr = listener.local_addr()?;
        let public_url = config.public_url_for(addr);
        let services = build_services(config, &db, &public_url, &instance_store, overrides)?;
        let heartbeat = Heartbeat::start(
            Arc::new(instance_store.clone()),
            instance,
            // Wall-clock time, whatever clock the services read: whether a process is alive
            // is not a matter of the domain's time (tests move that at will).
            Arc::new(SystemClock),
            Duration::from_millis(config.instance_timeout_secs.saturating_mul(1000) / 4)
                .max(Duration::from_millis(250)),
            chrono::Duration::seconds(i64::try_from(config.instance_timeout_secs).unwrap_or(10)),
            db.signals().clone(),
        )
        .await
        .context("registering this instance")?;
        // Tokens this instance signs would be refused by an instance with another key, silently:
        // say so now, and /readyz fails until every instance agrees.
        let differing =
            instance_store.disagreements().await.context("comparing settings with other instances")?;
        if !differing.is_empty() {
            tracing::error!(
                settings = %differing.join(", "),
                "another instance on this database was started with a different value of these settings; \
                 /readyz fails until every instance uses the same"
            );
        }
        let (stop, stopped) = watch::channel(false);
        let stopped_metrics = stopped.clone();
        let (work, mut workers) = start_background_work(config, &db, &services, &stopped);
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
            work,
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

    /// The instance's queues of durable work, to drain (tests).
    pub fn work(&self) -> WorkSet {
        self.work.clone()
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

//! The database over either backend, chosen at runtime by the URL's scheme: a connection pool
//! for PostgreSQL, readers and a writer thread for SQLite (see [`crate::sqlite`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use futures_util::FutureExt as _;

// The repositories take the error type from here, with the database they query.
pub(crate) use crate::error::StoreError;
use crate::pool_stats::PoolStats;
use crate::signals::{WorkQueue, WorkSignals};
use crate::sqlite::Sqlite;

const PG_MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/postgres");
const SQLITE_MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite");

/// Which database a [`Database`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// PostgreSQL (`postgres://` or `postgresql://`).
    Postgres,
    /// SQLite (`sqlite://<path>`).
    Sqlite,
}

/// How to connect.
#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    /// `postgres://…` or `sqlite://<path>` (`sqlite://data/agentry.db`).
    pub url: String,
    /// Most connections the pool opens.
    pub max_connections: usize,
    /// How long a request waits for a free connection before failing.
    pub acquire_timeout: Duration,
    /// Longest a single statement may run (PostgreSQL `statement_timeout`; SQLite waits at
    /// most this long for a lock through `busy_timeout`, and for a free reader).
    pub statement_timeout: Duration,
    /// How many threads serve requests: PostgreSQL connections are pooled per thread, and
    /// `max_connections` is shared out among these and the background workers' thread.
    pub threads: usize,
}

impl DatabaseSettings {
    /// Settings for `url` with the defaults used by the service.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(10),
            threads: std::thread::available_parallelism().map_or(2, usize::from),
        }
    }
}

#[derive(Clone)]
pub(crate) enum DbPool {
    Pg(Arc<PgPools>),
    Sqlite(Arc<Sqlite>),
}

/// PostgreSQL connections, pooled per request thread.
///
/// A tokio-postgres connection is driven by a task on the runtime that opened it, and its
/// socket is registered with that runtime's reactor. The service runs one single-threaded
/// runtime per HTTP worker thread, so a connection opened on one worker and used by a request
/// on another hands every query across threads twice (the request to the driver, the rows
/// back), each hand-off a wake-up through the kernel. Each thread of a single-threaded runtime
/// therefore keeps its own pool, opened lazily the first time it queries: a request's queries,
/// the driver and the socket stay on the request's thread. Work on a multi-threaded runtime
/// (the background workers, which move between its threads) shares one pool. The budget of
/// connections is shared out among these pools.
pub(crate) struct PgPools {
    settings: DatabaseSettings,
    per_pool: usize,
    /// Identifies this database among the pools a thread keeps.
    id: u64,
    /// Lives as long as the database: a thread drops its pool of a database that is gone.
    alive: Arc<()>,
    /// For callers on a multi-threaded runtime.
    shared: Pool<AsyncPgConnection>,
    /// Every pool, for the statistics and to close them with the database.
    all: std::sync::Mutex<Vec<Pool<AsyncPgConnection>>>,
}

struct LocalPgPool {
    id: u64,
    database: std::sync::Weak<()>,
    pool: Pool<AsyncPgConnection>,
}

thread_local! {
    static LOCAL_PG_POOLS: std::cell::RefCell<Vec<LocalPgPool>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl PgPools {
    fn new(settings: &DatabaseSettings) -> anyhow::Result<Self> {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        // One pool per request thread and the shared one; each at least one connection.
        let pools = settings.threads.max(1) + 1;
        let per_pool = (settings.max_connections / pools).max(1);
        let shared = pg_pool(settings, per_pool)?;
        Ok(Self {
            settings: settings.clone(),
            per_pool,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            alive: Arc::new(()),
            all: std::sync::Mutex::new(vec![shared.clone()]),
            shared,
        })
    }

    /// The calling thread's pool of this database (a cheap handle): its own on a
    /// single-threaded runtime, the shared one elsewhere.
    pub(crate) fn local(&self) -> Result<Pool<AsyncPgConnection>, StoreError> {
        let single_threaded = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
        if !single_threaded {
            return Ok(self.shared.clone());
        }
        LOCAL_PG_POOLS.with(|pools| {
            let mut pools = pools.borrow_mut();
            if let Some(local) = pools.iter().find(|p| p.id == self.id) {
                return Ok(local.pool.clone());
            }
            pools.retain(|p| p.database.strong_count() > 0);
            let pool =
                pg_pool(&self.settings, self.per_pool).map_err(|e| StoreError::Pool(format!("{e:#}")))?;
            pools.push(LocalPgPool {
                id: self.id,
                database: Arc::downgrade(&self.alive),
                pool: pool.clone(),
            });
            self.all.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(pool.clone());
            Ok(pool)
        })
    }

    /// The connections of all threads' pools.
    fn stats(&self) -> PoolStats {
        let pools = self.all.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut stats = PoolStats { max: self.settings.max_connections, ..PoolStats::default() };
        for status in pools.iter().map(Pool::status) {
            stats.open += status.size;
            stats.in_use += status.size.saturating_sub(status.available);
            stats.waiting += status.waiting;
        }
        stats
    }
}

impl Drop for PgPools {
    /// Closes every pool's connections: threads still hold handles to their pools, which would
    /// otherwise keep idle connections open until those threads end.
    fn drop(&mut self) {
        for pool in self.all.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
            pool.close();
        }
    }
}

/// A pooled database. Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct Database {
    pub(crate) pool: DbPool,
    /// The instance of the service this handle works for, when it takes leases.
    pub(crate) instance: Option<Arc<InstanceIdentity>>,
    /// This process's worker wake-ups, signalled when work is stored.
    signals: Arc<WorkSignals>,
}

/// Who takes leases through a [`Database`]: an instance of the service, and how long its
/// heartbeat may be silent before its leases are free.
#[derive(Debug)]
pub(crate) struct InstanceIdentity {
    pub(crate) id: String,
    pub(crate) timeout: chrono::Duration,
    /// How far the database's clock is ahead of this host's, in milliseconds (PostgreSQL; 0 on
    /// SQLite), as the last heartbeat read it: instances on several hosts judge each other's
    /// heartbeats by one clock, so a skew between hosts cannot make a live instance look dead.
    pub(crate) clock_offset_ms: std::sync::atomic::AtomicI64,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").field("backend", &self.backend()).finish_non_exhaustive()
    }
}

/// The backend a URL names.
///
/// # Errors
/// For any scheme but `postgres`, `postgresql` and `sqlite`.
pub fn backend_of(url: &str) -> anyhow::Result<Backend> {
    let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or_default();
    match scheme {
        "postgres" | "postgresql" => Ok(Backend::Postgres),
        "sqlite" => Ok(Backend::Sqlite),
        _ => anyhow::bail!("unsupported database URL {:?}: use postgres://… or sqlite://<path>", redact(url)),
    }
}

/// The URL without its password, for messages and logs.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_owned(),
    }
}

impl Database {
    /// Opens a pool. For SQLite the file's directory is created when missing; every
    /// connection gets WAL, a busy timeout and foreign keys. For PostgreSQL every connection
    /// gets the statement timeout. Nothing is migrated here: see [`Database::migrate`].
    ///
    /// # Errors
    /// For an unsupported URL, or when the pool cannot be built or its first connection fails.
    pub async fn connect(settings: &DatabaseSettings) -> anyhow::Result<Self> {
        let pool = match backend_of(&settings.url)? {
            Backend::Postgres => DbPool::Pg(Arc::new(PgPools::new(settings)?)),
            Backend::Sqlite => {
                let path = sqlite_path(&settings.url)?;
                create_private_file(Path::new(&path))?;
                DbPool::Sqlite(Sqlite::open(&path, settings.max_connections, settings.statement_timeout)?)
            }
        };
        let db = Self { pool, instance: None, signals: Arc::default() };
        db.ping().await.with_context(|| format!("cannot connect to {}", redact(&settings.url)))?;
        Ok(db)
    }

    /// This handle as used by instance `id` of the service: the leases its stores take name
    /// the instance as their owner, and the leases of instances whose heartbeat is older than
    /// `timeout` (see [`crate::InstanceStore`]) are free to take.
    #[must_use]
    pub fn for_instance(mut self, id: impl Into<String>, timeout: chrono::Duration) -> Self {
        self.instance =
            Some(Arc::new(InstanceIdentity { id: id.into(), timeout, clock_offset_ms: 0.into() }));
        self
    }

    /// The owner to write on a lease, and the oldest heartbeat of a live owner. Heartbeats are
    /// the database's wall-clock time (see [`crate::InstanceStore`]), whatever clock a claim's
    /// `now` comes from: whether a process is alive is not a matter of the domain's time.
    pub(crate) fn lease_owner(&self) -> (Option<String>, chrono::DateTime<chrono::Utc>) {
        match &self.instance {
            Some(i) => {
                let offset = i.clock_offset_ms.load(std::sync::atomic::Ordering::Relaxed);
                (Some(i.id.clone()), chrono::Utc::now() + chrono::Duration::milliseconds(offset) - i.timeout)
            }
            // No instance: owners are not recorded, and leases end only when they run out.
            None => (None, chrono::DateTime::<chrono::Utc>::UNIX_EPOCH),
        }
    }

    /// This process's worker wake-ups: what stores work signals them once it has committed.
    pub fn signals(&self) -> &Arc<WorkSignals> {
        &self.signals
    }

    /// Work was stored in `queue` (its unit of work committed): wakes this process's worker.
    /// Other instances heard of it from the unit's own `NOTIFY` (see [`crate::signals`]).
    pub(crate) fn stored(&self, queue: WorkQueue) {
        self.signals.notify(queue);
    }

    /// On PostgreSQL, listens for the work other instances store and wakes this process's
    /// workers (see [`crate::signals::listen`]); `None` on SQLite, which one process uses.
    pub fn listen_for_work(&self) -> Option<tokio::task::JoinHandle<()>> {
        match &self.pool {
            DbPool::Pg(pools) => {
                Some(crate::signals::listen(pools.settings.url.clone(), self.signals.clone()))
            }
            DbPool::Sqlite(_) => None,
        }
    }

    /// Which backend this is.
    pub fn backend(&self) -> Backend {
        match self.pool {
            DbPool::Pg(_) => Backend::Postgres,
            DbPool::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// The state of the connections, for `/metrics`.
    pub fn pool_stats(&self) -> PoolStats {
        match &self.pool {
            DbPool::Pg(pools) => pools.stats(),
            DbPool::Sqlite(sqlite) => sqlite.pool_stats(),
        }
    }

    /// Runs one trivial statement: the readiness check.
    ///
    /// # Errors
    /// When no connection can be had or the statement fails.
    pub async fn ping(&self) -> anyhow::Result<()> {
        with_conn!(self, conn => conn.batch_execute("SELECT 1").await)?;
        Ok(())
    }

    /// Applies the embedded migrations of this backend that have not run yet; returns how
    /// many ran.
    ///
    /// # Errors
    /// When a migration fails; it is rolled back and nothing after it runs.
    pub async fn migrate(&self) -> anyhow::Result<usize> {
        // The harness drives an async connection from synchronous code with `block_in_place`,
        // which needs a blocking-capable thread: give it one.
        let pool = self.pool.clone();
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || -> anyhow::Result<usize> {
            let _guard = handle.enter();
            let applied = match pool {
                DbPool::Pg(pools) => {
                    // A connection of its own, not one of a thread's pool.
                    let conn = handle
                        .block_on(AsyncPgConnection::establish(&pools.settings.url))
                        .context("no connection for migrations")?;
                    let mut harness = diesel_async::AsyncMigrationHarness::new(conn);
                    harness.run_pending_migrations(PG_MIGRATIONS).map_err(|e| anyhow::anyhow!("{e}"))?.len()
                }
                DbPool::Sqlite(sqlite) => {
                    // A connection of its own: migrations run before the service starts.
                    use diesel::Connection as _;
                    use diesel::connection::SimpleConnection as _;
                    let mut conn = diesel::SqliteConnection::establish(sqlite.path())
                        .context("no connection for migrations")?;
                    conn.batch_execute(&format!(
                        "PRAGMA busy_timeout = {}; PRAGMA foreign_keys = ON;",
                        sqlite.busy().as_millis()
                    ))
                    .context("setting up the migration connection")?;
                    conn.run_pending_migrations(SQLITE_MIGRATIONS).map_err(|e| anyhow::anyhow!("{e}"))?.len()
                }
            };
            Ok(applied)
        })
        .await
        .context("migration task panicked")?
    }
}

impl Database {
    /// How many rows `table` holds: for diagnostics and for tests that prove a failed operation
    /// left nothing behind. Only tables of this schema are accepted.
    ///
    /// # Errors
    /// For an unknown table, or when the query fails.
    pub async fn count_rows(&self, table: &str) -> anyhow::Result<i64> {
        const TABLES: &[&str] = &[
            "tenants",
            "users",
            "memberships",
            "credit_ledger",
            "refresh_tokens",
            "api_keys",
            "one_time_tokens",
            "rate_limit_counters",
            "agents",
            "chat_sessions",
            "chat_messages",
            "credit_holds",
            "purchases",
            "events",
            "jobs",
        ];
        anyhow::ensure!(TABLES.contains(&table), "unknown table {table:?}");
        #[derive(diesel::QueryableByName)]
        struct Count {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        let query = format!("SELECT COUNT(*) AS n FROM {table}");
        let row: Count = with_conn!(self, conn => {
            use diesel_async::RunQueryDsl as _;
            diesel::sql_query(&query).get_result(conn).await
        })?;
        Ok(row.n)
    }
}

fn pg_pool(settings: &DatabaseSettings, max_size: usize) -> anyhow::Result<Pool<AsyncPgConnection>> {
    let statement_timeout_ms = settings.statement_timeout.as_millis();
    let mut config = ManagerConfig::<AsyncPgConnection>::default();
    // A checkout costs no round trip: a connection the server closed fails its first query,
    // is marked broken and dropped by the pool, instead of every checkout paying a `SELECT 1`
    // to find out first (the default, which was a third of the queries of a GET).
    config.recycling_method = RecyclingMethod::Fast;
    config.custom_setup = Box::new(move |url| {
        async move {
            let mut conn = AsyncPgConnection::establish(url).await?;
            conn.batch_execute(&format!(
                "SET statement_timeout = {statement_timeout_ms}; SET plan_cache_mode = force_generic_plan"
            ))
            .await
            .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
            Ok(conn)
        }
        .boxed()
    });
    let manager = AsyncDieselConnectionManager::new_with_config(settings.url.clone(), config);
    Pool::builder(manager)
        .max_size(max_size)
        .wait_timeout(Some(settings.acquire_timeout))
        .create_timeout(Some(settings.acquire_timeout))
        .runtime(deadpool::Runtime::Tokio1)
        .build()
        .context("building the PostgreSQL pool")
}

/// Awaits a connection from a pool, recording the wait in `/metrics`.
pub(crate) async fn timed_acquire<T>(acquire: impl std::future::Future<Output = T>) -> T {
    let started = std::time::Instant::now();
    let conn = acquire.await;
    metrics::histogram!(agentry_domain::metrics::DB_ACQUIRE_DURATION).record(started.elapsed());
    conn
}

/// Takes a connection synchronously (a SQLite reader), recording the wait in `/metrics`.
pub(crate) fn timed<T>(acquire: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let conn = acquire();
    metrics::histogram!(agentry_domain::metrics::DB_ACQUIRE_DURATION).record(started.elapsed());
    conn
}

fn sqlite_path(url: &str) -> anyhow::Result<String> {
    let path = url.trim_start_matches("sqlite://").to_owned();
    anyhow::ensure!(!path.is_empty(), "the SQLite URL names no file: use sqlite://<path>");
    Ok(path)
}

/// Creates the database file, and its directory when missing, readable by this user only
/// (0600 in 0700): it holds password hashes and every tenant's data. SQLite gives its `-wal`
/// and `-shm` files the database file's permissions. An existing file is left as it is.
fn create_private_file(path: &Path) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
}

/// Splits the rows of a page query that also selects the total of the whole list (a subquery
/// evaluated once) into the page and the total: one query for both. An empty page says nothing
/// about the total unless it is the first, so then the total is `None` and the caller counts.
pub(crate) fn split_page<R>(
    rows: Vec<(R, i64)>,
    page: agentry_domain::pagination::Page,
) -> (Vec<R>, Option<i64>) {
    let total = match rows.first() {
        Some((_, total)) => Some(*total),
        None if page.offset() == 0 => Some(0),
        None => None,
    };
    (rows.into_iter().map(|(row, _)| row).collect(), total)
}

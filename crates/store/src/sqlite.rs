//! SQLite without hand-offs between threads.
//!
//! - **Reads run on the caller's thread.** Each connection of a small pool is an
//!   [`SqliteConn`]: diesel's synchronous connection behind diesel-async's traits, whose query
//!   futures are ready when made, so a repository's async query body runs right where it is
//!   awaited — no thread hop, no task. In WAL
//!   mode readers never wait for the writer, and these connections are `query_only`, so a read
//!   can never take the write lock.
//! - **Writes go to one writer thread**, which owns the only writing connection and takes units
//!   of work from a queue. Units that wait together share one `BEGIN IMMEDIATE … COMMIT` (group
//!   commit), each in a savepoint of its own, so one unit failing rolls back only its own
//!   changes. Nobody polls the lock with `busy_timeout`; a unit's caller gets its result after
//!   the commit, and a unit that was queued runs to its end even when its caller is gone.

use std::future::{Future, Ready, ready};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use diesel::connection::{Connection as _, LoadConnection, SimpleConnection as _};
use diesel::query_builder::{AsQuery, AstPass, Query, QueryFragment, QueryId};
use diesel::row::IntoOwnedRow;
use diesel::sqlite::{Sqlite as SqliteBackend, SqliteConnection};
use diesel::{QueryResult, sql_types};
use diesel_async::{AsyncConnectionCore, SimpleAsyncConnection};
use futures_util::future::BoxFuture;

use crate::error::StoreError;
use crate::pool_stats::PoolStats;
use crate::statements::{CachedBySql, uncacheable};

/// A SQLite connection that runs each query where it is awaited: diesel's synchronous
/// connection behind diesel-async's traits, so a repository's query body serves both backends.
/// Every future it returns is ready when made. Used only where blocking is fine: a reader on
/// the caller's thread (a short, indexed read), the writer on its own thread.
///
/// Unlike diesel-async's `SyncConnectionWrapper`, which moves each query to another thread and
/// so must write its SQL out and copy its binds every time, a query here stays typed: diesel's
/// statement cache finds it by type and the SQL is written once per connection. The queries
/// diesel will not cache by type are cached by their SQL (see [`crate::statements`]).
pub struct SqliteConn {
    conn: SqliteConnection,
}

/// Owned rows: the stream of a query must be `Send`, and diesel's borrowed SQLite rows are not.
type OwnedRow = <<SqliteConnection as LoadConnection>::Row<'static, 'static> as IntoOwnedRow<
    'static,
    SqliteBackend,
>>::OwnedRow;

impl SqliteConn {
    /// Inside a unit of work that stores work in `queue`: nothing to tell, as one process uses
    /// an SQLite file (its own workers are woken in-process; see [`crate::signals`]).
    #[allow(clippy::unused_async)]
    pub(crate) async fn announce(&mut self, _queue: crate::signals::WorkQueue) -> QueryResult<()> {
        Ok(())
    }

    fn establish(path: &str) -> anyhow::Result<Self> {
        let conn = SqliteConnection::establish(path)
            .with_context(|| format!("opening the SQLite database {path}"))?;
        Ok(Self { conn })
    }

    fn load_now<T>(&mut self, query: T) -> QueryResult<Vec<QueryResult<OwnedRow>>>
    where
        T: QueryFragment<SqliteBackend> + QueryId,
    {
        let mut cache = Default::default();
        let rows = if uncacheable(&query, &SqliteBackend) {
            self.conn.load(Untyped(CachedBySql(query)))?
        } else {
            self.conn.load(Untyped(query))?
        };
        let mut owned = Vec::with_capacity(rows.size_hint().0);
        for row in rows {
            owned.push(Ok(row?.into_owned(&mut cache)));
        }
        Ok(owned)
    }
}

/// A query with its row type left open. SQLite reads each column as the type the caller asks
/// for, so the synchronous `load` needs no row metadata; the query id stays the inner query's,
/// which keeps diesel's statement cache keyed by type.
struct Untyped<T>(T);

impl<T: QueryFragment<SqliteBackend>> QueryFragment<SqliteBackend> for Untyped<T> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, SqliteBackend>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, backend: &SqliteBackend) -> QueryResult<bool> {
        self.0.is_safe_to_cache_prepared(backend)
    }
}

impl<T: QueryId> QueryId for Untyped<T> {
    type QueryId = T::QueryId;
    const HAS_STATIC_QUERY_ID: bool = T::HAS_STATIC_QUERY_ID;
}

impl<T> Query for Untyped<T> {
    type SqlType = sql_types::Untyped;
}

impl SimpleAsyncConnection for SqliteConn {
    fn batch_execute(&mut self, query: &str) -> impl Future<Output = QueryResult<()>> + Send {
        ready(self.conn.batch_execute(query))
    }
}

impl AsyncConnectionCore for SqliteConn {
    type ExecuteFuture<'conn, 'query> = Ready<QueryResult<usize>>;
    type LoadFuture<'conn, 'query> = Ready<QueryResult<Self::Stream<'conn, 'query>>>;
    type Stream<'conn, 'query> = futures_util::stream::Iter<std::vec::IntoIter<QueryResult<OwnedRow>>>;
    type Row<'conn, 'query> = OwnedRow;
    type Backend = SqliteBackend;

    fn load<'conn, 'query, T>(&'conn mut self, source: T) -> Self::LoadFuture<'conn, 'query>
    where
        T: AsQuery + 'query,
        T::Query: QueryFragment<Self::Backend> + QueryId + 'query,
    {
        ready(self.load_now(source.as_query()).map(futures_util::stream::iter))
    }

    fn execute_returning_count<'conn, 'query, T>(
        &'conn mut self,
        source: T,
    ) -> Self::ExecuteFuture<'conn, 'query>
    where
        T: QueryFragment<Self::Backend> + QueryId + 'query,
    {
        ready(if uncacheable(&source, &SqliteBackend) {
            self.conn.execute_returning_count(&CachedBySql(source))
        } else {
            self.conn.execute_returning_count(&source)
        })
    }
}

/// Runs a future that completes on its first poll (a unit of work on the writer, whose every
/// query is an [`SqliteConn`]'s).
fn complete<T>(future: impl Future<Output = T>) -> T {
    futures_executor::block_on(future)
}

/// How much of a database file each connection maps into memory (1 GiB).
const MMAP_BYTES: u64 = 1 << 30;

fn open(path: &str, busy: Duration, read_only: bool) -> anyhow::Result<SqliteConn> {
    let mut conn = SqliteConn::establish(path)?;
    // busy_timeout first: even switching to WAL takes a lock. WAL lets readers run beside the
    // writer; foreign keys are off by default in SQLite. A reader is query_only: a write on it
    // is a bug, and fails loudly instead of fighting the writer for the lock. mmap_size: pages
    // are read from a mapping of the file instead of copied by a `pread` each into every
    // connection's own small page cache (a memory search over 100k entries spent a tenth of
    // its time in those copies); it reserves address space, not memory.
    let pragmas = format!(
        "PRAGMA busy_timeout = {}; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
         PRAGMA foreign_keys = ON; PRAGMA query_only = {}; PRAGMA mmap_size = {MMAP_BYTES};",
        busy.as_millis(),
        if read_only { "ON" } else { "OFF" }
    );
    conn.conn.batch_execute(&pragmas).context("setting up a SQLite connection")?;
    Ok(conn)
}

/// The statistics `/metrics` reports.
#[derive(Debug, Default)]
pub struct SqliteStats {
    /// Reader connections open.
    pub readers: AtomicUsize,
    /// Reader connections in use.
    pub readers_in_use: AtomicUsize,
    /// Units of work waiting for the writer.
    pub queued_writes: AtomicUsize,
    /// Transactions the writer committed.
    pub commits: AtomicUsize,
    /// Units of work the writer ran.
    pub units: AtomicUsize,
}

/// The readers and the writer of one SQLite database.
pub struct Sqlite {
    path: String,
    busy: Duration,
    max_readers: usize,
    idle: Mutex<Vec<SqliteConn>>,
    returned: Condvar,
    /// Callers waiting for a reader, guarded by `idle`'s lock: a returned reader wakes someone
    /// only when someone waits (a wake-up is a system call even when nobody sleeps).
    waiters: AtomicUsize,
    writer: Mutex<Sender<WriteUnit>>,
    pub(crate) stats: Arc<SqliteStats>,
}

impl std::fmt::Debug for Sqlite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sqlite").field("path", &self.path).finish_non_exhaustive()
    }
}

/// A reader connection, back to the pool when dropped.
pub struct Reader<'a> {
    db: &'a Sqlite,
    conn: Option<SqliteConn>,
}

impl std::ops::Deref for Reader<'_> {
    type Target = SqliteConn;
    fn deref(&self) -> &SqliteConn {
        self.conn.as_ref().expect("a reader holds its connection until dropped")
    }
}

impl std::ops::DerefMut for Reader<'_> {
    fn deref_mut(&mut self) -> &mut SqliteConn {
        self.conn.as_mut().expect("a reader holds its connection until dropped")
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let mut idle = self.db.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            idle.push(conn);
            self.db.stats.readers_in_use.fetch_sub(1, Ordering::Relaxed);
            let someone_waits = self.db.waiters.load(Ordering::Relaxed) > 0;
            drop(idle);
            if someone_waits {
                self.db.returned.notify_one();
            }
        }
    }
}

/// What the writer thread runs: a unit's body, which reports after the commit.
type WriteUnit = Box<dyn for<'c> FnOnce(&'c mut SqliteConn) -> BoxFuture<'c, Settle> + Send>;

/// A unit that ran: whether it failed (its savepoint is rolled back), and how to tell its
/// caller once the group's commit is known.
struct Settle {
    failed: bool,
    report: Box<dyn FnOnce(Result<(), String>) + Send>,
}

/// Most units in one group commit.
const MAX_GROUP: usize = 64;

impl Sqlite {
    /// Opens the database at `path` (created by the caller) and starts its writer thread.
    ///
    /// # Errors
    /// When the writer's connection cannot be opened.
    pub fn open(path: &str, max_readers: usize, busy: Duration) -> anyhow::Result<Arc<Self>> {
        let writer_conn = open(path, busy, false)?;
        let (tx, rx) = channel::<WriteUnit>();
        let stats = Arc::new(SqliteStats::default());
        let thread_stats = stats.clone();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || writer_loop(writer_conn, &rx, &thread_stats))
            .context("starting the SQLite writer thread")?;
        Ok(Arc::new(Self {
            path: path.to_owned(),
            busy,
            max_readers: max_readers.max(1),
            idle: Mutex::new(Vec::new()),
            returned: Condvar::new(),
            waiters: AtomicUsize::new(0),
            writer: Mutex::new(tx),
            stats,
        }))
    }

    /// The readers and the writer's queue, for `/metrics`.
    pub(crate) fn pool_stats(&self) -> PoolStats {
        let load = |n: &AtomicUsize| n.load(Ordering::Relaxed);
        PoolStats {
            max: self.max_readers,
            open: load(&self.stats.readers),
            in_use: load(&self.stats.readers_in_use),
            waiting: load(&self.waiters),
            queued_writes: load(&self.stats.queued_writes),
            commits: load(&self.stats.commits) as u64,
            write_units: load(&self.stats.units) as u64,
        }
    }

    /// The database file.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// How long a statement waits for a lock, and a caller for a reader.
    pub fn busy(&self) -> Duration {
        self.busy
    }

    /// A reader connection: an idle one, a new one while fewer than the maximum are open, or
    /// the next one returned.
    ///
    /// # Errors
    /// When a new connection cannot be opened, or none is returned within the busy timeout.
    pub fn reader(&self) -> Result<Reader<'_>, StoreError> {
        let mut idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut deadline = None;
        loop {
            if let Some(conn) = idle.pop() {
                self.stats.readers_in_use.fetch_add(1, Ordering::Relaxed);
                return Ok(Reader { db: self, conn: Some(conn) });
            }
            if self.stats.readers.load(Ordering::Relaxed) < self.max_readers {
                self.stats.readers.fetch_add(1, Ordering::Relaxed);
                drop(idle);
                return match open(&self.path, self.busy, true) {
                    Ok(conn) => {
                        self.stats.readers_in_use.fetch_add(1, Ordering::Relaxed);
                        Ok(Reader { db: self, conn: Some(conn) })
                    }
                    Err(e) => {
                        self.stats.readers.fetch_sub(1, Ordering::Relaxed);
                        Err(StoreError::Pool(format!("{e:#}")))
                    }
                };
            }
            let now = Instant::now();
            let deadline = *deadline.get_or_insert(now + self.busy);
            if now >= deadline {
                return Err(StoreError::Pool("no SQLite reader connection was free in time".into()));
            }
            self.waiters.fetch_add(1, Ordering::Relaxed);
            idle = self
                .returned
                .wait_timeout(idle, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
            self.waiters.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Runs `body` on the writer thread, in a savepoint of the next group commit, and answers
    /// its result once that commit is durable. An `Err` from `body` rolls back its changes
    /// only. The unit runs to its end even if this future is dropped.
    ///
    /// # Errors
    /// The body's error; or the commit's, which fails every unit of the group.
    pub async fn write<T, F>(&self, body: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConn) -> BoxFuture<'c, Result<T, StoreError>> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel::<Result<T, StoreError>>();
        let unit: WriteUnit = Box::new(move |conn| {
            Box::pin(async move {
                let result = body(conn).await;
                Settle {
                    failed: result.is_err(),
                    report: Box::new(move |commit| {
                        let answer = match commit {
                            Ok(()) => result,
                            Err(e) => Err(result.err().unwrap_or(StoreError::Commit(e))),
                        };
                        let _ = tx.send(answer);
                    }),
                }
            })
        });
        self.stats.queued_writes.fetch_add(1, Ordering::Relaxed);
        let sent = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner).send(unit);
        if sent.is_err() {
            self.stats.queued_writes.fetch_sub(1, Ordering::Relaxed);
            return Err(StoreError::Pool("the SQLite writer has stopped".into()));
        }
        rx.await.unwrap_or_else(|_| Err(StoreError::Pool("the SQLite writer dropped a unit of work".into())))
    }
}

fn writer_loop(mut conn: SqliteConn, rx: &Receiver<WriteUnit>, stats: &SqliteStats) {
    while let Ok(first) = rx.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(unit) => group.push(unit),
                Err(_) => break,
            }
        }
        stats.queued_writes.fetch_sub(group.len(), Ordering::Relaxed);
        stats.units.fetch_add(group.len(), Ordering::Relaxed);
        run_group(&mut conn, group);
        stats.commits.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs a group of units in one transaction, each in a savepoint, and reports to their callers
/// after the commit. A unit that could not run (no transaction, no savepoint, a panic) is
/// dropped: its caller hears that the writer dropped it.
fn run_group(conn: &mut SqliteConn, group: Vec<WriteUnit>) {
    let exec =
        |conn: &mut SqliteConn, sql: &str| complete(conn.batch_execute(sql)).map_err(|e| e.to_string());
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
        tracing::error!(error = %e, units = group.len(), "the SQLite writer could not begin a transaction");
        return;
    }
    let mut reports = Vec::with_capacity(group.len());
    for unit in group {
        if let Err(e) = exec(conn, "SAVEPOINT unit") {
            tracing::error!(error = %e, "the SQLite writer could not make a savepoint");
            continue;
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| complete(unit(conn)))) {
            Ok(settle) => {
                let end = if settle.failed { "ROLLBACK TO unit; RELEASE unit" } else { "RELEASE unit" };
                if let Err(e) = exec(conn, end) {
                    tracing::error!(error = %e, "ending a savepoint failed");
                }
                reports.push(settle.report);
            }
            Err(_) => {
                let _ = exec(conn, "ROLLBACK TO unit; RELEASE unit");
                tracing::error!("a unit of work panicked on the SQLite writer; its changes are rolled back");
            }
        }
    }
    let commit = exec(conn, "COMMIT");
    if commit.is_err() {
        let _ = exec(conn, "ROLLBACK");
    }
    for report in reports {
        report(commit.clone());
    }
}

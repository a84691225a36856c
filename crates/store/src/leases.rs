//! What every lease queue (jobs, webhook deliveries, workflow executions) shares: the one
//! claim statement, when a row's lease is free to take, and the instances whose heartbeats keep
//! their leases held.
//!
//! A lease is free when it was never taken, when it ran out, or when the instance that took it
//! has not beaten its heartbeat since `stale_before` (it crashed or was killed): work such an
//! instance held is taken over in seconds, not when its lease runs out.
//!
//! A claim is one `UPDATE … WHERE id IN (chosen) … RETURNING`. On PostgreSQL the rows are chosen
//! `FOR UPDATE SKIP LOCKED`, so concurrent workers of several instances pick disjoint rows
//! without waiting on each other; the outer `WHERE` repeats the condition, so a row that another
//! worker claimed between the two is re-checked and skipped. SQLite runs one write transaction
//! at a time, so the same statement is enough there.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::ExpressionMethods as _;
use diesel::QueryDsl as _;
use diesel_async::RunQueryDsl as _;

use agentry_domain::work::{Claimed, InstanceRegistry, Lease};

use crate::database::{Backend, Database};
use crate::schema::{event_consumers, instances, jobs, webhook_deliveries, workflow_executions};
use crate::types::DbTime;

/// A lease queue's table, as its claim reads it. Its SQL may use the claim's placeholders (see
/// [`ClaimParams`]): `now` is parameter 3; a queue's own parameters start at 7.
pub(crate) struct QueueTable {
    /// The table.
    pub(crate) table: &'static str,
    /// What makes a row due, besides a free lease.
    pub(crate) due: String,
    /// The order rows are claimed in (oldest due first).
    pub(crate) order_by: &'static str,
    /// The column that counts claims.
    pub(crate) counter: &'static str,
    /// More assignments of the claim (`status = 'running'`), or nothing.
    pub(crate) also_set: String,
    /// The columns the claim returns.
    pub(crate) returning: &'static str,
    /// A share: rows are grouped by this column (the tenant), and a claim takes a group's rows
    /// only while fewer than this many of its due rows are held under live leases.
    pub(crate) share: Option<(&'static str, u32)>,
}

/// Placeholder `n` of `backend`: numbered, so both read it (`$n` on PostgreSQL, `?n` on SQLite).
pub(crate) fn param(backend: Backend, n: u8) -> String {
    match backend {
        Backend::Postgres => format!("${n}"),
        Backend::Sqlite => format!("?{n}"),
    }
}

/// The claim statement of `queue`, the one every lease queue runs. The due rows are chosen once,
/// in a materialised CTE: as a subquery of the `UPDATE`, PostgreSQL may choose again for each
/// row and, seeing the rows it has just leased as taken, claim more than the limit.
fn claim_sql(queue: &QueueTable, backend: Backend) -> String {
    let p = |n: u8| param(backend, n);
    let lock = match backend {
        Backend::Postgres => "FOR UPDATE SKIP LOCKED",
        Backend::Sqlite => "",
    };
    let QueueTable { table, due, order_by, counter, also_set, returning, share } = queue;
    let free = free_sql(&p(3), &p(6));
    let claimable = format!("({due}) AND {free}");
    let also_set = if also_set.is_empty() { String::new() } else { format!(", {also_set}") };
    // With a share: groups that hold their share already are left out; of the first claimable
    // rows of the others (in claim order, as many as the claim could take and a share more),
    // each group's are numbered, and only those that keep the group within its share, counting
    // the rows it holds, are candidates. Bounded so, a claim costs the same with a backlog of
    // thousands. (The numbering is a window function, which a locking `SELECT` may not use: it
    // is a subquery of the one that locks.)
    let candidates = match share {
        None => format!("{table} WHERE {claimable}"),
        Some((group, share)) => {
            // Held rows, counted per group once per claim: a live lease ends after `now`, so
            // the index on running rows' lease ends finds them without reading the backlog.
            let held = format!("({due}) AND {}", held_sql(&p(3), &p(6)));
            let counts = format!("SELECT {group}, count(*) AS n FROM {table} WHERE {held} GROUP BY {group}");
            format!(
                "{table} WHERE id IN (SELECT id FROM (SELECT firsts.id, \
                 row_number() OVER (PARTITION BY firsts.{group} ORDER BY firsts.{order_by}, firsts.id) AS nth, \
                 COALESCE(counts.n, 0) AS held \
                 FROM (SELECT id, {group}, {order_by} FROM {table} WHERE {claimable} \
                 AND {group} NOT IN (SELECT {group} FROM ({counts}) full_groups WHERE n >= {share}) \
                 ORDER BY {order_by}, id LIMIT {limit} + {share}) firsts \
                 LEFT JOIN ({counts}) counts ON counts.{group} = firsts.{group}) ranked \
                 WHERE nth + held <= {share})",
                limit = p(4),
            )
        }
    };
    format!(
        "WITH chosen AS MATERIALIZED (SELECT id FROM {candidates} ORDER BY {order_by} LIMIT {limit} {lock}) \
         UPDATE {table} SET lease_token = {token}, lease_until = {until}, lease_owner = {owner}, \
         {counter} = {counter} + 1, updated_at = {now}{also_set} \
         WHERE id IN (SELECT id FROM chosen) AND {claimable} \
         RETURNING {returning}",
        token = p(1),
        until = p(2),
        now = p(3),
        limit = p(4),
        owner = p(5),
    )
}

/// The parameters every claim binds first, in order: the lease's token (1) and end (2), `now`
/// (3), the limit (4), the claiming instance (5) and the oldest heartbeat of a live instance
/// (6). Bound by [`claim!`].
pub(crate) struct ClaimParams {
    pub(crate) token: String,
    pub(crate) until: DbTime,
    pub(crate) now: DbTime,
    pub(crate) limit: i64,
    pub(crate) owner: Option<String>,
    pub(crate) stale_before: DbTime,
}

/// A claim of the queue `queue` builds for `db`'s backend: its statement, and the parameters
/// it binds first (this instance as the owner, `lease`, `now`, at most `limit` items).
pub(crate) fn prepare_claim(
    db: &Database,
    queue: impl FnOnce(Backend) -> QueueTable,
    lease: &Lease,
    now: DateTime<Utc>,
    limit: u32,
) -> (String, ClaimParams) {
    let backend = db.backend();
    (claim_sql(&queue(backend), backend), ClaimParams::new(db, lease, now, limit))
}

/// An item claimed under `lease`, with its claim count as stored.
pub(crate) fn claimed<T>(item: T, claims: i64, lease: &Lease) -> Claimed<T> {
    Claimed { item, claims: u32::try_from(claims).unwrap_or(u32::MAX), lease: lease.clone() }
}

impl ClaimParams {
    fn new(db: &Database, lease: &Lease, now: DateTime<Utc>, limit: u32) -> Self {
        let (owner, stale_before) = db.lease_owner();
        Self {
            token: lease.token.clone(),
            until: DbTime(lease.until),
            now: DbTime(now),
            limit: i64::from(limit),
            owner,
            stale_before: DbTime(stale_before),
        }
    }
}

/// The condition, in SQL, that a row's lease is free at `now`, with the placeholders of the
/// claim it is part of for `now` and `stale_before`.
fn free_sql(now: &str, stale_before: &str) -> String {
    format!(
        "(lease_until IS NULL OR lease_until < {now} OR (lease_owner IS NOT NULL AND lease_owner NOT IN \
         (SELECT id FROM instances WHERE heartbeat_at >= {stale_before})))"
    )
}

/// The condition, in SQL, that a row's lease is held (the negation of [`free_sql`]), written
/// so that an index on the lease's end serves it: the lease ends after `now`, and its
/// instance, if it names one, is alive.
fn held_sql(now: &str, stale_before: &str) -> String {
    format!(
        "(lease_until >= {now} AND (lease_owner IS NULL OR lease_owner IN \
         (SELECT id FROM instances WHERE heartbeat_at >= {stale_before})))"
    )
}

/// The running instances of the service, by their heartbeats.
///
/// On PostgreSQL a heartbeat is the database's `now()`, not the beating host's clock, and the
/// claims of every instance judge heartbeats by that clock too (each beat reads how far it is
/// from the host's): hosts whose clocks disagree by more than the instance timeout would
/// otherwise see each other as dead and take over each other's work. SQLite has one process,
/// and its own clock.
///
/// Each beat also records the instance's setting fingerprints (see
/// [`InstanceStore::with_fingerprints`]), which [`InstanceStore::disagreements`] compares.
#[derive(Debug, Clone)]
pub struct InstanceStore {
    db: Database,
    /// This instance's fingerprints, by setting name.
    fingerprints: BTreeMap<String, String>,
}

impl InstanceStore {
    /// A registry over `db`.
    pub fn new(db: Database) -> Self {
        Self { db, fingerprints: BTreeMap::new() }
    }

    /// The registry of an instance whose settings that must agree across instances have these
    /// fingerprints (by setting name; never the values themselves).
    #[must_use]
    pub fn with_fingerprints(mut self, fingerprints: BTreeMap<String, String>) -> Self {
        self.fingerprints = fingerprints;
        self
    }

    /// The settings on which a live instance of this database (heartbeat within the instance
    /// timeout) disagrees with this one, by name, sorted: an instance that recorded no
    /// fingerprint of a setting does not disagree on it.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn disagreements(&self) -> anyhow::Result<Vec<String>> {
        let (own, live_since) = self.db.lease_owner();
        let others: Vec<String> = transaction!(self.db, conn => Ok::<_, crate::database::StoreError>(
            instances::table
                .filter(instances::heartbeat_at.ge(DbTime(live_since)))
                .filter(instances::id.ne(own.clone().unwrap_or_default()))
                .select(instances::fingerprints)
                .load(conn)
                .await?
        ))?;
        let mut differing = std::collections::BTreeSet::new();
        for recorded in others {
            let theirs: BTreeMap<String, String> = serde_json::from_str(&recorded).unwrap_or_default();
            for (setting, fingerprint) in &self.fingerprints {
                if theirs.get(setting).is_some_and(|f| f != fingerprint) {
                    differing.insert(setting.clone());
                }
            }
        }
        Ok(differing.into_iter().collect())
    }

    /// Frees every lease of every queue; how many. Only for a database one process uses
    /// (SQLite), at that process's start: whatever is held was held by a process now gone.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn free_all_leases(&self) -> anyhow::Result<u64> {
        // Running jobs are due again once their lease has run out: the epoch has.
        let past = DbTime(DateTime::<Utc>::UNIX_EPOCH);
        let freed = transaction!(self.db, conn => {
            let jobs = diesel::update(jobs::table.filter(jobs::lease_until.is_not_null()))
                .set((jobs::lease_until.eq(past), jobs::lease_owner.eq(None::<String>)))
                .execute(conn)
                .await?;
            let deliveries = diesel::update(webhook_deliveries::table.filter(webhook_deliveries::lease_until.is_not_null()))
                .set((webhook_deliveries::lease_until.eq(past), webhook_deliveries::lease_owner.eq(None::<String>)))
                .execute(conn)
                .await?;
            let executions = diesel::update(workflow_executions::table.filter(workflow_executions::lease_until.is_not_null()))
                .set((workflow_executions::lease_until.eq(past), workflow_executions::lease_owner.eq(None::<String>)))
                .execute(conn)
                .await?;
            let consumers = diesel::update(event_consumers::table.filter(event_consumers::lease_until.is_not_null()))
                .set((event_consumers::lease_until.eq(None::<DbTime>), event_consumers::lease_owner.eq(None::<String>)))
                .execute(conn)
                .await?;
            Ok::<_, crate::database::StoreError>(jobs + deliveries + executions + consumers)
        })?;
        Ok(u64::try_from(freed).unwrap_or(0))
    }
}

/// The database's clock, read by a heartbeat.
#[derive(diesel::QueryableByName)]
struct DatabaseNow {
    #[diesel(sql_type = crate::types::UtcTime)]
    now: DbTime,
}

/// Instances silent for this long are forgotten (their leases were free long before).
const FORGET_AFTER: chrono::Duration = chrono::Duration::hours(1);

#[async_trait]
impl InstanceRegistry for InstanceStore {
    async fn beat(
        &self,
        id: &str,
        now: DateTime<Utc>,
        silent_before: DateTime<Utc>,
    ) -> anyhow::Result<Vec<String>> {
        let id = id.to_owned();
        let backend = self.db.backend();
        let fingerprints = serde_json::to_string(&self.fingerprints)?;
        let silent = transaction!(self.db, conn => {
            // The database's clock where instances share it: `now` and `silent_before`, read
            // from this host's clock, move by how far that is from the database's.
            let skew = match backend {
                Backend::Postgres => {
                    let database = diesel::sql_query("SELECT now() AS now").get_result::<DatabaseNow>(conn).await?.now;
                    database.0 - Utc::now()
                }
                Backend::Sqlite => chrono::Duration::zero(),
            };
            let at = DbTime(now + skew);
            let (forget_before, silent_before) = (DbTime(at.0 - FORGET_AFTER), DbTime(silent_before + skew));
            diesel::insert_into(instances::table)
                .values((
                    instances::id.eq(&id),
                    instances::started_at.eq(at),
                    instances::heartbeat_at.eq(at),
                    instances::fingerprints.eq(&fingerprints),
                ))
                .on_conflict(instances::id)
                .do_update()
                .set((instances::heartbeat_at.eq(at), instances::fingerprints.eq(&fingerprints)))
                .execute(conn)
                .await?;
            diesel::delete(instances::table.filter(instances::heartbeat_at.lt(forget_before))).execute(conn).await?;
            let silent: Vec<String> = instances::table
                .filter(instances::heartbeat_at.lt(silent_before))
                .select(instances::id)
                .load(conn)
                .await?;
            Ok::<_, crate::database::StoreError>((silent, skew))
        })?;
        let (silent, skew) = silent;
        if let Some(instance) = &self.db.instance {
            instance.clock_offset_ms.store(skew.num_milliseconds(), std::sync::atomic::Ordering::Relaxed);
        }
        Ok(silent)
    }

    async fn leave(&self, id: &str) -> anyhow::Result<()> {
        let id = id.to_owned();
        transaction!(self.db, conn => Ok::<_, crate::database::StoreError>(
            diesel::delete(instances::table.filter(instances::id.eq(&id))).execute(conn).await?
        ))?;
        Ok(())
    }
}

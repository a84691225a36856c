//! [`JobQueue`]: the job table, claimed with leases.
//!
//! A claim is one `UPDATE … WHERE id IN (due jobs) … RETURNING`. On PostgreSQL the inner
//! select takes `FOR UPDATE SKIP LOCKED`, so concurrent workers of several instances pick
//! disjoint jobs without waiting on each other; the outer `WHERE` repeats the due condition, so
//! a row that another worker claimed between the two is re-checked and skipped. SQLite runs one
//! write transaction at a time, so the same statement is enough there.

use agentry_domain::ids::JobId;
use agentry_domain::jobs::{ClaimedJob, JobKind, JobOutcome, JobQueue, Lease, NewJob};
use agentry_domain::metrics::{Backlog, QueueBacklog};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::{Backend, Database};
use crate::schema::jobs;
use crate::types::{DbJson, DbJsonAs, DbTime};

/// Jobs in the database.
#[derive(Debug, Clone)]
pub struct JobStore {
    db: Database,
}

impl JobStore {
    /// A queue over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// Jobs waiting or running (not failed), for metrics and tests.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn pending(&self) -> anyhow::Result<i64> {
        let n = with_conn!(self.db, conn => jobs::table.filter(jobs::status.ne(FAILED)).count().get_result(conn).await)?;
        Ok(n)
    }
}

#[async_trait]
impl QueueBacklog for JobStore {
    async fn backlog(&self, now: DateTime<Utc>) -> anyhow::Result<Vec<Backlog>> {
        let mut backlogs = Vec::with_capacity(JobKind::ALL.len());
        for kind in JobKind::ALL {
            let (depth, oldest): (i64, Option<DbTime>) = with_conn!(self.db, conn => {
                let of_kind = jobs::table.filter(jobs::kind.eq(kind.as_str()));
                let depth = of_kind
                    .filter(jobs::status.eq_any([QUEUED, RUNNING]))
                    .count()
                    .get_result(conn)
                    .await?;
                let oldest = of_kind
                    .filter(jobs::status.eq(QUEUED).and(jobs::run_at.le(DbTime(now))))
                    .order(jobs::run_at.asc())
                    .select(jobs::run_at)
                    .first(conn)
                    .await
                    .optional()?;
                Ok::<_, diesel::result::Error>((depth, oldest))
            })?;
            backlogs.push(Backlog::new(kind.as_str(), depth, oldest.map(|t| t.0), now));
        }
        Ok(backlogs)
    }
}

const QUEUED: &str = "queued";
const RUNNING: &str = "running";
const FAILED: &str = "failed";

#[derive(QueryableByName)]
struct ClaimedRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    id: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    kind: String,
    #[diesel(sql_type = crate::types::Json)]
    payload: DbJson,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    attempts: i64,
}

/// The claim statement: the due jobs chosen once, in a materialised CTE (as a subquery of the
/// `UPDATE`, PostgreSQL may choose again for each row and, seeing the rows it has just leased
/// as taken, claim more than the limit). The kinds are filled in as quoted names of [`JobKind`]s (constants of
/// this crate, never input); `lock` is PostgreSQL's row locking. Placeholders are numbered so
/// both backends read them (`$n` on PostgreSQL, `?n` on SQLite).
fn claim_sql(kinds: &[JobKind], placeholder: char, lock: &str) -> String {
    let kinds = kinds.iter().map(|k| format!("'{}'", k.as_str())).collect::<Vec<_>>().join(", ");
    let p = |n: u8| format!("{placeholder}{n}");
    let due = format!(
        "((status = '{QUEUED}' AND run_at <= {now}) OR (status = '{RUNNING}' AND {free}))",
        now = p(3),
        free = crate::leases::free_sql(&p(3), &p(6)),
    );
    format!(
        "WITH chosen AS MATERIALIZED (SELECT id FROM jobs WHERE kind IN ({kinds}) AND {due} ORDER BY run_at LIMIT {limit} {lock}) \
         UPDATE jobs SET status = '{RUNNING}', lease_token = {token}, lease_until = {until}, \
         lease_owner = {owner}, attempts = attempts + 1, updated_at = {now} \
         WHERE id IN (SELECT id FROM chosen) AND {due} \
         RETURNING id, kind, payload, attempts",
        token = p(1),
        until = p(2),
        now = p(3),
        limit = p(4),
        owner = p(5),
    )
}

/// The job, while it is still held under `token`.
#[diesel::dsl::auto_type(no_type_alias)]
fn held<'a>(job: &'a str, token: &'a str) -> _ {
    let running: &'static str = RUNNING;
    jobs::table.filter(jobs::id.eq(job)).filter(jobs::status.eq(running)).filter(jobs::lease_token.eq(token))
}

#[async_trait]
impl JobQueue for JobStore {
    async fn enqueue(&self, job: &NewJob) -> anyhow::Result<()> {
        let job = job.clone();
        transaction!(self.db, conn => Ok(diesel::insert_into(jobs::table)
            .values((
                jobs::id.eq(job.id.as_str()),
                jobs::kind.eq(job.kind.as_str()),
                jobs::payload.eq(DbJsonAs(job.payload.clone())),
                jobs::status.eq(QUEUED),
                jobs::attempts.eq(0_i64),
                jobs::run_at.eq(DbTime(job.run_at)),
                jobs::created_at.eq(DbTime(job.created_at)),
                jobs::updated_at.eq(DbTime(job.created_at)),
            ))
            .execute(conn)
            .await?))?;
        Ok(())
    }

    async fn claim(
        &self,
        kinds: &[JobKind],
        lease: &Lease,
        now: DateTime<Utc>,
        limit: u32,
    ) -> anyhow::Result<Vec<ClaimedJob>> {
        use diesel::sql_types::{BigInt, Text};

        use crate::types::UtcTime;
        if kinds.is_empty() {
            return Ok(Vec::new());
        }
        let limit = i64::from(limit);
        // The same statement on either backend; only the placeholders and the locking differ.
        let sql = match self.db.backend() {
            Backend::Postgres => claim_sql(kinds, '$', "FOR UPDATE SKIP LOCKED"),
            Backend::Sqlite => claim_sql(kinds, '?', ""),
        };
        let (token, until) = (lease.token.clone(), DbTime(lease.until));
        let (owner, stale_before) = self.db.lease_owner();
        let (now, stale_before) = (DbTime(now), DbTime(stale_before));
        let rows: Vec<ClaimedRow> = transaction!(self.db, conn => Ok(diesel::sql_query(sql)
            .bind::<Text, _>(token)
            .bind::<UtcTime, _>(until)
            .bind::<UtcTime, _>(now)
            .bind::<BigInt, _>(limit)
            .bind::<diesel::sql_types::Nullable<Text>, _>(owner)
            .bind::<UtcTime, _>(stale_before)
            .load(conn)
            .await?))?;
        rows.into_iter()
            .map(|r| {
                Ok(ClaimedJob {
                    kind: JobKind::parse(&r.kind)
                        .ok_or_else(|| anyhow::anyhow!("stored job kind {:?} is unknown", r.kind))?,
                    id: JobId::from_string(r.id),
                    payload: r.payload.0,
                    attempt: u32::try_from(r.attempts).unwrap_or(u32::MAX),
                    lease: lease.clone(),
                })
            })
            .collect()
    }

    async fn finish(
        &self,
        job: &JobId,
        lease: &Lease,
        outcome: &JobOutcome,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let (job, token, now) = (job.clone(), lease.token.clone(), DbTime(now));
        let (status, run_at, error) = match outcome {
            JobOutcome::Done => {
                // A finished job has nothing left to say (and a mail job names an address).
                let deleted = transaction!(self.db, conn => Ok(diesel::delete(held(job.as_str(), &token)).execute(conn).await?))?;
                return Ok(deleted == 1);
            }
            JobOutcome::RetryAt { at, error } => (QUEUED, DbTime(*at), error.clone()),
            JobOutcome::Failed { error } => (FAILED, now, error.clone()),
        };
        let changed = transaction!(self.db, conn => Ok(diesel::update(held(job.as_str(), &token))
            .set((
                jobs::status.eq(status),
                jobs::run_at.eq(run_at),
                jobs::lease_token.eq(None::<String>),
                jobs::lease_until.eq(None::<DbTime>),
                jobs::last_error.eq(error),
                jobs::updated_at.eq(now),
            ))
            .execute(conn)
            .await?))?;
        Ok(changed == 1)
    }
}

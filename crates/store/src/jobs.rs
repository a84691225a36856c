//! [`JobQueue`]: the job table, a lease queue claimed by the one claim statement
//! ([`crate::leases`]).

use agentry_domain::ids::JobId;
use agentry_domain::jobs::{JobKind, JobOutcome, JobQueue, NewJob, QueuedJob};
use agentry_domain::metrics::{Backlog, QueueBacklog};
use agentry_domain::work::{Claimed, Lease, LeaseQueue};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::{Backend, Database, StoreError};
use crate::leases::{QueueTable, claimed, param, prepare_claim};
use crate::schema::jobs;
use crate::signals::WorkQueue;
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

    /// The attempts made of the jobs still stored, for tests.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn attempts(&self) -> anyhow::Result<i64> {
        let n: Option<i64> = with_conn!(self.db, conn => jobs::table.select(diesel::dsl::max(jobs::attempts)).get_result(conn).await)?;
        Ok(n.unwrap_or(0))
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
    claims: i64,
}

/// The job table as a lease queue: queued jobs whose time has come, and running ones whose
/// lease is free (their worker died); a claim marks them running and counts an attempt.
fn job_table(backend: Backend) -> QueueTable {
    QueueTable {
        table: "jobs",
        due: format!(
            "(status = '{QUEUED}' AND run_at <= {now}) OR status = '{RUNNING}'",
            now = param(backend, 3)
        ),
        order_by: "run_at",
        counter: "attempts",
        also_set: format!("status = '{RUNNING}'"),
        returning: "id, kind, payload, attempts AS claims",
        share: None,
    }
}

/// The job, while it is still held under `token`.
#[diesel::dsl::auto_type(no_type_alias)]
fn held<'a>(job: &'a str, token: &'a str) -> _ {
    let running: &'static str = RUNNING;
    jobs::table.filter(jobs::id.eq(job)).filter(jobs::status.eq(running)).filter(jobs::lease_token.eq(token))
}

#[async_trait]
impl LeaseQueue<QueuedJob> for JobStore {
    async fn claim(
        &self,
        lease: &Lease,
        now: DateTime<Utc>,
        limit: u32,
    ) -> anyhow::Result<Vec<Claimed<QueuedJob>>> {
        let (sql, params) = prepare_claim(&self.db, job_table, lease, now, limit);
        let rows: Vec<ClaimedRow> =
            transaction!(self.db, conn => Ok::<_, StoreError>(claim!(conn, sql, params).await?))?;
        let mut taken = Vec::with_capacity(rows.len());
        for r in rows {
            let id = JobId::from_string(r.id);
            let Some(kind) = JobKind::parse(&r.kind) else {
                // A kind this version does not know (written by a newer one, or by hand) can
                // never run here: failed at once, so it neither blocks the queue nor comes back.
                let error = format!("unknown job kind {:?}", r.kind);
                tracing::error!(job = %id, %error, "failing a job that cannot be read");
                self.finish(&id, lease, &JobOutcome::Failed { error }, now).await?;
                continue;
            };
            taken.push(claimed(QueuedJob { kind, id, payload: r.payload.0 }, r.claims, lease));
        }
        Ok(taken)
    }
}

#[async_trait]
impl JobQueue for JobStore {
    async fn enqueue(&self, job: &NewJob) -> anyhow::Result<()> {
        let job = job.clone();
        transaction!(self.db, conn => {
            diesel::insert_into(jobs::table)
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
                .await?;
            conn.announce(WorkQueue::Jobs).await?;
            Ok::<_, StoreError>(())
        })?;
        self.db.stored(WorkQueue::Jobs);
        Ok(())
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

//! [`ExecutionRepository`]: workflow executions, their step results, and the worker's claims.
//!
//! Running executions are a lease queue claimed through the one claim statement
//! ([`crate::leases`]), as jobs and webhook deliveries are. Every
//! change a worker makes afterwards is applied only while the row carries its lease token, and
//! a step's result and the execution's end (with its event) are one transaction.

use agentry_domain::ids::{ExecutionId, TenantId, WorkflowId};
use agentry_domain::metrics::{Backlog, QueueBacklog};
use agentry_domain::pagination::Page;
use agentry_domain::work::{Lease, LeaseQueue};
use agentry_domain::workflows::{
    After, CANCELLED_WAIT_ERROR, ClaimedExecution, EXECUTION_QUEUE, Execution, ExecutionRepository,
    ExecutionRun, ExecutionStatus, NewExecution, Started, StepResult, StepStatus, steps_to_json,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::{Backend, Database, StoreError, split_page};
use crate::events::EventRow;
use crate::leases::{QueueTable, param, prepare_claim};
use crate::schema::{events, workflow_executions, workflow_step_results};
use crate::signals::WorkQueue;
use crate::types::{DbJsonAs, DbTime};

/// Executions in the database.
#[derive(Debug, Clone)]
pub struct ExecutionStore {
    db: Database,
    /// Most executions of one tenant a claim lets run at once (all instances together).
    tenant_share: Option<u32>,
}

impl ExecutionStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db, tenant_share: None }
    }

    /// The repository whose claims let at most `share` executions of one tenant run at once,
    /// on all instances together: one tenant's burst (or a chain of executions waiting for each
    /// other) never takes every worker, and other tenants' executions start beside it.
    #[must_use]
    pub fn with_tenant_share(mut self, share: u32) -> Self {
        self.tenant_share = Some(share.max(1));
        self
    }

    /// Executions of every tenant in `status`, for tests and benchmarks.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn count(&self, status: ExecutionStatus) -> anyhow::Result<i64> {
        let status = status.as_str();
        Ok(with_conn!(self.db, conn => workflow_executions::table
            .filter(workflow_executions::status.eq(status))
            .count()
            .get_result(conn)
            .await)?)
    }
}

const RUNNING: &str = "running";
const WAITING: &str = "waiting";
/// Running or waiting: an execution that has not ended.
const UNFINISHED: [&str; 2] = [RUNNING, WAITING];

mod rows;

use rows::{
    ClaimedIdRow, ExecutionRow, NewExecutionRow, RunRow, StepRow, assemble, assemble_each, claimed_run,
};

/// Executions as a lease queue: running and waiting ones that are due and that no live lease
/// holds, earliest due first, within each tenant's share when there is one; a claim counts a
/// claim (see [`agentry_domain::work`]) and resumes a waiting one (it is running again:
/// `Execution::resume`). One backing off before a step's next attempt, or waiting for a time,
/// is not due. (The condition is written as the partial index `workflow_executions_due_idx`
/// is, so both databases use it.)
fn running_executions(backend: Backend, tenant_share: Option<u32>) -> QueueTable {
    QueueTable {
        table: "workflow_executions",
        due: format!("status IN ('{RUNNING}', '{WAITING}') AND due_at <= {now}", now = param(backend, 3)),
        order_by: "due_at",
        counter: "claims",
        also_set: format!("status = '{RUNNING}'"),
        returning: "id",
        share: tenant_share.map(|share| ("tenant_id", share)),
    }
}

/// Taken first by a claim of executions with a share, on PostgreSQL: claims of several
/// instances then count each tenant's running executions one after the other, so that
/// together they never pass the share. (SQLite's one writer runs claims one at a time.)
const SHARE_LOCK_SQL: &str = "SELECT pg_advisory_xact_lock(7402361401)";

/// The execution row with `id` while it carries the lease `token`, locked for the rest of the
/// transaction on PostgreSQL (SQLite's writer holds the whole database).
fn held_sql(placeholder: char, lock: &str) -> String {
    format!(
        "SELECT id FROM workflow_executions WHERE id = {placeholder}1 AND lease_token = {placeholder}2 {lock}"
    )
}

/// Inside a transaction (`$conn` of either backend): marks an execution's pending steps
/// skipped (it ended before their turn).
macro_rules! skip_pending {
    ($conn:expr, $execution:expr) => {
        diesel::update(
            workflow_step_results::table
                .filter(workflow_step_results::execution_id.eq($execution))
                .filter(workflow_step_results::status.eq(StepStatus::Pending.as_str())),
        )
        .set((
            workflow_step_results::status.eq(StepStatus::Skipped.as_str()),
            workflow_step_results::next_run_at.eq(None::<DbTime>),
        ))
        .execute($conn)
    };
}

/// Inside a transaction (`$conn` of either backend): writes a step's whole result over the
/// stored one of execution `$execution`, addressed by the step's id.
macro_rules! write_step {
    ($conn:expr, $execution:expr, $step:expr) => {{
        let step: &StepRow = $step;
        diesel::update(
            workflow_step_results::table
                .filter(workflow_step_results::execution_id.eq($execution))
                .filter(workflow_step_results::step_id.eq(&step.step_id)),
        )
        .set(step.changes())
        .execute($conn)
    }};
}

/// Inside a connection (`$conn` of either backend): the executions with these ids, with their
/// step results, in the order given. Evaluates to `Result<Vec<Execution>, StoreError>`.
macro_rules! load_executions {
    ($conn:expr, $ids:expr) => {{
        let ids: &[String] = $ids;
        load_execution_rows!($conn, ids).map_err(StoreError::from).and_then(|(rows, steps)| {
            assemble(ids, rows, steps).map_err(|e| StoreError::Encode(e.to_string()))
        })
    }};
}

/// The rows of the executions `ids` and of their steps, as stored.
macro_rules! load_execution_rows {
    ($conn:expr, $ids:expr) => {{
        let ids: &[String] = $ids;
        let found: Result<(Vec<ExecutionRow>, Vec<StepRow>), diesel::result::Error> = async {
            let rows: Vec<ExecutionRow> = workflow_executions::table
                .filter(workflow_executions::id.eq_any(ids))
                .select(ExecutionRow::as_select())
                .load($conn)
                .await?;
            let steps: Vec<StepRow> = workflow_step_results::table
                .filter(workflow_step_results::execution_id.eq_any(ids))
                .order((workflow_step_results::execution_id, workflow_step_results::position))
                .select(StepRow::as_select())
                .load($conn)
                .await?;
            Ok((rows, steps))
        }
        .await;
        found
    }};
}

#[async_trait]
impl LeaseQueue<ExecutionRun> for ExecutionStore {
    async fn claim(
        &self,
        lease: &Lease,
        now: DateTime<Utc>,
        limit: u32,
    ) -> anyhow::Result<Vec<ClaimedExecution>> {
        let share = self.tenant_share;
        let (sql, params) =
            prepare_claim(&self.db, |backend| running_executions(backend, share), lease, now, limit);
        let share_lock = match (share, self.db.backend()) {
            (Some(_), Backend::Postgres) => Some(SHARE_LOCK_SQL),
            _ => None,
        };
        let (held, now_db) = (lease.clone(), DbTime(now));
        let (claimed, unreadable) = transaction!(self.db, conn => {
            if let Some(lock) = share_lock {
                diesel::sql_query(lock).execute(conn).await?;
            }
            let claimed: Vec<ClaimedIdRow> = claim!(conn, sql, params).await?;
            if claimed.is_empty() {
                return Ok((Vec::new(), Vec::new()));
            }
            let ids: Vec<String> = claimed.into_iter().map(|r| r.id).collect();
            let (rows, steps) = load_execution_rows!(conn, &ids)?;
            let runs: Vec<RunRow> = workflow_executions::table
                .filter(workflow_executions::id.eq_any(&ids))
                .select(RunRow::as_select())
                .load(conn)
                .await?;
            let mut runs: std::collections::HashMap<String, RunRow> =
                runs.into_iter().map(|r| (r.id.clone(), r)).collect();
            let (mut readable, mut unreadable) = (Vec::new(), Vec::new());
            for (id, execution) in assemble_each(&ids, rows, steps) {
                let run = runs.remove(&id);
                match execution.and_then(|execution| claimed_run(execution, run, &held)) {
                    Ok(claimed) => readable.push(claimed),
                    Err(e) => {
                        // What cannot be read can never run: failed at once, in this claim, so it
                        // neither blocks the queue nor comes back.
                        let error = format!("the stored execution cannot be read: {e:#}");
                        diesel::update(workflow_executions::table.filter(workflow_executions::id.eq(&id)))
                            .set((
                                workflow_executions::status.eq(ExecutionStatus::Failed.as_str()),
                                workflow_executions::error.eq(&error),
                                workflow_executions::finished_at.eq(Some(now_db)),
                                workflow_executions::updated_at.eq(now_db),
                                workflow_executions::lease_token.eq(None::<String>),
                                workflow_executions::lease_until.eq(None::<DbTime>),
                            ))
                            .execute(conn)
                            .await?;
                        unreadable.push((id, error));
                    }
                }
            }
            Ok::<_, StoreError>((readable, unreadable))
        })?;
        for (execution, error) in unreadable {
            tracing::error!(%execution, %error, "failed an execution that cannot be read");
        }
        Ok(claimed)
    }

    /// The earliest due time after `now` of the running and waiting executions (read through
    /// the claim's index, written as it is).
    async fn next_due(&self, now: DateTime<Utc>) -> anyhow::Result<Option<DateTime<Utc>>> {
        use diesel::sql_types::Bool;
        let now = DbTime(now);
        let due = with_conn!(self.db, conn => {
            workflow_executions::table
                .filter(diesel::dsl::sql::<Bool>(&format!("status IN ('{RUNNING}', '{WAITING}')")))
                .filter(workflow_executions::due_at.gt(now))
                .order(workflow_executions::due_at.asc())
                .select(workflow_executions::due_at)
                .first::<DbTime>(conn)
                .await
                .optional()
        })?;
        Ok(due.map(|t| t.0))
    }
}

#[async_trait]
impl ExecutionRepository for ExecutionStore {
    async fn create(&self, new: &NewExecution) -> anyhow::Result<Started> {
        let e = &new.execution;
        let row = NewExecutionRow {
            id: e.id.to_string(),
            tenant_id: e.tenant_id.to_string(),
            workflow_id: e.workflow_id.to_string(),
            status: e.status().as_str().to_owned(),
            input: DbJsonAs(e.input.clone()),
            steps: DbJsonAs(steps_to_json(&new.steps)),
            origin_kind: e.origin.kind(),
            origin_id: e.origin.source_id().map(str::to_owned),
            trigger_details: Some(&e.trigger).filter(|t| !t.is_null()).cloned().map(DbJsonAs),
            dedup_key: new.dedup_key.clone(),
            run_as_user_id: new.run_as.user_id.to_string(),
            run_as_role: new.run_as.role.as_str(),
            started_at: DbTime(e.started_at),
            updated_at: DbTime(e.started_at),
            call_chain: DbJsonAs(new.call_chain.workflows().iter().map(ToString::to_string).collect()),
            // Held by its starter (who runs it): its first claim, under the starter's lease.
            lease_token: new.held.as_ref().map(|l| l.token.clone()),
            lease_until: new.held.as_ref().map(|l| DbTime(l.until)),
            lease_owner: new.held.as_ref().and_then(|_| self.db.lease_owner().0),
            claims: i64::from(new.held.is_some()),
            due_at: DbTime(e.due_at()),
        };
        let steps: Vec<StepRow> =
            e.steps().iter().enumerate().map(|(i, r)| StepRow::new(&e.id, i, r)).collect();
        let event = EventRow::from_domain(&new.started_event)?;
        let (origin_id, dedup_key) = (row.origin_id.clone(), row.dedup_key.clone());
        let existing: Option<String> = transaction!(self.db, conn => {
            // A unique index on (origin, key) settles a race between two starts: the second
            // insert does nothing (on PostgreSQL after waiting for the first to commit) and
            // the first execution is returned.
            let inserted = diesel::insert_into(workflow_executions::table)
                .values(&row)
                .on_conflict_do_nothing()
                .execute(conn)
                .await?;
            if inserted == 0 {
                let first: String = workflow_executions::table
                    .filter(workflow_executions::origin_id.eq(origin_id))
                    .filter(workflow_executions::dedup_key.eq(dedup_key))
                    .select(workflow_executions::id)
                    .first(conn)
                    .await?;
                return Ok(Some(first));
            }
            // One statement per step: SQLite's batch insert cannot leave out a column.
            for step in &steps {
                diesel::insert_into(workflow_step_results::table).values(step).execute(conn).await?;
            }
            diesel::insert_into(events::table).values(&event).execute(conn).await?;
            conn.announce(WorkQueue::Executions).await?;
            Ok::<_, StoreError>(None)
        })?;
        match existing {
            None => {
                self.db.stored(WorkQueue::Executions);
                self.db.stored(WorkQueue::Outbox);
                Ok(Started::New(e.clone()))
            }
            Some(id) => {
                let first = self
                    .get(&e.tenant_id, &ExecutionId::from_string(id))
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("the execution a repeated start refers to is gone"))?;
                Ok(Started::Existing(first))
            }
        }
    }

    async fn get(&self, tenant: &TenantId, id: &ExecutionId) -> anyhow::Result<Option<Execution>> {
        let (tenant, id) = (tenant.to_string(), id.to_string());
        let found: Vec<Execution> = with_conn!(self.db, conn => {
            let owned: Option<String> = workflow_executions::table
                .filter(workflow_executions::tenant_id.eq(&tenant))
                .filter(workflow_executions::id.eq(&id))
                .select(workflow_executions::id)
                .first(conn)
                .await
                .optional()?;
            match owned {
                Some(id) => load_executions!(conn, &[id]),
                None => Ok(Vec::new()),
            }
        })?;
        Ok(found.into_iter().next())
    }

    async fn list(
        &self,
        tenant: &TenantId,
        workflow: &WorkflowId,
        status: Option<ExecutionStatus>,
        page: Page,
    ) -> anyhow::Result<(Vec<Execution>, u64)> {
        let statuses: Vec<&str> = match status {
            Some(s) => vec![s.as_str()],
            None => ExecutionStatus::ALL.iter().map(|s| s.as_str()).collect(),
        };
        let (tenant, workflow) = (tenant.to_string(), workflow.to_string());
        // Page and total in one query, as workflows do.
        let counted = diesel::alias!(workflow_executions as counted);
        let matching = counted
            .filter(counted.field(workflow_executions::tenant_id).eq(tenant.clone()))
            .filter(counted.field(workflow_executions::workflow_id).eq(workflow.clone()))
            .filter(counted.field(workflow_executions::status).eq_any(statuses.clone()));
        let (rows, total): (Vec<ExecutionRow>, i64) = with_conn!(self.db, conn => {
            let mine = workflow_executions::table
                .filter(workflow_executions::tenant_id.eq(&tenant))
                .filter(workflow_executions::workflow_id.eq(&workflow))
                .filter(workflow_executions::status.eq_any(&statuses));
            let rows = mine
                .clone()
                .order((workflow_executions::started_at.desc(), workflow_executions::id.desc()))
                .limit(page.limit())
                .offset(page.offset())
                .select((ExecutionRow::as_select(), matching.count().single_value().assume_not_null()))
                .load(conn)
                .await?;
            let (rows, total) = split_page(rows, page);
            let total = match total {
                Some(total) => total,
                None => mine.count().get_result(conn).await?,
            };
            Ok::<_, diesel::result::Error>((rows, total))
        })?;
        let found = rows.into_iter().map(|r| r.into_domain(Vec::new())).collect::<anyhow::Result<_>>()?;
        Ok((found, u64::try_from(total).unwrap_or(0)))
    }

    async fn record_cancel(&self, execution: &Execution) -> anyhow::Result<bool> {
        let (tenant, id) = (execution.tenant_id.to_string(), execution.id.to_string());
        let (status, error) = (execution.status().as_str(), execution.error().map(str::to_owned));
        let finished_at = execution.finished_at().map(DbTime);
        let updated_at = finished_at.unwrap_or(DbTime(execution.started_at));
        let skipped: Vec<i32> = execution
            .steps()
            .iter()
            .enumerate()
            .filter(|(_, step)| step.status() == StepStatus::Skipped)
            .map(|(position, _)| i32::try_from(position).unwrap_or(i32::MAX))
            .collect();
        let recorded = transaction!(self.db, conn => {
            let n = diesel::update(workflow_executions::table
                .filter(workflow_executions::tenant_id.eq(&tenant))
                .filter(workflow_executions::id.eq(&id))
                .filter(workflow_executions::status.eq_any(UNFINISHED)))
                .set((
                    workflow_executions::status.eq(status),
                    workflow_executions::error.eq(&error),
                    workflow_executions::finished_at.eq(finished_at),
                    workflow_executions::updated_at.eq(updated_at),
                ))
                .execute(conn)
                .await?;
            if n == 1 {
                // Only steps still pending as stored: one that started meanwhile keeps running.
                diesel::update(workflow_step_results::table
                    .filter(workflow_step_results::execution_id.eq(&id))
                    .filter(workflow_step_results::position.eq_any(&skipped))
                    .filter(workflow_step_results::status.eq(StepStatus::Pending.as_str())))
                    .set((
            workflow_step_results::status.eq(StepStatus::Skipped.as_str()),
            workflow_step_results::next_run_at.eq(None::<DbTime>),
        ))
                    .execute(conn)
                    .await?;
                // The step that waited fails with the execution's end (whichever waits as
                // stored: it may have begun to since the execution was read).
                diesel::update(workflow_step_results::table
                    .filter(workflow_step_results::execution_id.eq(&id))
                    .filter(workflow_step_results::status.eq(StepStatus::Waiting.as_str())))
                    .set((
                        workflow_step_results::status.eq(StepStatus::Failed.as_str()),
                        workflow_step_results::error.eq(CANCELLED_WAIT_ERROR),
                        workflow_step_results::finished_at.eq(finished_at),
                        workflow_step_results::next_run_at.eq(None::<DbTime>),
                    ))
                    .execute(conn)
                    .await?;
            }
            Ok::<_, StoreError>(n == 1)
        })?;
        Ok(recorded)
    }

    async fn record_retry(&self, execution: &Execution) -> anyhow::Result<bool> {
        let (tenant, id) = (execution.tenant_id.to_string(), execution.id.to_string());
        let (due_at, at_step) = (DbTime(execution.due_at()), execution.at_step().map(str::to_owned));
        // The steps it runs again (pending now), written whole: a fresh slate.
        let again: Vec<StepRow> = execution
            .steps()
            .iter()
            .filter(|s| s.status() == StepStatus::Pending)
            .map(|s| StepRow::new(&execution.id, 0, s))
            .collect();
        let recorded = transaction!(self.db, conn => {
            let n = diesel::update(workflow_executions::table
                .filter(workflow_executions::tenant_id.eq(&tenant))
                .filter(workflow_executions::id.eq(&id))
                .filter(workflow_executions::status.eq(ExecutionStatus::Failed.as_str())))
                .set((
                    workflow_executions::status.eq(RUNNING),
                    workflow_executions::output.eq(None::<DbJsonAs<serde_json::Value>>),
                    workflow_executions::error.eq(None::<String>),
                    workflow_executions::finished_at.eq(None::<DbTime>),
                    workflow_executions::due_at.eq(due_at),
                    workflow_executions::at_step.eq(&at_step),
                    workflow_executions::updated_at.eq(due_at),
                    workflow_executions::lease_token.eq(None::<String>),
                    workflow_executions::lease_until.eq(None::<DbTime>),
                    workflow_executions::claims.eq(0_i64),
                ))
                .execute(conn)
                .await?;
            if n == 1 {
                for step in &again {
                    write_step!(conn, &id, step).await?;
                }
                conn.announce(WorkQueue::Executions).await?;
            }
            Ok::<_, StoreError>(n == 1)
        })?;
        Ok(recorded)
    }

    async fn start_step(
        &self,
        id: &ExecutionId,
        lease: &Lease,
        step: &StepResult,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let (id, token, until, at) = (id.to_string(), lease.token.clone(), DbTime(lease.until), DbTime(now));
        let step = StepRow::new(&ExecutionId::from_string(id.clone()), 0, step);
        let held = transaction!(self.db, conn => {
            let n = diesel::update(workflow_executions::table
                .filter(workflow_executions::id.eq(&id))
                .filter(workflow_executions::lease_token.eq(&token))
                .filter(workflow_executions::status.eq(RUNNING)))
                .set((
                    workflow_executions::lease_until.eq(Some(until)),
                    workflow_executions::updated_at.eq(at),
                    workflow_executions::at_step.eq(Some(&step.step_id)),
                    workflow_executions::step_runs.eq(workflow_executions::step_runs + 1),
                ))
                .execute(conn)
                .await?;
            if n == 0 {
                return Ok(false);
            }
            // The whole result: a step run again (a loop) starts from a fresh slate.
            write_step!(conn, &id, &step).await?;
            Ok::<_, StoreError>(true)
        })?;
        Ok(held)
    }

    async fn release(&self, id: &ExecutionId, lease: &Lease) -> anyhow::Result<()> {
        let (id, token) = (id.to_string(), lease.token.clone());
        transaction!(self.db, conn => {
            diesel::update(workflow_executions::table
                .filter(workflow_executions::id.eq(&id))
                .filter(workflow_executions::lease_token.eq(&token)))
                .set((
                    workflow_executions::lease_token.eq(None::<String>),
                    workflow_executions::lease_until.eq(None::<DbTime>),
                    // Given back, not lost: this claim recorded its outcome, so it does not
                    // count towards giving the execution up (rolling restarts cannot fail it).
                    workflow_executions::claims.eq(workflow_executions::claims - 1),
                ))
                .execute(conn)
                .await?;
            // Given back while its instance stops: another instance takes it up at once.
            conn.announce(WorkQueue::Executions).await?;
            Ok::<_, StoreError>(())
        })?;
        Ok(())
    }

    async fn record_step(
        &self,
        id: &ExecutionId,
        lease: &Lease,
        result: &StepResult,
        after: After,
    ) -> anyhow::Result<bool> {
        // The position is the step's place in the list as shown, set when the execution was
        // stored; a result is addressed by its step's id.
        let step = StepRow::new(id, 0, result);
        let (id, token) = (id.to_string(), lease.token.clone());
        let at = DbTime(result.finished_at().unwrap_or_else(Utc::now));
        let (ends, due_at, status) = match &after {
            After::GoOn => (false, None, RUNNING),
            After::DueAt(due) => (false, Some(DbTime(*due)), RUNNING),
            After::Wait { until, .. } => (false, Some(DbTime(*until)), WAITING),
            After::Finish(_) => (true, None, RUNNING),
        };
        let waiting_event = match &after {
            After::Wait { event, .. } => Some(EventRow::from_domain(event)?),
            _ => None,
        };
        // An end or a wait writes an event: the outbox's consumers are woken after it commits.
        let writes_event = ends || waiting_event.is_some();
        let finish = after
            .into_finish()
            .map(|f| -> anyhow::Result<_> { Ok((EventRow::from_domain(&f.event)?, f)) })
            .transpose()?;
        let held_sql = match self.db.backend() {
            Backend::Postgres => held_sql('$', "FOR UPDATE"),
            Backend::Sqlite => held_sql('?', ""),
        };
        let held = transaction!(self.db, conn => {
            use diesel::sql_types::Text;
            // Reading the row under the lease proves (and, on PostgreSQL, locks) the claim. A
            // lock, not an UPDATE: a second UPDATE of a row this transaction already changed
            // makes PostgreSQL check its foreign key to the workflow again, and a concurrent
            // delete of that workflow (which holds the workflow row and waits for this one)
            // would deadlock with it.
            let held = match due_at {
                // Due again later: the lease goes with this one UPDATE (not counted as a claim
                // that failed: this one recorded its outcome). A cancel that came meanwhile
                // keeps the execution cancelled.
                Some(due_at) => diesel::update(workflow_executions::table
                    .filter(workflow_executions::id.eq(&id))
                    .filter(workflow_executions::lease_token.eq(&token)))
                    .set((
                        workflow_executions::status.eq(diesel::dsl::sql::<diesel::sql_types::Text>(&format!(
                            "CASE WHEN status = '{RUNNING}' THEN '{status}' ELSE status END"
                        ))),
                        workflow_executions::due_at.eq(due_at),
                        workflow_executions::updated_at.eq(at),
                        workflow_executions::lease_token.eq(None::<String>),
                        workflow_executions::lease_until.eq(None::<DbTime>),
                        workflow_executions::claims.eq(workflow_executions::claims - 1),
                    ))
                    .execute(conn)
                    .await? == 1,
                None => !diesel::sql_query(held_sql)
                    .bind::<Text, _>(&id)
                    .bind::<Text, _>(&token)
                    .load::<ClaimedIdRow>(conn)
                    .await?
                    .is_empty(),
            };
            if !held {
                return Ok(false);
            }
            write_step!(conn, &id, &step).await?;
            if let Some(event) = &waiting_event {
                // A cancel that came while the step ran kept the execution cancelled: the step
                // that would wait fails as a cancel leaves a waiting step, and nobody is told it
                // waits.
                let now_status: String = workflow_executions::table
                    .filter(workflow_executions::id.eq(&id))
                    .select(workflow_executions::status)
                    .first(conn)
                    .await?;
                if now_status == WAITING {
                    diesel::insert_into(events::table).values(event).execute(conn).await?;
                } else {
                    diesel::update(workflow_step_results::table
                        .filter(workflow_step_results::execution_id.eq(&id))
                        .filter(workflow_step_results::step_id.eq(&step.step_id)))
                        .set((
                            workflow_step_results::status.eq(StepStatus::Failed.as_str()),
                            workflow_step_results::error.eq(CANCELLED_WAIT_ERROR),
                            workflow_step_results::finished_at.eq(Some(at)),
                            workflow_step_results::next_run_at.eq(None::<DbTime>),
                        ))
                        .execute(conn)
                        .await?;
                }
            }
            if let Some((event, f)) = finish {
                let ended = diesel::update(workflow_executions::table
                    .filter(workflow_executions::id.eq(&id))
                    .filter(workflow_executions::status.eq(RUNNING)))
                    .set((
                        workflow_executions::updated_at.eq(at),
                        workflow_executions::status.eq(f.status.as_str()),
                        workflow_executions::output.eq(f.output.map(DbJsonAs)),
                        workflow_executions::error.eq(f.error),
                        workflow_executions::finished_at.eq(Some(DbTime(f.finished_at))),
                        workflow_executions::lease_token.eq(None::<String>),
                        workflow_executions::lease_until.eq(None::<DbTime>),
                    ))
                    .execute(conn)
                    .await?;
                if ended == 1 {
                    skip_pending!(conn, &id).await?;
                    diesel::insert_into(events::table).values(&event).execute(conn).await?;
                }
            }
            Ok::<_, StoreError>(true)
        })?;
        if held && writes_event {
            self.db.stored(WorkQueue::Outbox);
        }
        Ok(held)
    }
}

#[async_trait]
impl QueueBacklog for ExecutionStore {
    async fn backlog(&self, now: DateTime<Utc>) -> anyhow::Result<Vec<Backlog>> {
        let (depth, oldest): (i64, Option<DbTime>) = with_conn!(self.db, conn => {
            let running = workflow_executions::table.filter(workflow_executions::status.eq(RUNNING));
            let depth = running.count().get_result(conn).await?;
            let oldest = running
                .order(workflow_executions::started_at.asc())
                .select(workflow_executions::started_at)
                .first::<DbTime>(conn)
                .await
                .optional()?;
            Ok::<_, diesel::result::Error>((depth, oldest))
        })?;
        Ok(vec![Backlog::new(EXECUTION_QUEUE, depth, oldest.map(|t| t.0), now)])
    }
}

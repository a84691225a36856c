//! The rows of executions and their step results, and how they become the domain's.

use agentry_domain::ids::{ExecutionId, TenantId, UserId, WorkflowId};
use agentry_domain::tenancy::{CallChain, Role};
use agentry_domain::work::Lease;
use agentry_domain::workflows::{
    AttemptError, ClaimedExecution, Execution, ExecutionOrigin, ExecutionRecord, ExecutionRun, RunAs,
    StepRecord, StepResult, validate_steps,
};
use diesel::prelude::*;

use crate::leases::claimed;
use crate::schema::{workflow_executions, workflow_step_results};
use crate::types::{DbJson, DbJsonAs, DbTime, parse_named};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = workflow_executions, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(super) struct ExecutionRow {
    pub(super) id: String,
    pub(super) tenant_id: String,
    pub(super) workflow_id: String,
    pub(super) status: String,
    pub(super) input: DbJson,
    pub(super) output: Option<DbJson>,
    pub(super) error: Option<String>,
    pub(super) origin_kind: String,
    pub(super) origin_id: Option<String>,
    pub(super) trigger_details: Option<DbJson>,
    pub(super) started_at: DbTime,
    pub(super) finished_at: Option<DbTime>,
    pub(super) at_step: Option<String>,
    pub(super) due_at: DbTime,
    pub(super) step_runs: i64,
}

impl ExecutionRow {
    pub(super) fn into_domain(self, steps: Vec<StepRow>) -> anyhow::Result<Execution> {
        Ok(Execution::restore(ExecutionRecord {
            status: parse_named(&self.status, "execution status")?,
            origin: ExecutionOrigin::parse(&self.origin_kind, self.origin_id)
                .ok_or_else(|| anyhow::anyhow!("execution {} has an unknown origin", self.id))?,
            id: ExecutionId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            workflow_id: WorkflowId::from_string(self.workflow_id),
            input: self.input.0,
            trigger: self.trigger_details.map_or(serde_json::Value::Null, |t| t.0),
            output: self.output.map(|o| o.0),
            error: self.error,
            started_at: self.started_at.0,
            finished_at: self.finished_at.map(|t| t.0),
            steps: steps.into_iter().map(StepRow::into_record).collect::<anyhow::Result<_>>()?,
            at_step: self.at_step,
            due_at: self.due_at.0,
            step_runs: u32::try_from(self.step_runs).unwrap_or(u32::MAX),
        })?)
    }
}

/// What a worker needs beside the execution: its steps and whose authority they act with.
#[derive(Queryable, Selectable)]
#[diesel(table_name = workflow_executions, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(super) struct RunRow {
    pub(super) id: String,
    pub(super) steps: DbJson,
    pub(super) run_as_user_id: String,
    pub(super) run_as_role: String,
    pub(super) claims: i64,
    pub(super) call_chain: DbJsonAs<Vec<String>>,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = workflow_step_results, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(super) struct StepRow {
    pub(super) execution_id: String,
    pub(super) position: i32,
    pub(super) step_id: String,
    pub(super) step_type: String,
    pub(super) status: String,
    pub(super) output: Option<DbJson>,
    pub(super) error: Option<String>,
    pub(super) started_at: Option<DbTime>,
    pub(super) finished_at: Option<DbTime>,
    pub(super) attempts: i32,
    pub(super) next_run_at: Option<DbTime>,
    pub(super) branch: Option<String>,
    pub(super) attempt_errors: DbJsonAs<Vec<AttemptError>>,
}

/// What a step's start or result changes in its row: everything but where it is.
#[derive(AsChangeset)]
#[diesel(table_name = workflow_step_results, treat_none_as_null = true)]
pub(super) struct StepChanges<'a> {
    status: &'a str,
    output: Option<&'a DbJson>,
    error: Option<&'a str>,
    started_at: Option<DbTime>,
    finished_at: Option<DbTime>,
    attempts: i32,
    next_run_at: Option<DbTime>,
    branch: Option<&'a str>,
    attempt_errors: &'a DbJsonAs<Vec<AttemptError>>,
}

impl StepRow {
    pub(super) fn new(execution: &ExecutionId, position: usize, r: &StepResult) -> Self {
        Self {
            execution_id: execution.to_string(),
            position: i32::try_from(position).unwrap_or(i32::MAX),
            step_id: r.step_id.clone(),
            step_type: r.step_type.as_str().to_owned(),
            status: r.status().as_str().to_owned(),
            output: r.output().cloned().map(DbJsonAs),
            error: r.error().map(str::to_owned),
            started_at: r.started_at().map(DbTime),
            finished_at: r.finished_at().map(DbTime),
            attempts: i32::try_from(r.attempts()).unwrap_or(i32::MAX),
            next_run_at: r.next_run_at().map(DbTime),
            branch: r.branch().map(str::to_owned),
            attempt_errors: DbJsonAs(r.attempt_errors().to_vec()),
        }
    }

    /// The changes that store this row's state over the step's stored one.
    pub(super) fn changes(&self) -> StepChanges<'_> {
        StepChanges {
            status: &self.status,
            output: self.output.as_ref(),
            error: self.error.as_deref(),
            started_at: self.started_at,
            finished_at: self.finished_at,
            attempts: self.attempts,
            next_run_at: self.next_run_at,
            branch: self.branch.as_deref(),
            attempt_errors: &self.attempt_errors,
        }
    }

    pub(super) fn into_record(self) -> anyhow::Result<StepRecord> {
        Ok(StepRecord {
            step_type: parse_named(&self.step_type, "step type")?,
            status: parse_named(&self.status, "step status")?,
            step_id: self.step_id,
            output: self.output.map(|o| o.0),
            error: self.error,
            started_at: self.started_at.map(|t| t.0),
            finished_at: self.finished_at.map(|t| t.0),
            attempts: u32::try_from(self.attempts).unwrap_or(0),
            next_run_at: self.next_run_at.map(|t| t.0),
            branch: self.branch,
            attempt_errors: self.attempt_errors.0,
        })
    }
}

/// The row of a new execution.
#[derive(Insertable)]
#[diesel(table_name = workflow_executions, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(super) struct NewExecutionRow {
    pub(super) id: String,
    pub(super) tenant_id: String,
    pub(super) workflow_id: String,
    pub(super) status: String,
    pub(super) input: DbJson,
    pub(super) steps: DbJson,
    pub(super) origin_kind: &'static str,
    pub(super) origin_id: Option<String>,
    pub(super) trigger_details: Option<DbJson>,
    pub(super) dedup_key: Option<String>,
    pub(super) run_as_user_id: String,
    pub(super) run_as_role: &'static str,
    pub(super) started_at: DbTime,
    pub(super) updated_at: DbTime,
    pub(super) call_chain: DbJsonAs<Vec<String>>,
    pub(super) lease_token: Option<String>,
    pub(super) lease_until: Option<DbTime>,
    pub(super) lease_owner: Option<String>,
    pub(super) claims: i64,
    pub(super) due_at: DbTime,
}

/// A claimed execution's id.
#[derive(QueryableByName)]
pub(super) struct ClaimedIdRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(super) id: String,
}

/// Executions with their step results, in the order of `ids`.
pub(super) fn assemble(
    ids: &[String],
    rows: Vec<ExecutionRow>,
    steps: Vec<StepRow>,
) -> anyhow::Result<Vec<Execution>> {
    assemble_each(ids, rows, steps).into_iter().map(|(_, execution)| execution).collect()
}

/// Each execution of `ids` that was found, with its step results, in the order of `ids`: read
/// one by one, so one that cannot be read does not hide the others.
pub(super) fn assemble_each(
    ids: &[String],
    rows: Vec<ExecutionRow>,
    steps: Vec<StepRow>,
) -> Vec<(String, anyhow::Result<Execution>)> {
    let mut by_execution: std::collections::HashMap<String, Vec<StepRow>> = std::collections::HashMap::new();
    for step in steps {
        by_execution.entry(step.execution_id.clone()).or_default().push(step);
    }
    let mut by_id: std::collections::HashMap<String, ExecutionRow> =
        rows.into_iter().map(|r| (r.id.clone(), r)).collect();
    ids.iter()
        .filter_map(|id| by_id.remove(id))
        .map(|row| {
            let steps = by_execution.remove(&row.id).unwrap_or_default();
            (row.id.clone(), row.into_domain(steps))
        })
        .collect()
}

/// A claimed execution with what its run needs.
pub(super) fn claimed_run(
    execution: Execution,
    run: Option<RunRow>,
    lease: &Lease,
) -> anyhow::Result<ClaimedExecution> {
    let run = run.ok_or_else(|| anyhow::anyhow!("claimed execution {} vanished", execution.id))?;
    let claims = run.claims;
    let (steps, run_as, call_chain) = run.into_parts()?;
    Ok(claimed(ExecutionRun { execution, steps, run_as, call_chain }, claims, lease))
}

impl RunRow {
    pub(super) fn into_parts(
        self,
    ) -> anyhow::Result<(Vec<agentry_domain::workflows::Step>, RunAs, CallChain)> {
        let steps = validate_steps(&self.steps.0).map_err(|errors| {
            let first = <[_]>::first(&errors).map(ToString::to_string).unwrap_or_default();
            anyhow::anyhow!("execution {} has invalid stored steps: {first}", self.id)
        })?;
        let role: Role = self.run_as_role.parse().map_err(|_| {
            anyhow::anyhow!("execution {} has an unknown role {:?}", self.id, self.run_as_role)
        })?;
        let chain = CallChain::new(self.call_chain.0.into_iter().map(WorkflowId::from_string).collect());
        Ok((steps, RunAs { user_id: UserId::from_string(self.run_as_user_id), role }, chain))
    }
}

//! [`ScheduleRepository`]: workflows' cron schedules, scoped by tenant in every query but the
//! ticker's read of the due ones (of every tenant, with their workflows and plans), and the
//! compare-and-set that moves a schedule to its next tick.
//!
//! The table references `workflows` with `ON DELETE CASCADE`: deleting a workflow deletes its
//! schedules in the same statement.

use agentry_domain::ids::{ScheduleId, TenantId, UserId, WorkflowId};
use agentry_domain::workflows::{Advance, DueSchedule, RunAs, Schedule, ScheduleRepository};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::{Map, Value};

use crate::database::{Database, StoreError};
use crate::schema::{tenants, workflow_schedules, workflows};
use crate::types::{DbJsonAs, DbTime, parse_stored};
use crate::workflows::WorkflowRow;

/// Schedules in the database.
#[derive(Debug, Clone)]
pub struct ScheduleStore {
    db: Database,
}

impl ScheduleStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = workflow_schedules, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct ScheduleRow {
    id: String,
    tenant_id: String,
    workflow_id: String,
    cron: String,
    timezone: String,
    input: DbJsonAs<Map<String, Value>>,
    is_active: bool,
    run_as_user_id: String,
    run_as_role: String,
    next_run_at: Option<DbTime>,
    last_run_at: Option<DbTime>,
    missed_count: i64,
    created_at: DbTime,
    updated_at: DbTime,
}

impl ScheduleRow {
    fn from_domain(s: &Schedule) -> Self {
        Self {
            id: s.id.to_string(),
            tenant_id: s.tenant_id.to_string(),
            workflow_id: s.workflow_id.to_string(),
            cron: s.cron.clone(),
            timezone: s.timezone.clone(),
            input: DbJsonAs(s.input.clone()),
            is_active: s.is_active,
            run_as_user_id: s.run_as.user_id.to_string(),
            run_as_role: s.run_as.role.as_str().to_owned(),
            next_run_at: s.next_run_at.map(DbTime),
            last_run_at: s.last_run_at.map(DbTime),
            missed_count: i64::try_from(s.missed_count).unwrap_or(i64::MAX),
            created_at: DbTime(s.created_at),
            updated_at: DbTime(s.updated_at),
        }
    }

    fn into_domain(self) -> anyhow::Result<Schedule> {
        Ok(Schedule {
            run_as: RunAs {
                user_id: UserId::from_string(self.run_as_user_id),
                role: parse_stored(&self.run_as_role, "role")?,
            },
            id: ScheduleId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            workflow_id: WorkflowId::from_string(self.workflow_id),
            cron: self.cron,
            timezone: self.timezone,
            input: self.input.0,
            is_active: self.is_active,
            next_run_at: self.next_run_at.map(|t| t.0),
            last_run_at: self.last_run_at.map(|t| t.0),
            missed_count: u64::try_from(self.missed_count).unwrap_or(0),
            created_at: self.created_at.0,
            updated_at: self.updated_at.0,
        })
    }
}

#[async_trait]
impl ScheduleRepository for ScheduleStore {
    async fn create(&self, schedule: &Schedule) -> anyhow::Result<bool> {
        let row = ScheduleRow::from_domain(schedule);
        let result: Result<usize, StoreError> = transaction!(self.db, conn => {
            Ok(diesel::insert_into(workflow_schedules::table).values(&row).execute(conn).await?)
        });
        match result {
            Ok(_) => Ok(true),
            // The workflow was deleted meanwhile.
            Err(e) if e.is_foreign_key_violation() => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    async fn get(
        &self,
        tenant: &TenantId,
        workflow: &WorkflowId,
        id: &ScheduleId,
    ) -> anyhow::Result<Option<Schedule>> {
        let row: Option<ScheduleRow> = with_conn!(self.db, conn => workflow_schedules::table
            .filter(workflow_schedules::tenant_id.eq(tenant.as_str()))
            .filter(workflow_schedules::workflow_id.eq(workflow.as_str()))
            .filter(workflow_schedules::id.eq(id.as_str()))
            .select(ScheduleRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(ScheduleRow::into_domain).transpose()
    }

    async fn list(&self, tenant: &TenantId, workflow: &WorkflowId) -> anyhow::Result<Vec<Schedule>> {
        let rows: Vec<ScheduleRow> = with_conn!(self.db, conn => workflow_schedules::table
            .filter(workflow_schedules::tenant_id.eq(tenant.as_str()))
            .filter(workflow_schedules::workflow_id.eq(workflow.as_str()))
            .order(workflow_schedules::id.asc())
            .select(ScheduleRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().map(ScheduleRow::into_domain).collect()
    }

    async fn update(&self, schedule: &Schedule) -> anyhow::Result<bool> {
        let row = ScheduleRow::from_domain(schedule);
        let n = transaction!(self.db, conn => {
            Ok::<_, StoreError>(diesel::update(
                workflow_schedules::table
                    .filter(workflow_schedules::tenant_id.eq(&row.tenant_id))
                    .filter(workflow_schedules::id.eq(&row.id)),
            )
            .set((
                workflow_schedules::cron.eq(&row.cron),
                workflow_schedules::timezone.eq(&row.timezone),
                workflow_schedules::input.eq(&row.input),
                workflow_schedules::is_active.eq(row.is_active),
                workflow_schedules::next_run_at.eq(row.next_run_at),
                workflow_schedules::updated_at.eq(row.updated_at),
            ))
            .execute(conn)
            .await?)
        })?;
        Ok(n > 0)
    }

    async fn delete(
        &self,
        tenant: &TenantId,
        workflow: &WorkflowId,
        id: &ScheduleId,
    ) -> anyhow::Result<bool> {
        let (tenant, workflow, id) = (tenant.to_string(), workflow.to_string(), id.to_string());
        let n = transaction!(self.db, conn => {
            Ok::<_, StoreError>(diesel::delete(
                workflow_schedules::table
                    .filter(workflow_schedules::tenant_id.eq(&tenant))
                    .filter(workflow_schedules::workflow_id.eq(&workflow))
                    .filter(workflow_schedules::id.eq(&id)),
            )
            .execute(conn)
            .await?)
        })?;
        Ok(n > 0)
    }

    async fn due(&self, now: DateTime<Utc>, limit: u32) -> anyhow::Result<Vec<DueSchedule>> {
        let rows: Vec<(ScheduleRow, WorkflowRow, String)> = with_conn!(self.db, conn => workflow_schedules::table
            .inner_join(workflows::table.on(workflows::id
                .eq(workflow_schedules::workflow_id)
                .and(workflows::tenant_id.eq(workflow_schedules::tenant_id))))
            .inner_join(tenants::table.on(tenants::id.eq(workflow_schedules::tenant_id)))
            .filter(workflow_schedules::is_active.eq(true))
            .filter(workflow_schedules::next_run_at.le(DbTime(now)))
            .order(workflow_schedules::next_run_at.asc())
            .limit(i64::from(limit))
            .select((ScheduleRow::as_select(), WorkflowRow::as_select(), tenants::plan))
            .load(conn)
            .await)?;
        rows.into_iter()
            .map(|(schedule, workflow, plan)| {
                Ok(DueSchedule {
                    schedule: schedule.into_domain()?,
                    workflow: workflow.into_domain()?,
                    plan: parse_stored(&plan, "plan")?,
                })
            })
            .collect()
    }

    async fn advance(&self, id: &ScheduleId, advance: &Advance) -> anyhow::Result<bool> {
        let id = id.to_string();
        let missed = i64::try_from(advance.missed).unwrap_or(i64::MAX);
        let (from, next) = (DbTime(advance.from), advance.next_run_at.map(DbTime));
        let ran = advance.ran.map(DbTime);
        let n = transaction!(self.db, conn => {
            // Compare-and-set: only the instance that still sees the tick it read moves it on.
            let target = workflow_schedules::table
                .filter(workflow_schedules::id.eq(&id))
                .filter(workflow_schedules::next_run_at.eq(from));
            let moved = match ran {
                Some(ran) => diesel::update(target)
                    .set((
                        workflow_schedules::next_run_at.eq(next),
                        workflow_schedules::last_run_at.eq(ran),
                        workflow_schedules::missed_count.eq(workflow_schedules::missed_count + missed),
                    ))
                    .execute(conn)
                    .await?,
                None => diesel::update(target)
                    .set((
                        workflow_schedules::next_run_at.eq(next),
                        workflow_schedules::missed_count.eq(workflow_schedules::missed_count + missed),
                    ))
                    .execute(conn)
                    .await?,
            };
            Ok::<_, StoreError>(moved)
        })?;
        Ok(n > 0)
    }
}

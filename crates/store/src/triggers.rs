//! [`TriggerRepository`] and [`IntegrationRepository`]: webhook triggers and inbound
//! integrations, scoped by tenant in every query but the two look-ups an unauthenticated call
//! starts with (a trigger by its path, an integration by its id), which read the row, its
//! workflow and its tenant's plan in one query.
//!
//! Both tables reference `workflows` with `ON DELETE CASCADE`: deleting a workflow deletes its
//! triggers and integrations in the same statement.

use agentry_domain::ids::{IntegrationId, TenantId, TriggerId, UserId, WorkflowId};
use agentry_domain::webhooks::SealedSecret;
use agentry_domain::workflows::{
    Integration, IntegrationRepository, IntegrationTarget, RunAs, Trigger, TriggerRepository, TriggerTarget,
};
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::{Database, StoreError};
use crate::schema::{integrations, tenants, workflow_triggers, workflows};
use crate::types::{DbJsonAs, DbTime};
use crate::types::{parse_named, parse_stored};
use crate::workflows::WorkflowRow;

/// Webhook triggers in the database.
#[derive(Debug, Clone)]
pub struct TriggerStore {
    db: Database,
}

impl TriggerStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

/// Inbound integrations in the database.
#[derive(Debug, Clone)]
pub struct IntegrationStore {
    db: Database,
}

impl IntegrationStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = workflow_triggers, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct TriggerRow {
    id: String,
    tenant_id: String,
    workflow_id: String,
    path: String,
    name: String,
    allowed_methods: DbJsonAs<Vec<String>>,
    secret_sealed: String,
    is_active: bool,
    trigger_count: i64,
    run_as_user_id: String,
    run_as_role: String,
    created_at: DbTime,
}

impl TriggerRow {
    fn from_domain(t: &Trigger) -> Self {
        Self {
            id: t.id.to_string(),
            tenant_id: t.tenant_id.to_string(),
            workflow_id: t.workflow_id.to_string(),
            path: t.path.clone(),
            name: t.name.clone(),
            allowed_methods: DbJsonAs(t.allowed_methods.clone()),
            secret_sealed: t.secret.0.clone(),
            is_active: t.is_active,
            trigger_count: i64::try_from(t.trigger_count).unwrap_or(i64::MAX),
            run_as_user_id: t.run_as.user_id.to_string(),
            run_as_role: t.run_as.role.as_str().to_owned(),
            created_at: DbTime(t.created_at),
        }
    }

    fn into_domain(self) -> anyhow::Result<Trigger> {
        Ok(Trigger {
            run_as: RunAs {
                user_id: UserId::from_string(self.run_as_user_id),
                role: parse_stored(&self.run_as_role, "role")?,
            },
            id: TriggerId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            workflow_id: WorkflowId::from_string(self.workflow_id),
            path: self.path,
            name: self.name,
            allowed_methods: self.allowed_methods.0,
            secret: SealedSecret(self.secret_sealed),
            is_active: self.is_active,
            trigger_count: u64::try_from(self.trigger_count).unwrap_or(0),
            created_at: self.created_at.0,
        })
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = integrations, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct IntegrationRow {
    id: String,
    tenant_id: String,
    kind: String,
    name: String,
    workflow_id: String,
    signing_secret_sealed: String,
    run_as_user_id: String,
    run_as_role: String,
    created_at: DbTime,
}

impl IntegrationRow {
    fn from_domain(i: &Integration) -> Self {
        Self {
            id: i.id.to_string(),
            tenant_id: i.tenant_id.to_string(),
            kind: i.kind.as_str().to_owned(),
            name: i.name.clone(),
            workflow_id: i.workflow_id.to_string(),
            signing_secret_sealed: i.signing_secret.0.clone(),
            run_as_user_id: i.run_as.user_id.to_string(),
            run_as_role: i.run_as.role.as_str().to_owned(),
            created_at: DbTime(i.created_at),
        }
    }

    fn into_domain(self) -> anyhow::Result<Integration> {
        Ok(Integration {
            kind: parse_named(&self.kind, "integration kind")?,
            run_as: RunAs {
                user_id: UserId::from_string(self.run_as_user_id),
                role: parse_stored(&self.run_as_role, "role")?,
            },
            id: IntegrationId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            name: self.name,
            workflow_id: WorkflowId::from_string(self.workflow_id),
            signing_secret: SealedSecret(self.signing_secret_sealed),
            created_at: self.created_at.0,
        })
    }
}

/// An insert whose workflow may have been deleted meanwhile: `false` for the foreign-key
/// violation that means so.
fn inserted(result: Result<usize, StoreError>) -> anyhow::Result<bool> {
    match result {
        Ok(_) => Ok(true),
        Err(e) if e.is_foreign_key_violation() => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[async_trait]
impl TriggerRepository for TriggerStore {
    async fn create(&self, trigger: &Trigger) -> anyhow::Result<bool> {
        let row = TriggerRow::from_domain(trigger);
        inserted(transaction!(self.db, conn => {
            Ok(diesel::insert_into(workflow_triggers::table).values(&row).execute(conn).await?)
        }))
    }

    async fn list(&self, tenant: &TenantId, workflow: &WorkflowId) -> anyhow::Result<Vec<Trigger>> {
        let rows: Vec<TriggerRow> = with_conn!(self.db, conn => workflow_triggers::table
            .filter(workflow_triggers::tenant_id.eq(tenant.as_str()))
            .filter(workflow_triggers::workflow_id.eq(workflow.as_str()))
            .order(workflow_triggers::id.asc())
            .select(TriggerRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().map(TriggerRow::into_domain).collect()
    }

    async fn delete(&self, tenant: &TenantId, workflow: &WorkflowId, id: &TriggerId) -> anyhow::Result<bool> {
        let (tenant, workflow, id) = (tenant.to_string(), workflow.to_string(), id.to_string());
        let n = transaction!(self.db, conn => {
            Ok(diesel::delete(
                workflow_triggers::table
                    .filter(workflow_triggers::tenant_id.eq(&tenant))
                    .filter(workflow_triggers::workflow_id.eq(&workflow))
                    .filter(workflow_triggers::id.eq(&id)),
            )
            .execute(conn)
            .await?)
        })?;
        Ok(n > 0)
    }

    async fn find_by_path(&self, path: &str) -> anyhow::Result<Option<TriggerTarget>> {
        let row: Option<(TriggerRow, WorkflowRow, String)> = with_conn!(self.db, conn => workflow_triggers::table
            .inner_join(workflows::table.on(workflows::id
                .eq(workflow_triggers::workflow_id)
                .and(workflows::tenant_id.eq(workflow_triggers::tenant_id))))
            .inner_join(tenants::table.on(tenants::id.eq(workflow_triggers::tenant_id)))
            .filter(workflow_triggers::path.eq(path))
            .select((TriggerRow::as_select(), WorkflowRow::as_select(), tenants::plan))
            .first(conn)
            .await
            .optional())?;
        row.map(|(trigger, workflow, plan)| {
            Ok(TriggerTarget {
                trigger: trigger.into_domain()?,
                workflow: workflow.into_domain()?,
                plan: parse_stored(&plan, "plan")?,
            })
        })
        .transpose()
    }

    async fn count_call(&self, id: &TriggerId) -> anyhow::Result<Option<u64>> {
        let id = id.to_string();
        let count: Option<i64> = transaction!(self.db, conn => {
            // One statement: the database adds, so no call is lost to a read-modify-write race.
            Ok(diesel::update(workflow_triggers::table.filter(workflow_triggers::id.eq(&id)))
                .set(workflow_triggers::trigger_count.eq(workflow_triggers::trigger_count + 1_i64))
                .returning(workflow_triggers::trigger_count)
                .get_result(conn)
                .await
                .optional()?)
        })?;
        Ok(count.map(|n| u64::try_from(n).unwrap_or(0)))
    }
}

#[async_trait]
impl IntegrationRepository for IntegrationStore {
    async fn create(&self, integration: &Integration) -> anyhow::Result<bool> {
        let row = IntegrationRow::from_domain(integration);
        inserted(transaction!(self.db, conn => {
            Ok(diesel::insert_into(integrations::table).values(&row).execute(conn).await?)
        }))
    }

    async fn get(&self, tenant: &TenantId, id: &IntegrationId) -> anyhow::Result<Option<Integration>> {
        let row: Option<IntegrationRow> = with_conn!(self.db, conn => integrations::table
            .filter(integrations::tenant_id.eq(tenant.as_str()))
            .filter(integrations::id.eq(id.as_str()))
            .select(IntegrationRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(IntegrationRow::into_domain).transpose()
    }

    async fn list(&self, tenant: &TenantId) -> anyhow::Result<Vec<Integration>> {
        let rows: Vec<IntegrationRow> = with_conn!(self.db, conn => integrations::table
            .filter(integrations::tenant_id.eq(tenant.as_str()))
            .order(integrations::id.asc())
            .select(IntegrationRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().map(IntegrationRow::into_domain).collect()
    }

    async fn delete(&self, tenant: &TenantId, id: &IntegrationId) -> anyhow::Result<bool> {
        let (tenant, id) = (tenant.to_string(), id.to_string());
        let n = transaction!(self.db, conn => {
            Ok(diesel::delete(
                integrations::table.filter(integrations::tenant_id.eq(&tenant)).filter(integrations::id.eq(&id)),
            )
            .execute(conn)
            .await?)
        })?;
        Ok(n > 0)
    }

    async fn find_target(&self, id: &IntegrationId) -> anyhow::Result<Option<IntegrationTarget>> {
        let row: Option<(IntegrationRow, WorkflowRow, String)> = with_conn!(self.db, conn => integrations::table
            .inner_join(workflows::table.on(workflows::id
                .eq(integrations::workflow_id)
                .and(workflows::tenant_id.eq(integrations::tenant_id))))
            .inner_join(tenants::table.on(tenants::id.eq(integrations::tenant_id)))
            .filter(integrations::id.eq(id.as_str()))
            .select((IntegrationRow::as_select(), WorkflowRow::as_select(), tenants::plan))
            .first(conn)
            .await
            .optional())?;
        row.map(|(integration, workflow, plan)| {
            Ok(IntegrationTarget {
                integration: integration.into_domain()?,
                workflow: workflow.into_domain()?,
                plan: parse_stored(&plan, "plan")?,
            })
        })
        .transpose()
    }
}

//! [`WorkflowRepository`]: workflows, scoped by tenant in every query. Deleting one deletes its
//! triggers and integrations (their foreign keys cascade; see [`crate::triggers`]).

use agentry_domain::ids::{TenantId, WorkflowId};
use agentry_domain::pagination::Page;
use agentry_domain::workflows::{Workflow, WorkflowRepository, validate_steps};
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::Value;

use crate::database::{Database, StoreError, split_page};
use crate::schema::workflows;
use crate::types::{DbJsonAs, DbTime};

/// Workflows in the database.
#[derive(Debug, Clone)]
pub struct WorkflowStore {
    db: Database,
}

impl WorkflowStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[derive(Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = workflows, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(crate) struct WorkflowRow {
    id: String,
    tenant_id: String,
    name: String,
    #[diesel(treat_none_as_null = true)]
    description: Option<String>,
    steps: DbJsonAs<Value>,
    is_active: bool,
    created_at: DbTime,
    updated_at: DbTime,
}

impl WorkflowRow {
    fn from_domain(w: &Workflow) -> Self {
        Self {
            id: w.id.to_string(),
            tenant_id: w.tenant_id.to_string(),
            name: w.name.clone(),
            description: w.description.clone(),
            steps: DbJsonAs(w.steps_json()),
            is_active: w.is_active,
            created_at: w.created_at.into(),
            updated_at: w.updated_at.into(),
        }
    }

    pub(crate) fn into_domain(self) -> anyhow::Result<Workflow> {
        // Stored steps were validated when saved; reading them back parses their templates
        // again, which also catches a row written by hand.
        let steps = validate_steps(&self.steps.0).map_err(|errors| {
            let first = <[_]>::first(&errors).map(ToString::to_string).unwrap_or_default();
            anyhow::anyhow!("workflow {} has invalid stored steps: {first}", self.id)
        })?;
        Ok(Workflow {
            id: WorkflowId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            name: self.name,
            description: self.description,
            steps,
            is_active: self.is_active,
            created_at: self.created_at.0,
            updated_at: self.updated_at.0,
        })
    }
}

#[async_trait]
impl WorkflowRepository for WorkflowStore {
    async fn create(&self, workflow: &Workflow) -> anyhow::Result<()> {
        let row = WorkflowRow::from_domain(workflow);
        transaction!(self.db, conn => {
            diesel::insert_into(workflows::table).values(&row).execute(conn).await?;
            Ok::<_, StoreError>(())
        })?;
        Ok(())
    }

    async fn get(&self, tenant: &TenantId, id: &WorkflowId) -> anyhow::Result<Option<Workflow>> {
        let row: Option<WorkflowRow> = with_conn!(self.db, conn => workflows::table
            .filter(workflows::tenant_id.eq(tenant.as_str()))
            .filter(workflows::id.eq(id.as_str()))
            .select(WorkflowRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(WorkflowRow::into_domain).transpose()
    }

    async fn list(&self, tenant: &TenantId, page: Page) -> anyhow::Result<(Vec<Workflow>, u64)> {
        // Page and total in one query, as agents do (see `AgentStore::list`).
        let counted = diesel::alias!(workflows as counted);
        let in_tenant = counted.filter(counted.field(workflows::tenant_id).eq(tenant.as_str()));
        let (rows, total): (Vec<WorkflowRow>, i64) = with_conn!(self.db, conn => {
            let rows = workflows::table
                .filter(workflows::tenant_id.eq(tenant.as_str()))
                .order(workflows::id.asc())
                .limit(page.limit())
                .offset(page.offset())
                .select((WorkflowRow::as_select(), in_tenant.count().single_value().assume_not_null()))
                .load(conn)
                .await?;
            let (rows, total) = split_page(rows, page);
            let total = match total {
                Some(total) => total,
                None => workflows::table
                    .filter(workflows::tenant_id.eq(tenant.as_str()))
                    .count()
                    .get_result(conn)
                    .await?,
            };
            Ok::<_, diesel::result::Error>((rows, total))
        })?;
        let found = rows.into_iter().map(WorkflowRow::into_domain).collect::<anyhow::Result<_>>()?;
        Ok((found, u64::try_from(total).unwrap_or(0)))
    }

    async fn update(&self, workflow: &Workflow) -> anyhow::Result<bool> {
        let row = WorkflowRow::from_domain(workflow);
        let n = transaction!(self.db, conn => {
            let n = diesel::update(
                workflows::table.filter(workflows::tenant_id.eq(&row.tenant_id)).filter(workflows::id.eq(&row.id)),
            )
            .set(&row)
            .execute(conn)
            .await?;
            Ok::<_, StoreError>(n)
        })?;
        Ok(n > 0)
    }

    async fn delete(&self, tenant: &TenantId, id: &WorkflowId) -> anyhow::Result<bool> {
        let (tenant, id) = (tenant.to_string(), id.to_string());
        let n = transaction!(self.db, conn => {
            let n = diesel::delete(workflows::table.filter(workflows::tenant_id.eq(&tenant)).filter(workflows::id.eq(&id)))
                .execute(conn)
                .await?;
            Ok::<_, StoreError>(n)
        })?;
        Ok(n > 0)
    }
}

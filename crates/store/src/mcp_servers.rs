//! [`McpServerRepository`]: a tenant's remote MCP servers, scoped by tenant in every query;
//! names are unique per tenant (a unique index, so two concurrent registrations of one name
//! cannot both succeed).

use agentry_domain::ids::{McpServerId, TenantId};
use agentry_domain::mcp::{McpServer, McpServerRepository, McpTool};
use agentry_domain::webhooks::SealedSecret;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::{Database, StoreError};
use crate::schema::mcp_servers;
use crate::types::{DbJsonAs, DbTime, parse_named};

/// MCP servers in the database.
#[derive(Debug, Clone)]
pub struct McpServerStore {
    db: Database,
}

impl McpServerStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[derive(Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = mcp_servers, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
#[diesel(treat_none_as_null = true)]
struct McpServerRow {
    id: String,
    tenant_id: String,
    name: String,
    url: String,
    headers_sealed: String,
    header_names: DbJsonAs<Vec<String>>,
    allowed_tools: Option<DbJsonAs<Vec<String>>>,
    timeout_seconds: i32,
    status: String,
    error: Option<String>,
    tools: DbJsonAs<Vec<McpTool>>,
    checked_at: Option<DbTime>,
    created_at: DbTime,
    updated_at: DbTime,
}

impl McpServerRow {
    fn from_domain(s: &McpServer) -> Self {
        Self {
            id: s.id.to_string(),
            tenant_id: s.tenant_id.to_string(),
            name: s.name.clone(),
            url: s.url.clone(),
            headers_sealed: s.headers.0.clone(),
            header_names: DbJsonAs(s.header_names.clone()),
            allowed_tools: s.allowed_tools.clone().map(DbJsonAs),
            timeout_seconds: i32::try_from(s.timeout_seconds).unwrap_or(i32::MAX),
            status: s.status.as_str().to_owned(),
            error: s.error.clone(),
            tools: DbJsonAs(s.tools.clone()),
            checked_at: s.checked_at.map(DbTime),
            created_at: DbTime(s.created_at),
            updated_at: DbTime(s.updated_at),
        }
    }

    fn into_domain(self) -> anyhow::Result<McpServer> {
        Ok(McpServer {
            status: parse_named(&self.status, "MCP server status")?,
            id: McpServerId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            name: self.name,
            url: self.url,
            headers: SealedSecret(self.headers_sealed),
            header_names: self.header_names.0,
            allowed_tools: self.allowed_tools.map(|a| a.0),
            timeout_seconds: u32::try_from(self.timeout_seconds).unwrap_or(0),
            error: self.error,
            tools: self.tools.0,
            checked_at: self.checked_at.map(|t| t.0),
            created_at: self.created_at.0,
            updated_at: self.updated_at.0,
        })
    }
}

/// Whether a write failed only because the tenant has a server of that name.
fn name_taken(e: &StoreError) -> bool {
    e.is_unique_violation("mcp_servers_name_idx", "mcp_servers.name")
}

#[async_trait]
impl McpServerRepository for McpServerStore {
    async fn create(&self, server: &McpServer) -> anyhow::Result<bool> {
        let row = McpServerRow::from_domain(server);
        match transaction!(self.db, conn => {
            Ok(diesel::insert_into(mcp_servers::table).values(&row).execute(conn).await?)
        }) {
            Ok(_) => Ok(true),
            Err(e) if name_taken(&e) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    async fn get(&self, tenant: &TenantId, id: &McpServerId) -> anyhow::Result<Option<McpServer>> {
        let row: Option<McpServerRow> = with_conn!(self.db, conn => mcp_servers::table
            .filter(mcp_servers::tenant_id.eq(tenant.as_str()))
            .filter(mcp_servers::id.eq(id.as_str()))
            .select(McpServerRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(McpServerRow::into_domain).transpose()
    }

    async fn list(&self, tenant: &TenantId) -> anyhow::Result<Vec<McpServer>> {
        let rows: Vec<McpServerRow> = with_conn!(self.db, conn => mcp_servers::table
            .filter(mcp_servers::tenant_id.eq(tenant.as_str()))
            .order(mcp_servers::id.asc())
            .select(McpServerRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().map(McpServerRow::into_domain).collect()
    }

    async fn update(&self, server: &McpServer) -> anyhow::Result<Option<bool>> {
        let row = McpServerRow::from_domain(server);
        let (tenant, id) = (server.tenant_id.to_string(), server.id.to_string());
        match transaction!(self.db, conn => {
            Ok(diesel::update(
                mcp_servers::table.filter(mcp_servers::tenant_id.eq(&tenant)).filter(mcp_servers::id.eq(&id)),
            )
            .set(&row)
            .execute(conn)
            .await?)
        }) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(true)),
            Err(e) if name_taken(&e) => Ok(Some(false)),
            Err(e) => Err(e.into()),
        }
    }

    async fn delete(&self, tenant: &TenantId, id: &McpServerId) -> anyhow::Result<bool> {
        let (tenant, id) = (tenant.to_string(), id.to_string());
        let n = transaction!(self.db, conn => {
            Ok(diesel::delete(
                mcp_servers::table.filter(mcp_servers::tenant_id.eq(&tenant)).filter(mcp_servers::id.eq(&id)),
            )
            .execute(conn)
            .await?)
        })?;
        Ok(n > 0)
    }
}

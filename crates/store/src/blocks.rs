//! Core memory blocks: one row per block (`memory_blocks`) and one per version
//! (`memory_block_history`), written together. A change applies only over the version it was
//! made from, so two edits at once never lose one another: the second is told, and tries again.

use agentry_domain::agents::{BlockActor, BlockChange, BlockVersion, MemoryBlock, MemoryBlockRepository};
use agentry_domain::ids::{AgentId, TenantId};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::{Database, StoreError};
use crate::schema::{memory_block_history as h, memory_blocks as b};
use crate::types::{DbTime, parse_stored};

/// The agents' memory blocks.
#[derive(Clone, Debug)]
pub struct MemoryBlockStore {
    db: Database,
}

impl MemoryBlockStore {
    /// The store over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = b, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct BlockRow {
    tenant_id: String,
    agent_id: String,
    label: String,
    value: String,
    description: Option<String>,
    char_limit: i32,
    version: i32,
    created_at: DbTime,
    updated_at: DbTime,
}

impl BlockRow {
    fn from_domain(block: &MemoryBlock) -> Self {
        Self {
            tenant_id: block.tenant_id.to_string(),
            agent_id: block.agent_id.to_string(),
            label: block.label.clone(),
            value: block.value.clone(),
            description: block.description.clone(),
            char_limit: i32::try_from(block.limit).unwrap_or(i32::MAX),
            version: i32::try_from(block.version).unwrap_or(i32::MAX),
            created_at: DbTime(block.created_at),
            updated_at: DbTime(block.updated_at),
        }
    }

    fn into_domain(self) -> MemoryBlock {
        MemoryBlock {
            tenant_id: TenantId::from_string(self.tenant_id),
            agent_id: AgentId::from_string(self.agent_id),
            label: self.label,
            value: self.value,
            description: self.description,
            limit: u32::try_from(self.char_limit).unwrap_or(0),
            version: u32::try_from(self.version).unwrap_or(0),
            created_at: self.created_at.0,
            updated_at: self.updated_at.0,
        }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = h, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct VersionRow {
    tenant_id: String,
    agent_id: String,
    label: String,
    version: i32,
    value: String,
    change: String,
    actor: String,
    at: DbTime,
}

impl VersionRow {
    fn new(
        block: &MemoryBlock,
        version: u32,
        value: &str,
        change: BlockChange,
        actor: BlockActor,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            tenant_id: block.tenant_id.to_string(),
            agent_id: block.agent_id.to_string(),
            label: block.label.clone(),
            version: i32::try_from(version).unwrap_or(i32::MAX),
            value: value.to_owned(),
            change: change.as_str().to_owned(),
            actor: actor.as_str().to_owned(),
            at: DbTime(at),
        }
    }
}

#[async_trait]
impl MemoryBlockRepository for MemoryBlockStore {
    async fn list(&self, tenant: &TenantId, agent: &AgentId) -> anyhow::Result<Vec<MemoryBlock>> {
        let rows: Vec<BlockRow> = with_conn!(self.db, conn => b::table
            .filter(b::tenant_id.eq(tenant.as_str()))
            .filter(b::agent_id.eq(agent.as_str()))
            .order(b::label.asc())
            .select(BlockRow::as_select())
            .load(conn)
            .await)?;
        Ok(rows.into_iter().map(BlockRow::into_domain).collect())
    }

    async fn save(
        &self,
        block: &MemoryBlock,
        change: BlockChange,
        actor: BlockActor,
    ) -> anyhow::Result<bool> {
        let row = BlockRow::from_domain(block);
        let version = VersionRow::new(block, block.version, &block.value, change, actor, block.updated_at);
        let saved = transaction!(self.db, conn => {
            // Over the version it was made from; else, when no block has the label, as a new
            // one (a label used before continues its numbering).
            let mut written = diesel::update(
                b::table
                    .filter(b::agent_id.eq(&row.agent_id))
                    .filter(b::tenant_id.eq(&row.tenant_id))
                    .filter(b::label.eq(&row.label))
                    .filter(b::version.eq(row.version - 1)),
            )
            .set((
                b::value.eq(&row.value),
                b::description.eq(&row.description),
                b::char_limit.eq(row.char_limit),
                b::version.eq(row.version),
                b::updated_at.eq(row.updated_at),
            ))
            .execute(conn)
            .await?;
            if written == 0 {
                written = diesel::insert_into(b::table).values(&row).on_conflict_do_nothing().execute(conn).await?;
            }
            if written == 0 {
                return Ok::<_, StoreError>(false);
            }
            // The history's key refuses a version recorded twice: the later writer loses.
            diesel::insert_into(h::table).values(&version).execute(conn).await?;
            Ok(true)
        });
        match saved {
            Ok(saved) => Ok(saved),
            // Another change recorded this version first, or the agent went meanwhile.
            Err(e)
                if e.is_unique_violation("memory_block_history_pkey", "memory_block_history.agent_id")
                    || e.is_foreign_key_violation() =>
            {
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn delete(&self, block: &MemoryBlock, at: DateTime<Utc>) -> anyhow::Result<bool> {
        let row = BlockRow::from_domain(block);
        let version =
            VersionRow::new(block, block.version + 1, "", BlockChange::Deleted, BlockActor::Api, at);
        Ok(transaction!(self.db, conn => {
            let gone = diesel::delete(
                b::table
                    .filter(b::agent_id.eq(&row.agent_id))
                    .filter(b::tenant_id.eq(&row.tenant_id))
                    .filter(b::label.eq(&row.label))
                    .filter(b::version.eq(row.version)),
            )
            .execute(conn)
            .await?;
            if gone == 0 {
                return Ok::<_, StoreError>(false);
            }
            diesel::insert_into(h::table).values(&version).execute(conn).await?;
            Ok(true)
        })?)
    }

    async fn last_version(&self, tenant: &TenantId, agent: &AgentId, label: &str) -> anyhow::Result<u32> {
        let last: Option<i32> = with_conn!(self.db, conn => h::table
            .filter(h::tenant_id.eq(tenant.as_str()))
            .filter(h::agent_id.eq(agent.as_str()))
            .filter(h::label.eq(label))
            .select(diesel::dsl::max(h::version))
            .first(conn)
            .await)?;
        Ok(last.and_then(|v| u32::try_from(v).ok()).unwrap_or(0))
    }

    async fn history(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        label: &str,
    ) -> anyhow::Result<Vec<BlockVersion>> {
        let rows: Vec<VersionRow> = with_conn!(self.db, conn => h::table
            .filter(h::tenant_id.eq(tenant.as_str()))
            .filter(h::agent_id.eq(agent.as_str()))
            .filter(h::label.eq(label))
            .order(h::version.asc())
            .select(VersionRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter()
            .map(|r| {
                Ok(BlockVersion {
                    version: u32::try_from(r.version).unwrap_or(0),
                    value: r.value,
                    change: parse_stored(&r.change, "block change")?,
                    actor: parse_stored(&r.actor, "block actor")?,
                    at: r.at.0,
                })
            })
            .collect()
    }
}

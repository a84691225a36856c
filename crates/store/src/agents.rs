//! [`AgentRepository`]: agents, scoped by tenant in every query.

use agentry_domain::agents::{
    Agent, AgentConfig, AgentKnowledge, AgentName, AgentRepository, AgentTool, ExtractionMode,
};
use agentry_domain::events::Event;
use agentry_domain::ids::{AgentId, KnowledgeBaseId, TenantId};
use agentry_domain::memory::MemoryType;
use agentry_domain::pagination::Page;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::{Deserialize, Serialize};

use crate::database::{Database, StoreError, split_page};
use crate::events::EventRow;
use crate::schema::{agents, events};
use crate::signals::WorkQueue;
use crate::types::parse_stored;
use crate::types::{DbJsonAs, DbTime};

/// Agents in the database.
#[derive(Debug, Clone)]
pub struct AgentStore {
    db: Database,
}

impl AgentStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[derive(Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = agents, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct AgentRow {
    id: String,
    tenant_id: String,
    name: String,
    agent_type: String,
    status: String,
    #[diesel(treat_none_as_null = true)]
    description: Option<String>,
    memory_types: DbJsonAs<Vec<String>>,
    config: DbJsonAs<StoredConfig>,
    created_at: DbTime,
    updated_at: DbTime,
}

/// An agent's config as stored: every field, absent ones as null.
#[derive(Debug, Serialize, Deserialize)]
struct StoredConfig {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    max_tokens: Option<u32>,
    /// The tools as configured (validated when saved, read back with the same rules).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tools: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_tool_rounds: Option<u8>,
    /// The knowledge bases' ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    knowledge_bases: Vec<String>,
    /// `config.knowledge`, as the API shows it; absent: the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    knowledge: Option<serde_json::Value>,
    /// `config.memory_extraction`; absent: `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memory_extraction: Option<String>,
}

impl AgentRow {
    fn from_domain(a: &Agent) -> Self {
        Self {
            id: a.id.to_string(),
            tenant_id: a.tenant_id.to_string(),
            name: a.name.as_str().to_owned(),
            agent_type: a.agent_type.as_str().to_owned(),
            status: a.status.as_str().to_owned(),
            description: a.description.clone(),
            memory_types: DbJsonAs(a.memory_types.iter().map(|m| m.as_str().to_owned()).collect()),
            config: DbJsonAs(StoredConfig {
                model: a.config.model.clone(),
                temperature: a.config.temperature,
                system_prompt: a.config.system_prompt.clone(),
                max_tokens: a.config.max_tokens,
                tools: a.config.tools.iter().map(AgentTool::to_json).collect(),
                max_tool_rounds: a.config.max_tool_rounds,
                knowledge_bases: a.config.knowledge_bases.iter().map(ToString::to_string).collect(),
                knowledge: (a.config.knowledge != AgentKnowledge::default())
                    .then(|| a.config.knowledge.to_json()),
                memory_extraction: (a.config.memory_extraction != ExtractionMode::Auto)
                    .then(|| a.config.memory_extraction.as_str().to_owned()),
            }),
            created_at: a.created_at.into(),
            updated_at: a.updated_at.into(),
        }
    }

    fn into_domain(self) -> anyhow::Result<Agent> {
        let StoredConfig {
            model,
            temperature,
            system_prompt,
            max_tokens,
            tools,
            max_tool_rounds,
            knowledge_bases,
            knowledge,
            memory_extraction,
        } = self.config.0;
        let tools = AgentTool::parse_list(&serde_json::Value::Array(tools)).map_err(|e| {
            let reasons: Vec<&str> = e.iter().map(|e| e.message.as_str()).collect();
            anyhow::anyhow!("an agent's stored tools: {}", reasons.join("; "))
        })?;
        Ok(Agent {
            id: AgentId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            name: AgentName::new(&self.name)?,
            agent_type: parse_stored(&self.agent_type, "agent type")?,
            status: parse_stored(&self.status, "agent status")?,
            description: self.description,
            memory_types: self
                .memory_types
                .0
                .iter()
                .map(|m| parse_stored::<MemoryType>(m, "memory type"))
                .collect::<anyhow::Result<_>>()?,
            config: AgentConfig {
                model,
                temperature,
                system_prompt,
                max_tokens,
                tools,
                max_tool_rounds,
                knowledge_bases: knowledge_bases.into_iter().map(KnowledgeBaseId::from_string).collect(),
                knowledge: AgentKnowledge::from_stored(knowledge.as_ref()),
                memory_extraction: match memory_extraction {
                    Some(mode) => parse_stored(&mode, "memory extraction mode")?,
                    None => ExtractionMode::Auto,
                },
            },
            created_at: self.created_at.0,
            updated_at: self.updated_at.0,
        })
    }
}

#[async_trait]
impl AgentRepository for AgentStore {
    async fn create(&self, agent: &Agent, event: &Event) -> anyhow::Result<()> {
        let row = AgentRow::from_domain(agent);
        let event = EventRow::from_domain(event)?;
        transaction!(self.db, conn => {
            diesel::insert_into(agents::table).values(&row).execute(conn).await?;
            diesel::insert_into(events::table).values(&event).execute(conn).await?;
            Ok::<_, StoreError>(())
        })?;
        self.db.stored(WorkQueue::Outbox);
        Ok(())
    }

    async fn get(&self, tenant: &TenantId, id: &AgentId) -> anyhow::Result<Option<Agent>> {
        let row: Option<AgentRow> = with_conn!(self.db, conn => agents::table
            .filter(agents::tenant_id.eq(tenant.as_str()))
            .filter(agents::id.eq(id.as_str()))
            .select(AgentRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(AgentRow::into_domain).transpose()
    }

    async fn list(&self, tenant: &TenantId, page: Page) -> anyhow::Result<(Vec<Agent>, u64)> {
        // Page and total in one query: the total rides along as an uncorrelated subquery, which
        // both databases evaluate once per query over the tenant's index. (`count(*) OVER ()`
        // would be the same on PostgreSQL, but SQLite then copies every row of the tenant into
        // a temporary table first: 12 % slower.)
        let counted = diesel::alias!(agents as counted);
        let in_tenant = counted.filter(counted.field(agents::tenant_id).eq(tenant.as_str()));
        let (rows, total): (Vec<AgentRow>, i64) = with_conn!(self.db, conn => {
            let rows = agents::table
                .filter(agents::tenant_id.eq(tenant.as_str()))
                .order(agents::id.asc())
                .limit(page.limit())
                .offset(page.offset())
                .select((AgentRow::as_select(), in_tenant.count().single_value().assume_not_null()))
                .load(conn)
                .await?;
            let (rows, total) = split_page(rows, page);
            let total = match total {
                Some(total) => total,
                None => agents::table.filter(agents::tenant_id.eq(tenant.as_str())).count().get_result(conn).await?,
            };
            Ok::<_, diesel::result::Error>((rows, total))
        })?;
        let agents = rows.into_iter().map(AgentRow::into_domain).collect::<anyhow::Result<_>>()?;
        Ok((agents, u64::try_from(total).unwrap_or(0)))
    }

    async fn update(&self, agent: &Agent, event: &Event) -> anyhow::Result<bool> {
        let row = AgentRow::from_domain(agent);
        let event = EventRow::from_domain(event)?;
        let updated = transaction!(self.db, conn => {
            let n = diesel::update(
                agents::table
                    .filter(agents::tenant_id.eq(&row.tenant_id))
                    .filter(agents::id.eq(&row.id)),
            )
            .set(&row)
            .execute(conn)
            .await?;
            if n == 0 {
                return Ok::<_, StoreError>(false);
            }
            diesel::insert_into(events::table).values(&event).execute(conn).await?;
            Ok(true)
        })?;
        if updated {
            self.db.stored(WorkQueue::Outbox);
        }
        Ok(updated)
    }

    async fn delete(&self, tenant: &TenantId, id: &AgentId) -> anyhow::Result<bool> {
        // Conversations, messages, memory entries and documents go with it (ON DELETE
        // CASCADE); caches of the tenant's vectors are told to reload.
        let (tenant, id) = (tenant.clone(), id.clone());
        let n = transaction!(self.db, conn => {
            let n = diesel::delete(
                agents::table.filter(agents::tenant_id.eq(tenant.as_str())).filter(agents::id.eq(id.as_str())),
            )
            .execute(conn)
            .await?;
            if n == 1 {
                bump_memory_version!(conn, tenant.as_str(), reset: true)?;
            }
            Ok::<_, StoreError>(n)
        })?;
        Ok(n == 1)
    }
}

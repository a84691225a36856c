//! What memory learns from a conversation, stored: the facts extraction adds, rewords and
//! invalidates, each change with its version in `memory_history` and its event, all in one
//! transaction with the exchange's receipt (`memory_extractions`) and the charge of the model
//! calls that decided it, so that the same exchange handed over twice changes (and costs)
//! nothing the second time.

use agentry_domain::billing::Settlement;
use agentry_domain::ids::{AgentId, MemoryId, MessageId, TenantId};
use agentry_domain::memory::learning::{Invalidation, Learned, MemoryChange, MemoryVersion, Reworded};
use agentry_domain::memory::{MemoryEntry, MemoryType};
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::{EntryRow, MemoryStore, NewEntryRow, vector_bytes};
use crate::database::StoreError;
use crate::events::EventRow;
use crate::insert_all::{InsertAll, InsertReceipts};
use crate::leases::param;
use crate::schema::{credit_holds, memory_entries, memory_extractions, memory_history};
use crate::signals::WorkQueue;
use crate::types::{DbJsonAs, DbTime, parse_stored};

/// A version as stored.
#[derive(Queryable, Selectable)]
#[diesel(table_name = memory_history, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct VersionRow {
    version: i32,
    content: String,
    change: String,
    reason: Option<String>,
    source_message_ids: DbJsonAs<Vec<String>>,
    at: DbTime,
}

/// Records an entry's first version from the entry itself, when its history has none yet
/// (it was written before history was kept, or by a client): parameters 1 and 2 are the
/// entry and its tenant.
fn first_version_sql(backend: crate::Backend) -> String {
    let p = |n| param(backend, n);
    format!(
        "INSERT INTO memory_history (memory_id, tenant_id, version, content, change, reason, source_message_ids, at) \
         SELECT id, tenant_id, 1, content, 'added', NULL, source_message_ids, created_at FROM memory_entries \
         WHERE id = {} AND tenant_id = {} ON CONFLICT DO NOTHING",
        p(1),
        p(2)
    )
}

fn ids(ids: &[MessageId]) -> DbJsonAs<Vec<String>> {
    DbJsonAs(ids.iter().map(ToString::to_string).collect())
}

/// The indexed expression a fact's topic is found by (`memory_entries_topic_idx`): `->>` reads
/// a JSON member as text on both PostgreSQL (JSONB) and SQLite (JSON text, since 3.38).
const TOPIC: &str = "(memory_entries.metadata ->> 'topic')";

impl MemoryStore {
    /// See [`agentry_domain::memory::MemoryRepository::on_topic`].
    pub(super) async fn current_on_topic(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        topic: &str,
        now: DateTime<Utc>,
        limit: usize,
    ) -> anyhow::Result<Vec<MemoryEntry>> {
        use diesel::sql_types::{Bool, Text};
        use memory_entries as m;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<EntryRow> = with_conn!(self.db, conn => m::table
            .filter(m::tenant_id.eq(tenant.as_str()))
            .filter(m::agent_id.eq(agent.as_str()))
            .filter(m::invalid_at.is_null())
            .filter(diesel::dsl::sql::<Bool>(&format!("{TOPIC} = ")).bind::<Text, _>(topic))
            .filter(m::memory_type.eq(MemoryType::Semantic.as_str()))
            .filter(m::expires_at.is_null().or(m::expires_at.gt(DbTime(now))))
            .order(m::id.asc())
            .limit(limit)
            .select(EntryRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().map(EntryRow::into_domain).collect()
    }

    /// See [`agentry_domain::memory::MemoryRepository::learned_already`].
    pub(super) async fn receipts_of(
        &self,
        exchanges: &[(TenantId, MessageId)],
    ) -> anyhow::Result<Vec<MessageId>> {
        if exchanges.is_empty() {
            return Ok(Vec::new());
        }
        let messages: Vec<&str> = exchanges.iter().map(|(_, m)| m.as_str()).collect();
        let found: Vec<(String, String)> = with_conn!(self.db, conn => memory_extractions::table
            .filter(memory_extractions::message_id.eq_any(&messages))
            .select((memory_extractions::tenant_id, memory_extractions::message_id))
            .load(conn)
            .await)?;
        // A receipt counts only for its own tenant.
        Ok(exchanges
            .iter()
            .filter(|(t, m)| found.iter().any(|(ft, fm)| ft == t.as_str() && fm == m.as_str()))
            .map(|(_, m)| m.clone())
            .collect())
    }

    /// See [`agentry_domain::memory::MemoryRepository::learn_all`].
    pub(super) async fn apply_learned(&self, learned: &[Learned]) -> anyhow::Result<Vec<bool>> {
        if learned.is_empty() {
            return Ok(Vec::new());
        }
        let prepared = learned.iter().map(Prepared::of).collect::<anyhow::Result<Vec<_>>>()?;
        let first_version = first_version_sql(self.db.backend());
        let applied = transaction!(self.db, conn => {
            use memory_entries as m;
            // One memory version per tenant for the whole pass: its rows commit together.
            let mut versions: std::collections::HashMap<&str, i64> = std::collections::HashMap::new();
            // What the pass's exchanges add, written before any change.
            let (mut entries, mut first_versions, mut events) = (Vec::new(), Vec::new(), Vec::new());
            let receipts: Vec<ReceiptRow> = prepared.iter().map(Prepared::receipt).collect();
            let applied = conn.insert_receipts(&receipts).await?;
            for (p, fresh) in prepared.iter().zip(&applied) {
                if !*fresh {
                    continue;
                }
                if let Some(s) = &p.charge {
                    // The hold goes, and what it set aside beyond the calls' cost goes back to
                    // the balance; a hold the stale-hold sweeper released already is charged
                    // all the same.
                    let held = diesel::delete(credit_holds::table.filter(credit_holds::id.eq(s.hold.id.as_str())))
                        .returning(credit_holds::amount)
                        .get_result::<i64>(conn)
                        .await
                        .optional()?
                        .unwrap_or(0);
                    let cost = -s.entry.delta;
                    let (_, settled) = append_ledger!(conn, &s.entry, credits: held - cost, held: -held)?;
                    if let Some(low) = s.low_credit_event(settled, s.entry.created_at) {
                        events.push(EventRow::from_domain(&low).map_err(|e| StoreError::Encode(e.to_string()))?);
                    }
                }
                if p.changes == 0 {
                    continue;
                }
                let version = match versions.get(p.tenant.as_str()) {
                    Some(version) => *version,
                    None => {
                        let version = bump_memory_version!(conn, p.tenant.as_str())?;
                        versions.insert(p.tenant.as_str(), version);
                        version
                    }
                };
                for row in &p.added {
                    entries.push(NewEntryRow { seq: version, ..row.clone() });
                }
                for (id, content) in &p.added_texts {
                    first_versions.push(NewVersionRow {
                        memory_id: id.clone(),
                        tenant_id: p.tenant.clone(),
                        version: 1,
                        content: content.clone(),
                        change: MemoryChange::Added.as_str(),
                        reason: None,
                        source_message_ids: p.sources.clone(),
                        at: p.at,
                    });
                }
                events.extend(p.events.iter().cloned());
            }
            // The pass's new entries and their first versions go in before any change, which
            // may be to a fact an earlier exchange of the pass added.
            conn.insert_all(&entries).await?;
            conn.insert_all(&first_versions).await?;
            for (p, fresh) in prepared.iter().zip(&applied) {
                if !*fresh || (p.updated.is_empty() && p.invalidated.is_empty()) {
                    continue;
                }
                let (tenant, agent, at) = (&p.tenant, &p.agent, p.at);
                let version = versions.get(tenant.as_str()).copied().unwrap_or_default();
                // The next version of an entry's history; its first is recorded from the entry
                // when it has none yet (it was written by a client).
                macro_rules! next_version {
                    ($id:expr) => {{
                        use diesel::sql_types::Text;
                        let last: Option<i32> = memory_history::table
                            .filter(memory_history::memory_id.eq($id))
                            .select(diesel::dsl::max(memory_history::version))
                            .first(conn)
                            .await?;
                        match last {
                            Some(last) => last + 1,
                            None => {
                                diesel::sql_query(first_version.as_str())
                                    .bind::<Text, _>($id)
                                    .bind::<Text, _>(tenant)
                                    .execute(conn)
                                    .await?;
                                2
                            }
                        }
                    }};
                }
                macro_rules! record {
                    ($id:expr, $version:expr, $content:expr, $change:expr, $reason:expr) => {
                        diesel::insert_into(memory_history::table)
                            .values(NewVersionRow {
                                memory_id: $id.clone(),
                                tenant_id: tenant.clone(),
                                version: $version,
                                content: $content,
                                change: $change.as_str(),
                                reason: $reason,
                                source_message_ids: p.sources.clone(),
                                at,
                            })
                            .execute(conn)
                            .await?
                    };
                }
                // A fact changes only while it holds and is the agent's: one another exchange
                // invalidated meanwhile is left as it is.
                macro_rules! current {
                    ($id:expr) => {
                        m::table
                            .filter(m::tenant_id.eq(tenant))
                            .filter(m::id.eq($id))
                            .filter(m::agent_id.eq(agent))
                            .filter(m::invalid_at.is_null())
                    };
                }
                for u in &p.updated {
                    let id = u.id.to_string();
                    // Before the change: the first version recorded from the entry is its old text.
                    let next = next_version!(&id);
                    let n = diesel::update(current!(&id))
                        .set((
                            m::content.eq(&u.content),
                            m::embedding.eq(vector_bytes(&u.embedding.vector)),
                            m::embedding_dim.eq(i32::try_from(u.embedding.vector.len()).unwrap_or(i32::MAX)),
                            m::embedding_model.eq(&u.embedding.model_id),
                            m::source_message_ids.eq(ids(&u.source_message_ids)),
                            m::updated_at.eq(at),
                            m::seq.eq(version),
                        ))
                        .execute(conn)
                        .await?;
                    if n == 1 {
                        record!(&id, next, u.content.clone(), MemoryChange::Updated, None::<String>);
                    }
                }
                for i in &p.invalidated {
                    let id = i.id.to_string();
                    let next = next_version!(&id);
                    let content: Option<String> = diesel::update(current!(&id))
                        .set((
                            m::invalid_at.eq(Some(at)),
                            m::superseded_by.eq(i.superseded_by.as_ref().map(ToString::to_string)),
                            m::seq.eq(version),
                        ))
                        .returning(m::content)
                        .get_result(conn)
                        .await
                        .optional()?;
                    if let Some(content) = content {
                        record!(&id, next, content, MemoryChange::Invalidated, Some(i.reason.clone()));
                    }
                }
            }
            conn.insert_all(&events).await?;
            Ok::<_, StoreError>(applied)
        })?;
        if applied.iter().any(|a| *a) {
            self.db.stored(WorkQueue::Outbox);
        }
        Ok(applied)
    }

    /// See [`agentry_domain::memory::MemoryRepository::history`].
    pub(super) async fn versions(
        &self,
        tenant: &TenantId,
        id: &MemoryId,
    ) -> anyhow::Result<Vec<MemoryVersion>> {
        let rows: Vec<VersionRow> = with_conn!(self.db, conn => memory_history::table
            .filter(memory_history::tenant_id.eq(tenant.as_str()))
            .filter(memory_history::memory_id.eq(id.as_str()))
            .order(memory_history::version.asc())
            .select(VersionRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter()
            .map(|r| {
                Ok(MemoryVersion {
                    version: u32::try_from(r.version).unwrap_or(0),
                    content: r.content,
                    change: parse_stored(&r.change, "memory change")?,
                    reason: r.reason,
                    source_message_ids: r
                        .source_message_ids
                        .0
                        .into_iter()
                        .map(MessageId::from_string)
                        .collect(),
                    at: r.at.0,
                })
            })
            .collect()
    }
}

/// A version of an entry's history, as written.
#[derive(Insertable)]
#[diesel(table_name = memory_history, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(crate) struct NewVersionRow {
    memory_id: String,
    tenant_id: String,
    version: i32,
    content: String,
    change: &'static str,
    #[diesel(treat_none_as_null = true)]
    reason: Option<String>,
    source_message_ids: DbJsonAs<Vec<String>>,
    at: DbTime,
}

/// The receipt of an exchange learned from, as written.
#[derive(Insertable)]
#[diesel(table_name = memory_extractions, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(crate) struct ReceiptRow {
    pub(crate) tenant_id: String,
    pub(crate) message_id: String,
    agent_id: String,
    changes: i32,
    extracted_at: DbTime,
}

/// One exchange's [`Learned`], as its rows.
struct Prepared {
    tenant: String,
    agent: String,
    receipt: String,
    at: DbTime,
    sources: DbJsonAs<Vec<String>>,
    added: Vec<NewEntryRow>,
    added_texts: Vec<(String, String)>,
    updated: Vec<Reworded>,
    invalidated: Vec<Invalidation>,
    events: Vec<EventRow>,
    changes: i32,
    charge: Option<Settlement>,
}

impl Prepared {
    fn receipt(&self) -> ReceiptRow {
        ReceiptRow {
            tenant_id: self.tenant.clone(),
            message_id: self.receipt.clone(),
            agent_id: self.agent.clone(),
            changes: self.changes,
            extracted_at: self.at,
        }
    }

    fn of(learned: &Learned) -> anyhow::Result<Self> {
        Ok(Self {
            tenant: learned.tenant_id.to_string(),
            agent: learned.agent_id.to_string(),
            receipt: learned.exchange.to_string(),
            at: DbTime(learned.at),
            sources: ids(&learned.source_message_ids),
            added: learned.added.iter().map(NewEntryRow::from_domain).collect(),
            added_texts: learned
                .added
                .iter()
                .map(|e| (e.entry.id.to_string(), e.entry.content.clone()))
                .collect(),
            updated: learned.updated.clone(),
            invalidated: learned.invalidated.clone(),
            events: EventRow::all(&learned.events)?,
            changes: i32::try_from(learned.changes()).unwrap_or(i32::MAX),
            charge: learned.charge.clone(),
        })
    }
}

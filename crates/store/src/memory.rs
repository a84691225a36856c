//! [`MemoryRepository`]: memory entries with their embeddings, documents, full-text search
//! (FTS5 with bm25 on SQLite, a `tsvector` with a GIN index on PostgreSQL), and exact vector
//! search over an in-process cache kept current by the tenant's memory version
//! ([`crate::vectors`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agentry_domain::events::Event;
use agentry_domain::ids::{AgentId, DocumentId, MemoryId, TenantId};
use agentry_domain::memory::model::MemoryOrigin;
use agentry_domain::memory::{
    EmbeddedEntry, Embedding, MemoryDocument, MemoryEntry, MemoryFilter, MemoryRepository, MemoryType, Merge,
    Validity,
};
use agentry_domain::pagination::Page;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::{Backend, Database, StoreError};
use crate::events::EventRow;
use crate::schema::{events, memory_documents, memory_entries, memory_scopes, memory_tombstones};
use crate::signals::WorkQueue;
use crate::types::{DbJsonAs, DbTime};
use crate::vectors::{self, Load, Sync, VectorCache};

mod learning;
pub(crate) mod lexical;
mod rows;

pub(crate) use learning::{NewVersionRow, ReceiptRow};
use rows::VectorRow;
pub(crate) use rows::{EntryRow, NewEntryRow, vector_bytes, vector_from_bytes};

use lexical::CommonTerms;

/// Memory in the database, with this process's cache of vectors.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    db: Database,
    cache: Arc<VectorCache>,
    common_terms: Arc<CommonTerms>,
    dimension: usize,
}

impl MemoryStore {
    /// A repository over `db` for vectors of `dimension` values.
    pub fn new(db: Database, dimension: usize) -> Self {
        Self {
            db,
            cache: Arc::new(VectorCache::default()),
            common_terms: Arc::new(CommonTerms::default()),
            dimension,
        }
    }
}

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    id: String,
}

#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// The types of a filter as `,semantic,episodic,` (empty: every type), matched in SQL with a
/// substring test so that one statement serves every combination.
fn types_list(types: &[MemoryType]) -> String {
    if types.is_empty() {
        String::new()
    } else {
        format!(",{},", types.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(","))
    }
}

/// The tenant column as an expression no index serves (`tenant_id || ''`), for lookups of a
/// list of ids within a tenant. Without statistics SQLite guesses that an equality on an
/// index's first column matches 10 rows, fewer than a 100-id `IN` list of unique lookups, and
/// so walked every entry of the tenant (reading each row's embedding) to find a page of
/// search results. Written this way, both databases look the ids up by their unique index and
/// check the tenant on the rows found.
macro_rules! tenant_not_indexed {
    ($column:expr) => {
        $column.concat("")
    };
}

impl MemoryStore {
    /// Brings the tenant's cache up to the stored version and returns it.
    async fn synced(
        &self,
        tenant: &TenantId,
        model_id: &str,
    ) -> anyhow::Result<Arc<std::sync::RwLock<vectors::TenantVectors>>> {
        let cache = self.cache.tenant(tenant.as_str(), model_id, self.dimension);
        let tenant_id = tenant.as_str();
        let dimension = i32::try_from(self.dimension).unwrap_or(i32::MAX);
        let stored: Option<(i64, i64)> = with_conn!(self.db, conn => memory_scopes::table
            .filter(memory_scopes::tenant_id.eq(tenant_id))
            .select((memory_scopes::version, memory_scopes::reset_version))
            .first(conn)
            .await
            .optional())?;
        let (version, reset) = stored.unwrap_or((0, 0));
        let (sync, planned_from) = {
            let c = cache.read().unwrap_or_else(PoisonError::into_inner);
            (vectors::plan(&c, model_id, version, reset), vectors::version_of(&c))
        };
        let (rows, tombstones): (Vec<VectorRow>, Vec<String>) = match sync {
            Sync::Current => return Ok(cache),
            Sync::Everything => {
                let rows = with_conn!(self.db, conn => memory_entries::table
                    .filter(memory_entries::tenant_id.eq(tenant_id))
                    .filter(memory_entries::embedding_model.eq(model_id))
                    .filter(memory_entries::embedding_dim.eq(dimension))
                    .select(VectorRow::as_select())
                    .load(conn)
                    .await)?;
                (rows, Vec::new())
            }
            Sync::Changes { since } => with_conn!(self.db, conn => async {
                let rows = memory_entries::table
                    .filter(memory_entries::tenant_id.eq(tenant_id))
                    .filter(memory_entries::seq.gt(since))
                    .filter(memory_entries::embedding_model.eq(model_id))
                    .filter(memory_entries::embedding_dim.eq(dimension))
                    .select(VectorRow::as_select())
                    .load(conn)
                    .await?;
                let gone = memory_tombstones::table
                    .filter(memory_tombstones::tenant_id.eq(tenant_id))
                    .filter(memory_tombstones::seq.gt(since))
                    .select(memory_tombstones::entry_id)
                    .load(conn)
                    .await?;
                Ok::<_, diesel::result::Error>((rows, gone))
            }.await)?,
        };
        let rows = rows.into_iter().map(VectorRow::into_cached).collect::<anyhow::Result<Vec<_>>>()?;
        let load = Load {
            planned_from,
            sync,
            version,
            model_id: model_id.to_owned(),
            dimension: self.dimension,
            rows,
            tombstones: tombstones.into_iter().map(MemoryId::from_string).collect(),
        };
        vectors::apply(&mut cache.write().unwrap_or_else(PoisonError::into_inner), load);
        Ok(cache)
    }
}

/// Records in a transaction that `$ids` (an iterator of `&String`) were deleted at `$version`,
/// so that other processes' caches drop them; evaluates to `Result<(), diesel::result::Error>`.
macro_rules! record_tombstones {
    ($conn:expr, $tenant:expr, $version:expr, $ids:expr) => {{
        let mut result = Ok(());
        for id in $ids {
            let inserted = diesel::insert_into(memory_tombstones::table)
                .values((
                    memory_tombstones::tenant_id.eq($tenant),
                    memory_tombstones::seq.eq($version),
                    memory_tombstones::entry_id.eq(id),
                ))
                .execute($conn)
                .await;
            if let Err(e) = inserted {
                result = Err(e);
                break;
            }
        }
        result
    }};
}

#[async_trait]
impl MemoryRepository for MemoryStore {
    async fn insert(&self, entries: &[EmbeddedEntry], documents: &[MemoryDocument]) -> anyhow::Result<()> {
        let Some(tenant) = entries.first().map(|e| e.entry.tenant_id.to_string()) else { return Ok(()) };
        let mut rows: Vec<NewEntryRow> = entries.iter().map(NewEntryRow::from_domain).collect();
        let docs: Vec<_> = documents
            .iter()
            .map(|d| {
                (
                    memory_documents::id.eq(d.id.to_string()),
                    memory_documents::tenant_id.eq(d.tenant_id.to_string()),
                    memory_documents::agent_id.eq(d.agent_id.to_string()),
                    memory_documents::title.eq(d.title.clone()),
                    memory_documents::metadata.eq(DbJsonAs(d.metadata.clone())),
                    memory_documents::chunk_count.eq(i64::try_from(d.chunk_count).unwrap_or(i64::MAX)),
                    memory_documents::created_at.eq(DbTime(d.created_at)),
                )
            })
            .collect();
        transaction!(self.db, conn => {
            let version = bump_memory_version!(conn, tenant.as_str())?;
            for doc in &docs {
                diesel::insert_into(memory_documents::table).values(doc.clone()).execute(conn).await?;
            }
            for row in &mut rows {
                row.seq = version;
                diesel::insert_into(memory_entries::table).values(&*row).execute(conn).await?;
            }
            Ok::<_, StoreError>(())
        })?;
        Ok(())
    }

    async fn upsert_keyed(&self, entry: &EmbeddedEntry) -> anyhow::Result<MemoryEntry> {
        let mut row = NewEntryRow::from_domain(entry);
        let row = transaction!(self.db, conn => {
            row.seq = bump_memory_version!(conn, row.tenant_id.as_str())?;
            use memory_entries as m;
            let stored: EntryRow = diesel::insert_into(m::table)
                .values(&row)
                .on_conflict((m::tenant_id, m::memory_type, m::key))
                .do_update()
                .set((
                    m::agent_id.eq(&row.agent_id),
                    m::content.eq(&row.content),
                    m::source.eq(&row.source),
                    m::metadata.eq(&row.metadata),
                    m::tags.eq(&row.tags),
                    m::importance.eq(row.importance),
                    m::updated_at.eq(row.updated_at),
                    m::expires_at.eq(row.expires_at),
                    m::embedding.eq(&row.embedding),
                    m::embedding_dim.eq(row.embedding_dim),
                    m::embedding_model.eq(&row.embedding_model),
                    m::seq.eq(row.seq),
                ))
                .returning(EntryRow::as_returning())
                .get_result(conn)
                .await?;
            Ok::<_, StoreError>(stored)
        })?;
        row.into_domain()
    }

    async fn get(&self, tenant: &TenantId, id: &MemoryId) -> anyhow::Result<Option<MemoryEntry>> {
        let row: Option<EntryRow> = with_conn!(self.db, conn => memory_entries::table
            .filter(memory_entries::tenant_id.eq(tenant.as_str()))
            .filter(memory_entries::id.eq(id.as_str()))
            .select(EntryRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(EntryRow::into_domain).transpose()
    }

    async fn get_many(&self, tenant: &TenantId, ids: &[MemoryId]) -> anyhow::Result<Vec<MemoryEntry>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = ids.iter().map(MemoryId::as_str).collect();
        let rows: Vec<EntryRow> = with_conn!(self.db, conn => memory_entries::table
            .filter(tenant_not_indexed!(memory_entries::tenant_id).eq(tenant.as_str()))
            .filter(memory_entries::id.eq_any(&ids))
            .select(EntryRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().map(EntryRow::into_domain).collect()
    }

    async fn list(
        &self,
        tenant: &TenantId,
        agent: Option<AgentId>,
        memory_type: Option<MemoryType>,
        tag: Option<String>,
        validity: Validity,
        now: DateTime<Utc>,
        page: Page,
    ) -> anyhow::Result<(Vec<MemoryEntry>, u64)> {
        use memory_entries as m;
        // Tags are a JSON array (JSONB on PostgreSQL, text on SQLite), printed by both with
        // the same escapes. A tag is an element when its JSON string follows `[`, `,` or a
        // space: inside a string every `"` is escaped, so only a delimiter can follow those.
        // `replace` compares exactly (unlike SQLite's LIKE, which ignores case) on both.
        let tag_patterns = tag.as_ref().map(|t| {
            let quoted = serde_json::to_string(t).unwrap_or_default();
            ["[", ",", " "].map(|before| format!("{before}{quoted}"))
        });
        let (rows, total): (Vec<EntryRow>, i64) = with_conn!(self.db, conn => async {
            let query = || {
                let mut q = m::table
                    .filter(m::tenant_id.eq(tenant.as_str()))
                    .filter(m::expires_at.is_null().or(m::expires_at.gt(DbTime(now))))
                    .into_boxed();
                match validity.as_of {
                    Some(t) => {
                        q = q
                            .filter(m::valid_from.le(DbTime(t)))
                            .filter(m::invalid_at.is_null().or(m::invalid_at.gt(DbTime(t))));
                    }
                    None if validity.include_invalid => {}
                    None => q = q.filter(m::invalid_at.is_null()),
                }
                if let Some(agent) = &agent {
                    q = q.filter(m::agent_id.eq(agent.as_str().to_owned()));
                }
                if let Some(t) = memory_type {
                    q = q.filter(m::memory_type.eq(t.as_str()));
                }
                if let Some([first, second, third]) = &tag_patterns {
                    use diesel::sql_types::{Bool, Text};
                    const TAGS: &str = "CAST(memory_entries.tags AS TEXT)";
                    let (open, holds) = (format!("replace({TAGS}, "), format!(", '') <> {TAGS}"));
                    q = q.filter(
                        diesel::dsl::sql::<Bool>(&format!("({open}"))
                            .bind::<Text, _>(first.clone())
                            .sql(&format!("{holds} OR {open}"))
                            .bind::<Text, _>(second.clone())
                            .sql(&format!("{holds} OR {open}"))
                            .bind::<Text, _>(third.clone())
                            .sql(&format!("{holds})")),
                    );
                }
                q
            };
            let rows = query()
                .order(m::id.asc())
                .limit(page.limit())
                .offset(page.offset())
                .select(EntryRow::as_select())
                .load(conn)
                .await?;
            let total = query().count().get_result(conn).await?;
            Ok::<_, diesel::result::Error>((rows, total))
        }.await)?;
        let mut entries: Vec<MemoryEntry> =
            rows.into_iter().map(EntryRow::into_domain).collect::<anyhow::Result<_>>()?;
        // The text match can be fooled by a tag holding a quote; the exact check cannot.
        if let Some(tag) = &tag {
            entries.retain(|e| e.tags.contains(tag));
        }
        Ok((entries, u64::try_from(total).unwrap_or(0)))
    }

    async fn delete(&self, tenant: &TenantId, id: &MemoryId) -> anyhow::Result<bool> {
        let (tenant, id) = (tenant.to_string(), id.to_string());
        let deleted = transaction!(self.db, conn => {
            use memory_entries as m;
            let n = diesel::delete(m::table.filter(m::tenant_id.eq(&tenant)).filter(m::id.eq(&id)))
                .execute(conn)
                .await?;
            if n == 0 {
                return Ok(false);
            }
            let version = bump_memory_version!(conn, tenant.as_str())?;
            record_tombstones!(conn, &tenant, version, std::iter::once(&id))?;
            Ok::<_, StoreError>(true)
        })?;
        Ok(deleted)
    }

    async fn delete_document(&self, tenant: &TenantId, id: &DocumentId) -> anyhow::Result<bool> {
        let (tenant, id) = (tenant.to_string(), id.to_string());
        let deleted = transaction!(self.db, conn => {
            use memory_entries as m;
            let chunks: Vec<String> = diesel::delete(m::table.filter(m::tenant_id.eq(&tenant)).filter(m::document_id.eq(&id)))
                .returning(m::id)
                .get_results(conn)
                .await?;
            let n = diesel::delete(
                memory_documents::table
                    .filter(memory_documents::tenant_id.eq(&tenant))
                    .filter(memory_documents::id.eq(&id)),
            )
            .execute(conn)
            .await?;
            if n == 0 {
                return Ok(false);
            }
            let version = bump_memory_version!(conn, tenant.as_str())?;
            record_tombstones!(conn, &tenant, version, &chunks)?;
            Ok::<_, StoreError>(true)
        })?;
        Ok(deleted)
    }

    async fn nearest(
        &self,
        tenant: &TenantId,
        model_id: &str,
        query: &[f32],
        filter: &MemoryFilter,
        now: DateTime<Utc>,
        limit: usize,
    ) -> anyhow::Result<Vec<(MemoryId, f32)>> {
        let cache = self.synced(tenant, model_id).await?;
        let large =
            cache.read().unwrap_or_else(PoisonError::into_inner).scope_size(filter) >= vectors::PARALLEL_FROM;
        if !large {
            return Ok(cache
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .nearest(query, filter, now, limit));
        }
        // Milliseconds of work: off the request thread, which serves other requests meanwhile.
        let (query, filter) = (query.to_vec(), filter.clone());
        tokio::task::spawn_blocking(move || {
            cache.read().unwrap_or_else(PoisonError::into_inner).nearest(&query, &filter, now, limit)
        })
        .await
        .map_err(|e| anyhow::anyhow!("the vector scan failed: {e}"))
    }

    async fn lexical(
        &self,
        tenant: &TenantId,
        terms: &[String],
        filter: &MemoryFilter,
        now: DateTime<Utc>,
        limit: usize,
    ) -> anyhow::Result<Vec<MemoryId>> {
        self.lexical_ids(tenant, terms, filter, now, limit).await
    }

    async fn vector_count(
        &self,
        tenant: &TenantId,
        model_id: &str,
        filter: &MemoryFilter,
        now: DateTime<Utc>,
    ) -> anyhow::Result<usize> {
        let cache = self.synced(tenant, model_id).await?;
        let cache = cache.read().unwrap_or_else(PoisonError::into_inner);
        Ok(cache.count(filter, now))
    }

    async fn touch(&self, tenant: &TenantId, ids: &[MemoryId]) -> anyhow::Result<()> {
        let tenant = tenant.to_string();
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        transaction!(self.db, conn => {
            use memory_entries as m;
            diesel::update(m::table.filter(tenant_not_indexed!(m::tenant_id).eq(&tenant)).filter(m::id.eq_any(&ids)))
                .set(m::access_count.eq(m::access_count + 1))
                .execute(conn)
                .await?;
            Ok::<_, StoreError>(())
        })?;
        Ok(())
    }

    async fn agent_vectors(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        model_id: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Vec<(MemoryEntry, Vec<f32>)>> {
        use memory_entries as m;
        let rows: Vec<(EntryRow, Vec<u8>)> = with_conn!(self.db, conn => m::table
            .filter(m::tenant_id.eq(tenant.as_str()))
            .filter(m::agent_id.eq(agent.as_str()))
            .filter(m::document_id.is_null())
            .filter(m::embedding_model.eq(model_id))
            .filter(m::expires_at.is_null().or(m::expires_at.gt(DbTime(now))))
            .order(m::id.asc())
            .select((EntryRow::as_select(), m::embedding))
            .load(conn)
            .await)?;
        rows.into_iter().map(|(row, blob)| Ok((row.into_domain()?, vector_from_bytes(&blob)))).collect()
    }

    async fn learn(&self, learned: &agentry_domain::memory::learning::Learned) -> anyhow::Result<bool> {
        Ok(self.apply_learned(std::slice::from_ref(learned)).await?.into_iter().next().unwrap_or(false))
    }

    async fn learn_all(
        &self,
        learned: &[agentry_domain::memory::learning::Learned],
    ) -> anyhow::Result<Vec<bool>> {
        self.apply_learned(learned).await
    }

    async fn learned_already(
        &self,
        exchanges: &[(TenantId, agentry_domain::ids::MessageId)],
    ) -> anyhow::Result<Vec<agentry_domain::ids::MessageId>> {
        self.receipts_of(exchanges).await
    }

    async fn on_topic(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        topic: &str,
        now: DateTime<Utc>,
        limit: usize,
    ) -> anyhow::Result<Vec<MemoryEntry>> {
        self.current_on_topic(tenant, agent, topic, now, limit).await
    }

    async fn history(
        &self,
        tenant: &TenantId,
        id: &MemoryId,
    ) -> anyhow::Result<Vec<agentry_domain::memory::learning::MemoryVersion>> {
        self.versions(tenant, id).await
    }

    async fn consolidate(&self, tenant: &TenantId, merges: &[Merge], event: &Event) -> anyhow::Result<()> {
        let tenant = tenant.to_string();
        let event = EventRow::from_domain(event)?;
        let merges: Vec<(String, DbJsonAs<Vec<String>>, i64, DbTime, Vec<String>)> = merges
            .iter()
            .map(|m| {
                (
                    m.kept.id.to_string(),
                    DbJsonAs(m.kept.tags.clone()),
                    i64::try_from(m.kept.access_count).unwrap_or(i64::MAX),
                    DbTime(m.kept.updated_at),
                    m.absorbed.iter().map(ToString::to_string).collect(),
                )
            })
            .collect();
        transaction!(self.db, conn => {
            use memory_entries as m;
            let version = bump_memory_version!(conn, tenant.as_str())?;
            for (kept, tags, access_count, updated_at, absorbed) in &merges {
                diesel::update(m::table.filter(m::tenant_id.eq(&tenant)).filter(m::id.eq(kept)))
                    .set((
                        m::tags.eq(tags),
                        m::access_count.eq(access_count),
                        m::updated_at.eq(updated_at),
                        m::origin.eq(MemoryOrigin::Consolidation.as_str()),
                        m::seq.eq(version),
                    ))
                    .execute(conn)
                    .await?;
                diesel::delete(m::table.filter(tenant_not_indexed!(m::tenant_id).eq(&tenant)).filter(m::id.eq_any(absorbed)))
                    .execute(conn)
                    .await?;
                record_tombstones!(conn, &tenant, version, absorbed)?;
            }
            diesel::insert_into(events::table).values(&event).execute(conn).await?;
            Ok::<_, StoreError>(())
        })?;
        self.db.stored(WorkQueue::Outbox);
        Ok(())
    }

    async fn stale_embeddings(
        &self,
        model_id: &str,
        limit: usize,
    ) -> anyhow::Result<Vec<(TenantId, MemoryId, String)>> {
        use memory_entries as m;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let dimension = i32::try_from(self.dimension).unwrap_or(i32::MAX);
        let rows: Vec<(String, String, String)> = with_conn!(self.db, conn => m::table
            .filter(m::embedding_model.ne(model_id).or(m::embedding_dim.ne(dimension)))
            .order(m::id.asc())
            .limit(limit)
            .select((m::tenant_id, m::id, m::content))
            .load(conn)
            .await)?;
        Ok(rows
            .into_iter()
            .map(|(t, id, c)| (TenantId::from_string(t), MemoryId::from_string(id), c))
            .collect())
    }

    async fn set_embeddings(&self, updates: &[(TenantId, MemoryId, Embedding)]) -> anyhow::Result<()> {
        let updates: Vec<(String, String, Vec<u8>, i32, String)> = updates
            .iter()
            .map(|(t, id, e)| {
                let dim = i32::try_from(e.vector.len()).unwrap_or(i32::MAX);
                (t.to_string(), id.to_string(), vector_bytes(&e.vector), dim, e.model_id.clone())
            })
            .collect();
        transaction!(self.db, conn => {
            use memory_entries as m;
            let mut versions: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
            for (tenant, id, blob, dim, model) in &updates {
                let version = match versions.get(tenant) {
                    Some(v) => *v,
                    None => {
                        let v = bump_memory_version!(conn, tenant.as_str())?;
                        versions.insert(tenant.clone(), v);
                        v
                    }
                };
                diesel::update(m::table.filter(m::tenant_id.eq(tenant)).filter(m::id.eq(id)))
                    .set((
                        m::embedding.eq(blob),
                        m::embedding_dim.eq(dim),
                        m::embedding_model.eq(model),
                        m::seq.eq(version),
                    ))
                    .execute(conn)
                    .await?;
            }
            Ok::<_, StoreError>(())
        })?;
        Ok(())
    }
}

//! [`KnowledgeIndex`] and the ingestion queue: a knowledge file's row is its own queue item
//! (claimed by the one claim statement of [`crate::leases`]), and its chunks — text, position,
//! embedding, full-text index — are replaced whole, with its `indexed` status, in one
//! transaction.

use agentry_domain::events::Event;
use agentry_domain::ids::{ChunkId, KnowledgeBaseId, KnowledgeFileId, TenantId};
use agentry_domain::knowledge::chunking::ChunkLimits;
use agentry_domain::knowledge::{
    ChunkScope, FoundChunk, IndexedChunk, IngestionItem, KnowledgeChunk, KnowledgeFile, KnowledgeIndex,
};
use agentry_domain::work::{Claimed, Lease, LeaseQueue};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::{FileRow, KnowledgeStore};
use crate::database::{Backend, DbPool, StoreError};
use crate::events::EventRow;
use crate::leases::{QueueTable, claimed, prepare_claim};
use crate::memory::vector_bytes;
use crate::schema::{events, knowledge_bases, knowledge_chunks, knowledge_files};
use crate::signals::WorkQueue;
use crate::types::DbTime;

const QUEUED: &str = "queued";
const PROCESSING: &str = "processing";
const INDEXED: &str = "indexed";
const FAILED: &str = "failed";

/// Files of one tenant ingested at once, across every instance: a tenant that uploads a
/// hundred files does not hold back the others'.
const TENANT_SHARE: u32 = 2;

/// The files table as a lease queue: queued files, and files being processed whose lease is
/// free (their worker died); a claim marks them processing and counts a claim.
fn ingestion_table(_backend: Backend) -> QueueTable {
    QueueTable {
        table: "knowledge_files",
        due: format!("status = '{QUEUED}' OR status = '{PROCESSING}'"),
        order_by: "created_at",
        counter: "claims",
        also_set: format!("status = '{PROCESSING}', progress = 0"),
        returning: "id, claims",
        share: Some(("tenant_id", TENANT_SHARE)),
    }
}

/// Counts a change of a base's chunks (`$base`, its id), which the vector caches of every
/// instance compare with what they loaded ([`super::vectors`]).
macro_rules! bump_base_version {
    ($conn:expr, $base:expr) => {
        diesel::update(knowledge_bases::table.filter(knowledge_bases::id.eq($base)))
            .set(knowledge_bases::index_version.eq(knowledge_bases::index_version + 1_i64))
            .execute($conn)
            .await
    };
}
pub(super) use bump_base_version;

#[derive(QueryableByName)]
struct ClaimedRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    id: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    claims: i64,
}

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    id: String,
}

#[async_trait]
impl LeaseQueue<IngestionItem> for KnowledgeStore {
    async fn claim(
        &self,
        lease: &Lease,
        now: DateTime<Utc>,
        limit: u32,
    ) -> anyhow::Result<Vec<Claimed<IngestionItem>>> {
        let (sql, params) = prepare_claim(&self.db, ingestion_table, lease, now, limit);
        let rows: Vec<ClaimedRow> =
            transaction!(self.db, conn => Ok::<_, StoreError>(claim!(conn, sql, params).await?))?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
        let files: Vec<(FileRow, i32, i32)> = with_conn!(self.db, conn => knowledge_files::table
            .inner_join(knowledge_bases::table)
            .filter(knowledge_files::id.eq_any(&ids))
            .select((FileRow::as_select(), knowledge_bases::chunk_max_tokens, knowledge_bases::chunk_overlap_tokens))
            .load(conn)
            .await)?;
        let mut by_id: std::collections::HashMap<String, (FileRow, i32, i32)> =
            files.into_iter().map(|f| (f.0.id.clone(), f)).collect();
        let mut taken = Vec::with_capacity(rows.len());
        for r in rows {
            // A file deleted since the claim has nothing left to ingest.
            let Some((file, max, overlap)) = by_id.remove(&r.id) else { continue };
            let chunking = ChunkLimits {
                max_tokens: u32::try_from(max).unwrap_or(0),
                overlap_tokens: u32::try_from(overlap).unwrap_or(0),
            };
            taken.push(claimed(IngestionItem { file: file.into_domain()?, chunking }, r.claims, lease));
        }
        Ok(taken)
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = knowledge_chunks, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
#[diesel(treat_none_as_default_value = false)]
struct ChunkRow {
    id: String,
    tenant_id: String,
    knowledge_base_id: String,
    file_id: String,
    idx: i32,
    text: String,
    page: Option<i32>,
    headings: String,
    start_char: i64,
    end_char: i64,
    embedding: Vec<u8>,
    embedding_model: String,
}

/// A chunk as listed and cited: everything but its embedding.
#[derive(Queryable, Selectable)]
#[diesel(table_name = knowledge_chunks, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct ChunkView {
    id: String,
    knowledge_base_id: String,
    file_id: String,
    idx: i32,
    text: String,
    page: Option<i32>,
    headings: String,
    start_char: i64,
    end_char: i64,
}

impl ChunkView {
    fn into_domain(self) -> KnowledgeChunk {
        KnowledgeChunk {
            id: ChunkId::from_string(self.id),
            file_id: KnowledgeFileId::from_string(self.file_id),
            knowledge_base_id: KnowledgeBaseId::from_string(self.knowledge_base_id),
            index: u32::try_from(self.idx).unwrap_or(0),
            text: self.text,
            page: self.page.and_then(|p| u32::try_from(p).ok()),
            headings: serde_json::from_str(&self.headings).unwrap_or_default(),
            start: u64::try_from(self.start_char).unwrap_or(0),
            end: u64::try_from(self.end_char).unwrap_or(0),
        }
    }
}

fn chunk_rows(file: &KnowledgeFile, model: &str, chunks: &[IndexedChunk]) -> Vec<ChunkRow> {
    chunks
        .iter()
        .map(|c| ChunkRow {
            id: c.id.to_string(),
            tenant_id: file.tenant_id.to_string(),
            knowledge_base_id: file.knowledge_base_id.to_string(),
            file_id: file.id.to_string(),
            idx: i32::try_from(c.chunk.index).unwrap_or(i32::MAX),
            text: c.chunk.text.clone(),
            page: c.chunk.page.map(|p| i32::try_from(p).unwrap_or(i32::MAX)),
            headings: serde_json::to_string(&c.chunk.headings).unwrap_or_else(|_| "[]".into()),
            start_char: i64::try_from(c.chunk.start).unwrap_or(i64::MAX),
            end_char: i64::try_from(c.chunk.end).unwrap_or(i64::MAX),
            embedding: vector_bytes(&c.vector),
            embedding_model: model.to_owned(),
        })
        .collect()
}

/// `,a,b,` — a list a statement tests membership in with `instr`/`strpos` (ids hold no commas).
fn id_list<T: std::fmt::Display>(ids: &[T]) -> String {
    let mut list = String::from(",");
    for id in ids {
        list.push_str(&id.to_string());
        list.push(',');
    }
    list
}

const SQLITE_LEXICAL: &str = "SELECT c.id AS id FROM knowledge_fts JOIN knowledge_chunks c ON c.pk = knowledge_fts.rowid \
     WHERE knowledge_fts MATCH ?1 AND c.tenant_id = ?2 AND instr(?3, ',' || c.knowledge_base_id || ',') > 0 \
     AND (?4 = ',' OR instr(?4, ',' || c.file_id || ',') > 0) \
     ORDER BY bm25(knowledge_fts), c.id LIMIT ?5";

const PG_LEXICAL: &str = "SELECT id FROM knowledge_chunks \
     WHERE search_vector @@ to_tsquery('english', $1) AND tenant_id = $2 \
     AND strpos($3, ',' || knowledge_base_id || ',') > 0 AND ($4 = ',' OR strpos($4, ',' || file_id || ',') > 0) \
     ORDER BY ts_rank_cd(search_vector, to_tsquery('english', $1)) DESC, id LIMIT $5";

/// See `crate::memory::lexical`: a generic plan cannot fold `to_tsquery` into a constant.
const PG_CUSTOM_PLANS: &str = "SET LOCAL plan_cache_mode = force_custom_plan";

#[async_trait]
impl KnowledgeIndex for KnowledgeStore {
    async fn set_progress(
        &self,
        file: &KnowledgeFileId,
        lease: &Lease,
        progress: f64,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let (file, token) = (file.to_string(), lease.token.clone());
        let n = transaction!(self.db, conn => Ok::<_, StoreError>(diesel::update(
            knowledge_files::table
                .filter(knowledge_files::id.eq(&file))
                .filter(knowledge_files::status.eq(PROCESSING))
                .filter(knowledge_files::lease_token.eq(&token)),
        )
        .set((knowledge_files::progress.eq(progress.clamp(0.0, 1.0)), knowledge_files::updated_at.eq(DbTime(now))))
        .execute(conn)
        .await?))?;
        Ok(n == 1)
    }

    async fn index_file(
        &self,
        file: &KnowledgeFile,
        lease: &Lease,
        model: &str,
        pages: Option<u32>,
        chunks: &[IndexedChunk],
        event: &Event,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let rows = chunk_rows(file, model, chunks);
        let event = EventRow::from_domain(event)?;
        let (id, base, token, model) =
            (file.id.to_string(), file.knowledge_base_id.to_string(), lease.token.clone(), model.to_owned());
        let count = i32::try_from(rows.len()).unwrap_or(i32::MAX);
        let pages = pages.map(|p| i32::try_from(p).unwrap_or(i32::MAX));
        let held = transaction!(self.db, conn => {
            let n = diesel::update(
                knowledge_files::table
                    .filter(knowledge_files::id.eq(&id))
                    .filter(knowledge_files::status.eq(PROCESSING))
                    .filter(knowledge_files::lease_token.eq(&token)),
            )
            .set((
                knowledge_files::status.eq(INDEXED),
                knowledge_files::error.eq(None::<String>),
                knowledge_files::pages.eq(pages),
                knowledge_files::chunks.eq(count),
                knowledge_files::progress.eq(1.0),
                knowledge_files::embedding_model.eq(Some(&model)),
                knowledge_files::lease_token.eq(None::<String>),
                knowledge_files::lease_until.eq(None::<DbTime>),
                knowledge_files::lease_owner.eq(None::<String>),
                knowledge_files::updated_at.eq(DbTime(now)),
            ))
            .execute(conn)
            .await?;
            if n == 0 {
                return Ok::<_, StoreError>(false);
            }
            diesel::delete(knowledge_chunks::table.filter(knowledge_chunks::file_id.eq(&id))).execute(conn).await?;
            // One statement a chunk: SQLite's connection here takes no multi-row insert, and
            // inside one transaction each costs a round trip, not a commit.
            for row in &rows {
                diesel::insert_into(knowledge_chunks::table).values(row).execute(conn).await?;
            }
            bump_base_version!(conn, &base)?;
            diesel::insert_into(events::table).values(&event).execute(conn).await?;
            Ok(true)
        })?;
        if held {
            self.db.stored(WorkQueue::Outbox);
        }
        Ok(held)
    }

    async fn fail_file(
        &self,
        file: &KnowledgeFile,
        lease: Option<Lease>,
        error: &str,
        event: &Event,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let event = EventRow::from_domain(event)?;
        let (id, base, error) = (file.id.to_string(), file.knowledge_base_id.to_string(), error.to_owned());
        let token = lease.map(|l| l.token);
        let held = transaction!(self.db, conn => {
            let mut target = knowledge_files::table
                .filter(knowledge_files::id.eq(&id))
                .filter(knowledge_files::status.eq(PROCESSING))
                .into_boxed();
            if let Some(token) = &token {
                target = target.filter(knowledge_files::lease_token.eq(token));
            }
            let n = diesel::update(knowledge_files::table)
                .filter(knowledge_files::id.eq_any(target.select(knowledge_files::id)))
                .set((
                    knowledge_files::status.eq(FAILED),
                    knowledge_files::error.eq(Some(&error)),
                    knowledge_files::chunks.eq(0),
                    knowledge_files::progress.eq(0.0),
                    knowledge_files::lease_token.eq(None::<String>),
                    knowledge_files::lease_until.eq(None::<DbTime>),
                    knowledge_files::lease_owner.eq(None::<String>),
                    knowledge_files::updated_at.eq(DbTime(now)),
                ))
                .execute(conn)
                .await?;
            if n == 0 {
                return Ok::<_, StoreError>(false);
            }
            let removed =
                diesel::delete(knowledge_chunks::table.filter(knowledge_chunks::file_id.eq(&id))).execute(conn).await?;
            if removed > 0 {
                bump_base_version!(conn, &base)?;
            }
            diesel::insert_into(events::table).values(&event).execute(conn).await?;
            Ok(true)
        })?;
        if held {
            self.db.stored(WorkQueue::Outbox);
        }
        Ok(held)
    }

    async fn requeue(&self, model: &str, all: bool, now: DateTime<Utc>) -> anyhow::Result<u64> {
        let model = model.to_owned();
        let n = transaction!(self.db, conn => {
            let mut target = knowledge_files::table.filter(knowledge_files::status.eq(INDEXED)).into_boxed();
            if !all {
                target = target.filter(
                    knowledge_files::embedding_model.is_null().or(knowledge_files::embedding_model.ne(&model)),
                );
            }
            let n = diesel::update(knowledge_files::table)
                .filter(knowledge_files::id.eq_any(target.select(knowledge_files::id)))
                .set((
                    knowledge_files::status.eq(QUEUED),
                    knowledge_files::progress.eq(0.0),
                    knowledge_files::claims.eq(0_i64),
                    knowledge_files::updated_at.eq(DbTime(now)),
                ))
                .execute(conn)
                .await?;
            if n > 0 {
                conn.announce(WorkQueue::Knowledge).await?;
            }
            Ok::<_, StoreError>(n)
        })?;
        if n > 0 {
            self.db.stored(WorkQueue::Knowledge);
        }
        Ok(n as u64)
    }

    async fn list_chunks(
        &self,
        tenant: &TenantId,
        file: &KnowledgeFileId,
        skip: u64,
        limit: u64,
    ) -> anyhow::Result<(Vec<KnowledgeChunk>, u64)> {
        let (tenant, file) = (tenant.to_string(), file.to_string());
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (rows, total): (Vec<ChunkView>, i64) = with_conn!(self.db, conn => {
            let of_file = || knowledge_chunks::table
                .filter(knowledge_chunks::tenant_id.eq(&tenant))
                .filter(knowledge_chunks::file_id.eq(&file));
            let total = of_file().count().get_result(conn).await?;
            let rows = of_file()
                .order(knowledge_chunks::idx.asc())
                .offset(skip)
                .limit(limit)
                .select(ChunkView::as_select())
                .load(conn)
                .await?;
            Ok::<_, diesel::result::Error>((rows, total))
        })?;
        Ok((rows.into_iter().map(ChunkView::into_domain).collect(), u64::try_from(total).unwrap_or(0)))
    }

    async fn nearest(
        &self,
        scope: &ChunkScope,
        model: &str,
        query: &[f32],
        limit: usize,
    ) -> anyhow::Result<Vec<(ChunkId, f32)>> {
        self.nearest_chunks(scope, model, query, limit).await
    }

    async fn lexical(
        &self,
        scope: &ChunkScope,
        terms: &[String],
        limit: usize,
    ) -> anyhow::Result<Vec<ChunkId>> {
        use diesel::sql_types::{BigInt, Text};
        let (sql, any) = match self.db.backend() {
            Backend::Sqlite => (SQLITE_LEXICAL, " OR "),
            Backend::Postgres => (PG_LEXICAL, " | "),
        };
        let terms = crate::memory::lexical::match_terms(self.db.backend(), terms);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let matching = terms.join(any);
        let (tenant, bases, files) = (scope.tenant.to_string(), id_list(&scope.bases), id_list(&scope.files));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        macro_rules! statement {
            ($conn:ident) => {
                diesel::sql_query(sql)
                    .bind::<Text, _>(&matching)
                    .bind::<Text, _>(&tenant)
                    .bind::<Text, _>(&bases)
                    .bind::<Text, _>(&files)
                    .bind::<BigInt, _>(limit)
                    .load::<IdRow>($conn)
                    .await
            };
        }
        let rows: Vec<IdRow> = match &self.db.pool {
            DbPool::Sqlite(_) => with_conn!(self.db, conn => statement!(conn))?,
            DbPool::Pg(pools) => pg_transaction!(pools, conn => {
                diesel_async::SimpleAsyncConnection::batch_execute(conn, PG_CUSTOM_PLANS).await?;
                Ok::<_, StoreError>(statement!(conn)?)
            })?,
        };
        Ok(rows.into_iter().map(|r| ChunkId::from_string(r.id)).collect())
    }

    async fn get_chunks(&self, tenant: &TenantId, ids: &[ChunkId]) -> anyhow::Result<Vec<FoundChunk>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let tenant = tenant.to_string();
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let rows: Vec<(ChunkView, String)> = with_conn!(self.db, conn => knowledge_chunks::table
            .inner_join(knowledge_files::table)
            .filter(knowledge_chunks::tenant_id.eq(&tenant))
            .filter(knowledge_chunks::id.eq_any(&ids))
            .select((ChunkView::as_select(), knowledge_files::name))
            .load(conn)
            .await)?;
        Ok(rows.into_iter().map(|(c, file_name)| FoundChunk { chunk: c.into_domain(), file_name }).collect())
    }
}

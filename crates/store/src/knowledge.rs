//! [`KnowledgeRepository`]: knowledge bases and their files' records, scoped by tenant in every
//! query. Names are unique per tenant and contents per base (unique indexes, so concurrent
//! writes cannot both succeed); a base's file count and bytes are counted from its files, never
//! kept beside them, so they cannot drift.

mod index;
mod parts;
mod vectors;

use agentry_domain::ids::{KnowledgeBaseId, KnowledgeFileId, TenantId};
use agentry_domain::knowledge::chunking::ChunkLimits;
use agentry_domain::knowledge::{FileAdded, KnowledgeBase, KnowledgeFile, KnowledgeRepository};
use async_trait::async_trait;
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;

pub use self::parts::DbFileStore;
use crate::database::{Database, StoreError};
use crate::schema::{knowledge_bases, knowledge_file_parts, knowledge_files};
use crate::signals::WorkQueue;
use crate::types::{DbTime, parse_named};

/// Knowledge bases and files in the database.
#[derive(Debug, Clone)]
pub struct KnowledgeStore {
    db: Database,
    vectors: std::sync::Arc<vectors::BaseVectorCache>,
}

impl KnowledgeStore {
    /// A repository over `db`, its bases' vectors kept in memory up to `cache_floats`
    /// values ([`vectors`]).
    pub fn new(db: Database) -> Self {
        Self::with_cache(db, vectors::DEFAULT_CACHE_FLOATS)
    }

    /// A repository whose vector cache holds at most `cache_floats` values.
    pub fn with_cache(db: Database, cache_floats: usize) -> Self {
        Self { db, vectors: std::sync::Arc::new(vectors::BaseVectorCache::new(cache_floats)) }
    }
}

#[derive(Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = knowledge_bases, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
#[diesel(treat_none_as_null = true)]
struct BaseRow {
    id: String,
    tenant_id: String,
    name: String,
    description: Option<String>,
    chunk_max_tokens: i32,
    chunk_overlap_tokens: i32,
    created_at: DbTime,
    updated_at: DbTime,
}

impl BaseRow {
    fn from_domain(b: &KnowledgeBase) -> Self {
        Self {
            id: b.id.to_string(),
            tenant_id: b.tenant_id.to_string(),
            name: b.name.clone(),
            description: b.description.clone(),
            chunk_max_tokens: i32::try_from(b.chunking.max_tokens).unwrap_or(i32::MAX),
            chunk_overlap_tokens: i32::try_from(b.chunking.overlap_tokens).unwrap_or(i32::MAX),
            created_at: DbTime(b.created_at),
            updated_at: DbTime(b.updated_at),
        }
    }

    fn into_domain(self, (file_count, bytes): (i64, i64)) -> KnowledgeBase {
        KnowledgeBase {
            id: KnowledgeBaseId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            name: self.name,
            description: self.description,
            chunking: ChunkLimits {
                max_tokens: u32::try_from(self.chunk_max_tokens).unwrap_or(0),
                overlap_tokens: u32::try_from(self.chunk_overlap_tokens).unwrap_or(0),
            },
            file_count: u64::try_from(file_count).unwrap_or(0),
            bytes: u64::try_from(bytes).unwrap_or(0),
            created_at: self.created_at.0,
            updated_at: self.updated_at.0,
        }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = knowledge_files, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct FileRow {
    id: String,
    tenant_id: String,
    knowledge_base_id: String,
    name: String,
    media_type: String,
    bytes: i64,
    sha256: String,
    status: String,
    error: Option<String>,
    pages: Option<i32>,
    chunks: i32,
    progress: f64,
    created_at: DbTime,
    updated_at: DbTime,
}

impl FileRow {
    fn from_domain(f: &KnowledgeFile) -> Self {
        Self {
            id: f.id.to_string(),
            tenant_id: f.tenant_id.to_string(),
            knowledge_base_id: f.knowledge_base_id.to_string(),
            name: f.name.clone(),
            media_type: f.media_type.as_str().to_owned(),
            bytes: i64::try_from(f.bytes).unwrap_or(i64::MAX),
            sha256: f.sha256.clone(),
            status: f.status.as_str().to_owned(),
            error: f.error.clone(),
            pages: f.pages.map(|p| i32::try_from(p).unwrap_or(i32::MAX)),
            chunks: i32::try_from(f.chunks).unwrap_or(i32::MAX),
            progress: f.progress,
            created_at: DbTime(f.created_at),
            updated_at: DbTime(f.updated_at),
        }
    }

    fn into_domain(self) -> anyhow::Result<KnowledgeFile> {
        Ok(KnowledgeFile {
            media_type: parse_named(&self.media_type, "file media type")?,
            status: parse_named(&self.status, "file status")?,
            id: KnowledgeFileId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            knowledge_base_id: KnowledgeBaseId::from_string(self.knowledge_base_id),
            name: self.name,
            bytes: u64::try_from(self.bytes).unwrap_or(0),
            sha256: self.sha256,
            error: self.error,
            pages: self.pages.and_then(|p| u32::try_from(p).ok()),
            chunks: u32::try_from(self.chunks).unwrap_or(0),
            progress: self.progress,
            created_at: self.created_at.0,
            updated_at: self.updated_at.0,
        })
    }
}

/// `SUM(bytes)` as a `BIGINT` on both databases (PostgreSQL's own sum of a bigint is numeric).
fn total_bytes() -> diesel::expression::SqlLiteral<BigInt> {
    sql::<BigInt>("CAST(COALESCE(SUM(knowledge_files.bytes), 0) AS BIGINT)")
}

impl KnowledgeStore {
    /// File count and bytes of each of the tenant's bases that has files.
    async fn sizes(
        &self,
        tenant: &TenantId,
        base: Option<&KnowledgeBaseId>,
    ) -> Result<Vec<(String, i64, i64)>, StoreError> {
        let tenant = tenant.to_string();
        let base = base.map(ToString::to_string);
        with_conn!(self.db, conn => {
            let mut q = knowledge_files::table
                .filter(knowledge_files::tenant_id.eq(&tenant))
                .group_by(knowledge_files::knowledge_base_id)
                .select((knowledge_files::knowledge_base_id, sql::<BigInt>("COUNT(*)"), total_bytes()))
                .into_boxed();
            if let Some(b) = &base {
                q = q.filter(knowledge_files::knowledge_base_id.eq(b));
            }
            q.load::<(String, i64, i64)>(conn).await
        })
    }
}

/// Whether a write failed only because the tenant has a base of that name.
fn name_taken(e: &StoreError) -> bool {
    e.is_unique_violation("knowledge_bases_name_idx", "knowledge_bases.name")
}

#[async_trait]
impl KnowledgeRepository for KnowledgeStore {
    async fn create_base(&self, base: &KnowledgeBase) -> anyhow::Result<bool> {
        let row = BaseRow::from_domain(base);
        match transaction!(self.db, conn => {
            Ok(diesel::insert_into(knowledge_bases::table).values(&row).execute(conn).await?)
        }) {
            Ok(_) => Ok(true),
            Err(e) if name_taken(&e) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    async fn get_base(
        &self,
        tenant: &TenantId,
        id: &KnowledgeBaseId,
    ) -> anyhow::Result<Option<KnowledgeBase>> {
        let row: Option<BaseRow> = with_conn!(self.db, conn => knowledge_bases::table
            .filter(knowledge_bases::tenant_id.eq(tenant.as_str()))
            .filter(knowledge_bases::id.eq(id.as_str()))
            .select(BaseRow::as_select())
            .first(conn)
            .await
            .optional())?;
        let Some(row) = row else { return Ok(None) };
        let sizes = self.sizes(tenant, Some(id)).await?;
        let size = sizes.into_iter().next().map_or((0, 0), |(_, n, b)| (n, b));
        Ok(Some(row.into_domain(size)))
    }

    async fn list_bases(&self, tenant: &TenantId) -> anyhow::Result<Vec<KnowledgeBase>> {
        let rows: Vec<BaseRow> = with_conn!(self.db, conn => knowledge_bases::table
            .filter(knowledge_bases::tenant_id.eq(tenant.as_str()))
            .order(knowledge_bases::id.asc())
            .select(BaseRow::as_select())
            .load(conn)
            .await)?;
        let sizes: std::collections::HashMap<String, (i64, i64)> =
            self.sizes(tenant, None).await?.into_iter().map(|(id, n, b)| (id, (n, b))).collect();
        Ok(rows
            .into_iter()
            .map(|r| {
                let size = sizes.get(&r.id).copied().unwrap_or((0, 0));
                r.into_domain(size)
            })
            .collect())
    }

    async fn update_base(&self, base: &KnowledgeBase) -> anyhow::Result<Option<bool>> {
        let row = BaseRow::from_domain(base);
        let (tenant, id) = (base.tenant_id.to_string(), base.id.to_string());
        match transaction!(self.db, conn => {
            Ok(diesel::update(
                knowledge_bases::table.filter(knowledge_bases::tenant_id.eq(&tenant)).filter(knowledge_bases::id.eq(&id)),
            )
            .set((
                knowledge_bases::name.eq(&row.name),
                knowledge_bases::description.eq(&row.description),
                knowledge_bases::chunk_max_tokens.eq(row.chunk_max_tokens),
                knowledge_bases::chunk_overlap_tokens.eq(row.chunk_overlap_tokens),
                knowledge_bases::updated_at.eq(&row.updated_at),
            ))
            .execute(conn)
            .await?)
        }) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(true)),
            Err(e) if name_taken(&e) => Ok(Some(false)),
            Err(e) => Err(e.into()),
        }
    }

    async fn delete_base(&self, tenant: &TenantId, id: &KnowledgeBaseId) -> anyhow::Result<bool> {
        let (tenant, id) = (tenant.to_string(), id.to_string());
        let n = transaction!(self.db, conn => {
            let files = knowledge_files::table
                .filter(knowledge_files::tenant_id.eq(&tenant))
                .filter(knowledge_files::knowledge_base_id.eq(&id))
                .select(knowledge_files::id);
            diesel::delete(
                knowledge_file_parts::table
                    .filter(knowledge_file_parts::tenant_id.eq(&tenant))
                    .filter(knowledge_file_parts::file_id.eq_any(files)),
            )
            .execute(conn)
            .await?;
            // Its files go with it (ON DELETE CASCADE).
            Ok(diesel::delete(
                knowledge_bases::table.filter(knowledge_bases::tenant_id.eq(&tenant)).filter(knowledge_bases::id.eq(&id)),
            )
            .execute(conn)
            .await?)
        })?;
        Ok(n > 0)
    }

    async fn add_file(&self, file: &KnowledgeFile) -> anyhow::Result<FileAdded> {
        let row = FileRow::from_domain(file);
        let (tenant, base, sha256) =
            (row.tenant_id.clone(), row.knowledge_base_id.clone(), row.sha256.clone());
        match transaction!(self.db, conn => {
            diesel::insert_into(knowledge_files::table).values(&row).execute(conn).await?;
            conn.announce(WorkQueue::Knowledge).await?;
            Ok::<_, StoreError>(())
        }) {
            Ok(()) => {
                self.db.stored(WorkQueue::Knowledge);
                Ok(FileAdded::Added)
            }
            Err(e) if e.is_unique_violation("knowledge_files_sha256_idx", "knowledge_files.sha256") => {
                let existing: FileRow = with_conn!(self.db, conn => knowledge_files::table
                    .filter(knowledge_files::tenant_id.eq(&tenant))
                    .filter(knowledge_files::knowledge_base_id.eq(&base))
                    .filter(knowledge_files::sha256.eq(&sha256))
                    .select(FileRow::as_select())
                    .first(conn)
                    .await)?;
                Ok(FileAdded::Duplicate(existing.into_domain()?))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn get_file(
        &self,
        tenant: &TenantId,
        base: &KnowledgeBaseId,
        id: &KnowledgeFileId,
    ) -> anyhow::Result<Option<KnowledgeFile>> {
        let row: Option<FileRow> = with_conn!(self.db, conn => knowledge_files::table
            .filter(knowledge_files::tenant_id.eq(tenant.as_str()))
            .filter(knowledge_files::knowledge_base_id.eq(base.as_str()))
            .filter(knowledge_files::id.eq(id.as_str()))
            .select(FileRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(FileRow::into_domain).transpose()
    }

    async fn list_files(
        &self,
        tenant: &TenantId,
        base: &KnowledgeBaseId,
    ) -> anyhow::Result<Vec<KnowledgeFile>> {
        let rows: Vec<FileRow> = with_conn!(self.db, conn => knowledge_files::table
            .filter(knowledge_files::tenant_id.eq(tenant.as_str()))
            .filter(knowledge_files::knowledge_base_id.eq(base.as_str()))
            .order(knowledge_files::id.asc())
            .select(FileRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().map(FileRow::into_domain).collect()
    }

    async fn delete_file(
        &self,
        tenant: &TenantId,
        base: &KnowledgeBaseId,
        id: &KnowledgeFileId,
    ) -> anyhow::Result<bool> {
        let (tenant, base, id) = (tenant.to_string(), base.to_string(), id.to_string());
        let n = transaction!(self.db, conn => {
            let n = diesel::delete(
                knowledge_files::table
                    .filter(knowledge_files::tenant_id.eq(&tenant))
                    .filter(knowledge_files::knowledge_base_id.eq(&base))
                    .filter(knowledge_files::id.eq(&id)),
            )
            .execute(conn)
            .await?;
            if n > 0 {
                // Its chunks went with it (ON DELETE CASCADE).
                index::bump_base_version!(conn, &base)?;
                diesel::delete(
                    knowledge_file_parts::table
                        .filter(knowledge_file_parts::tenant_id.eq(&tenant))
                        .filter(knowledge_file_parts::file_id.eq(&id)),
                )
                .execute(conn)
                .await?;
            }
            Ok(n)
        })?;
        Ok(n > 0)
    }

    async fn usage(&self, tenant: &TenantId) -> anyhow::Result<(u64, u64)> {
        let (n, bytes): (i64, i64) = with_conn!(self.db, conn => knowledge_files::table
            .filter(knowledge_files::tenant_id.eq(tenant.as_str()))
            .select((sql::<BigInt>("COUNT(*)"), total_bytes()))
            .first(conn)
            .await)?;
        Ok((u64::try_from(n).unwrap_or(0), u64::try_from(bytes).unwrap_or(0)))
    }
}

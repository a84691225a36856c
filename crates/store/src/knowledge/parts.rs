//! [`FileStore`] in the database: a file's original bytes as rows of at most 1 MiB
//! (`knowledge_file_parts`, `bytea` on PostgreSQL, a blob on SQLite), so that every instance
//! reads what any instance stored, and no write or read holds more than one part.

use agentry_domain::ids::{KnowledgeFileId, TenantId};
use agentry_domain::knowledge::{FILE_PART_BYTES, FileStore};
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use chrono::{DateTime, Utc};

use crate::database::Database;
use crate::schema::{knowledge_file_parts, knowledge_files};
use crate::types::DbTime;

/// Files' contents in the database.
#[derive(Debug, Clone)]
pub struct DbFileStore {
    db: Database,
}

impl DbFileStore {
    /// A file store over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[async_trait]
impl FileStore for DbFileStore {
    async fn put_part(
        &self,
        tenant: &TenantId,
        file: &KnowledgeFileId,
        index: u32,
        bytes: &[u8],
    ) -> anyhow::Result<()> {
        anyhow::ensure!(
            bytes.len() <= FILE_PART_BYTES,
            "a file part of {} bytes is over the limit",
            bytes.len()
        );
        let part = i32::try_from(index)?;
        let (tenant, file, bytes) = (tenant.to_string(), file.to_string(), bytes.to_vec());
        transaction!(self.db, conn => {
            // Written again after a retry: the part is replaced, never doubled.
            diesel::delete(
                knowledge_file_parts::table
                    .filter(knowledge_file_parts::file_id.eq(&file))
                    .filter(knowledge_file_parts::part.eq(part)),
            )
            .execute(conn)
            .await?;
            diesel::insert_into(knowledge_file_parts::table)
                .values((
                    knowledge_file_parts::file_id.eq(&file),
                    knowledge_file_parts::part.eq(part),
                    knowledge_file_parts::tenant_id.eq(&tenant),
                    knowledge_file_parts::content.eq(&bytes),
                    knowledge_file_parts::written_at.eq(Some(DbTime(chrono::Utc::now()))),
                ))
                .execute(conn)
                .await?;
            Ok(())
        })?;
        Ok(())
    }

    async fn get_part(
        &self,
        tenant: &TenantId,
        file: &KnowledgeFileId,
        index: u32,
    ) -> anyhow::Result<Option<Vec<u8>>> {
        let part = i32::try_from(index)?;
        Ok(with_conn!(self.db, conn => knowledge_file_parts::table
            .filter(knowledge_file_parts::tenant_id.eq(tenant.as_str()))
            .filter(knowledge_file_parts::file_id.eq(file.as_str()))
            .filter(knowledge_file_parts::part.eq(part))
            .select(knowledge_file_parts::content)
            .first::<Vec<u8>>(conn)
            .await
            .optional())?)
    }

    async fn sweep_orphans(&self, written_before: DateTime<Utc>) -> anyhow::Result<u64> {
        // A part whose file has no row (its upload never finished) and that is older than any
        // upload in progress can be. Parts written before `written_at` existed count as old.
        let cutoff = DbTime(written_before);
        // A write: on SQLite it goes through the one writer.
        let swept = transaction!(self.db, conn => {
            let swept = diesel::delete(
                knowledge_file_parts::table
                    .filter(
                        knowledge_file_parts::written_at
                            .lt(cutoff)
                            .or(knowledge_file_parts::written_at.is_null()),
                    )
                    .filter(diesel::dsl::not(diesel::dsl::exists(
                        knowledge_files::table.filter(knowledge_files::id.eq(knowledge_file_parts::file_id)),
                    ))),
            )
            .execute(conn)
            .await?;
            Ok(swept)
        })?;
        Ok(u64::try_from(swept).unwrap_or(0))
    }

    async fn delete(&self, tenant: &TenantId, file: &KnowledgeFileId) -> anyhow::Result<()> {
        let (tenant, file) = (tenant.to_string(), file.to_string());
        transaction!(self.db, conn => {
            diesel::delete(
                knowledge_file_parts::table
                    .filter(knowledge_file_parts::tenant_id.eq(&tenant))
                    .filter(knowledge_file_parts::file_id.eq(&file)),
            )
            .execute(conn)
            .await?;
            Ok(())
        })?;
        Ok(())
    }
}

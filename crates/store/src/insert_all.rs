//! Many rows of one table written inside a unit of work: on PostgreSQL in one multi-row
//! `INSERT` (a round trip and a plan for the lot instead of one per row), on SQLite one
//! statement per row, as diesel-async runs no multi-row `INSERT` there and the writer is
//! in-process anyway (a statement costs no round trip).
//!
//! Called as `conn.insert_all(&rows)` inside a [`transaction!`] body, which is expanded once per
//! backend: each expansion picks its backend's implementation by the connection's type.

use std::collections::HashMap;

use diesel::QueryResult;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use crate::events::EventRow;
use crate::memory::{NewEntryRow, NewVersionRow, ReceiptRow};
use crate::postgres::PgConn;
use crate::schema::{events, memory_entries, memory_extractions, memory_history};
use crate::sqlite::SqliteConn;

/// Rows per PostgreSQL statement: well under its 65,535 bind parameters for the widest row
/// written here (`memory_entries`, 24 columns).
const ROWS_PER_STATEMENT: usize = 500;

/// Writes all of `rows` into their table.
pub(crate) trait InsertAll<R> {
    /// Inserts `rows` in their order; the first failure fails the call (and so its unit).
    async fn insert_all(&mut self, rows: &[R]) -> QueryResult<()>;
}

/// Implements [`InsertAll`] for `$row` into `$table` on both backends.
macro_rules! insert_all {
    ($row:ty => $table:path) => {
        impl InsertAll<$row> for PgConn<&mut AsyncPgConnection> {
            async fn insert_all(&mut self, rows: &[$row]) -> QueryResult<()> {
                for chunk in rows.chunks(ROWS_PER_STATEMENT) {
                    diesel::insert_into($table).values(chunk).execute(self).await?;
                }
                Ok(())
            }
        }

        impl InsertAll<$row> for SqliteConn {
            async fn insert_all(&mut self, rows: &[$row]) -> QueryResult<()> {
                for row in rows {
                    diesel::insert_into($table).values(row).execute(self).await?;
                }
                Ok(())
            }
        }
    };
}

insert_all!(NewEntryRow => memory_entries::table);
insert_all!(NewVersionRow => memory_history::table);
insert_all!(EventRow => events::table);

/// Writes the receipts of exchanges learned from, each only if its exchange has none yet.
pub(crate) trait InsertReceipts {
    /// Inserts the `receipts` not yet stored; says of each whether it was (a receipt repeated in
    /// `receipts` is new only the first time).
    async fn insert_receipts(&mut self, receipts: &[ReceiptRow]) -> QueryResult<Vec<bool>>;
}

impl InsertReceipts for PgConn<&mut AsyncPgConnection> {
    async fn insert_receipts(&mut self, receipts: &[ReceiptRow]) -> QueryResult<Vec<bool>> {
        use memory_extractions as x;
        // How many of each receipt the statement wrote (one at most): the rows it returns.
        let mut written: HashMap<(String, String), usize> = HashMap::new();
        for chunk in receipts.chunks(ROWS_PER_STATEMENT) {
            let keys: Vec<(String, String)> = diesel::insert_into(x::table)
                .values(chunk)
                .on_conflict_do_nothing()
                .returning((x::tenant_id, x::message_id))
                .get_results(self)
                .await?;
            for key in keys {
                *written.entry(key).or_default() += 1;
            }
        }
        Ok(receipts
            .iter()
            .map(|r| match written.get_mut(&(r.tenant_id.clone(), r.message_id.clone())) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    true
                }
                _ => false,
            })
            .collect())
    }
}

impl InsertReceipts for SqliteConn {
    async fn insert_receipts(&mut self, receipts: &[ReceiptRow]) -> QueryResult<Vec<bool>> {
        let mut fresh = Vec::with_capacity(receipts.len());
        for row in receipts {
            let n = diesel::insert_into(memory_extractions::table)
                .values(row)
                .on_conflict_do_nothing()
                .execute(self)
                .await?;
            fresh.push(n != 0);
        }
        Ok(fresh)
    }
}

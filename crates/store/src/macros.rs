//! The two macros that let a repository write each query once for both backends.

/// Runs `$body` with `$conn` bound to a pooled connection of whichever backend `$db` uses.
/// The body is expanded once per backend, so it is type-checked against both. Evaluates to
/// `Result<_, StoreError>`.
macro_rules! with_conn {
    ($db:expr, $conn:ident => $body:expr) => {{
        match &$db.pool {
            $crate::database::DbPool::Pg(pool) => match pool.get().await {
                Ok(mut guard) => {
                    let $conn = &mut *guard;
                    ($body).map_err($crate::database::StoreError::from)
                }
                Err(e) => Err($crate::database::StoreError::from(e)),
            },
            $crate::database::DbPool::Sqlite(pool) => match pool.get().await {
                Ok(mut guard) => {
                    let $conn = &mut *guard;
                    ($body).map_err($crate::database::StoreError::from)
                }
                Err(e) => Err($crate::database::StoreError::from(e)),
            },
        }
    }};
}

/// Like [`with_conn!`], inside a transaction: `$body` must be an `async` block returning
/// `Result<T, StoreError>`; an `Err` rolls everything back. SQLite transactions start with
/// `BEGIN IMMEDIATE` so that two writers queue on the lock up front instead of one failing with
/// "database is locked" when it upgrades from reading to writing.
macro_rules! transaction {
    ($db:expr, $conn:ident => $body:expr) => {{
        use diesel_async::AsyncConnection as _;
        match &$db.pool {
            $crate::database::DbPool::Pg(pool) => match pool.get().await {
                Ok(mut guard) => {
                    guard
                        .transaction(async |$conn| -> Result<_, $crate::database::StoreError> { $body })
                        .await
                }
                Err(e) => Err($crate::database::StoreError::from(e)),
            },
            $crate::database::DbPool::Sqlite(pool) => match pool.get().await {
                Ok(mut guard) => {
                    guard
                        .immediate_transaction(async |$conn| -> Result<_, $crate::database::StoreError> {
                            $body
                        })
                        .await
                }
                Err(e) => Err($crate::database::StoreError::from(e)),
            },
        }
    }};
}

/// Appends a ledger entry inside a transaction (`$conn` a connection of either backend):
/// one `UPDATE … RETURNING` on the tenant row changes its available credits by `$credits` and
/// what chats in flight hold by `$held`, gives the entry the tenant's next ledger number, and
/// returns the settled balance (available plus held) that becomes the entry's
/// `balance_after`; then the entry is inserted. The tenant row stays locked until the commit,
/// so entries are numbered and their balances follow in the order they were applied.
/// Evaluates to `Result<(available, settled), diesel::result::Error>`.
macro_rules! append_ledger {
    ($conn:expr, $entry:expr, credits: $credits:expr, held: $held:expr) => {{
        use $crate::schema::{credit_ledger, tenants};
        let entry: &agentry_domain::billing::LedgerEntry = $entry;
        let updated: Result<(i64, i64, i64), diesel::result::Error> =
            diesel::update(tenants::table.filter(tenants::id.eq(entry.tenant_id.as_str())))
                .set((
                    tenants::credits.eq(tenants::credits + $credits),
                    tenants::held.eq(tenants::held + $held),
                    tenants::ledger_seq.eq(tenants::ledger_seq + 1),
                ))
                .returning((tenants::credits, tenants::held, tenants::ledger_seq))
                .get_result($conn)
                .await;
        match updated {
            Ok((available, held, seq)) => {
                let settled = available + held;
                diesel::insert_into(credit_ledger::table)
                    .values((
                        credit_ledger::id.eq(entry.id.as_str()),
                        credit_ledger::tenant_id.eq(entry.tenant_id.as_str()),
                        credit_ledger::delta.eq(entry.delta),
                        credit_ledger::balance_after.eq(settled),
                        credit_ledger::reason.eq(entry.reason.as_str()),
                        credit_ledger::created_at.eq($crate::types::DbTime(entry.created_at)),
                        credit_ledger::reference.eq(entry.reference.as_deref()),
                        credit_ledger::seq.eq(seq),
                    ))
                    .execute($conn)
                    .await
                    .map(|_| (available, settled))
            }
            Err(e) => Err(e),
        }
    }};
}

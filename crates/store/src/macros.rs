//! The macros that let a repository write each query once for both backends, and the one that
//! appends to the credit ledger.

/// Reads: runs `$body` with `$conn` bound to a connection of whichever backend `$db` uses — a
/// pooled PostgreSQL connection, or a SQLite reader that runs the body on the spot (see
/// [`crate::sqlite`]). The body is expanded once per backend, so it is type-checked against
/// both. Evaluates to `Result<_, StoreError>`. A body that writes belongs in
/// [`transaction!`]: SQLite readers refuse writes.
macro_rules! with_conn {
    ($db:expr, $conn:ident => $body:expr) => {{
        match &$db.pool {
            $crate::database::DbPool::Pg(pools) => with_pg_conn!(pools, $conn => $body),
            $crate::database::DbPool::Sqlite(sqlite) => match $crate::database::timed(|| sqlite.reader()) {
                Ok(mut guard) => {
                    let $conn = &mut *guard;
                    ($body).map_err($crate::database::StoreError::from)
                }
                Err(e) => Err(e),
            },
        }
    }};
}

/// [`with_conn!`] for a body only PostgreSQL runs (`$pools` the database's
/// [`crate::database::PgPools`]): a pooled connection of the calling thread. A body that is one
/// statement may write: the statement is atomic by itself.
macro_rules! with_pg_conn {
    ($pools:expr, $conn:ident => $body:expr) => {{
        match $pools.local() {
            Ok(pool) => match $crate::database::timed_acquire(pool.get()).await {
                Ok(mut guard) => {
                    let $conn = &mut $crate::postgres::PgConn::new(&mut guard);
                    ($body).map_err($crate::database::StoreError::from)
                }
                Err(e) => Err($crate::database::StoreError::from(e)),
            },
            Err(e) => Err(e),
        }
    }};
}

/// Writes: a unit of work that commits whole or not at all. `$body` is the inside of an
/// `async move` block returning `Result<T, StoreError>` (an `Err` rolls the unit back), so what
/// it uses must be owned: the unit runs to its end even when its caller is gone.
///
/// - PostgreSQL: a transaction on a pooled connection, as a task of its own.
/// - SQLite: a savepoint in the writer thread's next group commit.
macro_rules! transaction {
    ($db:expr, $conn:ident => $body:expr) => {{
        match &$db.pool {
            $crate::database::DbPool::Pg(pools) => pg_transaction!(pools, $conn => $body),
            $crate::database::DbPool::Sqlite(sqlite) => {
                sqlite
                    .write(
                        move |$conn: &mut $crate::sqlite::SqliteConn| -> futures_util::future::BoxFuture<
                            '_,
                            Result<_, $crate::database::StoreError>,
                        > { Box::pin(async move { $body }) },
                    )
                    .await
            }
        }
    }};
}

/// [`transaction!`] for a body only PostgreSQL runs (`$pools` the database's
/// [`crate::database::PgPools`]).
macro_rules! pg_transaction {
    ($pools:expr, $conn:ident => $body:expr) => {{
        use diesel_async::AsyncConnection as _;
        // Spawned on the caller's thread (a request thread runs a single-threaded runtime), so
        // the unit uses that thread's connections.
        let pool = $pools.local();
        let unit = tokio::spawn(async move {
            let pool = pool?;
            match $crate::database::timed_acquire(pool.get()).await {
                Ok(mut guard) => {
                    guard
                        .transaction(async move |conn| -> Result<_, $crate::database::StoreError> {
                            let $conn = &mut $crate::postgres::PgConn::new(conn);
                            $body
                        })
                        .await
                }
                Err(e) => Err($crate::database::StoreError::from(e)),
            }
        });
        match unit.await {
            Ok(result) => result,
            Err(e) => Err($crate::database::StoreError::Pool(format!("a database task failed: {e}"))),
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

/// Advances a tenant's memory version inside a transaction (`$conn` a connection of either
/// backend) and evaluates to `Result<i64, diesel::result::Error>`: the new version, which the
/// transaction's rows carry as their `seq`. The version row stays locked until the commit, so
/// a tenant's memory changes are numbered in commit order and a cache that has read version
/// `v` can trust that every change up to `v` is visible (see [`crate::vectors`]). With
/// `reset`, caches are also told to reload everything (after a bulk change such as an agent's
/// deletion with its memory).
macro_rules! bump_memory_version {
    ($conn:expr, $tenant:expr) => {
        bump_memory_version!($conn, $tenant, reset: false)
    };
    ($conn:expr, $tenant:expr, reset: $reset:expr) => {{
        use $crate::schema::memory_scopes as ms;
        let tenant: &str = $tenant;
        let insert = diesel::insert_into(ms::table).values((
            ms::tenant_id.eq(tenant),
            ms::version.eq(1_i64),
            ms::reset_version.eq(if $reset { 1_i64 } else { 0_i64 }),
        ));
        if $reset {
            insert
                .on_conflict(ms::tenant_id)
                .do_update()
                .set((ms::version.eq(ms::version + 1_i64), ms::reset_version.eq(ms::version + 1_i64)))
                .returning(ms::version)
                .get_result::<i64>($conn)
                .await
        } else {
            insert
                .on_conflict(ms::tenant_id)
                .do_update()
                .set(ms::version.eq(ms::version + 1_i64))
                .returning(ms::version)
                .get_result::<i64>($conn)
                .await
        }
    }};
}

/// Runs a lease queue's claim (`$sql`, from [`crate::leases::claim_sql`]) on `$conn`, binding
/// the [`crate::leases::ClaimParams`] every claim takes first and then the queue's own
/// parameters (`Type => value`, from placeholder 7 on). Evaluates to the future of the loaded
/// rows.
macro_rules! claim {
    ($conn:expr, $sql:expr, $params:expr $(, $ty:ty => $value:expr)* $(,)?) => {{
        let params: &$crate::leases::ClaimParams = &$params;
        diesel::sql_query($sql)
            .bind::<diesel::sql_types::Text, _>(params.token.clone())
            .bind::<$crate::types::UtcTime, _>(params.until)
            .bind::<$crate::types::UtcTime, _>(params.now)
            .bind::<diesel::sql_types::BigInt, _>(params.limit)
            .bind::<diesel::sql_types::Nullable<diesel::sql_types::Text>, _>(params.owner.clone())
            .bind::<$crate::types::UtcTime, _>(params.stale_before)
            $(.bind::<$ty, _>($value))*
            .load($conn)
    }};
}

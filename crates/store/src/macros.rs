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

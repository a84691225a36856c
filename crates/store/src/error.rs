//! [`StoreError`]: what a storage operation fails with inside the store, before a repository
//! maps it to the domain's errors. Both backends' connections produce it (`database.rs`,
//! `sqlite.rs`), so it lives apart from either.

use diesel::result::{DatabaseErrorKind, Error as DieselError};

/// Errors of a storage operation before they are mapped to domain errors.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("no database connection available: {0}")]
    Pool(String),
    #[error(transparent)]
    Query(#[from] DieselError),
    /// A precondition the transaction checked did not hold; everything is rolled back.
    #[error("{0}")]
    Precondition(&'static str),
    /// A value could not be encoded for storage.
    #[error("cannot encode a value for storage: {0}")]
    Encode(String),
    /// The transaction that held the change did not commit.
    #[error("the transaction could not commit: {0}")]
    Commit(String),
}

impl From<diesel_async::pooled_connection::deadpool::PoolError> for StoreError {
    fn from(e: diesel_async::pooled_connection::deadpool::PoolError) -> Self {
        Self::Pool(e.to_string())
    }
}

impl StoreError {
    /// Whether a row referred to by a foreign key was missing (deleted by a concurrent
    /// request).
    pub(crate) fn is_foreign_key_violation(&self) -> bool {
        matches!(self, Self::Query(DieselError::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _)))
    }

    /// Whether this is a unique violation of `constraint` (a PostgreSQL constraint name, or
    /// the `table.column` SQLite names in its message).
    pub(crate) fn is_unique_violation(&self, pg_constraint: &str, sqlite_column: &str) -> bool {
        match self {
            Self::Query(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, info)) => {
                info.constraint_name() == Some(pg_constraint) || info.message().contains(sqlite_column)
            }
            _ => false,
        }
    }
}

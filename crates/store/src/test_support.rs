//! Databases for tests, one per test: a fresh SQLite file, or a fresh schema in the PostgreSQL
//! database named by `AGENTRY_TEST_DATABASE_URL`. Enabled by the `test-support` feature; used by
//! this crate's contract tests and by the API tests of the server.

use anyhow::Context as _;
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};

/// The URL of a SQLite file inside `dir`.
pub fn sqlite_url(dir: &std::path::Path) -> String {
    format!("sqlite://{}", dir.join("agentry.db").display())
}

/// A URL for a new, empty schema of the test PostgreSQL database, or `None` when
/// `AGENTRY_TEST_DATABASE_URL` is unset.
///
/// # Panics
/// When `AGENTRY_REQUIRE_POSTGRES=1` and the variable is unset: in CI a missing database must
/// fail the run, not skip tests silently.
///
/// # Errors
/// When the schema cannot be created.
pub async fn postgres_url() -> anyhow::Result<Option<String>> {
    let Ok(base) = std::env::var("AGENTRY_TEST_DATABASE_URL") else {
        assert!(
            std::env::var("AGENTRY_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "AGENTRY_REQUIRE_POSTGRES=1 but AGENTRY_TEST_DATABASE_URL is not set"
        );
        return Ok(None);
    };
    let schema = format!("t_{}", ulid::Ulid::new().to_string().to_lowercase());
    let mut admin = AsyncPgConnection::establish(&base).await.context("connecting to the test database")?;
    admin.batch_execute(&format!("CREATE SCHEMA {schema}")).await.context("creating a test schema")?;
    let separator = if base.contains('?') { '&' } else { '?' };
    Ok(Some(format!("{base}{separator}options=-c%20search_path%3D{schema}")))
}

/// Runs `sql` (statements without results) on `db` in one write transaction, as a test that
/// needs a row no repository would write (a stored state this version cannot read) does.
///
/// # Errors
/// When a statement fails.
pub async fn execute(db: &crate::Database, sql: &str) -> anyhow::Result<()> {
    let sql = sql.to_owned();
    transaction!(db, conn => Ok::<_, crate::database::StoreError>(conn.batch_execute(&sql).await?))?;
    Ok(())
}

/// The lease token an execution's row carries (`None`: no worker holds it), for tests that show
/// a waiting execution holds nothing.
///
/// # Errors
/// When the row cannot be read.
pub async fn execution_lease(db: &crate::Database, id: &str) -> anyhow::Result<Option<String>> {
    use diesel::{ExpressionMethods as _, QueryDsl as _};
    use diesel_async::RunQueryDsl as _;

    use crate::schema::workflow_executions;
    let id = id.to_owned();
    let token = with_conn!(db, conn => {
        workflow_executions::table
            .filter(workflow_executions::id.eq(&id))
            .select(workflow_executions::lease_token)
            .first::<Option<String>>(conn)
            .await
    })?;
    Ok(token)
}

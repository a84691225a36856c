//! Test databases: one per test, migrated, on either backend.

use agentry_store::{Database, DatabaseSettings};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};

/// A migrated database that lives as long as this value.
pub struct TestDb {
    pub db: Database,
    _dir: Option<tempfile::TempDir>,
}

/// A fresh SQLite file in a temporary directory.
pub async fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().expect("temporary directory");
    let url = format!("sqlite://{}", dir.path().join("test.db").display());
    let db = Database::connect(&DatabaseSettings::new(url))
        .await
        .expect("open SQLite");
    db.migrate().await.expect("migrate SQLite");
    TestDb {
        db,
        _dir: Some(dir),
    }
}

/// A fresh schema in the PostgreSQL database named by `AGENTRY_TEST_DATABASE_URL`, or `None`
/// when it is unset (a failure instead when `AGENTRY_REQUIRE_POSTGRES=1`).
pub async fn postgres() -> Option<TestDb> {
    let Ok(base) = std::env::var("AGENTRY_TEST_DATABASE_URL") else {
        assert!(
            std::env::var("AGENTRY_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "AGENTRY_REQUIRE_POSTGRES=1 but AGENTRY_TEST_DATABASE_URL is not set"
        );
        eprintln!("skipping PostgreSQL contract test: AGENTRY_TEST_DATABASE_URL is not set");
        return None;
    };
    let schema = format!("t_{}", ulid::Ulid::new().to_string().to_lowercase());
    let mut admin = AsyncPgConnection::establish(&base)
        .await
        .expect("connect to the test database");
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .expect("create schema");
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}options=-c%20search_path%3D{schema}");
    let db = Database::connect(&DatabaseSettings::new(url))
        .await
        .expect("open PostgreSQL");
    db.migrate().await.expect("migrate PostgreSQL");
    Some(TestDb { db, _dir: None })
}

/// Declares each listed `async fn name(db: Database)` as two tests, `name::sqlite` and
/// `name::postgres`.
#[macro_export]
macro_rules! contract {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let t = $crate::harness::sqlite().await;
                super::$name(t.db.clone()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(t) = $crate::harness::postgres().await {
                    super::$name(t.db.clone()).await;
                }
            }
        }
    )*};
}

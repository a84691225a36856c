//! Test databases: one per test, migrated, on either backend.

use agentry_store::test_support::{postgres_url, sqlite_url};
use agentry_store::{Database, DatabaseSettings};

/// A migrated database that lives as long as this value.
pub struct TestDb {
    pub db: Database,
    _dir: Option<tempfile::TempDir>,
}

async fn open(url: String, dir: Option<tempfile::TempDir>) -> TestDb {
    let db = Database::connect(&DatabaseSettings::new(url)).await.expect("open the test database");
    db.migrate().await.expect("migrate the test database");
    TestDb { db, _dir: dir }
}

/// A fresh SQLite file in a temporary directory.
pub async fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().expect("temporary directory");
    open(sqlite_url(dir.path()), Some(dir)).await
}

/// A fresh PostgreSQL schema, or `None` when no test database is configured.
pub async fn postgres() -> Option<TestDb> {
    match postgres_url().await.expect("a test schema") {
        Some(url) => Some(open(url, None).await),
        None => {
            eprintln!("skipping PostgreSQL contract test: AGENTRY_TEST_DATABASE_URL is not set");
            None
        }
    }
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

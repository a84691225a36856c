//! Storing work wakes the workers: in-process at once on both backends, and on PostgreSQL every
//! other instance of the same schema through the storing transaction's `NOTIFY` (never one of
//! another schema).

use std::time::Duration;

use agentry_domain::jobs::{JobQueue as _, NewJob};
use agentry_store::test_support::postgres_url;
use agentry_store::{Database, DatabaseSettings, JobStore, WorkQueue};
use chrono::Utc;
use serde_json::json;

crate::contract!(storing_a_job_wakes_this_process_job_worker_only);

fn job() -> NewJob {
    let now = Utc::now();
    NewJob {
        id: agentry_domain::ids::JobId::from_string(format!(
            "job_{}",
            now.timestamp_nanos_opt().unwrap_or(0)
        )),
        kind: agentry_domain::jobs::JobKind::Mail,
        payload: json!({"purpose": "magic_link", "email": "a@b.co"}),
        run_at: now,
        created_at: now,
    }
}

/// Whether `queue`'s worker of `db` is woken within `within`.
async fn woken(db: &Database, queue: WorkQueue, within: Duration) -> bool {
    tokio::time::timeout(within, db.signals().waiter(queue).notified()).await.is_ok()
}

async fn storing_a_job_wakes_this_process_job_worker_only(db: Database) {
    JobStore::new(db.clone()).enqueue(&job()).await.unwrap();
    assert!(woken(&db, WorkQueue::Jobs, Duration::from_secs(5)).await, "the job worker");
    assert!(!woken(&db, WorkQueue::Executions, Duration::from_millis(50)).await, "no other");
}

async fn connect(url: &str) -> Database {
    Database::connect(&DatabaseSettings::new(url)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_another_instance_of_the_schema_is_woken_and_no_other() {
    let (Some(url), Some(other_schema)) = (postgres_url().await.unwrap(), postgres_url().await.unwrap())
    else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    let storing = connect(&url).await;
    storing.migrate().await.unwrap();
    let (listening, elsewhere) = (connect(&url).await, connect(&other_schema).await);
    let listeners = [listening.listen_for_work().unwrap(), elsewhere.listen_for_work().unwrap()];
    // The listeners are up once a signal sent after them arrives: send until one does.
    let started = std::time::Instant::now();
    let jobs = JobStore::new(storing.clone());
    loop {
        jobs.enqueue(&job()).await.unwrap();
        if woken(&listening, WorkQueue::Jobs, Duration::from_millis(200)).await {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "the other instance was never woken");
    }
    assert!(!woken(&elsewhere, WorkQueue::Jobs, Duration::from_millis(300)).await, "another schema is not");
    for listener in listeners {
        listener.abort();
    }
}

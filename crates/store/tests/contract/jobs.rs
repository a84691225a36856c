use agentry_domain::ids::JobId;
use agentry_domain::jobs::{JobKind, JobOutcome, JobQueue, NewJob};
use agentry_domain::work::{Lease, LeaseQueue as _};
use agentry_store::{Database, JobStore};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;

crate::contract!(
    a_due_job_is_claimed_once_and_finished_under_its_lease,
    a_job_waits_for_its_time_and_its_retry,
    an_expired_lease_is_claimed_again_and_the_late_worker_is_ignored,
    concurrent_workers_never_share_a_job,
    a_claim_takes_no_more_than_its_limit,
    a_job_that_cannot_be_read_is_failed_and_the_others_run,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 5, 9, 0, 0).unwrap()
}

fn job(id: &str, run_at: DateTime<Utc>) -> NewJob {
    NewJob {
        id: JobId::from_string(id),
        kind: JobKind::Mail,
        payload: json!({"purpose": "magic_link", "email": "a@b.co"}),
        run_at,
        created_at: t0(),
    }
}

fn lease(token: &str, until: DateTime<Utc>) -> Lease {
    Lease { token: token.into(), until }
}

async fn a_due_job_is_claimed_once_and_finished_under_its_lease(db: Database) {
    let queue = JobStore::new(db.clone());
    queue.enqueue(&job("job_1", t0())).await.unwrap();
    let first = lease("l1", t0() + Duration::seconds(60));
    let claimed = queue.claim(&first, t0(), 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!((claimed[0].claims, claimed[0].payload["purpose"].as_str()), (1, Some("magic_link")));
    assert!(queue.claim(&lease("l2", t0()), t0(), 10).await.unwrap().is_empty(), "held");
    let other = lease("l-other", first.until);
    assert!(!queue.finish(&claimed[0].id, &other, &JobOutcome::Done, t0()).await.unwrap(), "not its lease");
    assert!(queue.finish(&claimed[0].id, &first, &JobOutcome::Done, t0()).await.unwrap());
    assert_eq!(db.count_rows("jobs").await.unwrap(), 0, "a done job is gone");
}

async fn a_job_waits_for_its_time_and_its_retry(db: Database) {
    let queue = JobStore::new(db.clone());
    queue.enqueue(&job("job_1", t0() + Duration::seconds(10))).await.unwrap();
    assert!(queue.claim(&lease("l1", t0()), t0(), 10).await.unwrap().is_empty());
    let later = t0() + Duration::seconds(10);
    let l1 = lease("l1", later + Duration::seconds(60));
    let claimed = queue.claim(&l1, later, 10).await.unwrap();
    let retry = JobOutcome::RetryAt { at: later + Duration::seconds(5), error: "smtp down".into() };
    assert!(queue.finish(&claimed[0].id, &l1, &retry, later).await.unwrap());
    assert!(queue.claim(&lease("l2", later), later, 10).await.unwrap().is_empty(), "backing off");
    let after = later + Duration::seconds(5);
    let l3 = lease("l3", after + Duration::seconds(60));
    let again = queue.claim(&l3, after, 10).await.unwrap();
    assert_eq!(again[0].claims, 2);
    let failed = JobOutcome::Failed { error: "gave up".into() };
    assert!(queue.finish(&again[0].id, &l3, &failed, after).await.unwrap());
    assert!(queue.claim(&lease("l4", after), after + Duration::days(1), 10).await.unwrap().is_empty());
    assert_eq!(queue.pending().await.unwrap(), 0);
    assert_eq!(db.count_rows("jobs").await.unwrap(), 1, "a failed job is kept with its error");
}

async fn an_expired_lease_is_claimed_again_and_the_late_worker_is_ignored(db: Database) {
    let queue = JobStore::new(db.clone());
    queue.enqueue(&job("job_1", t0())).await.unwrap();
    let crashed = lease("crashed", t0() + Duration::seconds(30));
    queue.claim(&crashed, t0(), 10).await.unwrap();
    let after = t0() + Duration::seconds(31);
    let rescuer = lease("rescuer", after + Duration::seconds(30));
    let claimed = queue.claim(&rescuer, after, 10).await.unwrap();
    assert_eq!((claimed.len(), claimed[0].claims), (1, 2));
    assert!(
        !queue.finish(&claimed[0].id, &crashed, &JobOutcome::Done, after).await.unwrap(),
        "the late worker"
    );
    assert!(queue.finish(&claimed[0].id, &rescuer, &JobOutcome::Done, after).await.unwrap());
}

async fn concurrent_workers_never_share_a_job(db: Database) {
    let queue = JobStore::new(db.clone());
    for i in 0..40 {
        queue.enqueue(&job(&format!("job_{i:02}"), t0())).await.unwrap();
    }
    let workers = (0..8).map(|w| {
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let l = lease(&format!("w{w}-{}", mine.len()), t0() + Duration::seconds(60));
                let batch = queue.claim(&l, t0(), 3).await.unwrap();
                if batch.is_empty() {
                    return mine;
                }
                mine.extend(batch.into_iter().map(|j| j.item.id.into_string()));
            }
        })
    });
    let mut all: Vec<String> =
        futures_util::future::join_all(workers).await.into_iter().flat_map(|r| r.unwrap()).collect();
    all.sort();
    let total = all.len();
    all.dedup();
    assert_eq!((total, all.len()), (40, 40), "each job claimed exactly once");
}

async fn a_claim_takes_no_more_than_its_limit(db: Database) {
    let queue = JobStore::new(db.clone());
    for i in 0..3 {
        queue.enqueue(&job(&format!("job_{i}"), t0())).await.unwrap();
    }
    let l1 = lease("l1", t0() + Duration::seconds(60));
    assert_eq!(queue.claim(&l1, t0(), 1).await.unwrap().len(), 1);
    let l2 = lease("l2", t0() + Duration::seconds(60));
    assert_eq!(queue.claim(&l2, t0(), 5).await.unwrap().len(), 2, "the rest were left");
}

async fn a_job_that_cannot_be_read_is_failed_and_the_others_run(db: Database) {
    let queue = JobStore::new(db.clone());
    queue.enqueue(&job("job_1", t0())).await.unwrap();
    queue.enqueue(&job("job_2", t0() + Duration::seconds(1))).await.unwrap();
    // A kind this version does not know, oldest first in the queue.
    agentry_store::test_support::execute(&db, "UPDATE jobs SET kind = 'fax' WHERE id = 'job_1'")
        .await
        .unwrap();
    let now = t0() + Duration::seconds(2);
    let claimed = queue.claim(&lease("l1", now + Duration::seconds(60)), now, 10).await.unwrap();
    let ids: Vec<&str> = claimed.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["job_2"]);
    assert_eq!(queue.pending().await.unwrap(), 1, "job_1 failed");
    // It never comes back, also once every lease has run out.
    let later = now + Duration::hours(1);
    let again = queue.claim(&lease("l2", later + Duration::seconds(60)), later, 10).await.unwrap();
    assert_eq!(again.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["job_2"]);
}

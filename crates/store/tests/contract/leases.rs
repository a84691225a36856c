//! What every lease queue shares: a lease whose instance has gone silent (or has left) is free
//! at once, one whose instance beats is not, and a single process frees every lease at its
//! start. Shown with jobs; webhook deliveries and executions claim through the same condition.

use agentry_domain::ids::JobId;
use agentry_domain::jobs::{JobKind, JobOutcome, JobQueue, NewJob};
use agentry_domain::work::{InstanceRegistry as _, Lease, LeaseQueue as _};
use agentry_store::{Database, InstanceStore, JobStore};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;

crate::contract!(
    a_lease_of_a_silent_instance_is_free_at_once,
    a_lease_of_an_instance_that_left_is_free_at_once,
    every_lease_is_freed_at_the_start_of_a_single_process,
    live_instances_that_disagree_on_a_setting_name_it,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 28, 9, 0, 0).unwrap()
}

async fn one_job(db: &Database) {
    let job = NewJob {
        id: JobId::from_string("job_1"),
        kind: JobKind::Mail,
        payload: json!({"purpose": "magic_link", "email": "a@b.co"}),
        run_at: t0(),
        created_at: t0(),
    };
    JobStore::new(db.clone()).enqueue(&job).await.unwrap();
}

/// The registry, and the job queue as instances `ins_a` and `ins_b` (timeout 10 s) use it.
fn two_instances(db: &Database) -> (InstanceStore, JobStore, JobStore) {
    let timeout = Duration::seconds(10);
    (
        InstanceStore::new(db.clone()),
        JobStore::new(db.clone().for_instance("ins_a", timeout)),
        JobStore::new(db.clone().for_instance("ins_b", timeout)),
    )
}

/// The oldest heartbeat of a live instance (the instances of these tests time out after 10 s).
fn silent_before() -> DateTime<Utc> {
    Utc::now() - Duration::seconds(10)
}

/// A lease that runs for an hour: only its owner's silence can free it sooner.
fn long_lease(token: &str) -> Lease {
    Lease { token: token.into(), until: t0() + Duration::hours(1) }
}

async fn a_lease_of_a_silent_instance_is_free_at_once(db: Database) {
    let (registry, a, b) = two_instances(&db);
    registry.beat("ins_a", Utc::now(), silent_before()).await.unwrap();
    registry.beat("ins_b", Utc::now(), silent_before()).await.unwrap();
    one_job(&db).await;
    let held = a.claim(&long_lease("la"), t0(), 10).await.unwrap();
    assert_eq!(held.len(), 1);
    assert!(b.claim(&long_lease("lb"), t0(), 10).await.unwrap().is_empty(), "its owner beats");

    // Instance a has been silent for longer than the timeout: it crashed.
    registry.beat("ins_a", Utc::now() - Duration::seconds(11), silent_before()).await.unwrap();
    assert_eq!(
        registry.beat("ins_b", Utc::now(), silent_before()).await.unwrap(),
        ["ins_a"],
        "a beat tells which instances went silent"
    );
    let taken = b.claim(&long_lease("lb"), t0(), 10).await.unwrap();
    assert_eq!((taken.len(), taken[0].claims), (1, 2), "taken over at once, as a second attempt");
    assert!(
        !a.finish(&held[0].id, &held[0].lease, &JobOutcome::Done, t0()).await.unwrap(),
        "the old lease is void"
    );
    assert!(b.finish(&taken[0].id, &taken[0].lease, &JobOutcome::Done, t0()).await.unwrap());
}

async fn a_lease_of_an_instance_that_left_is_free_at_once(db: Database) {
    let (registry, a, b) = two_instances(&db);
    registry.beat("ins_a", Utc::now(), silent_before()).await.unwrap();
    one_job(&db).await;
    assert_eq!(a.claim(&long_lease("la"), t0(), 10).await.unwrap().len(), 1);
    registry.leave("ins_a").await.unwrap();
    assert_eq!(b.claim(&long_lease("lb"), t0(), 10).await.unwrap().len(), 1);
}

async fn every_lease_is_freed_at_the_start_of_a_single_process(db: Database) {
    let registry = InstanceStore::new(db.clone());
    let a = JobStore::new(db.clone().for_instance("ins_a", Duration::seconds(10)));
    registry.beat("ins_a", Utc::now(), silent_before()).await.unwrap();
    one_job(&db).await;
    assert_eq!(a.claim(&long_lease("la"), t0(), 10).await.unwrap().len(), 1);
    assert_eq!(registry.free_all_leases().await.unwrap(), 1);
    // Even the owner beating again does not hold it: the lease itself is gone.
    let again = a.claim(&long_lease("la2"), t0(), 10).await.unwrap();
    assert_eq!((again.len(), again[0].claims), (1, 2));
}

/// Instance `id`'s registry, with fingerprints `pairs` (setting, fingerprint).
fn registry_of(db: &Database, id: &str, pairs: &[(&str, &str)]) -> InstanceStore {
    let fingerprints = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    InstanceStore::new(db.clone().for_instance(id, Duration::seconds(10))).with_fingerprints(fingerprints)
}

async fn live_instances_that_disagree_on_a_setting_name_it(db: Database) {
    let a = registry_of(&db, "ins_a", &[("AGENTRY_JWT_SECRET", "aa"), ("AGENTRY_JWT_ISSUER", "i")]);
    let b = registry_of(
        &db,
        "ins_b",
        &[("AGENTRY_JWT_SECRET", "bb"), ("AGENTRY_JWT_ISSUER", "i"), ("AGENTRY_SECRET_KEY", "s")],
    );
    a.beat("ins_a", Utc::now(), silent_before()).await.unwrap();
    assert!(a.disagreements().await.unwrap().is_empty(), "alone, it agrees with itself");
    b.beat("ins_b", Utc::now(), silent_before()).await.unwrap();
    assert_eq!(a.disagreements().await.unwrap(), ["AGENTRY_JWT_SECRET"]);
    assert_eq!(b.disagreements().await.unwrap(), ["AGENTRY_JWT_SECRET"]);

    // A silent instance (crashed long ago) is not compared, whatever it was configured with.
    let c = registry_of(&db, "ins_c", &[("AGENTRY_JWT_ISSUER", "other")]);
    c.beat("ins_c", Utc::now() - Duration::seconds(11), silent_before()).await.unwrap();
    assert_eq!(a.disagreements().await.unwrap(), ["AGENTRY_JWT_SECRET"]);

    // Once the other leaves (it was restarted with the right key), they agree.
    b.leave("ins_b").await.unwrap();
    assert!(a.disagreements().await.unwrap().is_empty());
}

//! Executions as a state machine in the one queue: a step that backs off gives its lease back
//! and leaves the execution due later, claimable only then; the step it is at, its step runs
//! and each attempt are kept; a step run again starts from a fresh slate.

use agentry_domain::ids::ExecutionId;
use agentry_domain::work::LeaseQueue as _;
use agentry_domain::workflows::{After, ExecutionOrigin, ExecutionRepository, StepStatus};
use agentry_store::Database;
use chrono::Duration;
use serde_json::json;

use super::executions::{completed, lease, new_execution, setup, started, t0};

crate::contract!(
    a_step_backing_off_leaves_its_execution_due_later_without_a_lease,
    a_step_run_again_starts_from_a_fresh_slate_and_every_run_counts,
);

async fn a_step_backing_off_leaves_its_execution_due_later_without_a_lease(db: Database) {
    let store = setup(&db).await;
    let new = new_execution("exe_1", "ten_1", t0(), ExecutionOrigin::Api, None);
    store.create(&new).await.unwrap();
    let (id, tenant) = (&new.execution.id, &new.execution.tenant_id);
    let held = lease("l1", t0() + Duration::seconds(30));
    assert_eq!(store.claim(&held, t0(), 10).await.unwrap().len(), 1);
    let mut run = new.execution.clone();
    run.start_step("find", t0()).unwrap();
    assert!(store.start_step(id, &held, run.step("find").unwrap(), t0()).await.unwrap());
    let due = t0() + Duration::seconds(60);
    run.retry_step("find", "the server answered 503".into(), due, t0() + Duration::seconds(1)).unwrap();
    let backing_off = run.step("find").unwrap();
    assert!(
        !store.record_step(id, &lease("other", due), backing_off, After::DueAt(due)).await.unwrap(),
        "lost lease"
    );
    assert!(store.record_step(id, &held, backing_off, After::DueAt(due)).await.unwrap());

    let stored = store.get(tenant, id).await.unwrap().unwrap();
    assert_eq!(
        stored, run,
        "the step's attempts, errors and next run, the execution's due time, step and runs"
    );
    assert_eq!((stored.at_step(), stored.step_runs(), stored.due_at()), (Some("find"), 1, due));
    let step = &stored.steps()[0];
    assert_eq!((step.status(), step.attempts(), step.next_run_at()), (StepStatus::Pending, 1, Some(due)));
    assert_eq!(step.attempt_errors()[0].error, "the server answered 503");

    // Its lease was given back, yet it is not due: nobody claims it a second early.
    let early = due - Duration::seconds(1);
    assert!(store.claim(&lease("l2", early + Duration::seconds(30)), early, 10).await.unwrap().is_empty());
    let claimed = store.claim(&lease("l3", due + Duration::seconds(30)), due, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].claims, 1, "a claim that scheduled a retry is not counted as one that failed");
    assert_eq!(claimed[0].execution, run);

    // Cancelled while it backs off: the step is skipped and waits for nothing.
    let mut cancelled = stored.clone();
    cancelled.cancel(due).unwrap();
    assert!(store.record_cancel(&cancelled).await.unwrap());
    let stored = store.get(tenant, id).await.unwrap().unwrap();
    assert_eq!((stored.steps()[0].status(), stored.steps()[0].next_run_at()), (StepStatus::Skipped, None));
}

async fn a_step_run_again_starts_from_a_fresh_slate_and_every_run_counts(db: Database) {
    let store = setup(&db).await;
    let new = new_execution("exe_1", "ten_1", t0(), ExecutionOrigin::Api, None);
    store.create(&new).await.unwrap();
    let (id, tenant) = (&new.execution.id, &new.execution.tenant_id);
    let held = lease("l1", t0() + Duration::seconds(30));
    store.claim(&held, t0(), 10).await.unwrap();
    assert!(store.start_step(id, &held, &started(&new.execution, "find"), t0()).await.unwrap());
    let mut run = completed(&new.execution, "find", json!({"results": [1]}), t0());
    run.branch_from("find", "find").unwrap();
    assert!(store.record_step(id, &held, run.step("find").unwrap(), After::GoOn).await.unwrap());
    assert_eq!(store.get(tenant, id).await.unwrap().unwrap().steps()[0].branch(), Some("find"));

    // The loop comes back to it.
    run.start_step("find", t0() + Duration::seconds(2)).unwrap();
    assert!(store.start_step(id, &held, run.step("find").unwrap(), t0()).await.unwrap());
    let stored = store.get(tenant, id).await.unwrap().unwrap();
    let step = &stored.steps()[0];
    assert_eq!(
        (step.status(), step.output(), step.finished_at(), step.branch()),
        (StepStatus::Running, None, None, None)
    );
    assert_eq!((stored.step_runs(), stored.at_step()), (2, Some("find")));
    assert_eq!(store.get(tenant, &ExecutionId::from_string("exe_none")).await.unwrap(), None);
}

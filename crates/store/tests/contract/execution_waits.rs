//! A waiting execution (a `wait` step) is a row: status `waiting`, due when its wait ends,
//! holding no lease; the claim that takes it when due makes it `running` again, and a cancel
//! fails the step that waited.

use agentry_domain::work::LeaseQueue as _;
use agentry_domain::workflows::{
    After, CANCELLED_WAIT_ERROR, ExecutionRepository, ExecutionStatus, StepStatus,
};
use agentry_store::Database;
use chrono::Duration;

use super::executions::{events_of, lease, started_under, t0};

/// What a step that waits until `until` leaves of `execution`, with its event.
fn waiting(execution: &agentry_domain::workflows::Execution, until: chrono::DateTime<chrono::Utc>) -> After {
    use agentry_domain::events::{Event, EventPayload, ExecutionWaitingData};
    use agentry_domain::ids::EventId;
    let event = Event {
        id: EventId::from_string(format!("evt_wait_{}", until.timestamp())),
        tenant_id: execution.tenant_id.clone(),
        payload: EventPayload::WorkflowExecutionWaiting(ExecutionWaitingData {
            execution_id: execution.id.clone(),
            workflow_id: execution.workflow_id.clone(),
            step_id: "find".into(),
            until,
        }),
        created_at: t0(),
    };
    After::Wait { until, event: Box::new(event) }
}

/// An execution of `ten_1` whose step `find` waits until `until`, stored through the store's
/// own steps (claimed under `held`, started, recorded waiting): the store and the execution.
async fn waiting_until(
    db: &Database,
    until: chrono::DateTime<chrono::Utc>,
    held: &agentry_domain::work::Lease,
) -> (agentry_store::ExecutionStore, agentry_domain::workflows::Execution) {
    let (store, mut run) = started_under(db, held).await;
    run.wait_step("find", until, t0()).unwrap();
    assert!(store.record_step(&run.id, held, run.step("find").unwrap(), waiting(&run, until)).await.unwrap());
    (store, run)
}

crate::contract!(
    a_waiting_execution_holds_no_lease_and_the_claim_that_takes_it_when_due_resumes_it,
    cancelling_a_waiting_execution_fails_the_step_that_waited,
    a_wait_recorded_after_a_cancel_fails_its_step_and_tells_nobody,
);

async fn a_waiting_execution_holds_no_lease_and_the_claim_that_takes_it_when_due_resumes_it(db: Database) {
    // A lease that would still hold when the wait ends, were it not given back.
    let held = lease("l1", t0() + Duration::seconds(300));
    let until = t0() + Duration::seconds(10);
    let (store, run) = waiting_until(&db, until, &held).await;
    let (id, tenant) = (&run.id, &run.tenant_id);

    let stored = store.get(tenant, id).await.unwrap().unwrap();
    assert_eq!(stored, run, "waiting, due when the wait ends, the step waiting until then");
    assert_eq!((stored.status(), stored.due_at()), (ExecutionStatus::Waiting, until));
    assert_eq!(
        agentry_store::test_support::execution_lease(&db, id.as_str()).await.unwrap(),
        None,
        "no lease held"
    );
    assert!(
        events_of(&db, "ten_1").await.contains(&"workflow.execution.waiting".to_owned()),
        "subscribers are told in the same transaction"
    );
    assert_eq!(
        store
            .list(tenant, &run.workflow_id, Some(ExecutionStatus::Waiting), Default::default())
            .await
            .unwrap()
            .1,
        1
    );

    // The worker that finds nothing to claim knows when to look again.
    assert_eq!(store.next_due(t0()).await.unwrap(), Some(until));
    assert_eq!(store.next_due(until).await.unwrap(), None, "due already: claimed, not waited for");
    // Not due a second early; due at its time, though the first claim's lease would still hold.
    let early = until - Duration::seconds(1);
    assert!(store.claim(&lease("l2", early + Duration::seconds(30)), early, 10).await.unwrap().is_empty());
    let claimed = store.claim(&lease("l3", until + Duration::seconds(30)), until, 10).await.unwrap();
    assert_eq!(claimed.len(), 1, "the wait gave its lease back");
    assert_eq!(claimed[0].claims, 1, "waiting is not a claim that failed");
    let mut resumed = run.clone();
    resumed.resume().unwrap();
    assert_eq!(claimed[0].item.execution, resumed, "resumed: running, its step still waiting");
    assert_eq!(store.get(tenant, id).await.unwrap().unwrap().status(), ExecutionStatus::Running);
}

async fn cancelling_a_waiting_execution_fails_the_step_that_waited(db: Database) {
    let until = t0() + Duration::seconds(3600);
    let (store, run) = waiting_until(&db, until, &lease("l1", t0() + Duration::seconds(30))).await;
    let (id, tenant) = (&run.id, &run.tenant_id);

    let mut cancelled = store.get(tenant, id).await.unwrap().unwrap();
    cancelled.cancel(t0() + Duration::seconds(5)).unwrap();
    assert!(store.record_cancel(&cancelled).await.unwrap());
    let stored = store.get(tenant, id).await.unwrap().unwrap();
    assert_eq!(stored, cancelled);
    assert_eq!(stored.status(), ExecutionStatus::Cancelled);
    let find = stored.step("find").unwrap();
    assert_eq!(
        (find.status(), find.error(), find.next_run_at()),
        (StepStatus::Failed, Some(CANCELLED_WAIT_ERROR), None)
    );
    // Its due time passes: nothing takes it up.
    assert!(store.claim(&lease("l2", until + Duration::seconds(30)), until, 10).await.unwrap().is_empty());
    assert!(!store.record_cancel(&cancelled).await.unwrap(), "a cancelled execution is not cancelled twice");
}

async fn a_wait_recorded_after_a_cancel_fails_its_step_and_tells_nobody(db: Database) {
    let held = lease("l1", t0() + Duration::seconds(30));
    let (store, mut run) = started_under(&db, &held).await;
    let (id, tenant) = (&run.id.clone(), &run.tenant_id.clone());
    // Cancelled while the step runs: the running step is left to record its result.
    let mut cancelled = store.get(tenant, id).await.unwrap().unwrap();
    cancelled.cancel(t0() + Duration::seconds(1)).unwrap();
    assert!(store.record_cancel(&cancelled).await.unwrap());
    // Its result is a wait.
    let until = t0() + Duration::seconds(60);
    run.wait_step("find", until, t0() + Duration::seconds(2)).unwrap();
    assert!(store.record_step(id, &held, run.step("find").unwrap(), waiting(&run, until)).await.unwrap());

    let stored = store.get(tenant, id).await.unwrap().unwrap();
    assert_eq!(stored.status(), ExecutionStatus::Cancelled);
    let find = stored.step("find").unwrap();
    assert_eq!(
        (find.status(), find.error(), find.next_run_at()),
        (StepStatus::Failed, Some(CANCELLED_WAIT_ERROR), None)
    );
    assert!(
        !events_of(&db, "ten_1").await.contains(&"workflow.execution.waiting".to_owned()),
        "nobody is told it waits"
    );
    assert!(store.claim(&lease("l2", until + Duration::seconds(30)), until, 10).await.unwrap().is_empty());
}

use agentry_domain::events::{Event, EventPayload, ExecutionCompletedData, ExecutionStartedData};
use agentry_domain::ids::{EventId, ExecutionId, TenantId, TriggerId, UserId, WorkflowId};
use agentry_domain::pagination::Page;
use agentry_domain::tenancy::{CallChain, Role};
use agentry_domain::work::{Lease, LeaseQueue as _};
use agentry_domain::workflows::{
    After, Execution, ExecutionOrigin, ExecutionRepository, ExecutionStatus, Finish, NewExecution, RunAs,
    StepResult, StepStatus, WorkflowRepository,
};
use agentry_store::{Database, EventStore, ExecutionStore};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{Value, json};

crate::contract!(
    an_execution_reads_back_with_its_steps_and_started_event,
    a_repeated_key_from_one_origin_is_one_execution_also_when_raced,
    claims_never_hand_one_execution_to_two_live_leases,
    step_results_and_the_end_are_kept_only_under_the_lease,
    cancelling_skips_pending_steps_and_keeps_a_finished_execution,
    executions_are_listed_newest_first_filtered_and_per_tenant,
    deleting_a_workflow_while_its_execution_ends_never_fails,
    an_execution_that_cannot_be_read_is_failed_and_the_others_run,
    an_execution_given_back_is_free_at_once_and_its_claim_not_counted,
    a_claim_keeps_each_tenant_within_its_share,
    an_execution_stored_held_is_its_starters_with_its_chain,
);

pub(super) fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 26, 9, 0, 0).unwrap()
}

pub(super) fn lease(token: &str, until: DateTime<Utc>) -> Lease {
    Lease { token: token.into(), until }
}

pub(super) fn new_execution(
    id: &str,
    tenant: &str,
    at: DateTime<Utc>,
    origin: ExecutionOrigin,
    key: Option<&str>,
) -> NewExecution {
    let workflow = super::workflows::workflow(&format!("wf_{tenant}"), tenant);
    let execution = Execution::start(
        ExecutionId::from_string(id),
        TenantId::from_string(tenant),
        workflow.id.clone(),
        json!({"question": "why?", "k": 2}),
        origin,
        at,
        &workflow.steps,
    );
    let started_event = Event {
        id: EventId::from_string(format!("evt_{id}")),
        tenant_id: TenantId::from_string(tenant),
        payload: EventPayload::WorkflowExecutionStarted(ExecutionStartedData {
            execution_id: execution.id.clone(),
            workflow_id: workflow.id.clone(),
            origin: execution.origin.kind().into(),
            input: execution.input.clone(),
        }),
        created_at: at,
    };
    NewExecution {
        execution,
        steps: workflow.steps,
        run_as: RunAs { user_id: UserId::from_string("usr_1"), role: Role::Member },
        dedup_key: key.map(str::to_owned),
        started_event,
        call_chain: CallChain::default(),
        held: None,
    }
}

/// `execution` after its step `step_id` ran from `at` for a second and completed with `output`:
/// the result a worker records.
pub(super) fn completed(execution: &Execution, step_id: &str, output: Value, at: DateTime<Utc>) -> Execution {
    let mut run = execution.clone();
    run.start_step(step_id, at).unwrap();
    run.complete_step(step_id, output, at + Duration::seconds(1)).unwrap();
    run
}

/// Step `step_id` of `execution` as it starts at t0.
pub(super) fn started(execution: &Execution, step_id: &str) -> StepResult {
    let mut run = execution.clone();
    run.start_step(step_id, t0()).unwrap();
    run.step(step_id).unwrap().clone()
}

/// Execution `exe_1` of `ten_1`, stored, claimed under `held` and with its step `find`
/// started through the store, as a worker holds it: the store and the execution.
pub(super) async fn started_under(db: &Database, held: &Lease) -> (ExecutionStore, Execution) {
    let store = setup(db).await;
    let new = new_execution("exe_1", "ten_1", t0(), ExecutionOrigin::Api, None);
    store.create(&new).await.unwrap();
    assert_eq!(store.claim(held, t0(), 10).await.unwrap().len(), 1);
    let mut run = new.execution;
    run.start_step("find", t0()).unwrap();
    assert!(store.start_step(&run.id, held, run.step("find").unwrap(), t0()).await.unwrap());
    (store, run)
}

pub(super) async fn setup(db: &Database) -> ExecutionStore {
    let workflows = super::workflows::setup(db).await;
    for tenant in ["ten_1", "ten_2"] {
        workflows.create(&super::workflows::workflow(&format!("wf_{tenant}"), tenant)).await.unwrap();
    }
    ExecutionStore::new(db.clone())
}

pub(super) async fn events_of(db: &Database, tenant: &str) -> Vec<String> {
    use agentry_domain::events::EventLog as _;
    let events = EventStore::new(db.clone()).recent(&TenantId::from_string(tenant), 100).await.unwrap();
    events.iter().map(|e| e.event_type().as_str().to_owned()).collect()
}

async fn an_execution_reads_back_with_its_steps_and_started_event(db: Database) {
    let store = setup(&db).await;
    let new = new_execution("exe_1", "ten_1", t0(), ExecutionOrigin::Api, None);
    let started = store.create(&new).await.unwrap();
    assert!(started.is_new());
    let got = store.get(&TenantId::from_string("ten_1"), &ExecutionId::from_string("exe_1")).await.unwrap();
    assert_eq!(got, Some(new.execution.clone()));
    assert_eq!(events_of(&db, "ten_1").await, ["workflow.execution.started"]);
    assert_eq!(store.get(&TenantId::from_string("ten_2"), &new.execution.id).await.unwrap(), None);
}

async fn a_repeated_key_from_one_origin_is_one_execution_also_when_raced(db: Database) {
    let store = setup(&db).await;
    let origin = ExecutionOrigin::Trigger(TriggerId::from_string("trg_1"));
    let runs = (0..8).map(|i| {
        let store = store.clone();
        let new = new_execution(&format!("exe_{i}"), "ten_1", t0(), origin.clone(), Some("key-1"));
        async move { store.create(&new).await.unwrap() }
    });
    let results = futures_util::future::join_all(runs).await;
    assert_eq!(results.iter().filter(|s| s.is_new()).count(), 1, "one execution for one key");
    let first = results.iter().find(|s| s.is_new()).unwrap().execution().id.clone();
    assert!(results.iter().all(|s| s.execution().id == first), "every start returns the first");
    assert_eq!(events_of(&db, "ten_1").await.len(), 1, "one started event");
    // Another key, or another origin with the same key, is another execution.
    assert!(
        store.create(&new_execution("exe_k2", "ten_1", t0(), origin, Some("key-2"))).await.unwrap().is_new()
    );
    let other = ExecutionOrigin::Trigger(TriggerId::from_string("trg_2"));
    assert!(
        store.create(&new_execution("exe_o2", "ten_1", t0(), other, Some("key-1"))).await.unwrap().is_new()
    );
}

async fn claims_never_hand_one_execution_to_two_live_leases(db: Database) {
    let store = setup(&db).await;
    for i in 0..6 {
        // Started before the claims: an execution is due from its start.
        let at = t0() - Duration::seconds(10 - i);
        store
            .create(&new_execution(&format!("exe_{i}"), "ten_1", at, ExecutionOrigin::Api, None))
            .await
            .unwrap();
    }
    let until = t0() + Duration::seconds(30);
    let claims = (0..4).map(|i| {
        let store = store.clone();
        async move { store.claim(&lease(&format!("l{i}"), until), t0(), 2).await.unwrap() }
    });
    let claimed: Vec<_> = futures_util::future::join_all(claims).await.into_iter().flatten().collect();
    let mut ids: Vec<&str> = claimed.iter().map(|c| c.execution.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 6, "each execution claimed once: {ids:?}");
    assert_eq!(claimed.len(), 6);
    let c = &claimed[0];
    assert_eq!(c.steps.len(), 2, "with the steps it runs");
    assert_eq!(c.run_as, RunAs { user_id: UserId::from_string("usr_1"), role: Role::Member });
    assert!(store.claim(&lease("l9", until), t0(), 10).await.unwrap().is_empty(), "held");
    // Once the leases end, another worker takes them over.
    let later = until + Duration::seconds(1);
    assert_eq!(store.claim(&lease("l10", later + Duration::seconds(30)), later, 10).await.unwrap().len(), 6);
}

async fn step_results_and_the_end_are_kept_only_under_the_lease(db: Database) {
    let store = setup(&db).await;
    let new = new_execution("exe_1", "ten_1", t0(), ExecutionOrigin::Api, None);
    store.create(&new).await.unwrap();
    let held = lease("l1", t0() + Duration::seconds(30));
    let claimed = store.claim(&held, t0(), 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let id = &new.execution.id;
    let tenant = &new.execution.tenant_id;

    let stranger = lease("other", t0() + Duration::seconds(30));
    assert!(
        !store.start_step(id, &stranger, &started(&new.execution, "find"), t0()).await.unwrap(),
        "another lease cannot start a step"
    );
    let extended = lease("l1", t0() + Duration::seconds(300));
    assert!(store.start_step(id, &extended, &started(&new.execution, "find"), t0()).await.unwrap());
    let got = store.get(tenant, id).await.unwrap().unwrap();
    assert_eq!(got.steps()[0].status(), StepStatus::Running);
    assert_eq!(got.steps()[0].started_at(), Some(t0()));
    // The extended lease keeps the execution from other workers while the step runs.
    let late = t0() + Duration::seconds(60);
    assert!(store.claim(&lease("l2", late + Duration::seconds(30)), late, 10).await.unwrap().is_empty());

    let done = |output| completed(&got, "find", output, t0()).steps()[0].clone();
    assert!(!store.record_step(id, &stranger, &done(json!("x")), After::GoOn).await.unwrap(), "lost lease");
    assert_eq!(store.get(tenant, id).await.unwrap().unwrap().steps()[0].status(), StepStatus::Running);
    assert!(store.record_step(id, &extended, &done(json!({"results": []})), After::GoOn).await.unwrap());

    assert!(store.start_step(id, &extended, &started(&new.execution, "answer"), t0()).await.unwrap());
    let last = completed(&got, "answer", json!({"n": 3}), t0()).steps()[1].clone();
    assert_eq!(last.step_id, "answer");
    let end = t0() + Duration::seconds(2);
    let finish = Finish {
        status: ExecutionStatus::Completed,
        output: Some(json!({"n": 3})),
        error: None,
        finished_at: end,
        event: Event {
            id: EventId::from_string("evt_done"),
            tenant_id: tenant.clone(),
            payload: EventPayload::WorkflowExecutionCompleted(ExecutionCompletedData {
                execution_id: id.clone(),
                workflow_id: WorkflowId::from_string("wf_ten_1"),
                output: json!({"n": 3}),
                duration_ms: 2000,
            }),
            created_at: end,
        },
    };
    assert!(store.record_step(id, &extended, &last, After::Finish(Box::new(finish))).await.unwrap());
    let finished = store.get(tenant, id).await.unwrap().unwrap();
    assert_eq!(finished.status(), ExecutionStatus::Completed);
    assert_eq!(finished.output(), Some(&json!({"n": 3})));
    assert_eq!(finished.finished_at(), Some(end));
    assert_eq!(finished.steps()[0].output(), Some(&json!({"results": []})));
    assert_eq!(finished.steps()[1].status(), StepStatus::Completed);
    let mut events = events_of(&db, "ten_1").await;
    events.sort();
    assert_eq!(events, ["workflow.execution.completed", "workflow.execution.started"]);
    let much_later = t0() + Duration::hours(1);
    assert!(store.claim(&lease("l3", much_later), much_later, 10).await.unwrap().is_empty(), "finished");
    let mut cancelled = new.execution.clone();
    cancelled.cancel(much_later).unwrap();
    assert!(!store.record_cancel(&cancelled).await.unwrap(), "a finished execution stays as it ended");
    assert_eq!(store.get(tenant, id).await.unwrap().unwrap().status(), ExecutionStatus::Completed);
}

async fn cancelling_skips_pending_steps_and_keeps_a_finished_execution(db: Database) {
    let store = setup(&db).await;
    let new = new_execution("exe_1", "ten_1", t0(), ExecutionOrigin::Api, None);
    store.create(&new).await.unwrap();
    let (id, tenant) = (&new.execution.id, &new.execution.tenant_id);
    let held = lease("l1", t0() + Duration::seconds(30));
    store.claim(&held, t0(), 10).await.unwrap();
    // Read before step 0 started, as a cancelling request may: step 0 is pending in its copy.
    let mut cancelled = store.get(tenant, id).await.unwrap().unwrap();
    assert!(store.start_step(id, &held, &started(&new.execution, "find"), t0()).await.unwrap());
    cancelled.cancel(t0()).unwrap();
    let mut foreign = cancelled.clone();
    foreign.tenant_id = TenantId::from_string("ten_2");
    assert!(!store.record_cancel(&foreign).await.unwrap(), "another tenant's");
    assert!(store.record_cancel(&cancelled).await.unwrap());
    let cancelled = store.get(tenant, id).await.unwrap().unwrap();
    assert_eq!(cancelled.status(), ExecutionStatus::Cancelled);
    assert_eq!(cancelled.error(), Some(agentry_domain::workflows::CANCELLED_ERROR));
    assert_eq!(cancelled.steps()[0].status(), StepStatus::Running, "a running step may finish");
    assert_eq!(cancelled.steps()[1].status(), StepStatus::Skipped);
    assert!(
        !store.start_step(id, &held, &started(&new.execution, "answer"), t0()).await.unwrap(),
        "no further step starts"
    );
    let mut finishing = cancelled.clone();
    finishing.complete_step("find", json!(1), t0()).unwrap();
    assert!(store.record_step(id, &held, &finishing.steps()[0], After::GoOn).await.unwrap());
    let after = store.get(tenant, id).await.unwrap().unwrap();
    assert_eq!(
        (after.status(), after.steps()[0].status()),
        (ExecutionStatus::Cancelled, StepStatus::Completed)
    );
    assert!(!store.record_cancel(&cancelled).await.unwrap(), "a second cancel changes nothing");
    let later = t0() + Duration::hours(1);
    assert!(store.claim(&lease("l2", later), later, 10).await.unwrap().is_empty(), "never claimed again");
}

async fn executions_are_listed_newest_first_filtered_and_per_tenant(db: Database) {
    let store = setup(&db).await;
    for i in 0..5 {
        let at = t0() + Duration::seconds(i);
        store
            .create(&new_execution(&format!("exe_{i}"), "ten_1", at, ExecutionOrigin::Api, None))
            .await
            .unwrap();
    }
    store.create(&new_execution("exe_x", "ten_2", t0(), ExecutionOrigin::Api, None)).await.unwrap();
    let tenant = TenantId::from_string("ten_1");
    let wf = WorkflowId::from_string("wf_ten_1");
    let mut first = store.get(&tenant, &ExecutionId::from_string("exe_1")).await.unwrap().unwrap();
    first.cancel(t0()).unwrap();
    assert!(store.record_cancel(&first).await.unwrap());
    let (page, total) = store.list(&tenant, &wf, None, Page { page: 1, per_page: 2 }).await.unwrap();
    assert_eq!(total, 5);
    let ids: Vec<&str> = page.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["exe_4", "exe_3"]);
    assert!(page.iter().all(|e| e.steps().is_empty()), "lists leave the steps out");
    let (page, total) = store.list(&tenant, &wf, None, Page { page: 3, per_page: 2 }).await.unwrap();
    assert_eq!((page.len(), total), (1, 5));
    let (page, total) = store.list(&tenant, &wf, None, Page { page: 9, per_page: 2 }).await.unwrap();
    assert_eq!((page.len(), total), (0, 5), "a page past the end still counts");
    let (cancelled, total) =
        store.list(&tenant, &wf, Some(ExecutionStatus::Cancelled), Page::default()).await.unwrap();
    assert_eq!((cancelled.len(), total), (1, 1));
    assert_eq!(cancelled[0].id.as_str(), "exe_1");
    let (none, total) =
        store.list(&TenantId::from_string("ten_2"), &wf, None, Page::default()).await.unwrap();
    assert_eq!((none.len(), total), (0, 0), "another tenant's workflow lists nothing");
}

async fn deleting_a_workflow_while_its_execution_ends_never_fails(db: Database) {
    // The end of an execution and the delete of its workflow (which cascades to it) race; each
    // must finish without an error (on PostgreSQL, without a deadlock) whichever comes first.
    let store = setup(&db).await;
    let workflows = agentry_store::WorkflowStore::new(db.clone());
    let tenant = TenantId::from_string("ten_1");
    for round in 0..10 {
        let wf = super::workflows::workflow(&format!("wf_race{round}"), "ten_1");
        workflows.create(&wf).await.unwrap();
        let mut new = new_execution(&format!("exe_race{round}"), "ten_1", t0(), ExecutionOrigin::Api, None);
        new.execution.workflow_id = wf.id.clone();
        store.create(&new).await.unwrap();
        let held = lease(&format!("l{round}"), t0() + Duration::seconds(30));
        let id = new.execution.id.clone();
        // Only this round's execution is free to claim: the earlier ones have ended or are gone.
        assert_eq!(store.claim(&held, t0(), 10).await.unwrap().len(), 1);
        assert!(store.start_step(&id, &held, &started(&new.execution, "find"), t0()).await.unwrap());
        let run = completed(&new.execution, "find", json!(1), t0());
        assert!(store.record_step(&id, &held, &run.steps()[0], After::GoOn).await.unwrap());
        assert!(store.start_step(&id, &held, &started(&new.execution, "answer"), t0()).await.unwrap());
        let last = completed(&run, "answer", json!(2), t0()).steps()[1].clone();
        let finish = Finish {
            status: ExecutionStatus::Completed,
            output: Some(json!(2)),
            error: None,
            finished_at: t0(),
            event: Event {
                id: EventId::from_string(format!("evt_race{round}")),
                tenant_id: tenant.clone(),
                payload: EventPayload::WorkflowExecutionCompleted(ExecutionCompletedData {
                    execution_id: id.clone(),
                    workflow_id: wf.id.clone(),
                    output: json!(2),
                    duration_ms: 1,
                }),
                created_at: t0(),
            },
        };
        let (ended, deleted) = tokio::join!(
            store.record_step(&id, &held, &last, After::Finish(Box::new(finish))),
            workflows.delete(&tenant, &wf.id)
        );
        ended.unwrap();
        assert!(deleted.unwrap());
        assert_eq!(store.get(&tenant, &id).await.unwrap(), None, "the execution went with its workflow");
    }
}

async fn an_execution_that_cannot_be_read_is_failed_and_the_others_run(db: Database) {
    let store = setup(&db).await;
    for (i, id) in ["exe_1", "exe_2"].into_iter().enumerate() {
        let at = t0() + Duration::seconds(i64::try_from(i).unwrap());
        store.create(&new_execution(id, "ten_1", at, ExecutionOrigin::Api, None)).await.unwrap();
    }
    // A role this version does not know, on the oldest execution.
    agentry_store::test_support::execute(
        &db,
        "UPDATE workflow_executions SET run_as_role = 'emperor' WHERE id = 'exe_1'",
    )
    .await
    .unwrap();
    let now = t0() + Duration::seconds(5);
    let claimed = store.claim(&lease("l1", now + Duration::seconds(30)), now, 10).await.unwrap();
    let ids: Vec<&str> = claimed.iter().map(|c| c.execution.id.as_str()).collect();
    assert_eq!(ids, ["exe_2"], "the readable one runs");
    let failed = store
        .get(&TenantId::from_string("ten_1"), &ExecutionId::from_string("exe_1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(failed.status(), ExecutionStatus::Failed);
    assert!(failed.error().unwrap_or_default().contains("cannot be read"), "{:?}", failed.error());
    let later = now + Duration::hours(1);
    let again = store.claim(&lease("l2", later + Duration::seconds(30)), later, 10).await.unwrap();
    assert_eq!(again.iter().map(|c| c.execution.id.as_str()).collect::<Vec<_>>(), ["exe_2"]);
}

async fn an_execution_given_back_is_free_at_once_and_its_claim_not_counted(db: Database) {
    let store = setup(&db).await;
    store.create(&new_execution("exe_1", "ten_1", t0(), ExecutionOrigin::Api, None)).await.unwrap();
    let held = lease("l1", t0() + Duration::seconds(30));
    let claimed = store.claim(&held, t0(), 10).await.unwrap();
    assert_eq!(claimed[0].claims, 1);
    store.release(&claimed[0].execution.id, &held).await.unwrap();
    // Taken again at once (its lease had not run out), still as the first claim: a stopping
    // instance gave it back, nothing crashed.
    let again = store.claim(&lease("l2", t0() + Duration::seconds(30)), t0(), 10).await.unwrap();
    assert_eq!((again.len(), again[0].claims), (1, 1));
}

/// With a share of 2, a tenant with five waiting executions gets two claimed, another tenant's
/// one is claimed beside them, and the first tenant gets more only as its own end; the share
/// counts executions held by any lease (another instance's, or a starter's).
async fn a_claim_keeps_each_tenant_within_its_share(db: Database) {
    let store = setup(&db).await.with_tenant_share(2);
    for i in 0..5 {
        let at = t0() - Duration::seconds(20 - i);
        store
            .create(&new_execution(&format!("exe_a{i}"), "ten_1", at, ExecutionOrigin::Api, None))
            .await
            .unwrap();
    }
    let late = t0() - Duration::seconds(5);
    store.create(&new_execution("exe_b0", "ten_2", late, ExecutionOrigin::Api, None)).await.unwrap();
    let until = t0() + Duration::seconds(30);
    let first = store.claim(&lease("l1", until), t0(), 10).await.unwrap();
    let mut ids: Vec<&str> = first.iter().map(|c| c.execution.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["exe_a0", "exe_a1", "exe_b0"], "two of ten_1's, oldest first, and ten_2's");
    // Claimed again at once (another worker, another instance): ten_1 holds its share.
    assert!(store.claim(&lease("l2", until), t0(), 10).await.unwrap().is_empty());
    // One of ten_1's ends: one more of its executions may run.
    let done = first.iter().find(|c| c.execution.id.as_str() == "exe_a0").unwrap();
    store.release(&done.execution.id, &done.lease).await.unwrap();
    let next = store.claim(&lease("l3", until), t0(), 10).await.unwrap();
    let ids: Vec<&str> = next.iter().map(|c| c.execution.id.as_str()).collect();
    assert_eq!(ids, ["exe_a0"], "given back, it is the oldest again");
    // Concurrent claimers never pass the share between them.
    let later = until + Duration::seconds(1);
    let claims = (0..4).map(|i| {
        let store = store.clone();
        async move {
            store.claim(&lease(&format!("c{i}"), later + Duration::seconds(30)), later, 10).await.unwrap()
        }
    });
    let claimed: Vec<_> = futures_util::future::join_all(claims).await.into_iter().flatten().collect();
    let of_ten_1 = claimed.iter().filter(|c| c.execution.tenant_id.as_str() == "ten_1").count();
    assert_eq!(of_ten_1, 2, "{:?}", claimed.iter().map(|c| c.execution.id.as_str()).collect::<Vec<_>>());
}

/// An execution stored held (an agent's `run_workflow`, run by the chat that started it) is
/// not claimed while its starter's lease lives, counts against its tenant's share, and carries
/// the chain of workflows above it to whoever claims it later.
async fn an_execution_stored_held_is_its_starters_with_its_chain(db: Database) {
    let store = setup(&db).await.with_tenant_share(1);
    let chain = CallChain::new(vec![WorkflowId::from_string("wf_parent")]);
    let until = t0() + Duration::seconds(30);
    let mut held = new_execution("exe_held", "ten_1", t0(), ExecutionOrigin::Api, None);
    held.call_chain = chain.clone();
    held.held = Some(lease("starter", until));
    store.create(&held).await.unwrap();
    let waiting = t0() + Duration::seconds(1);
    store.create(&new_execution("exe_next", "ten_1", waiting, ExecutionOrigin::Api, None)).await.unwrap();
    assert!(
        store.claim(&lease("l1", until), t0(), 10).await.unwrap().is_empty(),
        "held, and the share is spent"
    );
    // Its starter's lease ends (the starter died): a worker takes it over, with its chain.
    let later = until + Duration::seconds(1);
    let claimed = store.claim(&lease("l2", later + Duration::seconds(30)), later, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].execution.id.as_str(), "exe_held");
    assert_eq!(claimed[0].call_chain, chain);
    assert_eq!(claimed[0].claims, 2, "the starter's claim, then this one");
}

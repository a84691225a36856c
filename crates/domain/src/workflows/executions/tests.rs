#![allow(clippy::unwrap_used)]

use std::sync::Mutex;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;

use super::*;
use crate::ids::{MockIdGenerator, TenantId, TriggerId, UserId};
use crate::tenancy::{Credential, Plan, Role, Scope};
use crate::time::MockClock;
use crate::work::Ran;
use crate::workflows::MockStepPerformer;
use crate::workflows::execution_state::StepStatus;
use crate::workflows::execution_state::{StepEvent, step_transition};
use crate::workflows::ports::ExecutionRun;
use crate::workflows::ports::{MockExecutionRepository, MockWorkflowRepository};
use crate::workflows::steps::Step;
use crate::workflows::steps::validate_steps;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
}

fn caller(role: Role) -> Principal {
    Principal {
        user_id: UserId::from_string("usr_1"),
        tenant_id: TenantId::from_string("ten_1"),
        plan: Plan::Starter,
        role,
        credential: Credential::AccessToken,
        chain: Default::default(),
    }
}

fn steps() -> Vec<Step> {
    validate_steps(&json!([
        {"id": "greet", "type": "transform", "output": "Hello {{ input.name }}"},
        {"id": "shout", "type": "transform", "output": "{{ steps.greet.output | upper }}"},
        {"id": "count", "type": "transform", "output": {"n": "{{ input.n }}", "said": "{{ steps.shout.output }}"}}
    ]))
    .unwrap()
}

fn workflow(is_active: bool) -> Workflow {
    Workflow {
        id: WorkflowId::from_string("wf_1"),
        tenant_id: TenantId::from_string("ten_1"),
        name: "Greeter".into(),
        description: None,
        steps: steps(),
        is_active,
        created_at: t0(),
        updated_at: t0(),
    }
}

struct Mocks {
    workflows: MockWorkflowRepository,
    executions: MockExecutionRepository,
    performer: MockStepPerformer,
    /// The role the execution's starter has now (`None`: no longer a member).
    starter_role: Option<Role>,
}

impl Mocks {
    fn new() -> Self {
        Self {
            workflows: MockWorkflowRepository::new(),
            executions: MockExecutionRepository::new(),
            performer: MockStepPerformer::new(),
            starter_role: Some(Role::Member),
        }
    }

    fn service(self) -> ExecutionService {
        let mut clock = MockClock::new();
        clock.expect_now().returning(t0);
        let mut ids = MockIdGenerator::new();
        ids.expect_generate().returning(|prefix| format!("{prefix}_1"));
        ExecutionService::new(
            ExecutionServiceDeps {
                workflows: Arc::new(self.workflows),
                executions: Arc::new(self.executions),
                performer: Arc::new(self.performer),
                due: Arc::new(crate::work::MockLeaseQueue::new()),
                clock: Arc::new(clock),
                ids: Arc::new(ids),
                members: Arc::new(crate::workflows::test_support::members(self.starter_role)),
            },
            ExecutionSettings::default(),
        )
    }
}

/// A claimed execution of [`steps`] on `{name: "ada", n: 3}` whose first `done` steps completed.
fn claimed(done: usize) -> ClaimedExecution {
    let steps = steps();
    let outputs = [json!("Hello ada"), json!("HELLO ADA"), json!({"n": 3, "said": "HELLO ADA"})];
    let mut execution = Execution::start(
        ExecutionId::from_string("exe_1"),
        TenantId::from_string("ten_1"),
        WorkflowId::from_string("wf_1"),
        json!({"name": "ada", "n": 3}),
        ExecutionOrigin::Api,
        t0(),
        &steps,
    );
    for (step, output) in steps.iter().zip(outputs).take(done) {
        execution.start_step(step.id(), t0()).unwrap();
        execution.complete_step(step.id(), output, t0()).unwrap();
    }
    Claimed {
        item: ExecutionRun {
            execution,
            steps,
            run_as: RunAs { user_id: UserId::from_string("usr_1"), role: Role::Member },
            call_chain: Default::default(),
        },
        lease: Lease { token: "lease_1".into(), until: t0() + chrono::Duration::seconds(30) },
        claims: 1,
    }
}

/// Performs transforms for real: the performer's job for that type is to return the output.
fn transforms(performer: &mut MockStepPerformer, performed: Arc<Mutex<Vec<Value>>>) {
    performer.expect_perform().returning(move |caller, action, _, _| {
        assert_eq!(
            (caller.user_id.as_str(), caller.role),
            ("usr_1", Role::Member),
            "steps act as the starter"
        );
        match action {
            StepAction::Transform { output } => {
                performed.lock().unwrap().push(output.clone());
                Ok(output)
            }
            other => panic!("unexpected {other:?}"),
        }
    });
}

fn always_go() -> bool {
    true
}

#[tokio::test]
async fn execute_stores_a_running_execution_with_pending_steps_and_its_event() {
    let mut m = Mocks::new();
    m.workflows.expect_get().returning(|_, _| Ok(Some(workflow(true))));
    m.executions.expect_create().times(1).returning(|new| {
        let e = &new.execution;
        assert_eq!(e.status(), ExecutionStatus::Running);
        assert_eq!(e.steps().len(), 3);
        assert!(e.steps().iter().all(|s| s.status() == StepStatus::Pending));
        assert_eq!(new.steps, steps(), "the steps it runs are kept with it");
        assert_eq!(new.run_as, RunAs { user_id: UserId::from_string("usr_1"), role: Role::Member });
        assert_eq!(new.dedup_key, None);
        match &new.started_event.payload {
            EventPayload::WorkflowExecutionStarted(d) => {
                assert_eq!((d.execution_id.as_str(), d.origin.as_str()), ("exe_1", "api"));
                assert_eq!(d.input, json!({"name": "ada"}));
            }
            other => panic!("{other:?}"),
        }
        Ok(Started::New(e.clone()))
    });
    let service = m.service();
    let e = service
        .execute(&caller(Role::Member), &WorkflowId::from_string("wf_1"), json!({"name": "ada"}))
        .await
        .unwrap();
    assert_eq!((e.id.as_str(), e.started_at), ("exe_1", t0()));
}

#[tokio::test]
async fn execute_refuses_viewers_unknown_and_inactive_workflows_without_storing() {
    let mut m = Mocks::new();
    m.workflows.expect_get().returning(|_, id| Ok((id.as_str() != "wf_missing").then(|| workflow(false))));
    m.executions.expect_create().never();
    let service = m.service();
    let wf = WorkflowId::from_string("wf_1");
    assert!(matches!(
        service.execute(&caller(Role::Viewer), &wf, json!({})).await,
        Err(ExecutionError::Forbidden(_))
    ));
    let key = Principal {
        credential: Credential::ApiKey {
            key_id: crate::ids::ApiKeyId::from_string("key_1"),
            scopes: vec!["workflows:read".parse::<Scope>().unwrap()],
        },
        ..caller(Role::Owner)
    };
    assert!(matches!(service.execute(&key, &wf, json!({})).await, Err(ExecutionError::Forbidden(_))));
    assert!(matches!(
        service.execute(&caller(Role::Member), &WorkflowId::from_string("wf_missing"), json!({})).await,
        Err(ExecutionError::WorkflowNotFound)
    ));
    assert!(matches!(
        service.execute(&caller(Role::Member), &wf, json!({})).await,
        Err(ExecutionError::Inactive)
    ));
}

#[tokio::test]
async fn a_repeated_start_with_the_same_key_returns_the_first_and_wakes_nobody() {
    let mut m = Mocks::new();
    m.executions.expect_create().returning(|new| {
        assert_eq!(new.dedup_key.as_deref(), Some("delivery-1"));
        assert_eq!(new.execution.origin, ExecutionOrigin::Trigger(TriggerId::from_string("trg_1")));
        let mut first = new.execution.clone();
        first.id = ExecutionId::from_string("exe_first");
        Ok(Started::Existing(first))
    });
    let service = m.service();
    let started = service
        .start(
            &workflow(true),
            json!({}),
            json!({"method": "POST"}),
            ExecutionOrigin::Trigger(TriggerId::from_string("trg_1")),
            RunAs { user_id: UserId::from_string("usr_2"), role: Role::Admin },
            Some("delivery-1".into()),
        )
        .await
        .unwrap();
    assert!(!started.is_new());
    assert_eq!(started.execution().id.as_str(), "exe_first");
}

#[tokio::test]
async fn a_run_resumes_at_the_first_unfinished_step_and_completes_with_its_event() {
    let mut m = Mocks::new();
    let performed = Arc::new(Mutex::new(Vec::new()));
    transforms(&mut m.performer, performed.clone());
    let started = Arc::new(Mutex::new(Vec::new()));
    let s = started.clone();
    m.executions.expect_start_step().returning(move |_, lease, step, _| {
        assert_eq!(lease.token, "lease_1");
        assert!(lease.until > t0() + chrono::Duration::seconds(30), "the lease covers the step's timeout");
        assert_eq!((step.status(), step.attempts()), (StepStatus::Running, 1));
        s.lock().unwrap().push(step.step_id.clone());
        Ok(true)
    });
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let r = recorded.clone();
    m.executions.expect_record_step().returning(move |_, _, result, finish| {
        r.lock().unwrap().push((result.step_id.clone(), result.clone(), finish));
        Ok(true)
    });
    m.executions.expect_get().returning(|_, _| Ok(Some(claimed(3).item.execution)));
    let service = m.service();

    // Steps 0 and 1 completed before a crash: only step 2 runs, reading their outputs.
    let outcome = service.run_execution(claimed(2), &always_go).await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed);
    assert_eq!(*started.lock().unwrap(), ["count"]);
    assert_eq!(*performed.lock().unwrap(), [json!({"n": 3, "said": "HELLO ADA"})]);
    let recorded = recorded.lock().unwrap();
    let (step_id, result, finish) = &recorded[0];
    assert_eq!(step_id, "count");
    assert_eq!(result.status(), StepStatus::Completed);
    assert_eq!(result.output(), Some(&json!({"n": 3, "said": "HELLO ADA"})));
    let finish = finish.finish().expect("the last step ends the execution");
    assert_eq!(finish.status, ExecutionStatus::Completed);
    assert_eq!(finish.output.as_ref(), result.output(), "the execution's output is the last step's");
    match &finish.event.payload {
        EventPayload::WorkflowExecutionCompleted(d) => assert_eq!(d.execution_id.as_str(), "exe_1"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_fresh_run_runs_every_step_in_order_and_ends_only_with_the_last() {
    let mut m = Mocks::new();
    let performed = Arc::new(Mutex::new(Vec::new()));
    transforms(&mut m.performer, performed.clone());
    m.executions.expect_start_step().returning(|_, _, _, _| Ok(true));
    let finishes = Arc::new(Mutex::new(Vec::new()));
    let f = finishes.clone();
    m.executions.expect_record_step().times(3).returning(move |_, _, result, finish| {
        f.lock().unwrap().push((result.step_id.clone(), finish.into_finish().map(|f| f.status)));
        Ok(true)
    });
    m.executions.expect_get().returning(|_, _| Ok(Some(claimed(3).item.execution)));
    let outcome = m.service().run_execution(claimed(0), &always_go).await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed);
    assert_eq!(
        *performed.lock().unwrap(),
        [json!("Hello ada"), json!("HELLO ADA"), json!({"n": 3, "said": "HELLO ADA"})]
    );
    assert_eq!(
        *finishes.lock().unwrap(),
        [
            ("greet".to_owned(), None),
            ("shout".to_owned(), None),
            ("count".to_owned(), Some(ExecutionStatus::Completed))
        ]
    );
}

#[tokio::test]
async fn a_failing_step_fails_the_execution_and_no_later_step_runs() {
    let mut m = Mocks::new();
    m.performer
        .expect_perform()
        .times(1)
        .returning(|_, _, _, _| Err(StepFailure::new("the receiver answered 500")));
    m.executions.expect_start_step().times(1).returning(|_, _, _, _| Ok(true));
    m.executions.expect_record_step().times(1).returning(|_, _, result, finish| {
        assert_eq!(result.step_id, "greet");
        assert_eq!(result.status(), StepStatus::Failed);
        assert_eq!(result.error(), Some("the receiver answered 500"));
        let finish = finish.into_finish().unwrap();
        assert_eq!(finish.status, ExecutionStatus::Failed);
        assert_eq!(finish.error.as_deref(), Some("step greet failed: the receiver answered 500"));
        match finish.event.payload {
            EventPayload::WorkflowExecutionFailed(d) => assert_eq!(d.step_id, "greet"),
            other => panic!("{other:?}"),
        }
        Ok(true)
    });
    m.executions.expect_get().returning(|_, _| Ok(Some(claimed(0).item.execution)));
    assert_eq!(m.service().run_execution(claimed(0), &always_go).await.unwrap(), RunOutcome::Failed);
}

#[tokio::test]
async fn an_input_holding_nul_is_refused_naming_its_field_and_nothing_is_stored() {
    let m = Mocks::new();
    let caller = Principal {
        user_id: UserId::from_string("usr_1"),
        tenant_id: TenantId::from_string("ten_1"),
        plan: Plan::Starter,
        role: Role::Member,
        credential: Credential::AccessToken,
        chain: Default::default(),
    };
    let e = m
        .service()
        .execute(&caller, &WorkflowId::from_string("wf_1"), json!({"user": {"name": "a\u{0}"}}))
        .await
        .unwrap_err();
    match e {
        ExecutionError::Invalid(errors) => assert_eq!(errors.0[0].field, "input.user.name"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_execution_claimed_past_the_limit_fails_its_step_without_running_it() {
    let mut m = Mocks::new();
    // Five workers before this one took it and never finished step 2: it is not run again.
    m.performer.expect_perform().never();
    m.executions.expect_start_step().returning(|_, _, _, _| Ok(true));
    m.executions.expect_record_step().times(1).returning(|_, _, result, finish| {
        assert_eq!(result.step_id, "shout");
        assert_eq!(result.status(), StepStatus::Failed);
        assert!(result.error().unwrap().contains("given up after 5 claims"), "{result:?}");
        assert_eq!(finish.into_finish().unwrap().status, ExecutionStatus::Failed);
        Ok(true)
    });
    m.executions.expect_get().returning(|_, _| Ok(Some(claimed(1).item.execution)));
    let crashed_five_times = ClaimedExecution { claims: 6, ..claimed(1) };
    let mut ids = MockIdGenerator::new();
    ids.expect_generate().returning(|prefix| format!("{prefix}_1"));
    let mut clock = MockClock::new();
    clock.expect_now().returning(t0);
    let worker = crate::work::Worker::new(Arc::new(m.service()), Arc::new(ids), Arc::new(clock));
    assert_eq!(
        worker.process(crashed_five_times, &always_go).await,
        Some(Ran::ended(RunOutcome::Failed.into()))
    );
}

#[tokio::test]
async fn remote_text_with_nul_is_stored_with_the_replacement_character() {
    let mut m = Mocks::new();
    m.performer.expect_perform().returning(|_, _, _, _| Ok(json!({"body": "a\u{0}b"})));
    m.executions.expect_start_step().returning(|_, _, _, _| Ok(true));
    m.executions.expect_record_step().times(1).returning(|_, _, result, _| {
        assert_eq!(result.output(), Some(&json!({"body": "a\u{FFFD}b"})));
        Ok(true)
    });
    m.executions.expect_record_step().returning(|_, _, _, _| Ok(true));
    m.executions.expect_get().returning(|_, _| Ok(Some(claimed(0).item.execution)));
    m.service().run_execution(claimed(0), &always_go).await.unwrap();
}

#[tokio::test]
async fn an_output_over_the_limit_fails_its_step() {
    let mut m = Mocks::new();
    let huge = "x".repeat(crate::workflows::MAX_STEP_OUTPUT_BYTES + 1);
    m.performer.expect_perform().returning(move |_, _, _, _| Ok(json!(huge.clone())));
    m.executions.expect_start_step().returning(|_, _, _, _| Ok(true));
    m.executions.expect_record_step().times(1).returning(|_, _, result, finish| {
        assert_eq!(result.status(), StepStatus::Failed);
        assert!(result.error().unwrap().contains("larger than"), "{result:?}");
        assert_eq!(result.output(), None);
        assert_eq!(finish.into_finish().unwrap().status, ExecutionStatus::Failed);
        Ok(true)
    });
    m.executions.expect_get().returning(|_, _| Ok(Some(claimed(0).item.execution)));
    assert_eq!(m.service().run_execution(claimed(0), &always_go).await.unwrap(), RunOutcome::Failed);
}

#[tokio::test]
async fn a_cancelled_execution_starts_no_further_step() {
    let mut m = Mocks::new();
    m.performer.expect_perform().never();
    m.executions.expect_start_step().times(1).returning(|_, _, _, _| Ok(false));
    m.executions.expect_record_step().never();
    m.executions.expect_get().returning(|_, _| {
        let mut e = claimed(1).item.execution;
        e.cancel(t0()).unwrap();
        Ok(Some(e))
    });
    assert_eq!(m.service().run_execution(claimed(1), &always_go).await.unwrap(), RunOutcome::Cancelled);
}

#[tokio::test]
async fn a_lost_lease_drops_the_result_and_stops() {
    let mut m = Mocks::new();
    m.performer.expect_perform().times(1).returning(|_, action, _, _| match action {
        StepAction::Transform { output } => Ok(output),
        other => panic!("{other:?}"),
    });
    m.executions.expect_start_step().times(1).returning(|_, _, _, _| Ok(true));
    m.executions.expect_record_step().times(1).returning(|_, _, _, _| Ok(false));
    assert_eq!(m.service().run_execution(claimed(0), &always_go).await.unwrap(), RunOutcome::LostLease);
}

#[tokio::test]
async fn a_stopping_worker_gives_the_execution_back_between_steps() {
    let mut m = Mocks::new();
    m.performer.expect_perform().never();
    m.executions.expect_start_step().never();
    m.executions.expect_release().times(1).returning(|id, lease| {
        assert_eq!((id.as_str(), lease.token.as_str()), ("exe_1", "lease_1"));
        Ok(())
    });
    let outcome = m.service().run_execution(claimed(1), &|| false).await.unwrap();
    assert_eq!(outcome, RunOutcome::Released);
}

#[tokio::test]
async fn cancel_reports_whether_it_cancelled() {
    let mut m = Mocks::new();
    // exe_running is running, exe_done completed, exe_raced ends while it is cancelled.
    let raced_reads = std::sync::atomic::AtomicUsize::new(0);
    m.executions.expect_get().returning(move |_, id| {
        let mut e = claimed(0).item.execution;
        e.id = id.clone();
        Ok(match id.as_str() {
            "exe_running" => Some(e),
            "exe_raced" if raced_reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 => Some(e),
            "exe_done" | "exe_raced" => {
                e.complete(json!(1), t0()).unwrap();
                Some(e)
            }
            _ => None,
        })
    });
    m.executions.expect_record_cancel().returning(|e| {
        // What the domain decided is what is stored.
        assert_eq!(e.status(), ExecutionStatus::Cancelled);
        assert_eq!(e.steps()[1].status(), StepStatus::Skipped);
        Ok(e.id.as_str() == "exe_running")
    });
    let service = m.service();
    let who = caller(Role::Member);
    let ok = service.cancel(&who, &ExecutionId::from_string("exe_running")).await.unwrap();
    assert_eq!(ok.status(), ExecutionStatus::Cancelled);
    assert!(matches!(
        service.cancel(&who, &ExecutionId::from_string("exe_done")).await,
        Err(ExecutionError::Finished(ExecutionStatus::Completed))
    ));
    assert!(matches!(
        service.cancel(&who, &ExecutionId::from_string("exe_raced")).await,
        Err(ExecutionError::Finished(ExecutionStatus::Completed))
    ));
    assert!(matches!(
        service.cancel(&who, &ExecutionId::from_string("exe_none")).await,
        Err(ExecutionError::NotFound)
    ));
    assert!(matches!(
        service.cancel(&caller(Role::Viewer), &ExecutionId::from_string("exe_running")).await,
        Err(ExecutionError::Forbidden(_))
    ));
    // The step machine the run relies on.
    assert_eq!(step_transition(StepStatus::Running, StepEvent::Complete).unwrap(), StepStatus::Completed);
}

/// A step runs with its starter's role now: once they are no longer a member, the next step
/// fails with the reason instead of running, and so does the execution.
#[tokio::test]
async fn a_starter_removed_meanwhile_stops_the_execution_at_its_next_step() {
    let mut m = Mocks::new();
    m.starter_role = None;
    m.performer.expect_perform().never();
    m.executions.expect_start_step().returning(|_, _, _, _| Ok(true));
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let seen = recorded.clone();
    m.executions.expect_record_step().returning(move |_, _, result, finish| {
        seen.lock()
            .unwrap()
            .push((result.error().map(str::to_owned), finish.into_finish().map(|f| f.status)));
        Ok(true)
    });
    m.executions.expect_get().returning(|_, _| Ok(None));
    let outcome = m.service().run_execution(claimed(1), &|| true).await.unwrap();
    assert_eq!(outcome, RunOutcome::Failed);
    let recorded = recorded.lock().unwrap();
    let (error, end) = &recorded[0];
    assert!(error.as_deref().unwrap().contains("who is no longer a member of this tenant"), "{error:?}");
    assert_eq!(*end, Some(ExecutionStatus::Failed));
}

/// A trigger, an integration or a schedule starts an execution only while its maker is a
/// member whose role runs workflows, and with that role.
#[tokio::test]
async fn an_automation_starts_nothing_for_a_maker_who_lost_the_right() {
    for (role, refused) in [(None, true), (Some(Role::Viewer), true), (Some(Role::Admin), false)] {
        let mut m = Mocks::new();
        m.starter_role = role;
        if refused {
            m.executions.expect_create().never();
        } else {
            m.executions.expect_create().times(1).returning(|new| {
                assert_eq!(new.run_as.role, Role::Admin, "the maker's role now");
                Ok(Started::New(new.execution.clone()))
            });
        }
        let run_as = RunAs { user_id: UserId::from_string("usr_maker"), role: Role::Member };
        let origin = ExecutionOrigin::Trigger(TriggerId::from_string("trg_1"));
        let result = m.service().start(&workflow(true), json!({}), json!({}), origin, run_as, None).await;
        match result {
            Err(ExecutionError::NotEntitled(_)) => assert!(refused, "{role:?}"),
            Ok(_) => assert!(!refused, "{role:?}"),
            Err(e) => panic!("{e}"),
        }
    }
}

mod flow;
mod waits;

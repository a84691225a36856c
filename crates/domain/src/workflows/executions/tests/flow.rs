//! The executor as a state machine: retries with their due times, `on_error` routes, `next`
//! jumps, the step-run limit, and where a claimed execution resumes.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::{Mocks, always_go, t0};
use crate::ids::{ExecutionId, TenantId, UserId, WorkflowId};
use crate::tenancy::Role;
use crate::work::{Claimed, Lease, Outcome, WorkKind};
use crate::workflows::execution_state::{Execution, ExecutionOrigin, MAX_STEP_RUNS, StepResult, StepStatus};
use crate::workflows::executions::RunOutcome;
use crate::workflows::model::RunAs;
use crate::workflows::ports::{After, ClaimedExecution, ExecutionRun, FailureKind, StepFailure};
use crate::workflows::steps::{StepAction, validate_steps};
use crate::workflows::{ExecutionStatus, MockStepPerformer};

/// A claimed execution of `steps` on `{}`, changed by `prepare` before it is claimed.
pub(super) fn claimed_of(steps: Value, prepare: impl FnOnce(&mut Execution)) -> ClaimedExecution {
    let steps = validate_steps(&steps).unwrap();
    let mut execution = Execution::start(
        ExecutionId::from_string("exe_1"),
        TenantId::from_string("ten_1"),
        WorkflowId::from_string("wf_1"),
        json!({}),
        ExecutionOrigin::Api,
        t0(),
        &steps,
    );
    prepare(&mut execution);
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

/// Each step's run answers with the next of `answers` (a transform's own output once they run
/// out), and says which it performed.
pub(super) fn answering(
    performer: &mut MockStepPerformer,
    answers: Vec<Result<Value, StepFailure>>,
) -> Arc<Mutex<Vec<Value>>> {
    let performed = Arc::new(Mutex::new(Vec::new()));
    let (seen, answers) = (performed.clone(), Mutex::new(answers.into_iter()));
    performer.expect_perform().returning(move |_, action, _, _| {
        let StepAction::Transform { output } = action else { panic!("only transforms here") };
        seen.lock().unwrap().push(output.clone());
        answers.lock().unwrap().next().unwrap_or(Ok(output))
    });
    performed
}

/// Every result stored, with what became of the execution after it.
pub(super) type Recorded = Arc<Mutex<Vec<(StepResult, After)>>>;

pub(super) fn recording(m: &mut Mocks) -> Recorded {
    let recorded: Recorded = Arc::default();
    let r = recorded.clone();
    m.executions.expect_start_step().returning(|_, _, _, _| Ok(true));
    m.executions.expect_record_step().returning(move |_, _, result, after| {
        r.lock().unwrap().push((result.clone(), after));
        Ok(true)
    });
    m.executions.expect_get().returning(|_, _| Ok(None));
    recorded
}

fn server_error() -> StepFailure {
    StepFailure::of(FailureKind::ServerError, "the server answered 503")
}

#[tokio::test]
async fn a_failed_attempt_its_retry_covers_leaves_the_execution_due_later_with_the_attempt_recorded() {
    let mut m = Mocks::new();
    answering(
        &mut m.performer,
        vec![Err(server_error().with_retry_after(std::time::Duration::from_secs(7)))],
    );
    let recorded = recording(&mut m);
    let steps = json!([
        {"id": "fetch", "type": "transform", "output": 1, "retry": {"max_attempts": 3, "backoff_seconds": 2, "on": ["server_error"]}},
        {"id": "after", "type": "transform", "output": 2},
    ]);
    let ran = m.service().run(claimed_of(steps, |_| {}), &always_go).await.unwrap();
    let due = t0() + chrono::Duration::seconds(7);
    assert_eq!(
        (ran.outcome, ran.due_again),
        (Outcome::Retry, Some(due)),
        "the Retry-After is longer than the backoff"
    );
    let recorded = recorded.lock().unwrap();
    assert_eq!(recorded.len(), 1, "nothing after the step runs");
    let (result, after) = &recorded[0];
    assert_eq!(*after, After::DueAt(due));
    assert_eq!(
        (result.status(), result.attempts(), result.next_run_at()),
        (StepStatus::Pending, 1, Some(due))
    );
    assert_eq!(result.attempt_errors()[0].error, "the server answered 503");
}

#[tokio::test]
async fn a_step_backing_off_runs_again_when_claimed_and_the_execution_goes_on() {
    let mut m = Mocks::new();
    let performed = answering(&mut m.performer, Vec::new());
    let recorded = recording(&mut m);
    let steps = json!([
        {"id": "fetch", "type": "transform", "output": 1, "retry": {"max_attempts": 3}},
        {"id": "after", "type": "transform", "output": 2},
    ]);
    let claimed = claimed_of(steps, |e| {
        e.start_step("fetch", t0()).unwrap();
        e.retry_step("fetch", "the server answered 503".into(), t0(), t0()).unwrap();
    });
    let outcome = m.service().run_execution(claimed, &always_go).await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed);
    assert_eq!(*performed.lock().unwrap(), [json!(1), json!(2)]);
    let recorded = recorded.lock().unwrap();
    let (fetch, _) = &recorded[0];
    assert_eq!(
        (fetch.status(), fetch.attempts(), fetch.attempt_errors().len()),
        (StepStatus::Completed, 2, 1)
    );
}

#[tokio::test]
async fn a_failure_the_retry_does_not_cover_or_the_last_attempt_fails_the_execution() {
    for (on, attempts_before) in [(json!(["network"]), 0), (json!(["any"]), 2)] {
        let mut m = Mocks::new();
        answering(&mut m.performer, vec![Err(server_error())]);
        let recorded = recording(&mut m);
        let steps = json!([{"id": "fetch", "type": "transform", "output": 1, "retry": {"max_attempts": 3, "on": on}}]);
        let claimed = claimed_of(steps, |e| {
            for _ in 0..attempts_before {
                e.start_step("fetch", t0()).unwrap();
                e.retry_step("fetch", "earlier".into(), t0(), t0()).unwrap();
            }
        });
        let outcome = m.service().run_execution(claimed, &always_go).await.unwrap();
        assert_eq!(outcome, RunOutcome::Failed, "{on}");
        let recorded = recorded.lock().unwrap();
        assert_eq!(recorded[0].1.finish().unwrap().status, ExecutionStatus::Failed);
    }
}

#[tokio::test]
async fn on_error_continue_records_the_failure_and_goes_on_to_the_next_step() {
    let mut m = Mocks::new();
    let performed = answering(&mut m.performer, vec![Err(StepFailure::new("no such agent"))]);
    let recorded = recording(&mut m);
    let steps = json!([
        {"id": "try", "type": "transform", "output": 1, "on_error": "continue"},
        {"id": "then", "type": "transform", "output": 2},
    ]);
    let outcome = m.service().run_execution(claimed_of(steps, |_| {}), &always_go).await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed);
    assert_eq!(*performed.lock().unwrap(), [json!(1), json!(2)]);
    let recorded = recorded.lock().unwrap();
    assert_eq!((recorded[0].0.status(), recorded[0].0.error()), (StepStatus::Failed, Some("no such agent")));
    assert_eq!(recorded[0].1, After::GoOn);
    assert_eq!(recorded[1].1.finish().unwrap().output, Some(json!(2)));
}

#[tokio::test]
async fn on_error_and_next_go_on_at_the_step_they_name_and_record_the_branch() {
    let mut m = Mocks::new();
    let performed = answering(&mut m.performer, vec![Ok(json!("a")), Err(StepFailure::new("down"))]);
    let recorded = recording(&mut m);
    let steps = json!([
        {"id": "a", "type": "transform", "output": "a", "next": "c"},
        {"id": "b", "type": "transform", "output": "b"},
        {"id": "c", "type": "transform", "output": "c", "on_error": "e"},
        {"id": "d", "type": "transform", "output": "d"},
        {"id": "e", "type": "transform", "output": "e"},
    ]);
    let outcome = m.service().run_execution(claimed_of(steps, |_| {}), &always_go).await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed);
    assert_eq!(*performed.lock().unwrap(), [json!("a"), json!("c"), json!("e")], "b and d are jumped over");
    let recorded = recorded.lock().unwrap();
    let branches: Vec<(&str, Option<&str>)> =
        recorded.iter().map(|(r, _)| (r.step_id.as_str(), r.branch())).collect();
    assert_eq!(branches, [("a", Some("c")), ("c", Some("e")), ("e", None)]);
}

#[tokio::test]
async fn a_loop_that_never_ends_is_stopped_at_the_step_run_limit_without_running_the_step() {
    let mut m = Mocks::new();
    let performed = answering(&mut m.performer, Vec::new());
    let recorded = recording(&mut m);
    let steps = json!([{"id": "again", "type": "transform", "output": 1, "next": "again"}]);
    // Three runs short of the limit.
    let claimed = claimed_of(steps, |e| {
        let mut record = e.clone().into_record();
        record.step_runs = MAX_STEP_RUNS - 3;
        *e = Execution::restore(record).unwrap();
    });
    let outcome = m.service().run_execution(claimed, &always_go).await.unwrap();
    assert_eq!(outcome, RunOutcome::Failed);
    assert_eq!(performed.lock().unwrap().len(), 3, "the runs up to the limit, and no more");
    let recorded = recorded.lock().unwrap();
    let finish = recorded.last().unwrap().1.finish().unwrap();
    assert!(finish.error.as_deref().unwrap().contains("10000 step runs"), "{:?}", finish.error);
}

#[tokio::test]
async fn an_execution_resumes_where_the_step_it_was_at_led() {
    let mut m = Mocks::new();
    let performed = answering(&mut m.performer, Vec::new());
    recording(&mut m);
    let steps = json!([
        {"id": "a", "type": "transform", "output": "a", "next": "c"},
        {"id": "b", "type": "transform", "output": "b"},
        {"id": "c", "type": "transform", "output": "c"},
    ]);
    // Step a completed and led to c, and the worker died before c started.
    let claimed = claimed_of(steps, |e| {
        e.start_step("a", t0()).unwrap();
        e.complete_step("a", json!("a"), t0()).unwrap();
        e.branch_from("a", "c").unwrap();
    });
    let outcome = m.service().run_execution(claimed, &always_go).await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed);
    assert_eq!(*performed.lock().unwrap(), [json!("c")]);
}

#[tokio::test]
async fn a_condition_takes_the_first_case_that_holds_or_its_default_or_the_next_step() {
    let steps = json!([
        {"id": "route", "type": "condition",
         "cases": [{"when": "input.total > 1000", "next": "big"}, {"when": "input.flagged", "next": "review"}],
         "default": "ship"},
        {"id": "next_listed", "type": "transform", "output": "next"},
        {"id": "big", "type": "transform", "output": "big"},
        {"id": "review", "type": "transform", "output": "review"},
        {"id": "ship", "type": "transform", "output": "ship"},
    ]);
    for (input, route, ran) in [
        (json!({"total": 5000, "flagged": true}), json!({"case": 0, "next": "big"}), "big"),
        (json!({"total": 10, "flagged": true}), json!({"case": 1, "next": "review"}), "review"),
        (json!({"total": 10, "flagged": false}), json!({"case": null, "next": "ship"}), "ship"),
    ] {
        let mut m = Mocks::new();
        let performed = answering(&mut m.performer, Vec::new());
        let recorded = recording(&mut m);
        let claimed = claimed_of(steps.clone(), |e| e.input = input.clone());
        assert_eq!(m.service().run_execution(claimed, &always_go).await.unwrap(), RunOutcome::Completed);
        // The condition itself is decided by the executor: only the step it chose and those
        // after it are performed.
        assert_eq!(performed.lock().unwrap()[0], json!(ran), "{input}");
        let recorded = recorded.lock().unwrap();
        assert_eq!(recorded[0].0.output(), Some(&route), "{input}");
        assert_eq!(recorded[0].0.branch(), route["next"].as_str(), "{input}");
    }
    // Without a default, no case holding goes on at the next step listed.
    let mut m = Mocks::new();
    let performed = answering(&mut m.performer, Vec::new());
    recording(&mut m);
    let steps = json!([
        {"id": "route", "type": "condition", "cases": [{"when": "input.go", "next": "end"}]},
        {"id": "middle", "type": "transform", "output": "middle"},
        {"id": "end", "type": "transform", "output": "end"},
    ]);
    let claimed = claimed_of(steps, |e| e.input = json!({"go": false}));
    m.service().run_execution(claimed, &always_go).await.unwrap();
    assert_eq!(*performed.lock().unwrap(), [json!("middle"), json!("end")]);
}

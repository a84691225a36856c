//! The `wait` step: an execution waits as a row (status `waiting`, due when the wait ends,
//! its lease given back), and the claim that takes it when due completes the wait and goes on.

use chrono::Duration;
use serde_json::json;

use super::flow::{answering, claimed_of, recording};
use super::{Mocks, always_go, t0};
use crate::events::EventType;
use crate::work::{Outcome, WorkKind};
use crate::workflows::ExecutionStatus;
use crate::workflows::execution_state::StepStatus;
use crate::workflows::ports::After;

fn steps() -> serde_json::Value {
    json!([
        {"id": "pause", "type": "wait", "seconds": 60},
        {"id": "after", "type": "transform", "output": "after"},
    ])
}

#[tokio::test]
async fn a_wait_gives_the_execution_back_waiting_and_due_when_the_wait_ends() {
    let mut m = Mocks::new();
    let performed = answering(&mut m.performer, Vec::new());
    let recorded = recording(&mut m);
    let ran = m.service().run(claimed_of(steps(), |_| {}), &always_go).await.unwrap();
    let until = t0() + Duration::seconds(60);
    assert_eq!((ran.outcome, ran.due_again), (Outcome::Waiting, Some(until)));
    assert!(performed.lock().unwrap().is_empty(), "a wait is decided by the executor, not performed");
    let recorded = recorded.lock().unwrap();
    assert_eq!(recorded.len(), 1, "nothing runs after the step that waits");
    let (result, after) = &recorded[0];
    let After::Wait { until: due, event } = after else { panic!("{after:?}") };
    assert_eq!(*due, until);
    // Subscribers are told, in the same transaction.
    assert_eq!(event.event_type(), EventType::WorkflowExecutionWaiting);
    assert_eq!(
        event.payload.data().unwrap(),
        json!({"execution_id": "exe_1", "workflow_id": "wf_1", "step_id": "pause", "until": "2026-11-01T12:01:00.000Z"})
    );
    assert_eq!(
        (result.status(), result.next_run_at(), result.attempts()),
        (StepStatus::Waiting, Some(until), 1)
    );
}

#[tokio::test]
async fn the_claim_that_takes_a_due_wait_completes_it_and_goes_on_without_running_it_again() {
    let mut m = Mocks::new();
    let performed = answering(&mut m.performer, Vec::new());
    let recorded = recording(&mut m);
    let claimed = claimed_of(steps(), |e| {
        e.start_step("pause", t0() - Duration::seconds(60)).unwrap();
        e.wait_step("pause", t0(), t0() - Duration::seconds(60)).unwrap();
        e.resume().unwrap();
    });
    let ran = m.service().run(claimed, &always_go).await.unwrap();
    assert_eq!(ran.outcome, Outcome::Done);
    assert_eq!(*performed.lock().unwrap(), [json!("after")]);
    let recorded = recorded.lock().unwrap();
    let (pause, after) = &recorded[0];
    assert_eq!(*after, After::GoOn);
    assert_eq!(pause.status(), StepStatus::Completed);
    assert_eq!(pause.output(), Some(&json!({"waited_until": "2026-11-01T12:00:00.000Z"})));
    assert_eq!((pause.attempts(), pause.next_run_at()), (1, None), "completing the wait is no new attempt");
    assert_eq!(recorded[1].1.finish().unwrap().status, ExecutionStatus::Completed);
}

#[tokio::test]
async fn a_wait_taken_up_before_its_time_waits_on_until_then() {
    let mut m = Mocks::new();
    let performed = answering(&mut m.performer, Vec::new());
    let recorded = recording(&mut m);
    let until = t0() + Duration::seconds(10);
    let claimed = claimed_of(steps(), |e| {
        e.start_step("pause", t0()).unwrap();
        e.wait_step("pause", until, t0()).unwrap();
        e.resume().unwrap();
    });
    let ran = m.service().run(claimed, &always_go).await.unwrap();
    assert_eq!((ran.outcome, ran.due_again), (Outcome::Waiting, Some(until)));
    assert!(performed.lock().unwrap().is_empty());
    let recorded = recorded.lock().unwrap();
    assert!(matches!(&recorded[0].1, After::Wait { until: due, .. } if *due == until), "{:?}", recorded[0].1);
    assert_eq!(recorded[0].0.status(), StepStatus::Waiting);
}

#[tokio::test]
async fn a_wait_until_a_time_already_past_does_not_wait() {
    let mut m = Mocks::new();
    let performed = answering(&mut m.performer, Vec::new());
    let recorded = recording(&mut m);
    let steps = json!([
        {"id": "pause", "type": "wait", "until": "{{ input.at }}"},
        {"id": "after", "type": "transform", "output": "after"},
    ]);
    let claimed = claimed_of(steps, |e| e.input = json!({"at": "2026-10-31T23:00:00+01:00"}));
    let ran = m.service().run(claimed, &always_go).await.unwrap();
    assert_eq!(ran.outcome, Outcome::Done);
    assert_eq!(*performed.lock().unwrap(), [json!("after")]);
    let recorded = recorded.lock().unwrap();
    assert_eq!(recorded[0].0.output(), Some(&json!({"waited_until": "2026-10-31T22:00:00.000Z"})));
}

#[tokio::test]
async fn a_wait_until_that_renders_to_no_time_fails_the_step() {
    let mut m = Mocks::new();
    answering(&mut m.performer, Vec::new());
    let recorded = recording(&mut m);
    let steps = json!([{"id": "pause", "type": "wait", "until": "{{ input.at }}"}]);
    let claimed = claimed_of(steps, |e| e.input = json!({"at": "next tuesday"}));
    let ran = m.service().run(claimed, &always_go).await.unwrap();
    assert_eq!(ran.outcome, Outcome::Failed);
    let recorded = recorded.lock().unwrap();
    let error = recorded[0].0.error().unwrap();
    assert!(error.contains("until") && error.contains("RFC 3339"), "{error}");
}

#[tokio::test]
async fn an_execution_given_up_while_it_waited_fails_its_waiting_step() {
    let mut m = Mocks::new();
    answering(&mut m.performer, Vec::new());
    let recorded = recording(&mut m);
    let claimed = claimed_of(steps(), |e| {
        e.start_step("pause", t0()).unwrap();
        e.wait_step("pause", t0(), t0()).unwrap();
        e.resume().unwrap();
    });
    let ran = m.service().give_up(claimed, "claimed too often".into()).await.unwrap();
    assert_eq!(ran.outcome, Outcome::Failed);
    let recorded = recorded.lock().unwrap();
    assert_eq!(
        (recorded[0].0.status(), recorded[0].0.error()),
        (StepStatus::Failed, Some("claimed too often"))
    );
}

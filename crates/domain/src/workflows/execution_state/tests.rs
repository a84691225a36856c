#![allow(clippy::unwrap_used)]

use chrono::TimeZone;
use serde_json::json;

use super::*;
use crate::workflows::steps::StepType;
use crate::workflows::steps::validate_steps;

fn t(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap() + chrono::Duration::seconds(seconds)
}

/// A running execution of three transforms, none started.
fn execution() -> Execution {
    let steps = validate_steps(&json!([
        {"id": "a", "type": "transform", "output": 1},
        {"id": "b", "type": "transform", "output": 2},
        {"id": "c", "type": "transform", "output": 3},
    ]))
    .unwrap();
    Execution::start(
        ExecutionId::from_string("exe_1"),
        TenantId::from_string("ten_1"),
        WorkflowId::from_string("wf_1"),
        json!({}),
        ExecutionOrigin::Api,
        t(0),
        &steps,
    )
}

fn statuses(e: &Execution) -> Vec<StepStatus> {
    e.steps().iter().map(StepResult::status).collect()
}

#[test]
fn every_execution_transition_is_as_drawn() {
    for from in ExecutionStatus::ALL {
        for event in ExecutionEvent::ALL {
            let expected = match (from, event) {
                (ExecutionStatus::Running, ExecutionEvent::Complete) => Some(ExecutionStatus::Completed),
                (ExecutionStatus::Running, ExecutionEvent::Fail) => Some(ExecutionStatus::Failed),
                (ExecutionStatus::Running | ExecutionStatus::Waiting, ExecutionEvent::Cancel) => {
                    Some(ExecutionStatus::Cancelled)
                }
                (ExecutionStatus::Running, ExecutionEvent::Wait) => Some(ExecutionStatus::Waiting),
                (ExecutionStatus::Waiting, ExecutionEvent::Resume)
                | (ExecutionStatus::Failed, ExecutionEvent::Retry) => Some(ExecutionStatus::Running),
                _ => None,
            };
            match (transition(from, event), expected) {
                (Ok(to), Some(want)) => assert_eq!(to, want, "{from} + {}", event.as_str()),
                (Err(e), None) => {
                    let unfinished_refusal = matches!(
                        (from, event),
                        (ExecutionStatus::Running, ExecutionEvent::Resume | ExecutionEvent::Retry)
                            | (ExecutionStatus::Waiting, ExecutionEvent::Retry)
                            | (
                                ExecutionStatus::Waiting,
                                ExecutionEvent::Complete | ExecutionEvent::Fail | ExecutionEvent::Wait
                            )
                    );
                    assert!(from.is_terminal() || unfinished_refusal, "{from} + {}", event.as_str());
                    assert_eq!((e.from, e.event), (from.as_str(), event.as_str()));
                }
                (got, want) => panic!("{from} + {}: got {got:?}, want {want:?}", event.as_str()),
            }
        }
    }
    let e = transition(ExecutionStatus::Completed, ExecutionEvent::Cancel).unwrap_err();
    assert_eq!(e.to_string(), "cannot cancel an execution that is completed");
}

#[test]
fn every_step_transition_is_as_drawn() {
    for from in StepStatus::ALL {
        for event in StepEvent::ALL {
            let expected = match (from, event) {
                (StepStatus::Pending, StepEvent::Start) => Some(StepStatus::Running),
                (StepStatus::Pending, StepEvent::Skip) => Some(StepStatus::Skipped),
                (StepStatus::Running | StepStatus::Waiting, StepEvent::Complete) => {
                    Some(StepStatus::Completed)
                }
                (StepStatus::Running | StepStatus::Waiting, StepEvent::Fail) => Some(StepStatus::Failed),
                (StepStatus::Running, StepEvent::Retry) => Some(StepStatus::Pending),
                (StepStatus::Running, StepEvent::Wait) => Some(StepStatus::Waiting),
                (StepStatus::Completed | StepStatus::Failed | StepStatus::Skipped, StepEvent::Rerun) => {
                    Some(StepStatus::Pending)
                }
                _ => None,
            };
            assert_eq!(step_transition(from, event).ok(), expected, "{from} + {}", event.as_str());
        }
    }
}

#[test]
fn statuses_round_trip_through_their_names() {
    for s in ExecutionStatus::ALL {
        assert_eq!(ExecutionStatus::parse(s.as_str()), Some(s));
    }
    for s in StepStatus::ALL {
        assert_eq!(StepStatus::parse(s.as_str()), Some(s));
    }
    assert_eq!(ExecutionStatus::parse("Running"), None);
}

#[test]
fn an_execution_starts_running_with_every_step_pending() {
    let e = execution();
    assert_eq!(
        (e.status(), e.output(), e.error(), e.finished_at()),
        (ExecutionStatus::Running, None, None, None)
    );
    assert_eq!(statuses(&e), [StepStatus::Pending; 3]);
    let ids: Vec<&str> = e.steps().iter().map(|s| s.step_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert!(e.steps().iter().all(|s| s.started_at().is_none() && s.step_type == StepType::Transform));
}

#[test]
fn steps_move_only_as_drawn_and_keep_their_times_and_results() {
    let mut e = execution();
    e.start_step("a", t(1)).unwrap();
    e.complete_step("a", json!({"n": 1}), t(2)).unwrap();
    let done = &e.steps()[0];
    assert_eq!(
        (done.status(), done.output(), done.error()),
        (StepStatus::Completed, Some(&json!({"n": 1})), None)
    );
    assert_eq!((done.started_at(), done.finished_at()), (Some(t(1)), Some(t(2))));
    assert!(e.complete_step("a", json!(2), t(3)).is_err(), "a result is kept once");
    assert!(e.complete_step("b", json!(2), t(3)).is_err(), "a pending step cannot complete");
    assert!(e.fail_step("b", "x".into(), t(3)).is_err(), "nor fail");
    e.start_step("b", t(3)).unwrap();
    e.fail_step("b", "the receiver answered 500".into(), t(4)).unwrap();
    let failed = &e.steps()[1];
    assert_eq!(
        (failed.status(), failed.error(), failed.output()),
        (StepStatus::Failed, Some("the receiver answered 500"), None)
    );
    assert_eq!(e.start_step("z", t(5)).unwrap_err().from, "absent");
    assert_eq!(e.status(), ExecutionStatus::Running, "a step's end is not the execution's");
}

#[test]
fn a_step_left_running_by_a_dead_worker_starts_over() {
    let mut e = execution();
    e.start_step("a", t(1)).unwrap();
    e.start_step("a", t(9)).unwrap();
    assert_eq!((e.steps()[0].status(), e.steps()[0].started_at()), (StepStatus::Running, Some(t(9))));
}

#[test]
fn ending_skips_the_steps_not_started_and_lets_a_running_one_finish() {
    let mut e = execution();
    e.start_step("a", t(1)).unwrap();
    e.cancel(t(2)).unwrap();
    assert_eq!(
        (e.status(), e.error(), e.finished_at()),
        (ExecutionStatus::Cancelled, Some(CANCELLED_ERROR), Some(t(2)))
    );
    assert_eq!(statuses(&e), [StepStatus::Running, StepStatus::Skipped, StepStatus::Skipped]);
    assert!(e.start_step("b", t(3)).is_err(), "no further step starts");
    e.complete_step("a", json!(1), t(3)).unwrap();
    assert_eq!(e.status(), ExecutionStatus::Cancelled, "and the execution stays cancelled");

    let mut e = execution();
    e.start_step("a", t(1)).unwrap();
    e.fail_step("a", "boom".into(), t(2)).unwrap();
    e.fail("step a failed: boom".into(), t(2)).unwrap();
    assert_eq!(
        (e.status(), e.error(), e.output()),
        (ExecutionStatus::Failed, Some("step a failed: boom"), None)
    );
    assert_eq!(statuses(&e), [StepStatus::Failed, StepStatus::Skipped, StepStatus::Skipped]);
}

#[test]
fn a_finished_execution_never_changes_again() {
    let mut e = execution();
    for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
        e.start_step(id, t(1)).unwrap();
        e.complete_step(id, json!(i), t(2)).unwrap();
    }
    e.complete(json!(2), t(2)).unwrap();
    assert_eq!((e.status(), e.output(), e.error()), (ExecutionStatus::Completed, Some(&json!(2)), None));
    let before = e.clone();
    assert_eq!(e.cancel(t(3)).unwrap_err().to_string(), "cannot cancel an execution that is completed");
    assert!(e.fail("late".into(), t(3)).is_err());
    assert!(e.complete(json!(3), t(3)).is_err());
    assert_eq!(
        e.start_step("a", t(3)).unwrap_err().to_string(),
        "cannot start a step of an execution that is completed"
    );
    assert_eq!(e, before);
}

#[test]
fn a_stored_execution_reads_back_only_in_a_state_the_transitions_reach() {
    let mut mid = execution();
    mid.start_step("a", t(1)).unwrap();
    mid.complete_step("a", json!(1), t(2)).unwrap();
    mid.start_step("b", t(2)).unwrap();
    let mut failed = mid.clone();
    failed.fail_step("b", "boom".into(), t(3)).unwrap();
    failed.fail("step b failed: boom".into(), t(3)).unwrap();
    let mut cancelled = mid.clone();
    cancelled.cancel(t(3)).unwrap();
    let mut completed = execution();
    for id in ["a", "b", "c"] {
        completed.start_step(id, t(1)).unwrap();
        completed.complete_step(id, Value::Null, t(2)).unwrap();
    }
    completed.complete(Value::Null, t(2)).unwrap();
    for e in [execution(), mid.clone(), failed, cancelled, completed] {
        assert_eq!(Execution::restore(e.clone().into_record()).unwrap(), e);
    }

    let running = mid.into_record();
    type Breaks = fn(&mut ExecutionRecord);
    let broken: [(Breaks, &str); 10] = [
        (|r| r.finished_at = Some(t(9)), "execution exe_1 is running but has an end time"),
        (|r| r.status = ExecutionStatus::Completed, "execution exe_1 is completed but has no end time"),
        (|r| r.output = Some(json!(1)), "execution exe_1 is running but has an output"),
        (|r| r.error = Some("x".into()), "execution exe_1 is running but has an error"),
        (
            |r| (r.status, r.finished_at) = (ExecutionStatus::Failed, Some(t(9))),
            "execution exe_1 is failed but says not why",
        ),
        (|r| r.steps[0].finished_at = None, "step a is completed but has no end time"),
        (|r| r.steps[1].started_at = None, "step b is running but has no start time"),
        (|r| r.steps[2].started_at = Some(t(1)), "step c is pending but has a start time"),
        (|r| r.steps[2].output = Some(json!(1)), "step c is pending but has an output"),
        (|r| r.steps[0].error = Some("x".into()), "step a is completed but has an error"),
    ];
    for (breaks, problem) in broken {
        let mut record = running.clone();
        breaks(&mut record);
        let e = Execution::restore(record).unwrap_err();
        assert_eq!(e.to_string(), format!("stored {problem}"));
    }
}

#[test]
fn a_step_tried_again_waits_pending_with_its_attempts_and_errors_and_sets_the_due_time() {
    let mut e = execution();
    assert_eq!((e.at_step(), e.due_at(), e.step_runs()), (None, t(0), 0));
    e.start_step("a", t(1)).unwrap();
    assert_eq!((e.at_step(), e.step_runs(), e.steps()[0].attempts()), (Some("a"), 1, 1));
    e.retry_step("a", "the server answered 503".into(), t(11), t(2)).unwrap();
    let a = &e.steps()[0];
    assert_eq!(
        (a.status(), a.next_run_at(), a.started_at(), a.error()),
        (StepStatus::Pending, Some(t(11)), None, None)
    );
    assert_eq!(
        a.attempt_errors(),
        [AttemptError { attempt: 1, error: "the server answered 503".into(), at: t(2) }]
    );
    assert_eq!(e.due_at(), t(11), "the execution is due when the step is tried again");
    e.start_step("a", t(11)).unwrap();
    let a = &e.steps()[0];
    assert_eq!((a.attempts(), a.next_run_at(), e.step_runs()), (2, None, 2));
    e.complete_step("a", json!(1), t(12)).unwrap();
    assert_eq!(e.steps()[0].attempt_errors().len(), 1, "the errors of earlier attempts stay");
    let record = e.clone().into_record();
    assert_eq!(Execution::restore(record).unwrap(), e, "a retried step round-trips");
    assert!(e.retry_step("a", "x".into(), t(20), t(13)).is_err(), "only a running step is tried again");
}

#[test]
fn a_loop_runs_a_finished_step_again_from_a_fresh_slate_and_counts_every_run() {
    let mut e = execution();
    e.start_step("a", t(1)).unwrap();
    e.complete_step("a", json!(1), t(2)).unwrap();
    e.start_step("b", t(3)).unwrap();
    e.fail_step("b", "no".into(), t(4)).unwrap();
    e.branch_from("b", "a").unwrap();
    assert_eq!(e.steps()[1].branch(), Some("a"));
    e.start_step("a", t(5)).unwrap();
    let a = &e.steps()[0];
    assert_eq!((a.status(), a.output(), a.finished_at(), a.attempts()), (StepStatus::Running, None, None, 1));
    assert_eq!((e.step_runs(), e.at_step()), (3, Some("a")));
    assert!(e.branch_from("a", "c").is_err(), "a running step has not led anywhere yet");
    e.cancel(t(6)).unwrap();
    assert_eq!(e.steps()[2].status(), StepStatus::Skipped);
    assert!(e.start_step("c", t(7)).is_err(), "a skipped step never runs");
}

#[test]
fn a_stored_step_that_says_it_ran_without_an_attempt_or_waits_without_being_pending_is_refused() {
    let mut e = execution();
    e.start_step("a", t(1)).unwrap();
    let mut record = e.clone().into_record();
    record.steps[0].attempts = 0;
    assert_eq!(Execution::restore(record).unwrap_err().problem, "counts no attempt");
    let mut record = e.into_record();
    record.steps[0].next_run_at = Some(t(5));
    assert_eq!(Execution::restore(record).unwrap_err().problem, "has a next run");
}

#[test]
fn a_waiting_step_waits_with_its_execution_and_completes_when_resumed() {
    let mut e = execution();
    e.start_step("a", t(1)).unwrap();
    e.wait_step("a", t(61), t(1)).unwrap();
    assert_eq!((e.status(), e.due_at()), (ExecutionStatus::Waiting, t(61)));
    let a = &e.steps()[0];
    assert_eq!((a.status(), a.next_run_at(), a.started_at()), (StepStatus::Waiting, Some(t(61)), Some(t(1))));
    assert!(e.start_step("a", t(2)).is_err(), "a waiting step does not start again");
    assert!(e.wait_step("a", t(90), t(2)).is_err(), "a waiting execution cannot wait twice");
    // Stored and read back as it is.
    assert_eq!(Execution::restore(e.clone().into_record()).unwrap(), e);
    e.resume().unwrap();
    assert!(e.resume().is_err(), "only a waiting execution resumes");
    e.complete_step("a", json!({"waited_until": "…"}), t(61)).unwrap();
    let a = &e.steps()[0];
    assert_eq!((a.status(), a.next_run_at(), a.attempts()), (StepStatus::Completed, None, 1));
}

#[test]
fn cancelling_a_waiting_execution_fails_the_step_that_waited_and_skips_the_rest() {
    let mut e = execution();
    e.start_step("a", t(1)).unwrap();
    e.wait_step("a", t(61), t(1)).unwrap();
    e.cancel(t(5)).unwrap();
    assert_eq!(e.status(), ExecutionStatus::Cancelled);
    assert_eq!(statuses(&e), [StepStatus::Failed, StepStatus::Skipped, StepStatus::Skipped]);
    let a = &e.steps()[0];
    assert_eq!((a.error(), a.finished_at(), a.next_run_at()), (Some(CANCELLED_WAIT_ERROR), Some(t(5)), None));
    assert_eq!(Execution::restore(e.clone().into_record()).unwrap(), e);
}

#[test]
fn a_stored_waiting_step_must_say_until_when() {
    let mut e = execution();
    e.start_step("a", t(1)).unwrap();
    e.wait_step("a", t(61), t(1)).unwrap();
    let mut record = e.into_record();
    record.steps[0].next_run_at = None;
    let refused = Execution::restore(record).unwrap_err();
    assert_eq!(refused.to_string(), "stored step a is waiting but waits for no time");
}

#[test]
fn a_failed_execution_is_retried_from_a_step_keeping_the_results_before_it() {
    let mut e = execution();
    e.start_step("a", t(1)).unwrap();
    e.complete_step("a", json!("a"), t(2)).unwrap();
    e.start_step("b", t(3)).unwrap();
    e.fail_step("b", "down".into(), t(4)).unwrap();
    e.fail("step b failed: down".into(), t(4)).unwrap();
    assert_eq!(statuses(&e), [StepStatus::Completed, StepStatus::Failed, StepStatus::Skipped]);
    let mut refused = e.clone();
    assert!(refused.retry_from("nope", t(5)).is_err(), "a step it does not have");
    assert_eq!(refused, e, "a refused retry changes nothing");

    e.retry_from("b", t(5)).unwrap();
    assert_eq!(
        (e.status(), e.error(), e.finished_at(), e.due_at()),
        (ExecutionStatus::Running, None, None, t(5))
    );
    assert_eq!(
        (e.at_step(), e.step_runs()),
        (Some("b"), 2),
        "at the step it runs from; its runs go on counting"
    );
    assert_eq!(statuses(&e), [StepStatus::Completed, StepStatus::Pending, StepStatus::Pending]);
    assert_eq!(e.steps()[0].output(), Some(&json!("a")), "the step before keeps its result");
    let b = &e.steps()[1];
    assert_eq!((b.error(), b.attempts(), b.started_at()), (None, 0, None), "a fresh slate");
    assert_eq!(Execution::restore(e.clone().into_record()).unwrap(), e);
    assert!(e.retry_from("a", t(6)).is_err(), "only a failed execution is retried");
}

#[test]
fn a_retry_makes_a_step_skipped_before_it_pending_so_a_jump_back_runs_it() {
    let mut e = execution();
    // a led to c, jumping over b; c failed: b was skipped with the rest.
    e.start_step("a", t(1)).unwrap();
    e.complete_step("a", json!("a"), t(2)).unwrap();
    e.branch_from("a", "c").unwrap();
    e.start_step("c", t(3)).unwrap();
    e.fail_step("c", "down".into(), t(4)).unwrap();
    e.fail("step c failed: down".into(), t(4)).unwrap();
    assert_eq!(statuses(&e), [StepStatus::Completed, StepStatus::Skipped, StepStatus::Failed]);
    e.retry_from("c", t(5)).unwrap();
    assert_eq!(statuses(&e), [StepStatus::Completed, StepStatus::Pending, StepStatus::Pending]);
    e.start_step("b", t(6)).unwrap();
}

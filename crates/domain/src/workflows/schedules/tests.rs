#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use chrono::{Duration, TimeZone as _, Utc};
use serde_json::json;

use super::*;
use crate::ids::UserId;
use crate::ratelimit::PlanTable;
use crate::tenancy::{Plan, Role};
use crate::workflows::ports::{MockScheduleRepository, MockWorkflowRepository};
use crate::workflows::test_support::{
    caller, clock, execution_repo, execution_service, ids, key_caller, limiter, no_executions, t0, workflow,
};

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

#[test]
fn five_fields_and_an_iana_zone_are_taken_and_anything_else_named() {
    assert!(CronSpec::parse("*/5 9-17 * * MON-FRI", "Europe/Berlin").is_ok());
    assert!(CronSpec::parse("@hourly", "UTC").is_ok());
    let fields = |cron: &str, zone: &str| -> Vec<String> {
        CronSpec::parse(cron, zone).unwrap_err().into_iter().map(|e| e.field).collect()
    };
    assert_eq!(fields("* * * *", "UTC"), ["cron"], "four fields");
    assert_eq!(fields("0 * * * * *", "UTC"), ["cron"], "six fields (seconds) are not standard cron");
    assert_eq!(fields("61 * * * *", "UTC"), ["cron"]);
    assert_eq!(fields("* * * * *", "Mars/Olympus"), ["timezone"]);
    assert_eq!(fields("nonsense", "nowhere"), ["cron", "timezone"], "every problem at once");
}

#[test]
fn the_next_tick_is_read_in_the_schedules_zone() {
    let nine_in_berlin = CronSpec::parse("0 9 * * *", "Europe/Berlin").unwrap();
    // 27 November: Berlin is UTC+1.
    assert_eq!(nine_in_berlin.next_after(utc(2026, 11, 27, 7, 0)), Some(utc(2026, 11, 27, 8, 0)));
    assert_eq!(
        nine_in_berlin.next_after(utc(2026, 11, 27, 8, 0)),
        Some(utc(2026, 11, 28, 8, 0)),
        "strictly after"
    );
}

#[test]
fn an_expression_that_names_no_date_is_refused() {
    for never in ["0 0 30 2 *", "0 0 31 2 *", "0 0 31 4,6,9,11 *"] {
        let errors = CronSpec::parse(never, "UTC").unwrap_err();
        assert_eq!(errors.len(), 1, "{never}");
        assert_eq!(errors[0].field, "cron");
        assert!(errors[0].message.contains("never matches"), "{never}: {}", errors[0].message);
    }
    // Rare is not never: the 29th of February comes every four years.
    let leap = CronSpec::parse("0 0 29 2 *", "UTC").unwrap();
    assert_eq!(leap.next_after(utc(2026, 11, 27, 0, 0)), Some(utc(2028, 2, 29, 0, 0)));
}

#[test]
fn daylight_saving_changes_run_a_skipped_time_after_the_change_and_a_repeated_one_once() {
    // 29 March 2026, Berlin: 02:00 → 03:00. A 02:30 schedule runs at 03:00 local (01:00 UTC).
    let half_past_two = CronSpec::parse("30 2 * * *", "Europe/Berlin").unwrap();
    let spring = half_past_two.next_after(utc(2026, 3, 28, 23, 0)).unwrap();
    assert_eq!(spring, utc(2026, 3, 29, 1, 0));
    // 25 October 2026, Berlin: 03:00 → 02:00, so 02:30 happens twice; it runs once.
    let first = half_past_two.next_after(utc(2026, 10, 24, 22, 0)).unwrap();
    assert_eq!(first, utc(2026, 10, 25, 0, 30));
    assert_eq!(half_past_two.next_after(first), Some(utc(2026, 10, 26, 1, 30)), "not again an hour later");
}

#[test]
fn after_downtime_the_latest_due_tick_runs_and_the_earlier_ones_are_missed() {
    let every_minute = CronSpec::parse("* * * * *", "UTC").unwrap();
    let next = utc(2026, 11, 27, 9, 1);
    // On time: the one tick runs.
    assert_eq!(
        every_minute.due(next, next + Duration::seconds(20)),
        DueTicks { run: next, missed: 0, next: Some(utc(2026, 11, 27, 9, 2)) }
    );
    // Down from 9:01 to 9:05:30: 9:05 runs, 9:01–9:04 are missed, 9:06 is next.
    assert_eq!(
        every_minute.due(next, utc(2026, 11, 27, 9, 5) + Duration::seconds(30)),
        DueTicks { run: utc(2026, 11, 27, 9, 5), missed: 4, next: Some(utc(2026, 11, 27, 9, 6)) }
    );
}

fn schedule(next: Option<DateTime<Utc>>) -> Schedule {
    Schedule {
        id: ScheduleId::from_string("sch_1"),
        tenant_id: TenantId::from_string("ten_1"),
        workflow_id: WorkflowId::from_string("wf_1"),
        cron: "* * * * *".into(),
        timezone: "UTC".into(),
        input: json!({"report": "daily"}).as_object().unwrap().clone(),
        is_active: true,
        run_as: RunAs { user_id: UserId::from_string("usr_creator"), role: Role::Admin },
        next_run_at: next,
        last_run_at: None,
        missed_count: 0,
        created_at: t0(),
        updated_at: t0(),
    }
}

struct Setup {
    schedules: MockScheduleRepository,
    workflows: MockWorkflowRepository,
    executions: crate::workflows::ports::MockExecutionRepository,
    count: Option<u64>,
}

impl Setup {
    fn new() -> Self {
        Self {
            schedules: MockScheduleRepository::new(),
            workflows: MockWorkflowRepository::new(),
            executions: no_executions(),
            count: None,
        }
    }

    fn service(self) -> ScheduleService {
        ScheduleService::new(ScheduleServiceDeps {
            schedules: Arc::new(self.schedules),
            workflows: Arc::new(self.workflows),
            executions: execution_service(self.executions),
            limiter: limiter(self.count),
            plans: PlanTable::One,
            ids: Arc::new(ids()),
            clock: Arc::new(clock()),
        })
    }

    /// `schedule` is due now (t0 = 9:00) for a workflow `active` or not; what it is advanced
    /// with is recorded.
    fn due(mut self, schedule: Schedule, active: bool) -> (Self, Arc<Mutex<Vec<Advance>>>) {
        self.schedules.expect_due().returning(move |_, _| {
            Ok(vec![DueSchedule {
                schedule: schedule.clone(),
                workflow: workflow(active),
                plan: Plan::Starter,
            }])
        });
        let advances: Arc<Mutex<Vec<Advance>>> = Arc::default();
        let seen = advances.clone();
        self.schedules.expect_advance().returning(move |_, a| {
            seen.lock().unwrap().push(*a);
            Ok(true)
        });
        (self, advances)
    }
}

#[tokio::test]
async fn a_due_tick_starts_one_execution_as_the_creator_keyed_by_the_tick() {
    let (mut s, advances) = Setup::new().due(schedule(Some(utc(2026, 11, 27, 8, 58))), true);
    let (repo, stored) = execution_repo(false);
    s.executions = repo;
    s.count = Some(1);
    assert_eq!(s.service().run_due(10).await.unwrap(), 1);
    let stored = stored.lock().unwrap();
    let new = &stored[0];
    assert_eq!(new.execution.origin, ExecutionOrigin::Schedule(ScheduleId::from_string("sch_1")));
    assert_eq!(new.execution.input, json!({"report": "daily"}));
    assert_eq!(new.execution.trigger, json!({"schedule_id": "sch_1", "tick": "2026-11-27T09:00:00.000Z"}));
    assert_eq!(
        new.dedup_key.as_deref(),
        Some("2026-11-27T09:00:00.000Z"),
        "one execution per tick, whoever starts it"
    );
    assert_eq!(new.run_as.user_id.as_str(), "usr_creator");
    // 8:58 and 8:59 were missed; 9:00 ran; 9:01 is next.
    assert_eq!(
        advances.lock().unwrap()[..],
        [Advance {
            from: utc(2026, 11, 27, 8, 58),
            next_run_at: Some(utc(2026, 11, 27, 9, 1)),
            ran: Some(t0()),
            missed: 2
        }]
    );
}

#[tokio::test]
async fn a_tick_of_an_inactive_workflow_or_past_the_plan_limit_starts_nothing_and_is_missed() {
    let (s, advances) = Setup::new().due(schedule(Some(t0())), false);
    s.service().run_due(10).await.unwrap();
    let advance = advances.lock().unwrap()[0];
    assert_eq!((advance.ran, advance.missed), (None, 1));

    let (mut s, advances) = Setup::new().due(schedule(Some(t0())), true);
    s.count = Some(61); // over the Starter plan's 60 a minute
    s.service().run_due(10).await.unwrap();
    let advance = advances.lock().unwrap()[0];
    assert_eq!((advance.ran, advance.missed), (None, 1));
}

#[tokio::test]
async fn making_a_schedule_needs_write_and_execute_and_computes_its_next_tick() {
    let e = Setup::new()
        .service()
        .create(&key_caller(&["workflows:write"]), &WorkflowId::from_string("wf_1"), NewSchedule::default())
        .await
        .unwrap_err();
    assert!(matches!(e, ScheduleError::Forbidden(_)), "{e:?}");

    let mut s = Setup::new();
    s.workflows.expect_get().returning(|_, _| Ok(Some(workflow(true))));
    s.schedules.expect_create().returning(|_| Ok(true));
    let new = NewSchedule {
        cron: "0 9 * * *".into(),
        timezone: Some("Europe/Berlin".into()),
        ..NewSchedule::default()
    };
    let made =
        s.service().create(&caller(Role::Member), &WorkflowId::from_string("wf_1"), new).await.unwrap();
    assert_eq!(made.next_run_at, Some(utc(2026, 11, 28, 8, 0)), "9:00 in Berlin after 9:00 UTC");
    assert_eq!((made.is_active, made.missed_count, made.input.len()), (true, 0, 0));
    assert_eq!(made.run_as, RunAs { user_id: UserId::from_string("usr_1"), role: Role::Member });

    let bad =
        NewSchedule { cron: "every day".into(), timezone: Some("Nowhere".into()), ..NewSchedule::default() };
    let e = Setup::new().service().create(&caller(Role::Member), &WorkflowId::from_string("wf_1"), bad).await;
    match e {
        Err(ScheduleError::Invalid(v)) => assert_eq!(v.0.len(), 2),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn pausing_clears_the_next_tick_and_resuming_starts_from_now() {
    let mut s = Setup::new();
    let stored = schedule(Some(utc(2026, 11, 27, 8, 0)));
    s.schedules.expect_get().returning(move |_, _, _| Ok(Some(stored.clone())));
    s.schedules.expect_update().returning(|_| Ok(true));
    let service = s.service();
    let (wf, id) = (WorkflowId::from_string("wf_1"), ScheduleId::from_string("sch_1"));
    let paused = service
        .update(
            &caller(Role::Admin),
            &wf,
            &id,
            SchedulePatch { is_active: Some(false), ..SchedulePatch::default() },
        )
        .await
        .unwrap();
    assert_eq!((paused.is_active, paused.next_run_at), (false, None));
    let resumed = service
        .update(
            &caller(Role::Admin),
            &wf,
            &id,
            SchedulePatch { is_active: Some(true), ..SchedulePatch::default() },
        )
        .await
        .unwrap();
    assert_eq!(
        resumed.next_run_at,
        Some(utc(2026, 11, 27, 9, 1)),
        "the ticks missed while paused do not run"
    );
}

//! Schedules: they read back, are scoped by tenant and workflow, the due ones of every tenant
//! are found with their workflow and plan, and a tick moves on only once however many
//! instances try (compare-and-set).

use agentry_domain::ids::{ScheduleId, TenantId, UserId, WorkflowId};
use agentry_domain::tenancy::{Plan, Role};
use agentry_domain::workflows::{Advance, RunAs, Schedule, ScheduleRepository, WorkflowRepository};
use agentry_store::{Database, ScheduleStore, WorkflowStore};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;

crate::contract!(
    a_schedule_reads_back_and_another_tenant_sees_none,
    due_schedules_come_with_their_workflow_and_plan_and_paused_ones_never,
    a_tick_moves_on_once_however_many_instances_try,
    deleting_a_workflow_deletes_its_schedules,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap()
}

fn schedule(id: &str, tenant: &str, workflow: &str, next: Option<DateTime<Utc>>) -> Schedule {
    Schedule {
        id: ScheduleId::from_string(id),
        tenant_id: TenantId::from_string(tenant),
        workflow_id: WorkflowId::from_string(workflow),
        cron: "* * * * *".into(),
        timezone: "Europe/Berlin".into(),
        input: json!({"report": "daily"}).as_object().unwrap().clone(),
        is_active: next.is_some(),
        run_as: RunAs { user_id: UserId::from_string("usr_1"), role: Role::Member },
        next_run_at: next,
        last_run_at: None,
        missed_count: 0,
        created_at: t0(),
        updated_at: t0(),
    }
}

/// The two tenants and workflows of the trigger contract (`ten_2` on Pro).
async fn setup(db: &Database) -> ScheduleStore {
    super::triggers::setup_tenants(db).await;
    ScheduleStore::new(db.clone())
}

async fn a_schedule_reads_back_and_another_tenant_sees_none(db: Database) {
    let store = setup(&db).await;
    let s = schedule("sch_1", "ten_1", "wf_1", Some(t0()));
    assert!(store.create(&s).await.unwrap());
    let (t1, t2) = (TenantId::from_string("ten_1"), TenantId::from_string("ten_2"));
    let (wf1, id) = (WorkflowId::from_string("wf_1"), ScheduleId::from_string("sch_1"));
    assert_eq!(store.get(&t1, &wf1, &id).await.unwrap(), Some(s.clone()));
    assert_eq!(store.list(&t1, &wf1).await.unwrap(), std::slice::from_ref(&s));
    assert_eq!(store.get(&t2, &wf1, &id).await.unwrap(), None);
    assert!(store.list(&t2, &wf1).await.unwrap().is_empty());
    assert!(!store.delete(&t2, &wf1, &id).await.unwrap(), "another tenant cannot delete it");
    let mut changed = s.clone();
    changed.cron = "0 9 * * *".into();
    changed.tenant_id = t2.clone();
    assert!(!store.update(&changed).await.unwrap(), "nor change it");
    changed.tenant_id = t1.clone();
    changed.is_active = false;
    changed.next_run_at = None;
    assert!(store.update(&changed).await.unwrap());
    assert_eq!(store.get(&t1, &wf1, &id).await.unwrap(), Some(changed));
    // A schedule of a workflow that is gone is not stored.
    assert!(!store.create(&schedule("sch_2", "ten_1", "wf_gone", Some(t0()))).await.unwrap());
    assert!(store.delete(&t1, &wf1, &id).await.unwrap());
}

async fn due_schedules_come_with_their_workflow_and_plan_and_paused_ones_never(db: Database) {
    let store = setup(&db).await;
    store.create(&schedule("sch_late", "ten_2", "wf_2", Some(t0() - Duration::minutes(5)))).await.unwrap();
    store.create(&schedule("sch_now", "ten_1", "wf_1", Some(t0()))).await.unwrap();
    store.create(&schedule("sch_later", "ten_1", "wf_1", Some(t0() + Duration::minutes(1)))).await.unwrap();
    store.create(&schedule("sch_paused", "ten_1", "wf_1", None)).await.unwrap();
    let due = store.due(t0(), 10).await.unwrap();
    let ids: Vec<&str> = due.iter().map(|d| d.schedule.id.as_str()).collect();
    assert_eq!(ids, ["sch_late", "sch_now"], "earliest first; not the future one, not the paused one");
    assert_eq!((due[0].workflow.id.as_str(), due[0].plan), ("wf_2", Plan::Pro));
    assert_eq!(store.due(t0(), 1).await.unwrap().len(), 1, "at most the limit");
}

async fn a_tick_moves_on_once_however_many_instances_try(db: Database) {
    let store = setup(&db).await;
    store.create(&schedule("sch_1", "ten_1", "wf_1", Some(t0()))).await.unwrap();
    let id = ScheduleId::from_string("sch_1");
    let advance =
        Advance { from: t0(), next_run_at: Some(t0() + Duration::minutes(1)), ran: Some(t0()), missed: 2 };
    let tries = (0..8).map(|_| {
        let (store, id) = (store.clone(), id.clone());
        tokio::spawn(async move { store.advance(&id, &advance).await.unwrap() })
    });
    let moved =
        futures_util::future::join_all(tries).await.into_iter().filter(|r| *r.as_ref().unwrap()).count();
    assert_eq!(moved, 1, "one instance moves the tick on");
    let s = store
        .get(&TenantId::from_string("ten_1"), &WorkflowId::from_string("wf_1"), &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (s.next_run_at, s.last_run_at, s.missed_count),
        (Some(t0() + Duration::minutes(1)), Some(t0()), 2)
    );
    // A tick that started nothing adds to the missed count and leaves the last run.
    let skipped = Advance { from: t0() + Duration::minutes(1), next_run_at: None, ran: None, missed: 1 };
    assert!(store.advance(&id, &skipped).await.unwrap());
    let s = store
        .get(&TenantId::from_string("ten_1"), &WorkflowId::from_string("wf_1"), &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((s.next_run_at, s.last_run_at, s.missed_count), (None, Some(t0()), 3));
}

async fn deleting_a_workflow_deletes_its_schedules(db: Database) {
    let store = setup(&db).await;
    store.create(&schedule("sch_1", "ten_1", "wf_1", Some(t0()))).await.unwrap();
    let (t1, wf1) = (TenantId::from_string("ten_1"), WorkflowId::from_string("wf_1"));
    assert!(WorkflowStore::new(db.clone()).delete(&t1, &wf1).await.unwrap());
    assert!(store.list(&t1, &wf1).await.unwrap().is_empty());
    assert!(store.due(t0(), 10).await.unwrap().is_empty());
}

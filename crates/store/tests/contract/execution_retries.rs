//! A failed execution retried from a step: stored running and due at once, free of any lease,
//! its claims counted afresh, the steps it runs again pending, only while it is still failed.

use agentry_domain::work::LeaseQueue as _;
use agentry_domain::workflows::{After, ExecutionRepository, ExecutionStatus, Finish, StepStatus};
use agentry_store::Database;
use chrono::Duration;

use super::executions::{lease, started_under, t0};

crate::contract!(a_failed_execution_retried_from_a_step_is_claimed_again_with_its_earlier_results,);

async fn a_failed_execution_retried_from_a_step_is_claimed_again_with_its_earlier_results(db: Database) {
    let held = lease("l1", t0() + Duration::seconds(30));
    let (store, mut run) = started_under(&db, &held).await;
    let (id, tenant) = (&run.id.clone(), &run.tenant_id.clone());
    run.fail_step("find", "down".into(), t0() + Duration::seconds(1)).unwrap();
    run.fail("step find failed: down".into(), t0() + Duration::seconds(1)).unwrap();
    let event = agentry_domain::events::Event {
        id: agentry_domain::ids::EventId::from_string("evt_failed"),
        tenant_id: tenant.clone(),
        payload: agentry_domain::events::EventPayload::BillingCreditsLow { credits: 1, threshold: 2 },
        created_at: t0(),
    };
    let after = After::Finish(Box::new(Finish::of(&run, event)));
    assert!(store.record_step(id, &held, run.step("find").unwrap(), after).await.unwrap());
    let mut failed = store.get(tenant, id).await.unwrap().unwrap();
    assert_eq!(failed.status(), ExecutionStatus::Failed);

    let retried_at = t0() + Duration::seconds(60);
    failed.retry_from("find", retried_at).unwrap();
    assert!(store.record_retry(&failed).await.unwrap());
    let stored = store.get(tenant, id).await.unwrap().unwrap();
    assert_eq!(stored, failed);
    assert_eq!(stored.steps()[0].status(), StepStatus::Pending);
    assert!(!store.record_retry(&failed).await.unwrap(), "retried once: it is running now");

    let claimed =
        store.claim(&lease("l2", retried_at + Duration::seconds(30)), retried_at, 10).await.unwrap();
    assert_eq!(claimed.len(), 1, "due at once, free of the old lease");
    assert_eq!(claimed[0].claims, 1, "claims counted afresh");
    assert_eq!(claimed[0].item.execution, failed);
}

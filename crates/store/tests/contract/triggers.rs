use agentry_domain::billing::CreditRepository;
use agentry_domain::identity::AccountRepository;
use agentry_domain::ids::{IntegrationId, TenantId, TriggerId, UserId, WorkflowId};
use agentry_domain::tenancy::{Plan, Role};
use agentry_domain::webhooks::SealedSecret;
use agentry_domain::workflows::{
    Integration, IntegrationKind, IntegrationRepository, RunAs, Trigger, TriggerRepository, Workflow,
    WorkflowRepository, validate_steps,
};
use agentry_store::{AccountStore, CreditStore, Database, IntegrationStore, TriggerStore, WorkflowStore};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;

crate::contract!(
    a_trigger_reads_back_and_is_found_by_path_with_its_workflow_and_plan,
    triggers_are_listed_per_workflow_and_another_tenant_sees_none,
    a_trigger_of_a_missing_workflow_is_not_stored_and_paths_are_unique,
    fifty_concurrent_calls_are_all_counted,
    deleting_a_workflow_deletes_its_triggers_and_integrations,
    an_integration_reads_back_and_is_found_by_id_with_its_workflow_and_plan,
    another_tenants_integration_is_invisible_and_untouchable,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap()
}

fn workflow(id: &str, tenant: &str) -> Workflow {
    Workflow {
        id: WorkflowId::from_string(id),
        tenant_id: TenantId::from_string(tenant),
        name: "Echo".into(),
        description: None,
        steps: validate_steps(&json!([{"id": "echo", "type": "transform", "output": "{{ input.body }}"}]))
            .unwrap(),
        is_active: true,
        created_at: t0(),
        updated_at: t0(),
    }
}

fn trigger(id: &str, tenant: &str, workflow: &str, path: &str) -> Trigger {
    Trigger {
        id: TriggerId::from_string(id),
        tenant_id: TenantId::from_string(tenant),
        workflow_id: WorkflowId::from_string(workflow),
        path: path.into(),
        name: format!("Trigger {id}"),
        allowed_methods: vec!["POST".into(), "GET".into()],
        secret: SealedSecret(format!("sealed-{id}")),
        is_active: true,
        trigger_count: 0,
        run_as: RunAs { user_id: UserId::from_string("usr_1"), role: Role::Member },
        created_at: t0(),
    }
}

fn integration(id: &str, tenant: &str, workflow: &str, kind: IntegrationKind) -> Integration {
    Integration {
        id: IntegrationId::from_string(id),
        tenant_id: TenantId::from_string(tenant),
        kind,
        name: format!("Integration {id}"),
        workflow_id: WorkflowId::from_string(workflow),
        signing_secret: SealedSecret(format!("sealed-{id}")),
        run_as: RunAs { user_id: UserId::from_string("usr_1"), role: Role::Admin },
        created_at: t0(),
    }
}

struct Stores {
    workflows: WorkflowStore,
    triggers: TriggerStore,
    integrations: IntegrationStore,
}

/// Two tenants (`ten_1` on Starter, `ten_2` on Pro), each with a workflow (`wf_1`, `wf_2`).
async fn setup(db: &Database) -> Stores {
    let workflows = setup_tenants(db).await;
    Stores {
        workflows,
        triggers: TriggerStore::new(db.clone()),
        integrations: IntegrationStore::new(db.clone()),
    }
}

/// The two tenants and their workflows of [`setup`].
pub async fn setup_tenants(db: &Database) -> WorkflowStore {
    let accounts = AccountStore::new(db.clone());
    accounts.create_account(&super::accounts::account("1", "one@example.com")).await.unwrap();
    accounts.create_account(&super::accounts::account("2", "two@example.com")).await.unwrap();
    assert!(CreditStore::new(db.clone()).set_plan(&TenantId::from_string("ten_2"), Plan::Pro).await.unwrap());
    let workflows = WorkflowStore::new(db.clone());
    workflows.create(&workflow("wf_1", "ten_1")).await.unwrap();
    workflows.create(&workflow("wf_2", "ten_2")).await.unwrap();
    workflows
}

async fn a_trigger_reads_back_and_is_found_by_path_with_its_workflow_and_plan(db: Database) {
    let s = setup(&db).await;
    let t = trigger("trg_1", "ten_2", "wf_2", "path-one");
    assert!(s.triggers.create(&t).await.unwrap());
    let found = s.triggers.find_by_path("path-one").await.unwrap().expect("found by path");
    assert_eq!(found.trigger, t);
    assert_eq!(found.workflow, workflow("wf_2", "ten_2"));
    assert_eq!(found.plan, Plan::Pro);
    assert_eq!(s.triggers.find_by_path("path-two").await.unwrap(), None);
    assert_eq!(s.triggers.find_by_path("PATH-ONE").await.unwrap(), None, "paths match exactly");
    assert_eq!(s.triggers.list(&t.tenant_id, &t.workflow_id).await.unwrap(), vec![t.clone()]);
    assert!(s.triggers.delete(&t.tenant_id, &t.workflow_id, &t.id).await.unwrap());
    assert_eq!(s.triggers.find_by_path("path-one").await.unwrap(), None, "a deleted trigger's URL is gone");
    assert!(!s.triggers.delete(&t.tenant_id, &t.workflow_id, &t.id).await.unwrap());
    assert_eq!(s.triggers.count_call(&t.id).await.unwrap(), None);
}

async fn triggers_are_listed_per_workflow_and_another_tenant_sees_none(db: Database) {
    let s = setup(&db).await;
    s.workflows.create(&workflow("wf_3", "ten_1")).await.unwrap();
    for (id, wf) in [("trg_1", "wf_1"), ("trg_2", "wf_3"), ("trg_3", "wf_1")] {
        assert!(s.triggers.create(&trigger(id, "ten_1", wf, &format!("path-{id}"))).await.unwrap());
    }
    let ten_1 = TenantId::from_string("ten_1");
    let ten_2 = TenantId::from_string("ten_2");
    let wf_1 = WorkflowId::from_string("wf_1");
    let listed = s.triggers.list(&ten_1, &wf_1).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["trg_1", "trg_3"], "oldest first, only that workflow's");
    assert!(s.triggers.list(&ten_2, &wf_1).await.unwrap().is_empty());
    let trg_1 = TriggerId::from_string("trg_1");
    assert!(!s.triggers.delete(&ten_2, &wf_1, &trg_1).await.unwrap());
    assert!(
        !s.triggers.delete(&ten_1, &WorkflowId::from_string("wf_3"), &trg_1).await.unwrap(),
        "another workflow's"
    );
    assert_eq!(s.triggers.list(&ten_1, &wf_1).await.unwrap().len(), 2, "nothing was deleted");
}

async fn a_trigger_of_a_missing_workflow_is_not_stored_and_paths_are_unique(db: Database) {
    let s = setup(&db).await;
    assert!(!s.triggers.create(&trigger("trg_1", "ten_1", "wf_gone", "p1")).await.unwrap());
    assert_eq!(s.triggers.find_by_path("p1").await.unwrap(), None);
    assert!(s.triggers.create(&trigger("trg_2", "ten_1", "wf_1", "p2")).await.unwrap());
    assert!(
        s.triggers.create(&trigger("trg_3", "ten_2", "wf_2", "p2")).await.is_err(),
        "one trigger per path"
    );
    // A trigger naming another tenant's workflow is never found by path.
    assert!(s.triggers.create(&trigger("trg_4", "ten_1", "wf_2", "p4")).await.unwrap());
    assert_eq!(s.triggers.find_by_path("p4").await.unwrap(), None);
}

async fn fifty_concurrent_calls_are_all_counted(db: Database) {
    let s = setup(&db).await;
    let t = trigger("trg_1", "ten_1", "wf_1", "busy");
    assert!(s.triggers.create(&t).await.unwrap());
    let calls = (0..50).map(|_| {
        let store = s.triggers.clone();
        let id = t.id.clone();
        tokio::spawn(async move { store.count_call(&id).await.unwrap().unwrap() })
    });
    let mut counts: Vec<u64> = futures_util::future::try_join_all(calls).await.unwrap();
    counts.sort_unstable();
    assert_eq!(counts, (1..=50).collect::<Vec<u64>>(), "each call saw its own increment");
    let found = s.triggers.find_by_path("busy").await.unwrap().unwrap();
    assert_eq!(found.trigger.trigger_count, 50);
}

async fn deleting_a_workflow_deletes_its_triggers_and_integrations(db: Database) {
    let s = setup(&db).await;
    assert!(s.triggers.create(&trigger("trg_1", "ten_1", "wf_1", "p1")).await.unwrap());
    assert!(
        s.integrations.create(&integration("int_1", "ten_1", "wf_1", IntegrationKind::Chat)).await.unwrap()
    );
    assert!(s.triggers.create(&trigger("trg_2", "ten_2", "wf_2", "p2")).await.unwrap());
    assert!(
        s.workflows.delete(&TenantId::from_string("ten_1"), &WorkflowId::from_string("wf_1")).await.unwrap()
    );
    assert_eq!(s.triggers.find_by_path("p1").await.unwrap(), None);
    assert_eq!(s.integrations.find_target(&IntegrationId::from_string("int_1")).await.unwrap(), None);
    assert!(s.integrations.list(&TenantId::from_string("ten_1")).await.unwrap().is_empty());
    assert!(s.triggers.find_by_path("p2").await.unwrap().is_some(), "other workflows keep theirs");
}

async fn an_integration_reads_back_and_is_found_by_id_with_its_workflow_and_plan(db: Database) {
    let s = setup(&db).await;
    for (n, kind) in IntegrationKind::ALL.into_iter().enumerate() {
        let i = integration(&format!("int_{n}"), "ten_2", "wf_2", kind);
        assert!(s.integrations.create(&i).await.unwrap());
        assert_eq!(s.integrations.get(&i.tenant_id, &i.id).await.unwrap(), Some(i.clone()));
        let found = s.integrations.find_target(&i.id).await.unwrap().expect("found by id");
        assert_eq!((found.integration, found.workflow.id.as_str(), found.plan), (i, "wf_2", Plan::Pro));
    }
    let listed = s.integrations.list(&TenantId::from_string("ten_2")).await.unwrap();
    assert_eq!(listed.len(), 6);
    assert_eq!(listed[0].id.as_str(), "int_0", "oldest first");
    assert!(
        !s.integrations
            .create(&integration("int_9", "ten_2", "wf_gone", IntegrationKind::Wiki))
            .await
            .unwrap()
    );
    assert_eq!(s.integrations.find_target(&IntegrationId::from_string("int_9")).await.unwrap(), None);
}

async fn another_tenants_integration_is_invisible_and_untouchable(db: Database) {
    let s = setup(&db).await;
    let i = integration("int_1", "ten_1", "wf_1", IntegrationKind::CodeHost);
    assert!(s.integrations.create(&i).await.unwrap());
    let other = TenantId::from_string("ten_2");
    assert_eq!(s.integrations.get(&other, &i.id).await.unwrap(), None);
    assert!(s.integrations.list(&other).await.unwrap().is_empty());
    assert!(!s.integrations.delete(&other, &i.id).await.unwrap());
    assert_eq!(s.integrations.get(&i.tenant_id, &i.id).await.unwrap(), Some(i.clone()));
    // One naming another tenant's workflow is never found for a delivery.
    assert!(
        s.integrations.create(&integration("int_2", "ten_1", "wf_2", IntegrationKind::Wiki)).await.unwrap()
    );
    assert_eq!(s.integrations.find_target(&IntegrationId::from_string("int_2")).await.unwrap(), None);
    assert!(s.integrations.delete(&i.tenant_id, &i.id).await.unwrap());
    assert_eq!(s.integrations.find_target(&i.id).await.unwrap(), None);
}

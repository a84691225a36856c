#![allow(clippy::unwrap_used)]

use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;

use super::*;
use crate::ids::{MockIdGenerator, TenantId, UserId};
use crate::tenancy::{Credential, Plan, Role, Scope};
use crate::time::MockClock;
use crate::workflows::ports::MockWorkflowRepository;

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

fn service(workflows: MockWorkflowRepository) -> WorkflowService {
    let mut clock = MockClock::new();
    clock.expect_now().returning(t0);
    let mut ids = MockIdGenerator::new();
    ids.expect_generate().returning(|prefix| format!("{prefix}_1"));
    WorkflowService::new(WorkflowServiceDeps {
        workflows: Arc::new(workflows),
        clock: Arc::new(clock),
        ids: Arc::new(ids),
    })
}

fn two_steps() -> Value {
    json!([
        {"id": "greet", "type": "transform", "output": "Hello {{ input.name }}"},
        {"id": "shout", "type": "transform", "output": "{{ steps.greet.output | upper }}"}
    ])
}

fn stored() -> Workflow {
    Workflow {
        id: WorkflowId::from_string("wf_1"),
        tenant_id: TenantId::from_string("ten_1"),
        name: "Greeter".into(),
        description: None,
        steps: validate_steps(&two_steps()).unwrap(),
        is_active: true,
        created_at: t0(),
        updated_at: t0(),
    }
}

#[tokio::test]
async fn create_validates_and_stores_in_the_callers_tenant() {
    let mut repo = MockWorkflowRepository::new();
    repo.expect_create()
        .withf(|w| {
            w.tenant_id.as_str() == "ten_1" && w.steps.len() == 2 && w.is_active && w.name == "Greeter"
        })
        .times(1)
        .returning(|_| Ok(()));
    let new =
        NewWorkflow { name: " Greeter ".into(), description: None, steps: two_steps(), is_active: None };
    let created = service(repo).create(&caller(Role::Member), new).await.unwrap();
    assert_eq!(created.id.as_str(), "wf_1");
    assert_eq!(created.created_at, t0());
}

#[tokio::test]
async fn create_lists_every_problem_and_stores_nothing() {
    let mut repo = MockWorkflowRepository::new();
    repo.expect_create().never();
    let new = NewWorkflow {
        name: String::new(),
        description: None,
        steps: json!([{"id": "a", "type": "teleport"}, {"id": "b", "type": "transform", "output": "{{ steps.c.output }}"}]),
        is_active: None,
    };
    let Err(WorkflowError::Invalid(errors)) = service(repo).create(&caller(Role::Member), new).await else {
        panic!("expected a validation error");
    };
    let fields: Vec<&str> = errors.0.iter().map(|e| e.field.as_str()).collect();
    assert!(fields.contains(&"name"), "{fields:?}");
    assert!(fields.iter().any(|f| f.starts_with("steps[0]")), "{fields:?}");
    assert!(fields.iter().any(|f| f.starts_with("steps[1]")), "{fields:?}");
}

#[tokio::test]
async fn a_key_without_the_write_scope_is_refused() {
    let mut repo = MockWorkflowRepository::new();
    repo.expect_create().never();
    let mut reader = caller(Role::Member);
    reader.credential = Credential::ApiKey {
        key_id: crate::ids::ApiKeyId::from_string("key_1"),
        scopes: vec!["workflows:read".parse::<Scope>().unwrap()],
    };
    let new = NewWorkflow { name: "x".into(), description: None, steps: two_steps(), is_active: None };
    assert!(matches!(service(repo).create(&reader, new).await, Err(WorkflowError::Forbidden(_))));
}

#[tokio::test]
async fn update_applies_only_the_given_fields_and_revalidates_steps() {
    let mut repo = MockWorkflowRepository::new();
    repo.expect_get().returning(|_, _| Ok(Some(stored())));
    repo.expect_update()
        .withf(|w| !w.is_active && w.name == "Greeter" && w.description.as_deref() == Some("says hello"))
        .times(1)
        .returning(|_| Ok(true));
    let patch = WorkflowPatch {
        is_active: Some(false),
        description: Patch::Value("says hello".into()),
        ..WorkflowPatch::default()
    };
    let updated =
        service(repo).update(&caller(Role::Member), &WorkflowId::from_string("wf_1"), patch).await.unwrap();
    assert!(!updated.is_active);

    let mut repo = MockWorkflowRepository::new();
    repo.expect_get().returning(|_, _| Ok(Some(stored())));
    repo.expect_update().never();
    let patch = WorkflowPatch { steps: Some(json!([])), ..WorkflowPatch::default() };
    let result = service(repo).update(&caller(Role::Member), &WorkflowId::from_string("wf_1"), patch).await;
    assert!(matches!(result, Err(WorkflowError::Invalid(_))));
}

#[tokio::test]
async fn another_tenants_workflow_is_not_found() {
    let mut repo = MockWorkflowRepository::new();
    repo.expect_get().withf(|t, _| t.as_str() == "ten_1").returning(|_, _| Ok(None));
    repo.expect_delete().returning(|_, _| Ok(false));
    let svc = service(repo);
    let id = WorkflowId::from_string("wf_other");
    assert!(matches!(svc.get(&caller(Role::Member), &id).await, Err(WorkflowError::NotFound)));
    assert!(matches!(svc.delete(&caller(Role::Member), &id).await, Err(WorkflowError::NotFound)));
    let patch = WorkflowPatch { is_active: Some(false), ..WorkflowPatch::default() };
    assert!(matches!(svc.update(&caller(Role::Member), &id, patch).await, Err(WorkflowError::NotFound)));
}

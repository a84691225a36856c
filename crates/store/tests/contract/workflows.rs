use agentry_domain::identity::AccountRepository;
use agentry_domain::ids::{TenantId, WorkflowId};
use agentry_domain::pagination::Page;
use agentry_domain::workflows::{Workflow, WorkflowRepository, validate_steps};
use agentry_store::{AccountStore, Database, WorkflowStore};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;

crate::contract!(
    a_workflow_reads_back_as_stored,
    workflows_are_listed_per_tenant_with_a_total,
    another_tenants_workflow_is_invisible_everywhere,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 26, 9, 0, 0).unwrap()
}

pub fn workflow(id: &str, tenant: &str) -> Workflow {
    let steps = json!([
        {"id": "find", "type": "memory_search", "query": "{{ input.question }}", "top_k": "{{ input.k }}"},
        {"id": "answer", "type": "transform", "output": {"found": "{{ steps.find.output.results }}", "n": 3}}
    ]);
    Workflow {
        id: WorkflowId::from_string(id),
        tenant_id: TenantId::from_string(tenant),
        name: "Answer".into(),
        description: Some("finds and answers".into()),
        steps: validate_steps(&steps).unwrap(),
        is_active: true,
        created_at: t0(),
        updated_at: t0(),
    }
}

pub async fn setup(db: &Database) -> WorkflowStore {
    let accounts = AccountStore::new(db.clone());
    accounts.create_account(&super::accounts::account("1", "one@example.com")).await.unwrap();
    accounts.create_account(&super::accounts::account("2", "two@example.com")).await.unwrap();
    WorkflowStore::new(db.clone())
}

async fn a_workflow_reads_back_as_stored(db: Database) {
    let repo = setup(&db).await;
    let w = workflow("wf_1", "ten_1");
    repo.create(&w).await.unwrap();
    assert_eq!(repo.get(&w.tenant_id, &w.id).await.unwrap(), Some(w.clone()));
    let mut changed = w.clone();
    changed.is_active = false;
    changed.description = None;
    changed.steps.truncate(1);
    changed.updated_at = t0() + chrono::Duration::seconds(5);
    assert!(repo.update(&changed).await.unwrap());
    assert_eq!(repo.get(&w.tenant_id, &w.id).await.unwrap(), Some(changed));
    assert!(repo.delete(&w.tenant_id, &w.id).await.unwrap());
    assert_eq!(repo.get(&w.tenant_id, &w.id).await.unwrap(), None);
    assert!(!repo.delete(&w.tenant_id, &w.id).await.unwrap());
}

async fn workflows_are_listed_per_tenant_with_a_total(db: Database) {
    let repo = setup(&db).await;
    for i in 1..=5 {
        repo.create(&workflow(&format!("wf_{i}"), "ten_1")).await.unwrap();
    }
    repo.create(&workflow("wf_9", "ten_2")).await.unwrap();
    let tenant = TenantId::from_string("ten_1");
    let (page, total) = repo.list(&tenant, Page::new(Some(2), Some(2)).unwrap()).await.unwrap();
    assert_eq!(total, 5);
    let ids: Vec<&str> = page.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(ids, vec!["wf_3", "wf_4"]);
    let (past, total) = repo.list(&tenant, Page::new(Some(9), Some(2)).unwrap()).await.unwrap();
    assert!(past.is_empty());
    assert_eq!(total, 5, "the total is right past the last page too");
}

async fn another_tenants_workflow_is_invisible_everywhere(db: Database) {
    let repo = setup(&db).await;
    let w = workflow("wf_1", "ten_1");
    repo.create(&w).await.unwrap();
    let other = TenantId::from_string("ten_2");
    assert_eq!(repo.get(&other, &w.id).await.unwrap(), None);
    let mut moved = w.clone();
    moved.tenant_id = other.clone();
    moved.name = "Stolen".into();
    assert!(!repo.update(&moved).await.unwrap());
    assert!(!repo.delete(&other, &w.id).await.unwrap());
    assert_eq!(repo.list(&other, Page::new(None, None).unwrap()).await.unwrap().1, 0);
    assert_eq!(repo.get(&w.tenant_id, &w.id).await.unwrap(), Some(w));
}

use agentry_domain::billing::{CreditHold, CreditRepository, LedgerEntry, LedgerReason, Purchase};
use agentry_domain::events::{Event, EventType};
use agentry_domain::identity::AccountRepository;
use agentry_domain::ids::{CreditHoldId, EventId, LedgerEntryId, PurchaseId, TenantId};
use agentry_domain::pagination::Page;
use agentry_domain::tenancy::Plan;
use agentry_store::{AccountStore, CreditStore, Database};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;

crate::contract!(
    a_hold_takes_credits_only_when_they_cover_it,
    concurrent_holds_never_take_the_balance_below_zero,
    released_and_stale_holds_return_their_credits,
    a_purchase_adds_credits_ledger_and_event,
    plans_can_be_changed,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 3, 9, 0, 0).unwrap()
}

fn tenant() -> TenantId {
    TenantId::from_string("ten_1")
}

fn hold(id: &str, amount: i64) -> CreditHold {
    CreditHold { id: CreditHoldId::from_string(id), tenant_id: tenant(), amount, created_at: t0() }
}

async fn setup(db: &Database) -> CreditStore {
    // The test account starts with 1000 credits.
    AccountStore::new(db.clone())
        .create_account(&super::accounts::account("1", "one@example.com"))
        .await
        .unwrap();
    CreditStore::new(db.clone())
}

async fn balance(repo: &CreditStore) -> i64 {
    repo.account(&tenant()).await.unwrap().unwrap().0
}

async fn a_hold_takes_credits_only_when_they_cover_it(db: Database) {
    let repo = setup(&db).await;
    assert_eq!(repo.hold(&hold("hld_1", 600)).await.unwrap(), Some(400));
    assert_eq!(repo.hold(&hold("hld_2", 401)).await.unwrap(), None);
    assert_eq!(balance(&repo).await, 400);
    assert_eq!(db.count_rows("credit_holds").await.unwrap(), 1);
    assert_eq!(repo.hold(&hold("hld_3", 400)).await.unwrap(), Some(0));
}

async fn concurrent_holds_never_take_the_balance_below_zero(db: Database) {
    let repo = setup(&db).await;
    let tasks = (0..40).map(|i| {
        let repo = repo.clone();
        tokio::spawn(async move { repo.hold(&hold(&format!("hld_{i}"), 30)).await.unwrap() })
    });
    let granted = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .filter(|r| r.as_ref().unwrap().is_some())
        .count();
    assert_eq!(granted, 33, "1000 credits cover 33 holds of 30");
    assert_eq!(balance(&repo).await, 10);
}

async fn released_and_stale_holds_return_their_credits(db: Database) {
    let repo = setup(&db).await;
    repo.hold(&hold("hld_1", 100)).await.unwrap();
    repo.release(&CreditHoldId::from_string("hld_1")).await.unwrap();
    repo.release(&CreditHoldId::from_string("hld_1")).await.unwrap();
    assert_eq!(balance(&repo).await, 1000, "released once, idempotent");

    repo.hold(&hold("hld_2", 100)).await.unwrap();
    assert_eq!(repo.release_stale(t0()).await.unwrap(), 0, "not older than the cut-off");
    assert_eq!(repo.release_stale(t0() + Duration::minutes(1)).await.unwrap(), 1);
    assert_eq!(balance(&repo).await, 1000);
}

async fn a_purchase_adds_credits_ledger_and_event(db: Database) {
    let repo = setup(&db).await;
    let purchase = Purchase {
        id: PurchaseId::from_string("pur_1"),
        tenant_id: tenant(),
        credits: 250,
        provider: "manual".into(),
        provider_reference: "manual-250".into(),
        created_at: t0(),
    };
    let entry = LedgerEntry {
        id: LedgerEntryId::from_string("led_9"),
        tenant_id: tenant(),
        delta: 250,
        balance_after: 0,
        reason: LedgerReason::Purchase,
        reference: Some("pur_1".into()),
        created_at: t0(),
    };
    let event = Event {
        id: EventId::from_string("evt_1"),
        tenant_id: tenant(),
        event_type: EventType::BillingPurchaseCompleted,
        data: json!({"credits": 250}),
        created_at: t0(),
    };
    assert_eq!(repo.record_purchase(&purchase, &entry, &event).await.unwrap(), 1250);
    let (entries, total) = repo.ledger(&tenant(), Page::default()).await.unwrap();
    assert_eq!(total, 2);
    assert_eq!(entries[0].reason, LedgerReason::Purchase, "newest first");
    assert_eq!(entries[0].balance_after, 1250);
    assert_eq!(entries[0].reference.as_deref(), Some("pur_1"));
    assert_eq!(entries.iter().map(|e| e.delta).sum::<i64>(), balance(&repo).await, "the ledger adds up");
    assert_eq!(db.count_rows("events").await.unwrap(), 1);
}

async fn plans_can_be_changed(db: Database) {
    let repo = setup(&db).await;
    assert!(repo.set_plan(&tenant(), Plan::Enterprise).await.unwrap());
    assert_eq!(repo.account(&tenant()).await.unwrap().unwrap().1, Plan::Enterprise);
    assert!(!repo.set_plan(&TenantId::from_string("ten_none"), Plan::Pro).await.unwrap());
}

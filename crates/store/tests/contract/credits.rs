use agentry_domain::billing::{CreditRepository, HoldRequest, LedgerEntry, LedgerReason, Purchase};
use agentry_domain::events::EventType;
use agentry_domain::identity::AccountRepository;
use agentry_domain::ids::{CreditHoldId, LedgerEntryId, PurchaseId, TenantId};
use agentry_domain::pagination::Page;
use agentry_domain::tenancy::Plan;
use agentry_store::{AccountStore, CreditStore, Database};
use chrono::{DateTime, Duration, TimeZone, Utc};

crate::contract!(
    a_hold_takes_credits_only_when_they_cover_it,
    a_hold_takes_the_last_credits_down_to_its_minimum,
    concurrent_holds_never_take_the_balance_below_zero,
    released_and_stale_holds_return_their_credits,
    a_hold_grows_by_what_the_balance_pays_or_not_at_all,
    a_purchase_adds_credits_ledger_and_event,
    plans_can_be_changed,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 3, 9, 0, 0).unwrap()
}

fn tenant() -> TenantId {
    TenantId::from_string("ten_1")
}

fn hold(id: &str, amount: i64) -> HoldRequest {
    hold_between(id, amount, amount)
}

fn hold_between(id: &str, minimum: i64, wanted: i64) -> HoldRequest {
    HoldRequest { id: CreditHoldId::from_string(id), tenant_id: tenant(), wanted, minimum, created_at: t0() }
}

async fn held(repo: &CreditStore, request: &HoldRequest) -> Option<i64> {
    repo.hold(request).await.unwrap().map(|h| h.amount)
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
    assert_eq!(held(&repo, &hold("hld_1", 600)).await, Some(600));
    assert_eq!(held(&repo, &hold("hld_2", 401)).await, None);
    assert_eq!(balance(&repo).await, 400);
    assert_eq!(db.count_rows("credit_holds").await.unwrap(), 1);
    assert_eq!(held(&repo, &hold("hld_3", 400)).await, Some(400));
    assert_eq!(balance(&repo).await, 0);
}

async fn a_hold_takes_the_last_credits_down_to_its_minimum(db: Database) {
    let repo = setup(&db).await;
    assert_eq!(held(&repo, &hold("hld_1", 999)).await, Some(999));
    // One credit left: a chat wanting 3 but needing 1 gets that one.
    assert_eq!(held(&repo, &hold_between("hld_2", 2, 3)).await, None, "not even the minimum");
    assert_eq!(held(&repo, &hold_between("hld_3", 1, 3)).await, Some(1));
    assert_eq!(balance(&repo).await, 0);
    assert_eq!(held(&repo, &hold_between("hld_4", 1, 3)).await, None);
    assert_eq!(db.count_rows("credit_holds").await.unwrap(), 2, "refused holds leave no row");
}

async fn concurrent_holds_never_take_the_balance_below_zero(db: Database) {
    let repo = setup(&db).await;
    let tasks = (0..40).map(|i| {
        let repo = repo.clone();
        tokio::spawn(async move { repo.hold(&hold_between(&format!("hld_{i}"), 20, 30)).await.unwrap() })
    });
    let granted = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .filter_map(|r| r.unwrap().map(|h| h.amount))
        .collect::<Vec<_>>();
    // 33 holds of 30, then the last 10 credits are below every minimum of 20.
    assert_eq!(granted.iter().sum::<i64>(), 990, "{granted:?}");
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

async fn a_hold_grows_by_what_the_balance_pays_or_not_at_all(db: Database) {
    let repo = setup(&db).await;
    let hold = repo.hold(&hold("hld_1", 900)).await.unwrap().unwrap();
    assert_eq!(repo.extend_hold(&hold, 50, 10, t0()).await.unwrap(), Some(50));
    assert_eq!(balance(&repo).await, 50);
    assert_eq!(repo.extend_hold(&hold, 80, 60, t0()).await.unwrap(), None, "50 left: below the minimum");
    assert_eq!(balance(&repo).await, 50, "a refused extension changes nothing");
    assert_eq!(
        repo.extend_hold(&hold, 80, 20, t0()).await.unwrap(),
        Some(50),
        "the last credits, down to the minimum"
    );
    assert_eq!(balance(&repo).await, 0);
    // The hold now holds 1000: releasing it returns all of it.
    repo.release(&hold.id).await.unwrap();
    assert_eq!(balance(&repo).await, 1000);
    assert_eq!(repo.extend_hold(&hold, 10, 1, t0()).await.unwrap(), None, "a released hold does not grow");
    assert_eq!(balance(&repo).await, 1000, "and takes nothing");

    // A hold that is still working is refreshed, so the stale-hold sweeper leaves it alone.
    let hold = repo.hold(&hold_between("hld_2", 1, 10)).await.unwrap().unwrap();
    let later = t0() + Duration::minutes(30);
    assert_eq!(repo.extend_hold(&hold, 0, 0, later).await.unwrap(), Some(0));
    assert_eq!(repo.release_stale(t0() + Duration::minutes(1)).await.unwrap(), 0, "refreshed");
    assert_eq!(repo.release_stale(later + Duration::minutes(1)).await.unwrap(), 1);
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
    let event = crate::harness::event("evt_1", "ten_1", EventType::BillingPurchaseCompleted);
    assert_eq!(repo.record_purchase(&purchase, &entry, &event).await.unwrap(), 1250);
    let (entries, total) = repo.ledger(&tenant(), Page::default()).await.unwrap();
    assert_eq!(total, 2);
    assert_eq!(entries[0].reason, LedgerReason::Purchase, "newest first");
    assert_eq!(entries[0].balance_after, 1250);
    assert_eq!(entries[0].reference.as_deref(), Some("pur_1"));
    assert_eq!(entries.iter().map(|e| e.delta).sum::<i64>(), balance(&repo).await, "the ledger adds up");
    let (past, total) = repo.ledger(&tenant(), Page::new(Some(3), Some(1)).unwrap()).await.unwrap();
    assert_eq!((past.len(), total), (0, 2), "past the end the total is still counted");
    assert_eq!(db.count_rows("events").await.unwrap(), 1);
}

async fn plans_can_be_changed(db: Database) {
    let repo = setup(&db).await;
    assert!(repo.set_plan(&tenant(), Plan::Enterprise).await.unwrap());
    assert_eq!(repo.account(&tenant()).await.unwrap().unwrap().1, Plan::Enterprise);
    assert!(!repo.set_plan(&TenantId::from_string("ten_none"), Plan::Pro).await.unwrap());
}

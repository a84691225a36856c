//! Billing: overview, ledger, purchases.

use agentry_domain::events::EventType;
use serde_json::json;

use crate::helpers::{json_with_status, spawn, spawn_with};

#[tokio::test]
async fn the_overview_shows_plan_credits_and_limits() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let body = json_with_status(app.get_with_token("/api/v1/billing", &token).await, 200).await;
    assert_eq!(
        body,
        json!({"plan": "starter", "credits": 1000, "rate_limits": {"per_minute": 60, "per_day": 1000}})
    );
    let ledger = json_with_status(app.get_with_token("/api/v1/billing/ledger", &token).await, 200).await;
    assert_eq!(ledger["total"], 1);
    assert_eq!(ledger["entries"][0]["reason"], "welcome_grant");
    assert_eq!(ledger["entries"][0]["delta"], 1000);
}

#[tokio::test]
async fn plan_table_two_is_selectable() {
    let app = spawn_with(|c| c.plan_table = 2).await;
    let token = app.access_token("ada@example.com").await;
    let body = json_with_status(app.get_with_token("/api/v1/billing", &token).await, 200).await;
    assert_eq!(body["rate_limits"], json!({"per_minute": 60, "per_day": 10000}));
}

#[tokio::test]
async fn a_manual_purchase_adds_credits_ledger_and_event() {
    let app = spawn_with(|c| c.payment_provider = agentry_server::config::PaymentProviderKind::Manual).await;
    let token = app.access_token("ada@example.com").await;
    let tenant = app.tenant_of(&token).await;
    let r = app.post_json_with_token("/api/v1/billing/purchases", &token, &json!({"credits": 500})).await;
    let purchase = json_with_status(r, 201).await;
    assert_eq!((purchase["credits"].as_i64(), purchase["balance"].as_i64()), (Some(500), Some(1500)));
    assert_eq!(purchase["status"], "completed");
    let ledger = json_with_status(app.get_with_token("/api/v1/billing/ledger", &token).await, 200).await;
    assert_eq!(ledger["entries"][0]["reason"], "purchase");
    assert_eq!(ledger["entries"][0]["reference"], purchase["id"]);
    let events = app.events(&tenant).await;
    assert_eq!(events[0].event_type(), EventType::BillingPurchaseCompleted);
    assert_eq!(events[0].envelope().unwrap()["data"]["credits"], 500);

    let r = app.post_json_with_token("/api/v1/billing/purchases", &token, &json!({"credits": 0})).await;
    assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "credits");
    assert_eq!(app.events(&tenant).await.len(), 1, "no event for a refused purchase");
}

#[tokio::test]
async fn purchases_are_off_by_default_and_never_made_with_a_key() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let r = app.post_json_with_token("/api/v1/billing/purchases", &token, &json!({"credits": 5})).await;
    assert_eq!(json_with_status(r, 503).await["error"], "unavailable");

    let app = spawn_with(|c| c.payment_provider = agentry_server::config::PaymentProviderKind::Manual).await;
    let token = app.access_token("ada@example.com").await;
    let key = json_with_status(
        app.post_json_with_token(
            "/api/v1/auth/api-keys",
            &token,
            &json!({"name": "b", "scopes": ["billing:read"]}),
        )
        .await,
        201,
    )
    .await;
    let key = key["key"].as_str().unwrap();
    assert_eq!(app.get_with_token("/api/v1/billing", key).await.status(), 200);
    let r = app.post_json_with_token("/api/v1/billing/purchases", key, &json!({"credits": 5})).await;
    assert_eq!(json_with_status(r, 403).await["error"], "forbidden");
}

//! Plan rate limits per tenant, shared across instances on PostgreSQL.

use crate::helpers::{TestApp, json_with_status, spawn, start, test_config, wait_for_fresh_minute};

async fn hit(app: &TestApp, token: &str) -> reqwest::Response {
    app.get_with_token("/api/v1/agents", token).await
}

#[tokio::test]
async fn the_61st_request_of_a_minute_is_429_and_other_tenants_are_unaffected() {
    let app = spawn().await;
    let ada = app.access_token("ada@example.com").await;
    let eve = app.access_token("eve@example.com").await;
    wait_for_fresh_minute().await;
    for i in 1..=60 {
        let r = hit(&app, &ada).await;
        assert_eq!(r.status(), 200, "request {i}");
        assert_eq!(r.headers()["x-ratelimit-limit"], "60");
        assert_eq!(r.headers()["x-ratelimit-remaining"], (60 - i).to_string().as_str());
        let reset: i64 = r.headers()["x-ratelimit-reset"].to_str().unwrap().parse().unwrap();
        assert_eq!(reset % 60, 0, "the reset is the end of the current minute");
    }
    let r = hit(&app, &ada).await;
    assert_eq!(r.headers()["x-ratelimit-remaining"], "0");
    let retry_after: u64 = r.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after));
    let body = json_with_status(r, 429).await;
    assert_eq!(body["error"], "rate_limit_exceeded");
    assert_eq!(body["retry_after"].as_u64(), Some(retry_after));

    assert_eq!(hit(&app, &eve).await.status(), 200, "another tenant has its own budget");
}

/// Two instances on one PostgreSQL database enforce one limit together.
#[tokio::test]
async fn two_instances_on_one_postgresql_database_share_the_limit() {
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    let configure = |dir: &tempfile::TempDir| {
        let mut c = test_config(dir);
        c.database_url = url.clone();
        c.auto_migrate = Some(true);
        c
    };
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start(configure(&dir_a), dir_a).await;
    let b = start(configure(&dir_b), dir_b).await;
    let token = a.access_token("ada@example.com").await;
    wait_for_fresh_minute().await;
    for i in 0..60 {
        let app = if i % 2 == 0 { &a } else { &b };
        assert_eq!(hit(app, &token).await.status(), 200, "request {}", i + 1);
    }
    assert_eq!(hit(&a, &token).await.status(), 429);
    assert_eq!(hit(&b, &token).await.status(), 429);
}

#[tokio::test]
async fn an_enterprise_tenant_is_not_limited() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let tenant = app.tenant_of(&token).await;
    use agentry_domain::billing::CreditRepository as _;
    agentry_store::CreditStore::new(app.db.clone())
        .set_plan(
            &agentry_domain::ids::TenantId::from_string(tenant),
            agentry_domain::tenancy::Plan::Enterprise,
        )
        .await
        .unwrap();
    for _ in 0..70 {
        let r = hit(&app, &token).await;
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("x-ratelimit-limit").is_none());
    }
}

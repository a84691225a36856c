//! Plan rate limits per tenant, shared across instances on PostgreSQL.

use agentry_domain::time::Clock as _;

use crate::helpers::{
    TestApp, json_with_status, minute_clock, spawn, spawn_with_clock, start_with, test_config,
};

async fn hit(app: &TestApp, token: &str) -> reqwest::Response {
    app.get_with_token("/api/v1/agents", token).await
}

#[tokio::test]
async fn the_61st_request_of_a_minute_is_429_and_other_tenants_are_unaffected() {
    let app = spawn_with_clock(|_| {}).await;
    let ada = app.access_token("ada@example.com").await;
    let eve = app.access_token("eve@example.com").await;
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

    // The next minute brings a new budget.
    app.clock().advance(chrono::Duration::seconds(60));
    assert_eq!(hit(&app, &ada).await.status(), 200);
}

#[tokio::test]
async fn when_the_day_is_spent_the_headers_describe_the_day() {
    let app = spawn_with_clock(|_| {}).await;
    let ada = app.access_token("ada@example.com").await;
    // 1,000 a day on Starter: 16 minutes of 60, then 40 more.
    for minute in 0..16 {
        for _ in 0..60 {
            if hit(&app, &ada).await.status() != 200 {
                panic!("refused in minute {minute}");
            }
        }
        app.clock().advance(chrono::Duration::seconds(60));
    }
    for _ in 0..40 {
        assert_eq!(hit(&app, &ada).await.status(), 200);
    }
    let r = hit(&app, &ada).await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["x-ratelimit-limit"], "1000", "the day's limit");
    assert_eq!(r.headers()["x-ratelimit-remaining"], "0");
    let reset: i64 = r.headers()["x-ratelimit-reset"].to_str().unwrap().parse().unwrap();
    assert_eq!(reset % 86_400, 0, "the end of the UTC day");
    let retry_after: i64 = r.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert_eq!(reset - app.clock().now().timestamp(), retry_after);
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
    // One clock for both: the same minute window, whatever the wall clock does.
    let clock = minute_clock();
    let a = start_with(configure(&dir_a), dir_a, Some(clock.clone())).await;
    let b = start_with(configure(&dir_b), dir_b, Some(clock)).await;
    let token = a.access_token("ada@example.com").await;
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

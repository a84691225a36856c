use serde_json::json;

use crate::helpers::{json_with_status, spawn, start, test_config};

#[tokio::test]
async fn healthz_and_readyz_answer() {
    let app = spawn().await;
    let body = json_with_status(app.client.get(app.url("/healthz")).send().await.unwrap(), 200).await;
    assert_eq!(body["status"], "ok");
    let body = json_with_status(app.client.get(app.url("/readyz")).send().await.unwrap(), 200).await;
    assert_eq!(body["status"], "ready");
}

#[tokio::test]
async fn every_response_carries_a_request_id_and_echoes_a_given_one() {
    let app = spawn().await;
    let r = app.client.get(app.url("/healthz")).send().await.unwrap();
    let generated = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(generated.len(), 26);
    let r = app.client.get(app.url("/no/such/route")).header("x-request-id", "abc-123").send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.headers()["x-request-id"], "abc-123");
    // A header that could smuggle text into logs is replaced, not echoed.
    let r = app.client.get(app.url("/healthz")).header("x-request-id", "a b\tc").send().await.unwrap();
    assert_ne!(r.headers()["x-request-id"], "a b\tc");
}

#[tokio::test]
async fn openapi_document_lists_the_routes_and_the_docs_page_is_served() {
    let app = spawn().await;
    let doc =
        json_with_status(app.client.get(app.url("/api/v1/openapi.json")).send().await.unwrap(), 200).await;
    assert_eq!(doc["openapi"], "3.1.0");
    for path in
        ["/api/v1/auth/register", "/api/v1/auth/login", "/api/v1/auth/me", "/api/v1/auth/refresh", "/healthz"]
    {
        assert!(doc["paths"].get(path).is_some(), "{path} missing from the OpenAPI document");
    }
    let docs = app.client.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(docs.status(), 200);
    assert!(docs.text().await.unwrap().contains("swagger"));
}

#[tokio::test]
async fn data_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(&dir);
    let db_url = config.database_url.clone();
    let first = start(config, tempfile::tempdir().unwrap()).await;
    assert_eq!(first.register("keep@example.com", None).await.status(), 201);
    first.handle.stop(true).await;

    let mut config = test_config(&dir);
    config.database_url = db_url;
    let second = start(config, dir).await;
    assert_eq!(second.login("keep@example.com", "correct horse battery").await.status(), 200);
    assert_eq!(second.register("keep@example.com", None).await.status(), 409);
}

#[tokio::test]
async fn a_graceful_stop_lets_in_flight_requests_finish() {
    let app = spawn().await;
    assert_eq!(app.register("drain@example.com", None).await.status(), 201);
    // A login spends a full argon2id verification: long enough to be in flight during the stop.
    let in_flight = tokio::spawn({
        let client = app.client.clone();
        let url = app.url("/api/v1/auth/login");
        async move {
            client
                .post(url)
                .form(&[("username", "drain@example.com"), ("password", "correct horse battery")])
                .send()
                .await
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    app.handle.stop(true).await;
    let response = in_flight.await.unwrap().expect("the in-flight request was answered");
    assert_eq!(response.status(), 200);
    assert!(app.client.get(app.url("/healthz")).send().await.is_err(), "no new connections after the stop");
}

/// The whole account flow on PostgreSQL, when a test database is configured (always in CI).
#[tokio::test]
async fn the_account_flow_runs_on_postgresql() {
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(&dir);
    config.database_url = url;
    config.auto_migrate = Some(true);
    let app = start(config, dir).await;

    let body = json_with_status(app.client.get(app.url("/readyz")).send().await.unwrap(), 200).await;
    assert_eq!(body["status"], "ready");
    let token = app.signed_in("pg@example.com").await;
    assert_eq!(app.register("PG@example.com", None).await.status(), 409);
    let access = token["access_token"].as_str().unwrap();
    let me = json_with_status(app.get_with_token("/api/v1/auth/me", access).await, 200).await;
    assert_eq!(me["tenants"][0]["role"], "owner");
    let r = app.post_json("/api/v1/auth/refresh", &json!({"refresh_token": token["refresh_token"]})).await;
    assert_eq!(r.status(), 200);
    let r = app.post_json("/api/v1/auth/refresh", &json!({"refresh_token": token["refresh_token"]})).await;
    assert_eq!(r.status(), 401);
}

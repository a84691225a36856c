//! Self-service API keys and the principal behind every request.

use agentry_domain::time::Clock as _;
use chrono::Duration;
use serde_json::{Value, json};

use crate::helpers::{TestApp, json_with_status, spawn};

async fn create_key(app: &TestApp, token: &str, body: Value) -> Value {
    json_with_status(app.post_json_with_token("/api/v1/auth/api-keys", token, &body).await, 201).await
}

async fn list_keys(app: &TestApp, token: &str) -> Vec<Value> {
    let body = json_with_status(app.get_with_token("/api/v1/auth/api-keys", token).await, 200).await;
    body["items"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_key_authenticates_as_its_user_in_its_tenant_and_records_its_use() {
    let app = spawn().await;
    let jwt = app.access_token("ada@example.com").await;
    let me_by_jwt = json_with_status(app.get_with_token("/api/v1/auth/me", &jwt).await, 200).await;

    let created =
        create_key(&app, &jwt, json!({"name": "ci", "scopes": ["agents:read", "workflows:execute"]})).await;
    let key = created["key"].as_str().unwrap();
    assert!(key.starts_with("agk_") && key.len() == 44, "{key}");
    assert!(key[4..].chars().all(|c| c.is_ascii_alphanumeric()));
    assert_eq!(created["name"], "ci");
    assert_eq!(created["scopes"], json!(["agents:read", "workflows:execute"]));
    assert!(created["expires_at"].is_null());
    assert!(created["id"].as_str().unwrap().starts_with("key_"));

    let listed = list_keys(&app, &jwt).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["key_prefix"], &key[..12]);
    assert!(listed[0].get("key").is_none(), "the full key is never shown again");
    assert!(listed[0]["last_used_at"].is_null());

    let me_by_key = json_with_status(app.get_with_token("/api/v1/auth/me", key).await, 200).await;
    assert_eq!(me_by_key, me_by_jwt);
    let last_used = list_keys(&app, &jwt).await[0]["last_used_at"].clone();
    assert!(last_used.is_string(), "last_used_at moves on use: {last_used}");
}

#[tokio::test]
async fn a_key_cannot_manage_keys() {
    let app = spawn().await;
    let jwt = app.access_token("ada@example.com").await;
    let created =
        create_key(&app, &jwt, json!({"name": "all", "scopes": ["agents:read", "agents:write"]})).await;
    let key = created["key"].as_str().unwrap();
    let r = app
        .post_json_with_token("/api/v1/auth/api-keys", key, &json!({"name": "x", "scopes": ["agents:read"]}))
        .await;
    assert_eq!(json_with_status(r, 403).await["error"], "forbidden");
    assert_eq!(app.get_with_token("/api/v1/auth/api-keys", key).await.status(), 403);
    let path = format!("/api/v1/auth/api-keys/{}", created["id"].as_str().unwrap());
    assert_eq!(app.delete_with_token(&path, key).await.status(), 403);
}

#[tokio::test]
async fn a_revoked_key_gets_401() {
    let app = spawn().await;
    let jwt = app.access_token("ada@example.com").await;
    let created = create_key(&app, &jwt, json!({"name": "ci", "scopes": ["agents:read"]})).await;
    let key = created["key"].as_str().unwrap();
    assert_eq!(app.get_with_token("/api/v1/auth/me", key).await.status(), 200);

    let path = format!("/api/v1/auth/api-keys/{}", created["id"].as_str().unwrap());
    let body = json_with_status(app.delete_with_token(&path, &jwt).await, 200).await;
    assert_eq!(body["success"], true);
    assert!(body["message"].is_string());

    let body = json_with_status(app.get_with_token("/api/v1/auth/me", key).await, 401).await;
    assert_eq!(body["error"], "unauthorized");
    assert!(list_keys(&app, &jwt).await.is_empty());
    assert_eq!(app.delete_with_token(&path, &jwt).await.status(), 404, "already revoked");
}

#[tokio::test]
async fn an_expired_key_gets_401() {
    let app = crate::helpers::spawn_with_clock(|_| {}).await;
    let jwt = app.access_token("ada@example.com").await;
    let expires_at = (app.clock().now() + Duration::seconds(90)).to_rfc3339();
    let created =
        create_key(&app, &jwt, json!({"name": "short", "scopes": ["agents:read"], "expires_at": expires_at}))
            .await;
    let key = created["key"].as_str().unwrap();
    assert!(created["expires_at"].is_string());
    assert_eq!(app.get_with_token("/api/v1/auth/me", key).await.status(), 200, "valid before expiry");
    app.clock().advance(Duration::seconds(91));
    assert_eq!(
        json_with_status(app.get_with_token("/api/v1/auth/me", key).await, 401).await["error"],
        "unauthorized"
    );
}

#[tokio::test]
async fn another_user_can_neither_see_nor_revoke_your_keys() {
    let app = spawn().await;
    let ada = app.access_token("ada@example.com").await;
    let eve = app.access_token("eve@example.com").await;
    let created = create_key(&app, &ada, json!({"name": "ci", "scopes": ["agents:read"]})).await;
    assert!(list_keys(&app, &eve).await.is_empty());
    let path = format!("/api/v1/auth/api-keys/{}", created["id"].as_str().unwrap());
    assert_eq!(json_with_status(app.delete_with_token(&path, &eve).await, 404).await["error"], "not_found");
    assert_eq!(app.get_with_token("/api/v1/auth/me", created["key"].as_str().unwrap()).await.status(), 200);
}

#[tokio::test]
async fn a_tenant_the_caller_is_not_a_member_of_is_403() {
    let app = spawn().await;
    let ada = app.access_token("ada@example.com").await;
    let eve = app.access_token("eve@example.com").await;
    let eve_me = json_with_status(app.get_with_token("/api/v1/auth/me", &eve).await, 200).await;
    let eve_tenant = eve_me["tenants"][0]["id"].as_str().unwrap();
    let path = format!("/api/v1/auth/api-keys?tenant_id={eve_tenant}");
    assert_eq!(json_with_status(app.get_with_token(&path, &ada).await, 403).await["error"], "forbidden");
    assert_eq!(app.get_with_token(&path, &eve).await.status(), 200, "a member may name their tenant");

    let key = create_key(&app, &ada, json!({"name": "ci", "scopes": ["agents:read"]})).await;
    let path = format!("/api/v1/auth/me?tenant_id={eve_tenant}");
    assert_eq!(app.get_with_token(&path, key["key"].as_str().unwrap()).await.status(), 403);
}

#[tokio::test]
async fn bad_key_requests_are_validation_errors() {
    let app = spawn().await;
    let jwt = app.access_token("ada@example.com").await;
    let cases = [
        (json!({"scopes": ["agents:read"]}), "name"),
        (json!({"name": "x"}), "scopes"),
        (json!({"name": "x", "scopes": []}), "scopes"),
        (json!({"name": "x", "scopes": ["agents:delete"]}), "scopes"),
        (json!({"name": "x", "scopes": ["billing:write"]}), "scopes"),
        (json!({"name": "x", "scopes": ["agents:read"], "expires_at": "2001-01-01T00:00:00Z"}), "expires_at"),
        (json!({"name": "x", "scopes": ["agents:read"], "expires_at": "tomorrow"}), "expires_at"),
        (json!({"name": "x", "scopes": "agents:read"}), "scopes"),
    ];
    for (body, field) in cases {
        let r = app.post_json_with_token("/api/v1/auth/api-keys", &jwt, &body).await;
        let err = json_with_status(r, 422).await;
        assert_eq!(err["details"][0]["field"], field, "{body}");
    }
}

#[tokio::test]
async fn a_made_up_key_is_401() {
    let app = spawn().await;
    let fake = format!("agk_{}", "A".repeat(40));
    assert_eq!(app.get_with_token("/api/v1/auth/me", &fake).await.status(), 401);
}

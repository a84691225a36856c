//! Agents: CRUD, validation, tenant isolation, scopes, and their events.

use serde_json::{Value, json};

use crate::helpers::{TestApp, json_with_status, spawn};

const BODY: &str = r#"{"name": "Support bot", "type": "support", "description": "Answers tickets",
    "memory_types": ["semantic", "episodic"], "config": {"model": "gpt-test", "temperature": 0.7}}"#;

fn body() -> Value {
    serde_json::from_str(BODY).unwrap()
}

#[tokio::test]
async fn agents_are_created_read_listed_updated_and_deleted_with_the_spec_shapes() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let tenant = app.tenant_of(&token).await;

    let mut request = body();
    // Fields a caller may not set are ignored.
    request["id"] = json!("agt_mine");
    request["tenant_id"] = json!("ten_other");
    request["created_at"] = json!("2000-01-01T00:00:00Z");
    let created = app.create_agent(&token, request).await;
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("agt_") && id != "agt_mine");
    assert_eq!(created["tenant_id"], tenant.as_str());
    assert_eq!(created["name"], "Support bot");
    assert_eq!(created["type"], "support");
    assert_eq!(created["status"], "active");
    assert_eq!(created["memory_types"], json!(["semantic", "episodic"]));
    assert_eq!(created["config"]["temperature"], 0.7);
    assert_ne!(created["created_at"], "2000-01-01T00:00:00.000Z");

    let path = format!("/api/v1/agents/{id}");
    assert_eq!(json_with_status(app.get_with_token(&path, &token).await, 200).await, created);

    let patched = app
        .patch_json_with_token(&path, &token, &json!({"status": "paused", "config": {"temperature": 1.5}}))
        .await;
    let patched = json_with_status(patched, 200).await;
    assert_eq!(patched["status"], "paused");
    assert_eq!(patched["config"]["temperature"], 1.5);
    assert_eq!(patched["config"]["model"], "gpt-test", "config keys not named keep their value");
    assert_eq!(patched["name"], "Support bot");

    let r = app.client.delete(app.url(&path)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(app.get_with_token(&path, &token).await.status(), 404);
}

#[tokio::test]
async fn lists_paginate_with_a_total() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    for i in 0..5 {
        app.create_agent(&token, json!({"name": format!("agent {i}")})).await;
    }
    let page =
        json_with_status(app.get_with_token("/api/v1/agents?page=2&per_page=2", &token).await, 200).await;
    assert_eq!(
        (page["total"].as_u64(), page["page"].as_u64(), page["per_page"].as_u64()),
        (Some(5), Some(2), Some(2))
    );
    let names: Vec<&str> =
        page["agents"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["agent 2", "agent 3"]);
    let all = json_with_status(app.get_with_token("/v1/agents", &token).await, 200).await;
    assert_eq!(all["agents"].as_array().unwrap().len(), 5);
    assert_eq!(all["per_page"], 20);

    for bad in ["?per_page=101", "?page=0", "?page=abc", "?per_page=-1"] {
        let r = app.get_with_token(&format!("/api/v1/agents{bad}"), &token).await;
        assert_eq!(json_with_status(r, 422).await["error"], "validation_error", "{bad}");
    }
}

#[tokio::test]
async fn invalid_agents_are_422_naming_the_field() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let cases = [
        (json!({"name": "x", "config": {"temperature": 9}}), "config.temperature"),
        (json!({"type": "support"}), "name"),
        (json!({"name": ""}), "name"),
        (json!({"name": "x".repeat(101)}), "name"),
        (json!({"name": "x", "type": "robot"}), "type"),
        (json!({"name": "x", "memory_types": ["dreams"]}), "memory_types"),
        (json!({"name": "x", "config": {"max_tokens": 0}}), "config.max_tokens"),
        (json!({"name": 5}), "name"),
    ];
    for (body, field) in cases {
        let r = app.post_json_with_token("/api/v1/agents", &token, &body).await;
        let err = json_with_status(r, 422).await;
        assert_eq!(err["details"][0]["field"], field, "{body}");
    }
    let created = app.create_agent(&token, json!({"name": "ok"})).await;
    let path = format!("/api/v1/agents/{}", created["id"].as_str().unwrap());
    let r = app.patch_json_with_token(&path, &token, &json!({"status": "sleeping"})).await;
    assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "status");
    assert!(
        app.events(created["tenant_id"].as_str().unwrap()).await.len() == 1,
        "no event for refused changes"
    );
}

async fn two_tenants() -> (TestApp, String, String, String) {
    let app = spawn().await;
    let ada = app.access_token("ada@example.com").await;
    let eve = app.access_token("eve@example.com").await;
    let agent = app.create_agent(&ada, body()).await;
    let id = agent["id"].as_str().unwrap().to_owned();
    (app, ada, eve, id)
}

#[tokio::test]
async fn another_tenants_agent_is_404_on_every_route() {
    let (app, _ada, eve, id) = two_tenants().await;
    let path = format!("/api/v1/agents/{id}");
    assert_eq!(app.get_with_token(&path, &eve).await.status(), 404);
    assert_eq!(app.patch_json_with_token(&path, &eve, &json!({"name": "mine"})).await.status(), 404);
    assert_eq!(app.client.delete(app.url(&path)).bearer_auth(&eve).send().await.unwrap().status(), 404);
    let chat = app.post_json_with_token(&format!("{path}/chat"), &eve, &json!({"message": "hi"})).await;
    assert_eq!(json_with_status(chat, 404).await["error"], "not_found");
    let history = app.get_with_token(&format!("{path}/sessions/ses_x/messages"), &eve).await;
    assert_eq!(history.status(), 404);
    let listed = json_with_status(app.get_with_token("/api/v1/agents", &eve).await, 200).await;
    assert_eq!(listed["total"], 0);
}

#[tokio::test]
async fn a_read_only_key_lists_agents_and_is_refused_creation() {
    let (app, ada, _eve, _id) = two_tenants().await;
    let key = json_with_status(
        app.post_json_with_token(
            "/api/v1/auth/api-keys",
            &ada,
            &json!({"name": "reader", "scopes": ["agents:read"]}),
        )
        .await,
        201,
    )
    .await;
    let key = key["key"].as_str().unwrap();
    let listed = json_with_status(app.get_with_token("/api/v1/agents", key).await, 200).await;
    assert_eq!(listed["total"], 1);
    let r = app.post_json_with_token("/api/v1/agents", key, &body()).await;
    assert_eq!(json_with_status(r, 403).await["error"], "forbidden");
    let chat_path = format!("/api/v1/agents/{}/chat", listed["agents"][0]["id"].as_str().unwrap());
    assert_eq!(app.post_json_with_token(&chat_path, key, &json!({"message": "hi"})).await.status(), 403);
}

#[tokio::test]
async fn creating_and_updating_an_agent_writes_its_event() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let tenant = app.tenant_of(&token).await;
    let agent = app.create_agent(&token, body()).await;
    let path = format!("/api/v1/agents/{}", agent["id"].as_str().unwrap());
    assert_eq!(app.patch_json_with_token(&path, &token, &json!({"name": "Renamed"})).await.status(), 200);

    let events = app.events(&tenant).await;
    assert_eq!(events.len(), 2);
    let created = events[1].envelope().unwrap();
    assert_eq!(created["type"], "agent.created");
    assert_eq!(created["tenant_id"], tenant.as_str());
    assert_eq!(created["api_version"], "2026-11-01");
    assert!(created["id"].as_str().unwrap().starts_with("evt_"));
    assert!(created["created_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(created["data"]["id"], agent["id"]);
    let updated = events[0].envelope().unwrap();
    assert_eq!(updated["type"], "agent.updated");
    assert_eq!(updated["data"]["agent"]["name"], "Renamed");
    assert_eq!(updated["data"]["changed"], json!(["name"]));
}

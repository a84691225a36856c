//! The OpenAI-compatible endpoint: completions and models in OpenAI's shapes, its errors in
//! OpenAI's error shape, stateless calls and `X-Session-Id`, and OpenAI's own Python client.

use serde_json::{Value, json};

use crate::helpers::{TestApp, json_with_status, on_both_databases, spawn, spawn_with_clock};

async fn new_key(app: &TestApp, token: &str) -> String {
    let body = json!({"name": "openai", "scopes": ["agents:read", "agents:write"]});
    let created =
        json_with_status(app.post_json_with_token("/api/v1/auth/api-keys", token, &body).await, 201).await;
    created["key"].as_str().unwrap().to_owned()
}

async fn new_agent(app: &TestApp, token: &str, name: &str) -> String {
    app.create_agent(token, json!({"name": name, "config": {"system_prompt": "You are terse."}})).await["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn complete(app: &TestApp, key: &str, body: Value, session: Option<&str>) -> reqwest::Response {
    let mut request = app.client.post(app.url("/v1/chat/completions")).bearer_auth(key).json(&body);
    if let Some(session) = session {
        request = request.header("x-session-id", session);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn a_completion_in_openai_shape_is_charged_and_stored_only_when_a_session_is_named() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let key = new_key(&app, &token).await;
            let agent = new_agent(&app, &token, "Helper").await;
            let body = json!({"model": "agent:Helper", "messages": [
                {"role": "user", "content": "My name is Ada."},
                {"role": "assistant", "content": "Hello Ada."},
                {"role": "user", "content": [{"type": "text", "text": "What is my name?"}]},
            ], "max_tokens": 500});
            let done = json_with_status(complete(&app, &key, body.clone(), None).await, 200).await;
            assert_eq!(done["object"], "chat.completion");
            assert_eq!(done["model"], "agent:Helper");
            assert!(done["id"].as_str().unwrap().starts_with("chatcmpl-"));
            let choice = &done["choices"][0];
            assert_eq!(choice["message"]["role"], "assistant");
            // The built-in responder reflects the last message and the client's earlier ones.
            let content = choice["message"]["content"].as_str().unwrap();
            assert!(content.contains("What is my name?") && content.contains("My name is Ada."), "{content}");
            assert!(["stop", "length"].contains(&choice["finish_reason"].as_str().unwrap()));
            let usage = &done["usage"];
            assert_eq!(
                usage["total_tokens"].as_u64().unwrap(),
                usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
            );
            // Stateless: charged (one ledger entry), nothing of the conversation stored.
            let ledger =
                json_with_status(app.get_with_token("/api/v1/billing/ledger", &token).await, 200).await;
            assert_eq!(ledger["entries"][0]["reason"], "chat_usage", "{ledger}");
            assert_eq!(app.db.count_rows("chat_messages").await.unwrap(), 0);
            assert_eq!(app.db.count_rows("credit_holds").await.unwrap(), 0);

            // With X-Session-Id: stored as chat stores it.
            let by_id = json!({"model": agent, "messages": [{"role": "user", "content": "Remember me"}]});
            json_with_status(complete(&app, &key, by_id, Some("oa-1")).await, 200).await;
            let path = format!("/api/v1/agents/{agent}/sessions/oa-1/messages");
            let history = json_with_status(app.get_with_token(&path, &token).await, 200).await;
            assert_eq!(history["total"], 2);
            assert_eq!(history["messages"][0]["content"], "Remember me");
        },
    )
    .await;
}

#[tokio::test]
async fn models_are_the_active_agents_of_the_tenant() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let key = new_key(&app, &token).await;
    let first = new_agent(&app, &token, "One").await;
    let paused = new_agent(&app, &token, "Two").await;
    let path = format!("/api/v1/agents/{paused}");
    assert_eq!(app.patch_json_with_token(&path, &token, &json!({"status": "paused"})).await.status(), 200);
    let other = app.access_token("bob@example.com").await;
    new_agent(&app, &other, "Bob's").await;
    let list = json_with_status(app.get_with_token("/api/v1/models", &key).await, 200).await;
    assert_eq!(list["object"], "list");
    let data = list["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{list}");
    assert_eq!(data[0]["id"], first.as_str());
    assert_eq!(data[0]["object"], "model");
    assert!(data[0]["created"].as_i64().unwrap() > 1_700_000_000);
}

#[tokio::test]
async fn errors_have_openai_shape_with_our_statuses() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let key = new_key(&app, &token).await;
    let bob = app.access_token("bob@example.com").await;
    let bobs = new_agent(&app, &bob, "Bob's").await;
    let error = |v: &Value| v["error"].clone();

    let r = complete(&app, "agk_wrong", json!({"model": "x", "messages": []}), None).await;
    let e = error(&json_with_status(r, 401).await);
    assert_eq!(
        (e["type"].as_str(), e["code"].as_str()),
        (Some("invalid_request_error"), Some("invalid_api_key"))
    );
    assert!(e["message"].is_string() && e.get("param").is_some());

    // Another tenant's agent is no model of this one.
    let r =
        complete(&app, &key, json!({"model": bobs, "messages": [{"role": "user", "content": "hi"}]}), None)
            .await;
    assert_eq!(error(&json_with_status(r, 404).await)["code"], "model_not_found");

    for (body, param) in [
        (json!({"messages": [{"role": "user", "content": "hi"}]}), "model"),
        (json!({"model": "agent:x", "messages": []}), "messages"),
        (json!({"model": "agent:x", "messages": [{"role": "robot", "content": "hi"}]}), "messages[0].role"),
        (json!({"model": "agent:x", "messages": [{"role": "user", "content": 5}]}), "messages[0].content"),
        (
            json!({"model": "agent:x", "messages": [{"role": "user", "content": "hi"}], "temperature": 3}),
            "temperature",
        ),
        (
            json!({"model": "agent:x", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}),
            "max_tokens",
        ),
        (
            json!({"model": "agent:x", "messages": [{"role": "user", "content": "hi"}], "tools": [{}]}),
            "tools[0].type",
        ),
        (
            json!({"model": "agent:x", "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "has space"}}]}),
            "tools[0].function.name",
        ),
        (
            json!({"model": "agent:x", "messages": [{"role": "tool", "content": "{}"}]}),
            "messages[0].tool_call_id",
        ),
        (
            json!({"model": "agent:x", "messages": [{"role": "user", "content": "hi", "tool_call_id": ""}]}),
            "messages[0].tool_call_id",
        ),
        (
            json!({"model": "agent:x", "messages": [{"role": "user", "content": "hi"}], "tool_choice": 5}),
            "tool_choice",
        ),
        (
            json!({"model": "agent:x", "messages": [{"role": "user", "content": "hi", "tool_calls": []}]}),
            "messages[0].tool_calls",
        ),
    ] {
        let e = error(&json_with_status(complete(&app, &key, body, None).await, 422).await);
        assert_eq!(
            (e["type"].as_str(), e["param"].as_str()),
            (Some("invalid_request_error"), Some(param)),
            "{e}"
        );
    }
    let r = complete(
        &app,
        &key,
        json!({"model": "agent:x", "messages": [{"role": "user", "content": "hi"}]}),
        Some("bad id"),
    )
    .await;
    assert_eq!(error(&json_with_status(r, 422).await)["param"], "X-Session-Id");
    // The rest of the API keeps its own envelope.
    let r = app.get_with_token("/api/v1/agents/agt_nope", &key).await;
    assert_eq!(json_with_status(r, 404).await["error"], "not_found");
}

/// The real `openai` Python package: plain, streamed, a client tool round trip (plain and
/// streamed), 401, 404, 402, and a 429 whose `Retry-After` it honours; then docs/agents.md's
/// example as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_python_client_works_unchanged() {
    let Some((root, python)) = crate::helpers::python_tools("the openai client suite") else { return };
    // The clock stands at the minute's last second: a 429 says `Retry-After: 1`.
    let app = spawn_with_clock(|_| {}).await;
    app.clock().advance(chrono::Duration::seconds(59));
    let token = app.access_token("ada@example.com").await;
    let key = new_key(&app, &token).await;
    let agent = new_agent(&app, &token, "Helper").await;
    let poor = app.access_token("poor@example.com").await;
    let poor_key = new_key(&app, &poor).await;
    let poor_agent = new_agent(&app, &poor, "Poor").await;
    let poor_tenant = app.tenant_of(&poor).await;
    agentry_store::test_support::execute(
        &app.db,
        &format!("UPDATE tenants SET credits = 0 WHERE id = '{poor_tenant}'"),
    )
    .await
    .unwrap();
    let limited = app.access_token("limited@example.com").await;
    let limited_key = new_key(&app, &limited).await;
    let config = json!({
        "base_url": app.url("/api/v1"), "key": key, "agent": agent, "agent_name": "Helper",
        "poor_key": poor_key, "poor_agent": poor_agent, "limited_key": limited_key, "retry_after": 1,
    });
    let run = tokio::process::Command::new(python)
        .arg(root.join("scripts/openai_suite.py"))
        .arg(config.to_string())
        .output()
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{out}\n{}", String::from_utf8_lossy(&run.stderr));
    assert!(out.contains("all checks passed"), "{out}");
}

/// `agents:write` is the chat permission on both chat routes (docs/agents.md); `agents:read`
/// alone chats on neither.
#[tokio::test]
async fn the_chat_scope_is_the_same_on_both_chat_routes() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let agent = new_agent(&app, &token, "Helper").await;
    let key = |scopes: Value| {
        let app = &app;
        let token = token.clone();
        async move {
            let body = json!({"name": "scoped", "scopes": scopes});
            let created =
                json_with_status(app.post_json_with_token("/api/v1/auth/api-keys", &token, &body).await, 201)
                    .await;
            created["key"].as_str().unwrap().to_owned()
        }
    };
    let writer = key(json!(["agents:write"])).await;
    let reader = key(json!(["agents:read"])).await;
    let completion = |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
    for model in [agent.as_str(), "agent:Helper"] {
        assert_eq!(complete(&app, &writer, completion(model), None).await.status(), 200, "{model}");
        assert_eq!(complete(&app, &reader, completion(model), None).await.status(), 403, "{model}");
    }
    let chat = format!("/api/v1/agents/{agent}/chat");
    let message = json!({"message": "hi"});
    assert_eq!(app.post_json_with_token(&chat, &writer, &message).await.status(), 200);
    assert_eq!(app.post_json_with_token(&chat, &reader, &message).await.status(), 403);
}

//! Chat: replies with usage, sessions, credits under concurrency, events, and model errors.

use agentry_domain::events::EventType;
use secrecy::SecretString;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{
    TestApp, json_with_status, on_both_databases, slow_model, spawn, spawn_with, use_model,
};

async fn agent(app: &TestApp, token: &str) -> String {
    let a = app.create_agent(token, json!({"name": "Helper", "memory_types": ["episodic"]})).await;
    a["id"].as_str().unwrap().to_owned()
}

async fn chat(app: &TestApp, token: &str, agent: &str, body: Value) -> reqwest::Response {
    app.post_json_with_token(&format!("/api/v1/agents/{agent}/chat"), token, &body).await
}

async fn balance(app: &TestApp, token: &str) -> i64 {
    json_with_status(app.get_with_token("/api/v1/billing", token).await, 200).await["credits"]
        .as_i64()
        .unwrap()
}

#[tokio::test]
async fn two_messages_in_one_session_grow_the_prompt_and_charge_what_they_show() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let agent = agent(&app, &token).await;
    let before = balance(&app, &token).await;

    let first =
        json_with_status(chat(&app, &token, &agent, json!({"message": "My name is Ada."})).await, 200).await;
    assert_eq!(first["role"], "assistant");
    assert!(first["id"].as_str().unwrap().starts_with("msg_"));
    assert!(first["content"].as_str().unwrap().contains("built-in responder"));
    let session = first["session_id"].as_str().unwrap();
    assert!(session.starts_with("ses_"));
    let usage = &first["usage"];
    assert_eq!(
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap(),
        usage["total_tokens"].as_u64().unwrap()
    );
    let charged = first["credits"]["charged"].as_i64().unwrap();
    assert!(charged >= 1);
    assert_eq!(first["credits"]["remaining"].as_i64().unwrap(), before - charged);

    let second = json_with_status(
        chat(&app, &token, &agent, json!({"message": "What is my name?", "session_id": session})).await,
        200,
    )
    .await;
    assert_eq!(second["session_id"], session);
    assert!(second["usage"]["prompt_tokens"].as_u64() > first["usage"]["prompt_tokens"].as_u64());
    assert!(second["content"].as_str().unwrap().contains("My name is Ada."), "it remembers the session");
    let after = balance(&app, &token).await;
    assert_eq!(after, before - charged - second["credits"]["charged"].as_i64().unwrap());

    let history = json_with_status(
        app.get_with_token(&format!("/api/v1/agents/{agent}/sessions/{session}/messages"), &token).await,
        200,
    )
    .await;
    assert_eq!(history["total"], 4);
    let roles: Vec<&str> =
        history["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(history["messages"][0]["content"], "My name is Ada.");
    assert!(history["messages"][0]["usage"].is_null());
    assert_eq!(history["messages"][1]["usage"], first["usage"]);
}

#[tokio::test]
async fn chat_events_carry_the_spec_data_and_the_ledger_records_the_charge() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let tenant = app.tenant_of(&token).await;
    let agent = agent(&app, &token).await;
    let reply = json_with_status(chat(&app, &token, &agent, json!({"message": "hello"})).await, 200).await;

    let events = app.events(&tenant).await;
    let completed = events
        .iter()
        .find(|e| e.event_type() == EventType::AgentMessageCompleted)
        .unwrap()
        .envelope()
        .unwrap();
    let data = &completed["data"];
    assert_eq!(data["agent_id"], agent.as_str());
    assert_eq!(data["conversation_id"], reply["session_id"]);
    assert_eq!(data["message_id"], reply["id"]);
    assert_eq!(data["content"], reply["content"]);
    assert_eq!(data["tokens_used"], reply["usage"]["total_tokens"]);
    assert!(data["latency_ms"].is_u64());
    let created = events.iter().find(|e| e.event_type() == EventType::AgentMessageCreated).unwrap();
    assert_eq!(created.envelope().unwrap()["data"]["content"], "hello");

    let ledger = json_with_status(app.get_with_token("/api/v1/billing/ledger", &token).await, 200).await;
    let entry = &ledger["entries"][0];
    assert_eq!(entry["reason"], "chat_usage");
    assert_eq!(entry["delta"].as_i64().unwrap(), -reply["credits"]["charged"].as_i64().unwrap());
    assert_eq!(entry["reference"], reply["id"]);
}

#[tokio::test]
async fn forty_concurrent_chats_against_a_small_balance_never_overdraw() {
    let app = spawn_with(|c| {
        c.welcome_credits = 15;
        c.chat_max_tokens = 100;
        c.credits_low_threshold = 10;
    })
    .await;
    let token = app.access_token("ada@example.com").await;
    let tenant = app.tenant_of(&token).await;
    let agent = agent(&app, &token).await;
    let chats = (0..40).map(|i| chat(&app, &token, &agent, json!({"message": format!("message {i}")})));
    let statuses: Vec<u16> =
        futures_util::future::join_all(chats).await.iter().map(|r| r.status().as_u16()).collect();
    let ok = statuses.iter().filter(|s| **s == 200).count();
    let refused = statuses.iter().filter(|s| **s == 402).count();
    assert_eq!(ok + refused, 40, "only 200 and 402: {statuses:?}");
    assert_eq!(ok, 15, "each chat costs one credit");

    let final_balance = balance(&app, &token).await;
    assert_eq!(final_balance, 0);
    let ledger =
        json_with_status(app.get_with_token("/api/v1/billing/ledger?per_page=100", &token).await, 200).await;
    let sum: i64 = ledger["entries"].as_array().unwrap().iter().map(|e| e["delta"].as_i64().unwrap()).sum();
    assert_eq!(sum, final_balance, "the ledger adds up");
    // Oldest first, each entry's balance_after is the running sum of the entries up to it.
    let mut running = 0;
    for e in ledger["entries"].as_array().unwrap().iter().rev() {
        running += e["delta"].as_i64().unwrap();
        assert_eq!(e["balance_after"].as_i64().unwrap(), running, "{e}");
        assert!(running >= 0);
    }
    let completed = app
        .events(&tenant)
        .await
        .iter()
        .filter(|e| e.event_type() == EventType::AgentMessageCompleted)
        .count();
    assert_eq!(completed, 15, "events only for the chats that happened");
    let low =
        app.events(&tenant).await.iter().filter(|e| e.event_type() == EventType::BillingCreditsLow).count();
    assert_eq!(low, 1, "the balance crossed the low threshold once");
}

#[tokio::test]
async fn without_credits_chat_is_402_and_nothing_is_written() {
    let app = spawn_with(|c| c.welcome_credits = 0).await;
    let token = app.access_token("ada@example.com").await;
    let tenant = app.tenant_of(&token).await;
    let agent = agent(&app, &token).await;
    let err = json_with_status(chat(&app, &token, &agent, json!({"message": "hello"})).await, 402).await;
    assert_eq!(err["error"], "insufficient_credits");
    assert_eq!(app.events(&tenant).await.len(), 1, "only agent.created");
    assert_eq!(app.db.count_rows("chat_messages").await.unwrap(), 0);
}

#[tokio::test]
async fn chat_input_and_state_are_checked() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let agent = agent(&app, &token).await;
    let r = chat(&app, &token, &agent, json!({})).await;
    assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "message");
    let r = chat(&app, &token, &agent, json!({"message": "x".repeat(32_001)})).await;
    assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "message");
    let r = chat(&app, &token, &agent, json!({"message": "hi", "session_id": "has space"})).await;
    assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "session_id");

    let path = format!("/api/v1/agents/{agent}");
    assert_eq!(app.patch_json_with_token(&path, &token, &json!({"status": "paused"})).await.status(), 200);
    let r = chat(&app, &token, &agent, json!({"message": "hi"})).await;
    assert_eq!(json_with_status(r, 409).await["error"], "conflict");
}

#[tokio::test]
async fn an_openai_compatible_provider_answers_and_its_failures_are_502() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"message": {"role": "assistant", "content": "Hello from the model"}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 1000, "total_tokens": 1030}
        })))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
        .mount(&server)
        .await;
    let uri = server.uri();
    let app = spawn_with(|c| {
        c.llm_provider = agentry_server::config::LlmProvider::Openai;
        c.llm_base_url = uri;
        c.llm_api_key = Some(SecretString::from("sk-test"));
        c.llm_timeout_secs = 5;
    })
    .await;
    let token = app.access_token("ada@example.com").await;
    let agent = agent(&app, &token).await;
    let before = balance(&app, &token).await;
    let ok = json_with_status(chat(&app, &token, &agent, json!({"message": "hi"})).await, 200).await;
    assert_eq!(ok["content"], "Hello from the model");
    assert_eq!(ok["usage"]["total_tokens"], 1030);
    assert_eq!(ok["credits"]["charged"], 2, "ceil(1030 / 1000)");
    assert_eq!(balance(&app, &token).await, before - 2);

    let tenant = app.tenant_of(&token).await;
    let events_before = app.events(&tenant).await.len();
    let err = json_with_status(chat(&app, &token, &agent, json!({"message": "again"})).await, 502).await;
    assert_eq!(err["error"], "upstream_error");
    assert_eq!(app.events(&tenant).await.len(), events_before, "no events for a failed chat");
    assert_eq!(balance(&app, &token).await, before - 2, "a failed call costs nothing");
}

#[tokio::test]
async fn a_chat_whose_client_leaves_mid_answer_still_finishes_and_charges_on_both_databases() {
    // The model takes a while; the client gives up long before. The chat that started must
    // still record its exchange and settle its hold, exactly as if the client had waited.
    let model = slow_model("Late but sure", (30, 1000), std::time::Duration::from_millis(700)).await;
    let uri = model.uri();
    on_both_databases(
        |c| use_model(c, &uri),
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let agent = agent(&app, &token).await;
            let tenant = app.tenant_of(&token).await;
            let before = balance(&app, &token).await;
            let impatient =
                reqwest::Client::builder().timeout(std::time::Duration::from_millis(150)).build().unwrap();
            let gave_up = impatient
                .post(app.url(&format!("/api/v1/agents/{agent}/chat")))
                .bearer_auth(&token)
                .json(&json!({"message": "take your time"}))
                .send()
                .await;
            assert!(gave_up.is_err_and(|e| e.is_timeout()), "the client left before the answer");
            let mut waited = 0;
            while app.db.count_rows("chat_messages").await.unwrap() < 2 {
                assert!(waited < 100, "the exchange was never recorded after its client left");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                waited += 1;
            }
            let events = app.events(&tenant).await;
            let replies =
                events.iter().filter(|e| e.event_type() == EventType::AgentMessageCompleted).count();
            assert_eq!(replies, 1, "the exchange was recorded with its events");
            assert_eq!(balance(&app, &token).await, before - 2, "charged what the model used");
            assert_eq!(
                app.db.count_rows("credit_holds").await.unwrap(),
                0,
                "the hold was settled, not left to expire"
            );
        },
    )
    .await;
}

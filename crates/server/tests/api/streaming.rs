//! Streamed replies: server-sent events read by a real SSE parser, refusals before the stream
//! as JSON, and a client that leaves mid-reply (stored, marked incomplete, charged once).

use std::time::Duration;

use eventsource_stream::{Event, Eventsource as _};
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use crate::helpers::{TestApp, json_with_status, on_both_databases, spawn_with};

async fn agent(app: &TestApp, token: &str) -> String {
    let a = app.create_agent(token, json!({"name": "Helper"})).await;
    a["id"].as_str().unwrap().to_owned()
}

/// Posts a chat asking for a stream with `Accept: text/event-stream` (or `"stream": true`).
async fn stream(app: &TestApp, token: &str, agent: &str, body: Value, by_header: bool) -> reqwest::Response {
    let mut request = app.client.post(app.url(&format!("/api/v1/agents/{agent}/chat"))).bearer_auth(token);
    let body = if by_header {
        request = request.header("accept", "text/event-stream");
        body
    } else {
        let mut body = body;
        body["stream"] = json!(true);
        body
    };
    request.json(&body).send().await.unwrap()
}

async fn events(response: reqwest::Response) -> Vec<Event> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    response.bytes_stream().eventsource().map(|e| e.expect("a well-formed event")).collect().await
}

async fn credits(app: &TestApp, token: &str) -> i64 {
    json_with_status(app.get_with_token("/api/v1/billing", token).await, 200).await["credits"]
        .as_i64()
        .unwrap()
}

#[tokio::test]
async fn a_streamed_reply_is_the_stored_reply_piece_by_piece() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let agent = agent(&app, &token).await;
            for by_header in [false, true] {
                let before = credits(&app, &token).await;
                let body = json!({"message": "Tell me something", "session_id": "s-1"});
                let events = events(stream(&app, &token, &agent, body, by_header).await).await;
                let (last, deltas) = events.split_last().unwrap();
                assert!(deltas.len() > 5, "the built-in responder streams word by word: {events:?}");
                assert!(deltas.iter().all(|e| e.event == "message.delta"));
                let text: String = deltas
                    .iter()
                    .map(|e| {
                        serde_json::from_str::<Value>(&e.data).unwrap()["content"]
                            .as_str()
                            .unwrap()
                            .to_owned()
                    })
                    .collect();
                assert_eq!(last.event, "message.completed");
                let completed: Value = serde_json::from_str(&last.data).unwrap();
                assert_eq!(completed["content"], text.as_str());
                assert_eq!(completed["session_id"], "s-1");
                let charged = completed["credits"]["charged"].as_i64().unwrap();
                assert!(charged >= 1);
                assert_eq!(credits(&app, &token).await, before - charged);
                let history = json_with_status(
                    app.get_with_token(&format!("/api/v1/agents/{agent}/sessions/s-1/messages"), &token)
                        .await,
                    200,
                )
                .await;
                let stored = history["messages"].as_array().unwrap().last().unwrap().clone();
                assert_eq!(stored["content"], text.as_str());
                assert_eq!(stored["id"], completed["id"]);
                assert!(stored.get("incomplete").is_none(), "{stored}");
            }
            assert_eq!(app.db.count_rows("credit_holds").await.unwrap(), 0);
        },
    )
    .await;
}

#[tokio::test]
async fn refusals_before_the_stream_are_json_answers() {
    let app = spawn_with(|c| c.welcome_credits = 0).await;
    let token = app.access_token("ada@example.com").await;
    let agent = agent(&app, &token).await;
    let refused = stream(&app, &token, &agent, json!({"message": "hello"}), true).await;
    assert_eq!(refused.headers()["content-type"], "application/json");
    assert_eq!(json_with_status(refused, 402).await["error"], "insufficient_credits");
    let invalid = stream(&app, &token, &agent, json!({"message": ""}), false).await;
    assert_eq!(json_with_status(invalid, 422).await["details"][0]["field"], "message");
    let invalid = stream(&app, &token, &agent, json!({"message": "hi", "stream": "yes"}), true).await;
    assert_eq!(json_with_status(invalid, 422).await["details"][0]["field"], "stream");
    let missing = stream(&app, &token, "agt_nope", json!({"message": "hello"}), true).await;
    assert_eq!(json_with_status(missing, 404).await["error"], "not_found");
    let anonymous = app
        .client
        .post(app.url(&format!("/api/v1/agents/{agent}/chat")))
        .json(&json!({"message": "hello", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(json_with_status(anonymous, 401).await["error"], "unauthorized");
    assert_eq!(app.db.count_rows("chat_messages").await.unwrap(), 0);
}

/// A model failing after the stream began ends it with an `error` event; nothing is charged.
#[tokio::test]
async fn a_failing_model_ends_the_stream_with_an_error_event() {
    let upstream = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(500).set_body_string("boom"))
        .mount(&upstream)
        .await;
    let uri = upstream.uri();
    let app = spawn_with(|c| crate::helpers::use_model(c, &uri)).await;
    let token = app.access_token("ada@example.com").await;
    let agent = agent(&app, &token).await;
    let before = credits(&app, &token).await;
    let events = events(stream(&app, &token, &agent, json!({"message": "hello"}), false).await).await;
    let last = events.last().unwrap();
    assert_eq!(last.event, "error");
    let error: Value = serde_json::from_str(&last.data).unwrap();
    assert_eq!(error["error"], "upstream_error");
    assert_eq!(credits(&app, &token).await, before);
    assert_eq!(app.db.count_rows("credit_holds").await.unwrap(), 0);
    assert_eq!(app.db.count_rows("chat_messages").await.unwrap(), 0);
}

/// SmolLM2 generates token by token: a client that leaves after the first piece stops it. What
/// was generated is stored, marked incomplete, and charged once; no credit stays held.
#[tokio::test]
async fn a_client_that_leaves_mid_reply_stops_the_model_and_pays_for_what_was_made() {
    let Some(path) = crate::helpers::language_model() else { return };
    on_both_databases(
        |c| crate::helpers::use_local_model(c, &path),
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let agent = agent(&app, &token).await;
            let before = credits(&app, &token).await;
            let body = json!({"message": "Write a very long story about a dragon.", "session_id": "gone"});
            let response = stream(&app, &token, &agent, body, true).await;
            let mut events = response.bytes_stream().eventsource();
            let first = events.next().await.unwrap().unwrap();
            assert_eq!(first.event, "message.delta");
            let first: Value = serde_json::from_str(&first.data).unwrap();
            drop(events); // the client leaves

            // The reply is stored once the generation noticed; nothing else to wait for.
            let path = format!("/api/v1/agents/{agent}/sessions/gone/messages");
            let stored = wait_for(|| async {
                let r = app.get_with_token(&path, &token).await;
                if r.status() != 200 {
                    return None;
                }
                let history: Value = r.json().await.unwrap();
                history["messages"].as_array().unwrap().get(1).cloned()
            })
            .await;
            assert_eq!(stored["incomplete"], true, "{stored}");
            let content = stored["content"].as_str().unwrap();
            assert!(content.starts_with(first["content"].as_str().unwrap()), "{stored}");
            let completion = stored["usage"]["completion_tokens"].as_u64().unwrap();
            assert!((1..200).contains(&completion), "stopped early: {stored}");

            let ledger =
                json_with_status(app.get_with_token("/api/v1/billing/ledger", &token).await, 200).await;
            let charges: Vec<&Value> = ledger["entries"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["reason"] == "chat_usage")
                .collect();
            assert_eq!(charges.len(), 1, "{ledger}");
            let charged = -charges[0]["delta"].as_i64().unwrap();
            assert!(charged >= 1);
            assert_eq!(credits(&app, &token).await, before - charged);
            assert_eq!(app.db.count_rows("credit_holds").await.unwrap(), 0);
        },
    )
    .await;
}

/// Polls `probe` until it answers, for at most a minute: the stored reply of a generation that
/// runs on after its client left is written by the service, not by the test.
async fn wait_for<F, Fut, T>(probe: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "not stored within a minute");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A reply cut at the agent's `max_tokens` says so: `finish_reason: "length"` in the answer, the
/// stream's last event, the stored conversation and the console; a whole reply says `stop`.
#[tokio::test]
async fn a_reply_cut_at_the_token_limit_says_so_everywhere() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let tenant = app.tenant_of(&token).await;
            let short = app.create_agent(&token, json!({"name": "Terse", "config": {"max_tokens": 4}})).await;
            let short = short["id"].as_str().unwrap().to_owned();
            let whole = agent(&app, &token).await;

            let chat = |agent: String, session: &'static str| {
                let app = &app;
                let token = token.clone();
                async move {
                    let body = json!({"message": "Tell me a long story", "session_id": session});
                    json_with_status(
                        app.post_json_with_token(&format!("/api/v1/agents/{agent}/chat"), &token, &body)
                            .await,
                        200,
                    )
                    .await
                }
            };
            let cut = chat(short.clone(), "s-cut").await;
            assert_eq!(cut["finish_reason"], "length", "{cut}");
            assert_eq!(cut["usage"]["completion_tokens"], 4, "{cut}");
            let done = chat(whole.clone(), "s-whole").await;
            assert_eq!(done["finish_reason"], "stop", "{done}");

            let body = json!({"message": "Tell me a long story", "session_id": "s-cut-streamed"});
            let events = events(stream(&app, &token, &short, body, true).await).await;
            let last = events.last().unwrap();
            assert_eq!(last.event, "message.completed");
            assert_eq!(serde_json::from_str::<Value>(&last.data).unwrap()["finish_reason"], "length");

            let history = json_with_status(
                app.get_with_token(&format!("/api/v1/agents/{short}/sessions/s-cut/messages"), &token).await,
                200,
            )
            .await;
            let messages = history["messages"].as_array().unwrap();
            assert!(messages[0].get("finish_reason").is_none(), "a person's message has none: {history}");
            assert_eq!(messages[1]["finish_reason"], "length", "{history}");

            let mut browser = crate::console::Browser::new(&app);
            browser.sign_in("ada@example.com").await;
            for (agent, session, shown) in [(&short, "s-cut", true), (&whole, "s-whole", false)] {
                let page = browser.get(&format!("/console/{tenant}/agents/{agent}?session={session}")).await;
                assert_eq!(page.status(), 200);
                let html = page.text().await.unwrap();
                assert_eq!(html.contains("Cut off at the token limit"), shown, "{agent} {session}");
            }
        },
    )
    .await;
}

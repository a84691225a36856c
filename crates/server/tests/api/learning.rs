//! Memory that learns: what a user states in one conversation is a fact the agent recalls in the
//! next, replaced (never deleted) when it changes, with its history.

use serde_json::{Value, json};

use crate::helpers::{TestApp, json_with_status, model_available, on_both_databases, slow_model, use_model};

async fn chat(app: &TestApp, token: &str, agent: &str, message: &str) -> Value {
    let r = app
        .post_json_with_token(&format!("/api/v1/agents/{agent}/chat"), token, &json!({"message": message}))
        .await;
    let body = json_with_status(r, 200).await;
    // What follows the exchange (the facts it teaches) runs from the outbox, after it.
    app.drain().await;
    body
}

async fn facts(app: &TestApp, token: &str, agent: &str) -> Vec<Value> {
    let list =
        json_with_status(app.get_with_token(&format!("/api/v1/memory?agent_id={agent}"), token).await, 200)
            .await;
    list["memories"].as_array().unwrap().clone()
}

async fn search(app: &TestApp, token: &str, body: Value) -> Vec<String> {
    let r =
        json_with_status(app.post_json_with_token("/api/v1/memory/search", token, &body).await, 200).await;
    let mut found: Vec<String> =
        r["results"].as_array().unwrap().iter().map(|h| h["content"].as_str().unwrap().to_owned()).collect();
    found.sort();
    found
}

#[tokio::test]
async fn a_fact_told_in_one_conversation_is_replaced_when_it_changes_and_kept_with_its_history() {
    if !model_available() {
        return;
    }
    let model = slow_model("Noted.", (10, 2), std::time::Duration::ZERO).await;
    let uri = model.uri();
    on_both_databases(
        |c| use_model(c, &uri),
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let tenant = app.tenant_of(&token).await;
            let created = app
                .post_json_with_token(
                    "/api/v1/agents",
                    &token,
                    &json!({"name": "Concierge", "memory_types": ["semantic"]}),
                )
                .await;
            let agent = json_with_status(created, 201).await["id"].as_str().unwrap().to_owned();

            chat(&app, &token, &agent, "Hi! I live in Lyon.").await;
            let known = facts(&app, &token, &agent).await;
            assert_eq!(known.len(), 1, "{known:#?}");
            let lyon = known[0].clone();
            assert_eq!(lyon["content"], "The user lives in Lyon.");
            assert_eq!((lyon["origin"].as_str(), lyon["invalid_at"].as_str()), (Some("extraction"), None));
            assert_eq!(lyon["source_message_ids"].as_array().unwrap().len(), 2, "the message and its reply");
            let lyon_id = lyon["id"].as_str().unwrap().to_owned();
            // Small talk teaches nothing, and a fact said again changes nothing.
            chat(&app, &token, &agent, "What a nice day. I live in Lyon.").await;
            assert_eq!(facts(&app, &token, &agent).await.len(), 1);
            let between = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);

            chat(&app, &token, &agent, "Good news: I moved to Porto!").await;
            let known = facts(&app, &token, &agent).await;
            let contents: Vec<_> = known.iter().map(|m| m["content"].as_str().unwrap()).collect();
            assert_eq!(contents, ["The user lives in Porto."], "Lyon no longer holds");
            let porto_id = known[0]["id"].as_str().unwrap().to_owned();
            let old =
                json_with_status(app.get_with_token(&format!("/api/v1/memory/{lyon_id}"), &token).await, 200)
                    .await;
            assert!(old["invalid_at"].is_string(), "{old}");
            assert_eq!(old["superseded_by"], porto_id.as_str());

            let query = |extra: Value| {
                let mut body =
                    json!({"agent_id": agent, "query": "Where does the user live?", "min_score": 0});
                body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
                body
            };
            assert_eq!(search(&app, &token, query(json!({}))).await, ["The user lives in Porto."]);
            assert_eq!(
                search(&app, &token, query(json!({"include_invalid": true}))).await,
                ["The user lives in Lyon.", "The user lives in Porto."]
            );
            assert_eq!(
                search(&app, &token, query(json!({"as_of": between}))).await,
                ["The user lives in Lyon."]
            );

            let history = json_with_status(
                app.get_with_token(&format!("/api/v1/memory/{lyon_id}/history"), &token).await,
                200,
            )
            .await;
            let changes: Vec<_> = history
                .as_array()
                .unwrap()
                .iter()
                .map(|v| (v["version"].as_u64().unwrap(), v["change"].as_str().unwrap()))
                .collect();
            assert_eq!(changes, [(1, "added"), (2, "invalidated")]);
            assert!(history[1]["reason"].as_str().unwrap().contains("Porto"));
            assert_ne!(
                history[0]["source_message_ids"], history[1]["source_message_ids"],
                "each from its own exchange"
            );

            let events = app.events(&tenant).await;
            let count = |t: &str| events.iter().filter(|e| e.event_type().as_str() == t).count();
            assert_eq!((count("memory.created"), count("memory.invalidated")), (2, 1));

            // The next conversation recalls where the user lives now.
            chat(&app, &token, &agent, "Where does the user live?").await;
            let requests = model.received_requests().await.unwrap();
            let prompt: Value = serde_json::from_slice(&requests.last().unwrap().body).unwrap();
            let system: String = prompt["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "system")
                .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
                .collect();
            assert!(system.contains("lives in Porto") && !system.contains("Lyon"), "{system}");

            // Another tenant sees none of it.
            let other = app.access_token("bob@example.com").await;
            let r = app.get_with_token(&format!("/api/v1/memory/{lyon_id}/history"), &other).await;
            assert_eq!(r.status(), 404);
        },
    )
    .await;
}

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
                    // The model answers chat; the rules learn (offline, free).
                    &json!({"name": "Concierge", "memory_types": ["semantic"], "config": {"memory_extraction": "rules"}}),
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

            // The next conversation recalls where the user lives now, asked in the first person.
            chat(&app, &token, &agent, "Where do I live these days?").await;
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

/// An agent of `token`'s tenant keeping semantic memory, with `config`.
async fn concierge(app: &TestApp, token: &str, config: Value) -> String {
    let body = json!({"name": "Concierge", "memory_types": ["semantic"], "config": config});
    let created = app.post_json_with_token("/api/v1/agents", token, &body).await;
    json_with_status(created, 201).await["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn offline_the_built_in_responder_learns_by_the_rules() {
    if !model_available() {
        return;
    }
    on_both_databases(
        |_| {},
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let agent = concierge(&app, &token, json!({})).await;
            let shown =
                json_with_status(app.get_with_token(&format!("/api/v1/agents/{agent}"), &token).await, 200)
                    .await;
            assert_eq!(shown["config"]["memory_extraction"], "auto");
            chat(&app, &token, &agent, "Hello, my name is Ada and I live in Lyon.").await;
            let between = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            chat(&app, &token, &agent, "I moved to Porto last week.").await;
            let mut contents: Vec<String> = facts(&app, &token, &agent)
                .await
                .iter()
                .map(|m| m["content"].as_str().unwrap().to_owned())
                .collect();
            contents.sort();
            assert_eq!(contents, ["The user lives in Porto.", "The user's name is Ada."]);
            let query = json!({"agent_id": agent, "query": "Where does the user live?", "min_score": 0});
            assert_eq!(
                search(&app, &token, query.clone()).await,
                ["The user lives in Porto.", "The user's name is Ada."]
            );
            let mut then = query;
            then["as_of"] = json!(between);
            assert_eq!(
                search(&app, &token, then).await,
                ["The user lives in Lyon.", "The user's name is Ada."]
            );

            // Off learns nothing more.
            let r = app
                .patch_json_with_token(
                    &format!("/api/v1/agents/{agent}"),
                    &token,
                    &json!({"config": {"memory_extraction": "off"}}),
                )
                .await;
            assert_eq!(json_with_status(r, 200).await["config"]["memory_extraction"], "off");
            chat(&app, &token, &agent, "I work at Acme.").await;
            assert_eq!(facts(&app, &token, &agent).await.len(), 2);
            let r = app
                .patch_json_with_token(
                    &format!("/api/v1/agents/{agent}"),
                    &token,
                    &json!({"config": {"memory_extraction": "sometimes"}}),
                )
                .await;
            let err = json_with_status(r, 422).await;
            assert!(err.to_string().contains("config.memory_extraction"), "{err}");
        },
    )
    .await;
}

/// An OpenAI-compatible upstream that chats ("Noted.") and, asked for memory decisions (a
/// request with a response format), decides as a careful model would from what it is shown:
/// "I live in Lyon" adds it; "I moved to Porto" invalidates the Lyon fact it was shown and
/// adds Porto; "gibberish" gets an answer that is not JSON; "theirs <id>" names a memory it
/// was not shown.
struct ScriptedModel;

impl wiremock::Respond for ScriptedModel {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let usage = json!({"prompt_tokens": 700, "completion_tokens": 50, "total_tokens": 750});
        let reply = |content: String| {
            wiremock::ResponseTemplate::new(200).set_body_json(json!({
                "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": usage
            }))
        };
        if body.get("response_format").is_none() {
            return reply("Noted.".into());
        }
        let asked = body["messages"][1]["content"].as_str().unwrap().to_owned();
        let exchange = asked.split("Exchange:").nth(1).unwrap_or_default();
        let shown_id = |about: &str| {
            asked
                .lines()
                .find(|l| l.starts_with("- [") && l.contains(about))
                .map(|l| l[3..].split(']').next().unwrap().to_owned())
        };
        let facts = if exchange.contains("I live in Lyon") {
            json!([{"event": "ADD", "text": "The user lives in Lyon."}])
        } else if exchange.contains("moved to Porto") {
            let lyon = shown_id("Lyon").expect("the Lyon fact is shown");
            json!([
                {"event": "INVALIDATE", "id": lyon, "reason": "The user moved to Porto."},
                {"event": "ADD", "text": "The user lives in Porto."}
            ])
        } else if exchange.contains("gibberish") {
            return reply("I think the user likes gibberish.".into());
        } else if let Some(id) = exchange.split("theirs ").nth(1) {
            json!([{"event": "INVALIDATE", "id": id.split_whitespace().next().unwrap()}])
        } else {
            json!([])
        };
        reply(json!({"facts": facts}).to_string())
    }
}

#[tokio::test]
async fn with_a_model_facts_are_decided_by_it_validated_and_charged() {
    if !model_available() {
        return;
    }
    let upstream = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(ScriptedModel)
        .mount(&upstream)
        .await;
    let uri = upstream.uri();
    on_both_databases(
        |c| use_model(c, &uri),
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            // `auto`: the service's model is a remote one, so it decides.
            let agent = concierge(&app, &token, json!({})).await;
            chat(&app, &token, &agent, "I live in Lyon.").await;
            let known = facts(&app, &token, &agent).await;
            assert_eq!(known.len(), 1, "{known:#?}");
            assert_eq!((known[0]["content"].as_str(), known[0]["origin"].as_str()), (Some("The user lives in Lyon."), Some("extraction")));
            let lyon_id = known[0]["id"].as_str().unwrap().to_owned();
            let between = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);

            chat(&app, &token, &agent, "Big news: I moved to Porto.").await;
            let known = facts(&app, &token, &agent).await;
            let contents: Vec<_> = known.iter().map(|m| m["content"].as_str().unwrap()).collect();
            assert_eq!(contents, ["The user lives in Porto."]);
            let history = json_with_status(
                app.get_with_token(&format!("/api/v1/memory/{lyon_id}/history"), &token).await,
                200,
            )
            .await;
            let changes: Vec<_> = history.as_array().unwrap().iter().map(|v| v["change"].as_str().unwrap()).collect();
            assert_eq!(changes, ["added", "invalidated"]);
            assert_eq!(history[1]["reason"], "The user moved to Porto.");
            assert_ne!(history[0]["source_message_ids"], history[1]["source_message_ids"]);
            let query = json!({"agent_id": agent, "query": "Where does the user live?", "min_score": 0, "as_of": between});
            assert_eq!(search(&app, &token, query).await, ["The user lives in Lyon."]);

            // Each extraction is charged as a chat call, under its own reason.
            let ledger = json_with_status(app.get_with_token("/api/v1/billing/ledger", &token).await, 200).await;
            let entries = ledger["entries"].as_array().unwrap().clone();
            let extraction = entries.iter().filter(|e| e["reason"] == "memory_extraction").count();
            assert_eq!(extraction, 2, "{ledger:#}");

            // A malformed answer, asked for twice, stores nothing; nor does a foreign id.
            let calls = upstream.received_requests().await.unwrap().len();
            chat(&app, &token, &agent, "Some gibberish for you.").await;
            assert_eq!(upstream.received_requests().await.unwrap().len(), calls + 3, "the chat and two tries");
            let other = app.access_token("bob@example.com").await;
            let theirs = concierge(&app, &other, json!({"memory_extraction": "rules"})).await;
            chat(&app, &other, &theirs, "I live in Oslo.").await;
            let oslo = facts(&app, &other, &theirs).await[0]["id"].as_str().unwrap().to_owned();
            chat(&app, &token, &agent, &format!("This is theirs {oslo} now.")).await;
            assert_eq!(facts(&app, &token, &agent).await.len(), 1);
            let still = facts(&app, &other, &theirs).await;
            assert_eq!((still.len(), still[0]["invalid_at"].is_null()), (1, true), "{still:#?}");

            // The chat after the move is told Porto, not Lyon.
            chat(&app, &token, &agent, "Where does the user live?").await;
            let requests = upstream.received_requests().await.unwrap();
            let last_chat = requests
                .iter()
                .rev()
                .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
                .find(|b| b.get("response_format").is_none())
                .unwrap();
            let system: String = last_chat["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "system")
                .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
                .collect();
            assert!(system.contains("lives in Porto") && !system.contains("Lyon"), "{system}");
        },
    )
    .await;
}

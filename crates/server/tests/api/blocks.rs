//! Core memory blocks: set, listed, versioned and deleted through the API on both databases;
//! edited by the agent itself through its `core_memory` tools (a scripted OpenAI-compatible
//! upstream on 127.0.0.1 asks for the calls), within their limit; always in the agent's prompt.

use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{TestApp, json_with_status, on_both_databases, use_model};

fn calls(name: &str, arguments: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}
        ]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10}
    }))
}

fn says(content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5}
    }))
}

/// The upstream asks for `first` until a tool result is in the conversation, then says "Done.".
async fn script(server: &MockServer, first: ResponseTemplate) {
    server.reset().await;
    Mock::given(method("POST"))
        .and(body_string_contains(r#""role":"tool""#))
        .respond_with(says("Done."))
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("POST")).respond_with(first).with_priority(2).mount(server).await;
}

async fn received(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

async fn put(app: &TestApp, token: &str, agent: &str, label: &str, body: Value) -> reqwest::Response {
    app.put_json_with_token(&format!("/api/v1/agents/{agent}/memory-blocks/{label}"), token, &body).await
}

async fn chat(app: &TestApp, token: &str, agent: &str, message: &str) {
    let r = app
        .post_json_with_token(&format!("/api/v1/agents/{agent}/chat"), token, &json!({"message": message}))
        .await;
    json_with_status(r, 200).await;
}

#[tokio::test]
async fn blocks_are_set_listed_versioned_and_deleted_per_tenant() {
    on_both_databases(
        |_| {},
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let created =
                app.post_json_with_token("/api/v1/agents", &token, &json!({"name": "Helper"})).await;
            let agent = json_with_status(created, 201).await["id"].as_str().unwrap().to_owned();
            let base = format!("/api/v1/agents/{agent}/memory-blocks");

            let block =
                json_with_status(put(&app, &token, &agent, "human", json!({"value": "Ada."})).await, 201)
                    .await;
            assert_eq!(
                (block["version"].as_u64(), block["limit"].as_u64(), block["chars"].as_u64()),
                (Some(1), Some(2000), Some(4))
            );
            let body = json!({"value": "Ada, a chemist.", "description": "Who the user is", "limit": 40});
            let block = json_with_status(put(&app, &token, &agent, "human", body).await, 200).await;
            assert_eq!(
                (block["version"].as_u64(), block["description"].as_str()),
                (Some(2), Some("Who the user is"))
            );
            let list = json_with_status(app.get_with_token(&base, &token).await, 200).await;
            assert_eq!(list["blocks"].as_array().unwrap().len(), 1);

            // Refused, and nothing changed: past the limit, a bad label, a bad limit, no value.
            for (label, body, field) in [
                ("human", json!({"value": "x".repeat(41), "limit": 40}), "value"),
                ("Not OK", json!({"value": "x"}), "label"),
                ("human", json!({"value": "x", "limit": 0}), "limit"),
                ("human", json!({"limit": 10}), "value"),
            ] {
                let r = json_with_status(put(&app, &token, &agent, label, body).await, 422).await;
                assert!(r.to_string().contains(field), "{r}");
            }
            let r = put(&app, &token, &agent, "human", json!({"value": "x", "colour": "red"})).await;
            assert_eq!(r.status(), 422);

            // Another tenant sees nothing of it.
            let other = app.access_token("bob@example.com").await;
            assert_eq!(app.get_with_token(&base, &other).await.status(), 404);
            assert_eq!(put(&app, &other, &agent, "human", json!({"value": "mine"})).await.status(), 404);
            assert_eq!(app.get_with_token(&format!("{base}/human/history"), &other).await.status(), 404);

            let r = app.delete_with_token(&format!("{base}/human"), &token).await;
            assert_eq!(r.status(), 204);
            assert_eq!(app.delete_with_token(&format!("{base}/human"), &token).await.status(), 404);
            let history =
                json_with_status(app.get_with_token(&format!("{base}/human/history"), &token).await, 200)
                    .await;
            let changes: Vec<_> = history
                .as_array()
                .unwrap()
                .iter()
                .map(|v| {
                    (
                        v["version"].as_u64().unwrap(),
                        v["change"].as_str().unwrap(),
                        v["actor"].as_str().unwrap(),
                    )
                })
                .collect();
            assert_eq!(changes, [(1, "set", "api"), (2, "set", "api"), (3, "deleted", "api")]);
            assert_eq!(app.get_with_token(&format!("{base}/persona/history"), &token).await.status(), 404);
        },
    )
    .await;
}

#[tokio::test]
async fn the_agent_edits_its_blocks_through_its_tools_and_always_reads_them() {
    let upstream = MockServer::start().await;
    let uri = upstream.uri();
    on_both_databases(
        |c| use_model(c, &uri),
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let body = json!({"name": "Helper", "config": {"tools": [{"type": "core_memory"}]}});
            let agent =
                json_with_status(app.post_json_with_token("/api/v1/agents", &token, &body).await, 201).await;
            assert_eq!(agent["config"]["tools"], json!([{"type": "core_memory"}]));
            let agent = agent["id"].as_str().unwrap().to_owned();
            let body = json!({"value": "Name: Ada.", "description": "Who the user is", "limit": 40});
            json_with_status(put(&app, &token, &agent, "human", body).await, 201).await;

            script(
                &upstream,
                calls("core_memory_append", json!({"label": "human", "text": "Lives in Lyon."})),
            )
            .await;
            chat(&app, &token, &agent, "I live in Lyon.").await;
            let asked = received(&upstream).await;
            let tools: Vec<_> = asked[0]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(tools, ["core_memory_append", "core_memory_replace"]);
            let system = asked[0]["messages"][0]["content"].as_str().unwrap().to_owned();
            assert!(
                system.contains(
                    "<block label=\"human\" chars=\"10/40\"> (Who the user is)\nName: Ada.\n</block>"
                ),
                "{system}"
            );

            script(
                &upstream,
                calls("core_memory_replace", json!({"label": "human", "old": "Lyon", "new": "Porto"})),
            )
            .await;
            chat(&app, &token, &agent, "I moved to Porto.").await;
            let system = received(&upstream).await[0]["messages"][0]["content"].as_str().unwrap().to_owned();
            assert!(
                system.contains("Name: Ada.\nLives in Lyon."),
                "the next chat reads the appended block: {system}"
            );

            // Past the limit: an error the model reads, and the block as it was.
            script(
                &upstream,
                calls(
                    "core_memory_append",
                    json!({"label": "human", "text": "Works at a lab in the old town."}),
                ),
            )
            .await;
            chat(&app, &token, &agent, "I work at a lab in the old town.").await;
            let asked = received(&upstream).await;
            let result = asked[1]["messages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["role"] == "tool")
                .unwrap()
                .clone();
            assert!(result["content"].as_str().unwrap().contains("past its limit of 40"), "{result}");
            let list = json_with_status(
                app.get_with_token(&format!("/api/v1/agents/{agent}/memory-blocks"), &token).await,
                200,
            )
            .await;
            assert_eq!(list["blocks"][0]["value"], "Name: Ada.\nLives in Porto.");

            let history = json_with_status(
                app.get_with_token(&format!("/api/v1/agents/{agent}/memory-blocks/human/history"), &token)
                    .await,
                200,
            )
            .await;
            let changes: Vec<_> = history
                .as_array()
                .unwrap()
                .iter()
                .map(|v| (v["change"].as_str().unwrap(), v["actor"].as_str().unwrap()))
                .collect();
            assert_eq!(changes, [("set", "api"), ("appended", "agent"), ("replaced", "agent")]);
        },
    )
    .await;
}

//! Agents that answer from their knowledge bases, on both databases: sources in the prompt
//! (`auto`) or found with `knowledge_search` (`tool`), and the reply's citations as the chat
//! answers them, the history lists them, a stream sends them, the OpenAI-compatible endpoint
//! annotates them and a scripted OpenAI-compatible upstream (wiremock on 127.0.0.1) is given
//! them. The built-in responder cites its first source, so this needs no language model.

use eventsource_stream::Eventsource as _;
use futures_util::StreamExt as _;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{TestApp, json_with_status, knowledge_fixture as fixture, on_both_databases, use_model};

/// A base holding the handbook (refunds on page 2) and the release notes, indexed; its id and
/// the handbook's file id.
async fn handbook(app: &TestApp, token: &str) -> (String, String) {
    let r = app.post_json_with_token("/api/v1/knowledge-bases", token, &json!({"name": "Handbook"})).await;
    let base = json_with_status(r, 201).await["id"].as_str().unwrap().to_owned();
    let form = Form::new()
        .part("file", Part::bytes(fixture("handbook.pdf")).file_name("handbook.pdf"))
        .part("file", Part::bytes(fixture("notes.md")).file_name("notes.md"));
    let r = app
        .client
        .post(app.url(&format!("/api/v1/knowledge-bases/{base}/files")))
        .bearer_auth(token)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let stored = json_with_status(r, 202).await;
    app.drain().await;
    (base, stored["files"][0]["id"].as_str().unwrap().to_owned())
}

// Words of page 2, so that the hashing embedder (no model) finds it as the model does.
const QUESTION: &str = "Within how many days are refunds for annual plans paid after cancellation?";

fn chat_path(agent: &str) -> String {
    format!("/api/v1/agents/{agent}/chat")
}

fn assert_cites_page_two(citation: &Value, file: &str) {
    assert_eq!(citation["index"], 1, "{citation}");
    assert_eq!((citation["file_name"].as_str(), citation["page"].as_u64()), (Some("handbook.pdf"), Some(2)));
    assert_eq!(citation["file_id"], file);
    assert!(citation["chunk_id"].as_str().unwrap().starts_with("kbc_"));
    assert!(citation["snippet"].as_str().unwrap().contains("fourteen days"), "{citation}");
}

#[tokio::test]
async fn an_agent_answers_from_its_bases_and_cites_the_page_everywhere_a_reply_is_shown() {
    on_both_databases(
        |_| {},
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let (base, file) = handbook(&app, &token).await;

            // Another tenant's base, an unknown one, one listed twice: refused by name.
            let bob = app.access_token("bob@example.com").await;
            let body = json!({"name": "Thief", "config": {"knowledge_bases": [base]}});
            let r = app.post_json_with_token("/api/v1/agents", &bob, &body).await;
            let refused = json_with_status(r, 422).await;
            assert!(refused.to_string().contains("config.knowledge_bases[0]"), "{refused}");
            let body = json!({"name": "Bad", "config": {"knowledge_bases": [base, base], "knowledge": {"mode": "both", "top_k": 0}}});
            let refused = json_with_status(app.post_json_with_token("/api/v1/agents", &token, &body).await, 422).await;
            for field in ["config.knowledge_bases[1]", "config.knowledge.mode", "config.knowledge.top_k"] {
                assert!(refused.to_string().contains(field), "{field}: {refused}");
            }

            let agent = app.create_agent(&token, json!({"name": "Clerk", "config": {"knowledge_bases": [base]}})).await;
            assert_eq!(agent["config"]["knowledge_bases"], json!([base]));
            assert_eq!(agent["config"]["knowledge"], json!({"mode": "auto", "top_k": 5, "max_context_tokens": 1500}));
            let agent = agent["id"].as_str().unwrap().to_owned();

            // The reply: the built-in responder quotes its first source and cites it.
            let reply = json_with_status(
                app.post_json_with_token(&chat_path(&agent), &token, &json!({"message": QUESTION})).await,
                200,
            )
            .await;
            assert!(reply["content"].as_str().unwrap().contains("handbook.pdf, page 2, says"), "{reply}");
            assert!(reply["content"].as_str().unwrap().ends_with("[1]."), "{reply}");
            assert_eq!(reply["citations"].as_array().unwrap().len(), 1, "{reply}");
            assert_cites_page_two(&reply["citations"][0], &file);

            // Stored with the message and listed in the history.
            let session = reply["session_id"].as_str().unwrap();
            let r = app.get_with_token(&format!("/api/v1/agents/{agent}/sessions/{session}/messages"), &token).await;
            let history = json_with_status(r, 200).await;
            let messages = history["messages"].as_array().unwrap();
            assert!(messages[0].get("citations").is_none(), "the user's message cites nothing");
            assert_eq!(messages[1]["citations"], reply["citations"]);

            // Streamed: a `citation` event after the last delta, before `message.completed`.
            let r = app
                .client
                .post(app.url(&chat_path(&agent)))
                .bearer_auth(&token)
                .json(&json!({"message": QUESTION, "stream": true}))
                .send()
                .await
                .unwrap();
            let events: Vec<_> = r.bytes_stream().eventsource().map(|e| e.unwrap()).collect().await;
            let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
            let at = names.iter().position(|n| *n == "citation").expect("a citation event");
            assert_eq!(names[at - 1], "message.delta");
            assert_eq!(names[at + 1..], ["message.completed"]);
            let cited: Value = serde_json::from_str(&events[at].data).unwrap();
            assert_cites_page_two(&cited, &file);

            // The OpenAI-compatible endpoint: the message's annotations.
            let body = json!({"model": agent, "messages": [{"role": "user", "content": QUESTION}]});
            let completion = json_with_status(app.post_json_with_token("/v1/chat/completions", &token, &body).await, 200).await;
            assert_eq!(
                completion["choices"][0]["message"]["annotations"],
                json!([{"type": "file_citation", "file_citation": {"file_id": file, "filename": "handbook.pdf", "index": 1}}]),
                "{completion}"
            );

            // `tool` mode: the model searches, the results are numbered and the reply cites one.
            let change = json!({"config": {"knowledge": {"mode": "tool", "top_k": 2}}});
            let r = app.patch_json_with_token(&format!("/api/v1/agents/{agent}"), &token, &change).await;
            let changed = json_with_status(r, 200).await;
            assert_eq!(changed["config"]["knowledge"]["mode"], "tool");
            assert_eq!(changed["config"]["knowledge_bases"], json!([base]), "the bases are kept");
            let message = json!({"message": format!(r#"Use knowledge_search {{"query": "{QUESTION}"}}"#)});
            let reply = json_with_status(app.post_json_with_token(&chat_path(&agent), &token, &message).await, 200).await;
            assert!(reply["content"].as_str().unwrap().starts_with("The tool knowledge_search answered"), "{reply}");
            assert_cites_page_two(&reply["citations"][0], &file);

            // `/mcp` searches the tenant's bases as the search route does.
            let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "knowledge_search", "arguments": {"query": QUESTION, "knowledge_base_ids": [base], "top_k": 1}}});
            let answered = json_with_status(app.post_json_with_token("/mcp", &token, &call).await, 200).await;
            let found = &answered["result"]["structuredContent"]["results"];
            assert_eq!((found[0]["file_name"].as_str(), found[0]["page"].as_u64()), (Some("handbook.pdf"), Some(2)), "{answered}");
            let answered = json_with_status(app.post_json_with_token("/mcp", &bob, &call).await, 200).await;
            assert_eq!(answered["result"]["isError"], true, "another tenant's base is not found: {answered}");

            // A base deleted later is skipped: the agent answers without sources.
            assert_eq!(app.delete_with_token(&format!("/api/v1/knowledge-bases/{base}"), &token).await.status(), 204);
            let change = json!({"config": {"knowledge": null}});
            app.patch_json_with_token(&format!("/api/v1/agents/{agent}"), &token, &change).await;
            let reply = json_with_status(
                app.post_json_with_token(&chat_path(&agent), &token, &json!({"message": QUESTION})).await,
                200,
            )
            .await;
            assert_eq!(reply["citations"], json!([]), "{reply}");
        },
    )
    .await;
}

#[tokio::test]
async fn a_model_upstream_is_given_the_numbered_sources_and_its_markers_become_citations() {
    let upstream = &MockServer::start().await;
    let url = upstream.uri();
    on_both_databases(
        |config| use_model(config, &url),
        async |app: TestApp| {
            upstream.reset().await;
            let said = ResponseTemplate::new(200).set_body_json(json!({
                "choices": [{"message": {"role": "assistant", "content": "Fourteen days [1]; see also [9]."}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 300, "completion_tokens": 8}
            }));
            Mock::given(method("POST")).respond_with(said).mount(upstream).await;
            let token = app.access_token("ada@example.com").await;
            let (base, file) = handbook(&app, &token).await;
            let body = json!({"name": "Clerk", "config": {"knowledge_bases": [base], "knowledge": {"top_k": 2, "max_context_tokens": 400}}});
            let agent = app.create_agent(&token, body).await["id"].as_str().unwrap().to_owned();
            let reply = json_with_status(
                app.post_json_with_token(&chat_path(&agent), &token, &json!({"message": QUESTION})).await,
                200,
            )
            .await;
            assert_eq!(reply["citations"].as_array().unwrap().len(), 1, "[9] names no source: {reply}");
            assert_cites_page_two(&reply["citations"][0], &file);

            let sent: Value = serde_json::from_slice(&upstream.received_requests().await.unwrap()[0].body).unwrap();
            let messages = sent["messages"].as_array().unwrap();
            let sources = messages[1]["content"].as_str().unwrap();
            assert_eq!(messages[1]["role"], "system");
            assert!(sources.contains("cite each source you use by its number in brackets, as [1]"), "{sources}");
            assert!(sources.contains("[1] handbook.pdf, page 2:\n"), "{sources}");
            assert!(sources.contains("fourteen days"), "{sources}");
            assert!(!sources.contains("[3]"), "top_k 2: {sources}");
            assert_eq!(messages.last().unwrap()["content"], QUESTION);
        },
    )
    .await;
}

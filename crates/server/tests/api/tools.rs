//! Agents that call tools: a scripted OpenAI-compatible upstream (wiremock on 127.0.0.1) asks
//! for the agent's tools, the service runs them (memory, a real workflow, an allowed host) and
//! feeds the results back; the rounds, their messages, events and charges are checked on both
//! databases. The built-in responder's tool rule drives the streamed case.

use eventsource_stream::Eventsource as _;
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::helpers::{TestApp, json_with_status, on_both_databases, use_model};

/// An upstream answer asking for one tool call.
fn calls(name: &str, arguments: Value, usage: (u64, u64)) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}
        ]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1}
    }))
}

/// An upstream answer in text.
fn says(content: &str, usage: (u64, u64)) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1}
    }))
}

/// Scripts the upstream afresh (no mock, no recorded request): it asks for `first` while no
/// tool result is in the conversation, and answers `then` once one is.
async fn script(server: &MockServer, first: ResponseTemplate, then: ResponseTemplate) {
    server.reset().await;
    Mock::given(method("POST"))
        .and(body_string_contains(r#""role":"tool""#))
        .respond_with(then)
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("POST")).respond_with(first).with_priority(2).mount(server).await;
}

async fn balance(app: &TestApp, token: &str) -> i64 {
    json_with_status(app.get_with_token("/api/v1/billing", token).await, 200).await["credits"]
        .as_i64()
        .unwrap()
}

async fn chat(app: &TestApp, token: &str, agent: &str, message: &str) -> Value {
    let body = json!({"message": message, "session_id": "s-1"});
    json_with_status(
        app.post_json_with_token(&format!("/api/v1/agents/{agent}/chat"), token, &body).await,
        200,
    )
    .await
}

async fn history(app: &TestApp, token: &str, agent: &str) -> Vec<Value> {
    let page = json_with_status(
        app.get_with_token(&format!("/api/v1/agents/{agent}/sessions/s-1/messages"), token).await,
        200,
    )
    .await;
    page["messages"].as_array().unwrap().clone()
}

/// The chat requests the upstream received, as JSON (memory extraction's, which follow a chat
/// of an agent with semantic memory, are left out).
async fn received(server: &MockServer) -> Vec<Value> {
    let requests: Vec<Request> = server.received_requests().await.unwrap();
    requests
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
        .filter(|b| b.get("response_format").is_none())
        .collect()
}

#[tokio::test]
async fn memory_search_then_the_answer_each_call_charged_in_one_entry() {
    // 30 + 1,200 tokens cost 2 credits, 1,500 + 10 cost 2: 4 in all (the agent allows replies
    // of 2,048 tokens, so that the scripted 1,200 fit what the chat holds).
    let upstream = &MockServer::start().await;
    let url = upstream.uri();
    on_both_databases(
        |c| use_model(c, &url),
        |app| async move {
            script(upstream, calls("memory_search", json!({"query": "favourite colour"}), (30, 1200)), says("Teal.", (1500, 10))).await;
            let token = app.access_token("ada@example.com").await;
            let agent = app
                .create_agent(&token, json!({"name": "Helper", "memory_types": ["semantic"], "config": {"tools": [{"type": "memory_search"}], "max_tokens": 2048}}))
                .await;
            assert_eq!(agent["config"]["tools"], json!([{"type": "memory_search", "name": "memory_search"}]));
            let id = agent["id"].as_str().unwrap();
            let fact = json!({"content": "The customer's favourite colour is teal.", "memory_type": "semantic", "agent_id": id});
            json_with_status(app.post_json_with_token("/api/v1/memory", &token, &fact).await, 201).await;
            let before = balance(&app, &token).await;

            let reply = chat(&app, &token, id, "What is my favourite colour?").await;
            assert_eq!(reply["content"], "Teal.");
            assert_eq!(reply["usage"]["prompt_tokens"], 1530, "the usage of both calls");
            assert_eq!(reply["usage"]["completion_tokens"], 1210);
            assert_eq!(reply["credits"]["charged"], 4);
            assert_eq!(balance(&app, &token).await, before - 4);
            let ledger = json_with_status(app.get_with_token("/api/v1/billing/ledger", &token).await, 200).await;
            assert_eq!(ledger["entries"][0]["delta"], -4, "one entry for the chat");
            assert_ne!(ledger["entries"][1]["reason"], "chat_usage");

            // The tool's result reached the model, as OpenAI wants it.
            let sent = received(upstream).await;
            let second = sent.last().unwrap();
            assert_eq!(second["tools"][0]["function"]["name"], "memory_search");
            let messages = second["messages"].as_array().unwrap();
            let (call, result) = (&messages[messages.len() - 2], &messages[messages.len() - 1]);
            assert_eq!(call["tool_calls"][0]["id"], "call_1");
            assert_eq!((result["role"].as_str(), result["tool_call_id"].as_str()), (Some("tool"), Some("call_1")));
            assert!(result["content"].as_str().unwrap().contains("teal"), "{result}");

            // The session shows the round.
            let messages = history(&app, &token, id).await;
            let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
            assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
            assert_eq!(messages[1]["tool_calls"][0]["name"], "memory_search");
            assert!(messages[1]["usage"].is_null(), "the reply carries the usage");
            assert_eq!((messages[2]["tool_call_id"].as_str(), messages[2]["name"].as_str()), (Some("call_1"), Some("memory_search")));
            assert_eq!(messages[3]["usage"]["total_tokens"], 2740);

            // Announced, and a following chat sends the round back as history.
            let tenant = app.tenant_of(&token).await;
            let called: Vec<_> = app
                .events(&tenant)
                .await
                .into_iter()
                .filter(|e| e.event_type().as_str() == "agent.tool.called")
                .collect();
            assert_eq!(called.len(), 1);
            let data = called[0].payload.data().unwrap();
            assert_eq!((data["tool"].as_str(), data["ok"].as_bool(), data["session_id"].as_str()), (Some("memory_search"), Some(true), Some("s-1")));
            upstream.reset().await;
            Mock::given(method("POST")).respond_with(says("Still teal.", (10, 2))).mount(upstream).await;
            chat(&app, &token, id, "And again?").await;
            let history_sent = &received(upstream).await[0]["messages"];
            assert!(history_sent.as_array().unwrap().iter().any(|m| m["role"] == "tool"), "{history_sent}");
        },
    )
    .await;
}

#[tokio::test]
async fn run_workflow_runs_a_real_execution_and_its_output_reaches_the_model() {
    let upstream = &MockServer::start().await;
    let url = upstream.uri();
    on_both_databases(
        |c| use_model(c, &url),
        |app| async move {
            script(upstream, calls("shout", json!({"text": "hello tools"}), (20, 5)), says("Done.", (40, 2))).await;
            let token = app.access_token("ada@example.com").await;
            let workflow = json!({"name": "Shout", "steps": [{"id": "loud", "type": "transform", "output": {"shouted": "{{ input.text | upper }}"}}]});
            let workflow = json_with_status(app.post_json_with_token("/api/v1/workflows", &token, &workflow).await, 201).await;
            let workflow_id = workflow["id"].as_str().unwrap();
            let tool = json!({"type": "run_workflow", "name": "shout", "workflow_id": workflow_id,
                "input_schema": {"properties": {"text": {"type": "string"}}, "required": ["text"]}, "timeout_seconds": 30});
            let agent = app.create_agent(&token, json!({"name": "Runner", "config": {"tools": [tool]}})).await;
            let id = agent["id"].as_str().unwrap();
            let reply = chat(&app, &token, id, "Shout it").await;
            assert_eq!(reply["content"], "Done.");
            let sent = received(upstream).await;
            let result = sent.last().unwrap()["messages"].as_array().unwrap().last().unwrap().clone();
            let output: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
            assert_eq!(output["status"], "completed", "{output}");
            assert_eq!(output["output"]["shouted"], "HELLO TOOLS");
            let executions = json_with_status(
                app.get_with_token(&format!("/api/v1/workflows/{workflow_id}/executions"), &token).await,
                200,
            )
            .await;
            let execution = &executions["executions"][0];
            assert_eq!((execution["origin"].as_str(), execution["status"].as_str()), (Some("agent"), Some("completed")));
        },
    )
    .await;
}

#[tokio::test]
async fn the_most_rounds_end_the_chat_with_a_message_that_says_so() {
    // The upstream asks for the tool every time.
    let upstream = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(calls("memory_search", json!({"query": "anything"}), (20, 5)))
        .mount(&upstream)
        .await;
    let url = upstream.uri();
    on_both_databases(
        |c| use_model(c, &url),
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let config = json!({"tools": [{"type": "memory_search"}], "max_tool_rounds": 2});
            let agent = app.create_agent(&token, json!({"name": "Looper", "config": config})).await;
            let id = agent["id"].as_str().unwrap();
            let before = balance(&app, &token).await;
            let reply = chat(&app, &token, id, "Search forever").await;
            assert!(reply["content"].as_str().unwrap().contains("max_tool_rounds"), "{reply}");
            assert_eq!(reply["credits"]["charged"], 3, "three model calls of one credit each");
            assert_eq!(balance(&app, &token).await, before - 3);
            let roles: Vec<String> = history(&app, &token, id)
                .await
                .iter()
                .map(|m| m["role"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(roles, ["user", "assistant", "tool", "assistant", "tool", "assistant"]);
        },
    )
    .await;
}

#[tokio::test]
async fn http_request_reaches_an_allowed_host_only() {
    let target = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"forecast": "sunny"})))
        .mount(&target)
        .await;
    let allowed_url = &format!("{}/weather", target.uri());
    let upstream = &MockServer::start().await;
    let url = upstream.uri();
    on_both_databases(
        |c| {
            use_model(c, &url);
            crate::executions::loopback(c);
        },
        |app| async move {
            script(upstream, calls("weather", json!({"url": allowed_url}), (20, 5)), says("Sunny.", (40, 2))).await;
            let token = app.access_token("ada@example.com").await;
            let tools = json!([{"type": "http_request", "name": "weather", "description": "The weather", "allowed_hosts": ["127.0.0.1"]},
                {"type": "http_request", "name": "elsewhere", "description": "Elsewhere", "allowed_hosts": ["example.com"]}]);
            let agent = app.create_agent(&token, json!({"name": "Weather", "config": {"tools": tools}})).await;
            let id = agent["id"].as_str().unwrap();
            assert_eq!(chat(&app, &token, id, "Weather?").await["content"], "Sunny.");
            let messages = history(&app, &token, id).await;
            let output: Value = serde_json::from_str(messages[2]["content"].as_str().unwrap()).unwrap();
            assert_eq!((output["status"].as_u64(), &output["body"]), (Some(200), &json!({"forecast": "sunny"})));
        },
    )
    .await;
    // Another host than the tool's own is refused before anything is sent: the model is told.
    let refused = MockServer::start().await;
    script(&refused, calls("elsewhere", json!({"url": target.uri()}), (20, 5)), says("Could not.", (40, 2)))
        .await;
    let url = refused.uri();
    let app = crate::helpers::spawn_with(|c| {
        use_model(c, &url);
        crate::executions::loopback(c);
    })
    .await;
    let token = app.access_token("ada@example.com").await;
    let tools = json!([{"type": "http_request", "name": "elsewhere", "description": "Elsewhere", "allowed_hosts": ["example.com"]}]);
    let agent = app.create_agent(&token, json!({"name": "Weather", "config": {"tools": tools}})).await;
    let id = agent["id"].as_str().unwrap();
    assert_eq!(chat(&app, &token, id, "Weather?").await["content"], "Could not.");
    let messages = history(&app, &token, id).await;
    assert!(
        messages[2]["content"].as_str().unwrap().contains("not one this tool may call"),
        "{}",
        messages[2]
    );
    let reached = target.received_requests().await.unwrap();
    assert!(!reached.is_empty());
    assert!(
        reached.iter().all(|r| r.url.path() == "/weather"),
        "only the allowed tool's calls reached the host"
    );
}

#[tokio::test]
async fn a_streamed_chat_shows_the_call_and_its_result_before_the_reply() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let agent = app.create_agent(&token, json!({"name": "Helper", "config": {"tools": [{"type": "memory_add"}]}})).await;
            let id = agent["id"].as_str().unwrap();
            // The built-in responder calls a tool its message names.
            let body = json!({"message": r#"Please memory_add {"content": "Ada likes tea"}"#, "stream": true, "session_id": "s-1"});
            let response = app
                .client
                .post(app.url(&format!("/api/v1/agents/{id}/chat")))
                .bearer_auth(&token)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            let events: Vec<_> = response.bytes_stream().eventsource().map(|e| e.unwrap()).collect().await;
            let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
            assert_eq!(&names[..2], ["tool.call", "tool.result"], "{names:?}");
            assert_eq!(names.last(), Some(&"message.completed"));
            let call: Value = serde_json::from_str(&events[0].data).unwrap();
            assert_eq!((call["name"].as_str(), call["arguments"].as_str()), (Some("memory_add"), Some(r#"{"content":"Ada likes tea"}"#)));
            let result: Value = serde_json::from_str(&events[1].data).unwrap();
            assert_eq!(result["id"], call["id"]);
            assert_eq!(result["output"]["content"], "Ada likes tea", "{result}");
            let text: String = events[2..events.len() - 1]
                .iter()
                .map(|e| serde_json::from_str::<Value>(&e.data).unwrap()["content"].as_str().unwrap().to_owned())
                .collect();
            let completed: Value = serde_json::from_str(&events.last().unwrap().data).unwrap();
            assert_eq!(text, completed["content"].as_str().unwrap());
            assert!(text.starts_with("The tool memory_add answered"), "{text}");
            // The memory is the agent's own.
            let list = json_with_status(app.get_with_token(&format!("/api/v1/memory?agent_id={id}"), &token).await, 200).await;
            assert!(list.to_string().contains("Ada likes tea"), "{list}");
        },
    )
    .await;
}

#[tokio::test]
async fn tools_a_caller_may_not_use_fail_as_results_and_bad_tools_are_refused() {
    let app = crate::helpers::spawn().await;
    let token = app.access_token("ada@example.com").await;
    let create = |config: Value| json!({"name": "Bad", "config": config});
    let refused = |body: Value| {
        let app = &app;
        let token = token.clone();
        async move {
            let r =
                json_with_status(app.post_json_with_token("/api/v1/agents", &token, &body).await, 422).await;
            r["details"][0]["field"].as_str().map(str::to_owned).unwrap_or_else(|| r.to_string())
        }
    };
    assert_eq!(refused(create(json!({"tools": [{"type": "shell"}]}))).await, "config.tools[0].type");
    assert_eq!(
        refused(create(json!({"tools": [{"type": "memory_add"}, {"type": "memory_add"}]}))).await,
        "config.tools[1].name"
    );
    assert_eq!(refused(create(json!({"max_tool_rounds": 21}))).await, "config.max_tool_rounds");
    assert_eq!(
        refused(create(
            json!({"tools": [{"type": "http_request", "name": "h", "description": "d", "allowed_hosts": []}]})
        ))
        .await,
        "config.tools[0].allowed_hosts"
    );
    // Every refusal at once, each at its path, unknown fields too.
    let r = app
        .post_json_with_token(
            "/api/v1/agents",
            &token,
            &create(json!({"tools": [
                {"type": "memory_search", "limit": 3},
                {"type": "run_workflow", "name": "w", "workflow_id": "wf_1", "input_schema": {"type": "array"}, "timeout_seconds": 301}
            ]})),
        )
        .await;
    let details = json_with_status(r, 422).await["details"].clone();
    let fields: Vec<&str> =
        details.as_array().unwrap().iter().map(|d| d["field"].as_str().unwrap()).collect();
    assert_eq!(
        fields,
        ["config.tools[0].limit", "config.tools[1].input_schema.type", "config.tools[1].timeout_seconds"],
        "{details}"
    );
    // PATCH replaces the list; null removes it.
    let agent = app
        .create_agent(&token, json!({"name": "Helper", "config": {"tools": [{"type": "memory_search"}]}}))
        .await;
    let id = agent["id"].as_str().unwrap();
    let patched = json_with_status(
        app.patch_json_with_token(
            &format!("/api/v1/agents/{id}"),
            &token,
            &json!({"config": {"max_tool_rounds": 0}}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(patched["config"]["tools"][0]["type"], "memory_search", "absent keys are kept");
    assert_eq!(patched["config"]["max_tool_rounds"], 0);
    let patched = json_with_status(
        app.patch_json_with_token(
            &format!("/api/v1/agents/{id}"),
            &token,
            &json!({"config": {"tools": null}}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(patched["config"]["tools"], json!([]));

    // A key without `memory:write` calls `memory_add` in vain: the model hears why.
    let agent = app
        .create_agent(&token, json!({"name": "Writer", "config": {"tools": [{"type": "memory_add"}]}}))
        .await;
    let id = agent["id"].as_str().unwrap();
    let key = json!({"name": "chat only", "scopes": ["agents:read", "agents:write"]});
    let key =
        json_with_status(app.post_json_with_token("/api/v1/auth/api-keys", &token, &key).await, 201).await;
    let key = key["key"].as_str().unwrap().to_owned();
    let reply = chat(&app, &key, id, r#"memory_add {"content": "secret"}"#).await;
    let messages = history(&app, &token, id).await;
    assert!(messages[2]["content"].as_str().unwrap().contains("error"), "{}", messages[2]);
    assert!(reply["content"].as_str().unwrap().contains("error"), "{reply}");
    let list =
        json_with_status(app.get_with_token(&format!("/api/v1/memory?agent_id={id}"), &token).await, 200)
            .await;
    assert!(!list.to_string().contains("secret"), "nothing was written: {list}");
}

/// Offline, with SmolLM2 in process: the agent offered `memory_search` decides to call it (its
/// decision held by a grammar to the tool's schema), the service runs it, and the model answers
/// with the result before it.
#[tokio::test]
async fn an_offline_agent_calls_memory_search_and_answers_from_the_result() {
    let Some(path) = crate::helpers::language_model() else { return };
    on_both_databases(
        |c| crate::helpers::use_local_model(c, &path),
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let agent = app
                .create_agent(&token, json!({"name": "Helper", "memory_types": ["semantic"], "config": {"tools": [{"type": "memory_search"}]}}))
                .await;
            let id = agent["id"].as_str().unwrap();
            let fact = json!({"content": "The user's favourite colour is teal.", "memory_type": "semantic", "agent_id": id});
            json_with_status(app.post_json_with_token("/api/v1/memory", &token, &fact).await, 201).await;

            let reply = chat(&app, &token, id, "Search your memory: what is my favourite colour?").await;
            assert_eq!(reply["finish_reason"], "stop", "{reply}");
            let messages = history(&app, &token, id).await;
            let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
            assert_eq!(roles, ["user", "assistant", "tool", "assistant"], "{messages:#?}");
            assert_eq!(messages[1]["tool_calls"][0]["name"], "memory_search");
            let arguments: Value =
                serde_json::from_str(messages[1]["tool_calls"][0]["arguments"].as_str().unwrap()).unwrap();
            assert!(arguments["query"].is_string(), "arguments of the tool's schema: {arguments}");
            assert!(messages[2]["content"].as_str().unwrap().contains("teal"), "{:?}", messages[2]);
            assert!(reply["content"].as_str().unwrap().to_lowercase().contains("teal"), "{reply}");
        },
    )
    .await;
}

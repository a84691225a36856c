//! Workflow executions over HTTP: a three-step workflow (memory search → agent chat → HTTP
//! request to a receiver on loopback) run by the worker, failures, cancellation, listing,
//! scopes and tenant isolation, on both databases. Receivers are wiremock servers on
//! 127.0.0.1; nothing else is contacted.

use std::time::Duration;

use agentry_domain::ids::{ExecutionId, TenantId};
use agentry_domain::workflows::ExecutionRepository as _;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{TestApp, json_with_status, on_both_databases};

/// `http_request` steps may call loopback receivers over http.
pub fn loopback(config: &mut agentry_server::Config) {
    config.webhook_allow_insecure = true;
    config.webhook_allow_private = true;
    config.webhook_poll_interval_ms = 50;
}

/// A receiver answering `{"ok": true}` on `POST /in`, after `delay`.
pub async fn receiver(delay: Duration) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/in"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})).set_delay(delay))
        .mount(&server)
        .await;
    server
}

pub async fn create_workflow(app: &TestApp, token: &str, body: &Value) -> String {
    let created =
        json_with_status(app.post_json_with_token("/api/v1/workflows", token, body).await, 201).await;
    created["id"].as_str().unwrap().to_owned()
}

pub async fn execute(app: &TestApp, token: &str, workflow: &str, input: Value) -> Value {
    let r = app
        .post_json_with_token(
            &format!("/api/v1/workflows/{workflow}/execute"),
            token,
            &json!({"input": input}),
        )
        .await;
    json_with_status(r, 202).await
}

/// Waits (reading the store, so the plan's request limit is not spent on polling) until the
/// execution satisfies `done`; at most 30 s.
pub async fn wait_until(
    app: &TestApp,
    tenant: &str,
    id: &str,
    done: impl Fn(&agentry_domain::workflows::Execution) -> bool,
) -> agentry_domain::workflows::Execution {
    let store = agentry_store::ExecutionStore::new(app.db.clone());
    let (tenant, id) = (TenantId::from_string(tenant), ExecutionId::from_string(id));
    for _ in 0..600 {
        if let Some(e) = store.get(&tenant, &id).await.unwrap()
            && done(&e)
        {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("execution {id} did not get there in time");
}

/// Waits until the execution has finished, and returns it as the API shows it.
pub async fn finished(app: &TestApp, token: &str, id: &str) -> Value {
    let tenant = app.tenant_of(token).await;
    wait_until(app, &tenant, id, |e| e.status().is_terminal()).await;
    json_with_status(app.get_with_token(&format!("/api/v1/executions/{id}"), token).await, 200).await
}

/// The topic of the three-step workflow: `input.topic` whether it is executed by the API or
/// called at its trigger URL (whose JSON body is the input).
const TOPIC: &str = "{{ input.topic }}";

#[tokio::test]
async fn a_three_step_workflow_runs_each_step_and_shows_its_output() {
    on_both_databases(loopback, |app| async move {
        let receiver = receiver(Duration::ZERO).await;
        let token = app.access_token("ada@example.com").await;
        let tenant = app.tenant_of(&token).await;
        let agent = app.create_agent(&token, json!({"name": "Helper", "memory_types": ["semantic"]})).await;
        let agent_id = agent["id"].as_str().unwrap();
        let fact = json!({"content": "The customer's favourite colour is teal.", "memory_type": "semantic", "agent_id": agent_id});
        json_with_status(app.post_json_with_token("/api/v1/memory", &token, &fact).await, 201).await;
        // A subscriber to the execution events.
        let subscriber = MockServer::start().await;
        Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&subscriber).await;
        let hook = json!({"url": format!("{}/hook", subscriber.uri()), "events": ["workflow.execution.started", "workflow.completed"]});
        json_with_status(app.post_json_with_token("/api/v1/webhooks", &token, &hook).await, 201).await;
        let credits_before = json_with_status(app.get_with_token("/api/v1/billing", &token).await, 200).await["credits"]
            .as_i64()
            .unwrap();

        let workflow = create_workflow(&app, &token, &json!({
            "name": "Recall, ask, report",
            "steps": [
                {"id": "recall", "type": "memory_search", "query": TOPIC, "agent_id": agent_id, "top_k": 1},
                {"id": "ask", "type": "agent_chat", "agent_id": agent_id,
                 "message": "Remember this: {{ steps.recall.output.results[0].content }}"},
                {"id": "report", "type": "http_request", "method": "POST", "url": format!("{}/in", receiver.uri()),
                 "headers": {"X-Topic": TOPIC},
                 "body": {"memory": "{{ steps.recall.output.results[0].content }}", "reply": "{{ steps.ask.output.content }}",
                          "tokens": "{{ steps.ask.output.usage.total_tokens }}"}}
            ]
        })).await;
        let started = execute(&app, &token, &workflow, json!({"topic": "favourite colour"})).await;
        assert_eq!(started["status"], "running", "{started}");
        let id = started["execution_id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("exe_") && started["started_at"].is_string(), "{started}");

        let done = finished(&app, &token, &id).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["workflow_id"], workflow.as_str());
        assert_eq!(done["input"], json!({"topic": "favourite colour"}));
        assert_eq!(done["origin"], "api");
        let steps = done["steps"].as_array().unwrap();
        let ids: Vec<&str> = steps.iter().map(|s| s["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["recall", "ask", "report"]);
        for step in steps {
            assert_eq!(step["status"], "completed", "{step}");
            assert!(step["started_at"].is_string() && step["finished_at"].is_string(), "{step}");
            assert_eq!(step["error"], Value::Null);
        }
        assert_eq!(steps[0]["type"], "memory_search");
        assert_eq!(steps[0]["output"]["results"][0]["content"], "The customer's favourite colour is teal.");
        let reply = steps[1]["output"]["content"].as_str().unwrap().to_owned();
        assert!(!reply.is_empty());
        assert!(steps[1]["output"]["usage"]["total_tokens"].as_u64().unwrap() > 0);
        assert!(steps[1]["output"]["session_id"].as_str().unwrap().starts_with("ses_"));
        assert_eq!(steps[2]["output"]["status"], 200);
        assert_eq!(steps[2]["output"]["body"], json!({"ok": true}));
        assert_eq!(done["output"], steps[2]["output"], "the execution's output is the last step's");
        assert!(done["finished_at"].is_string());

        // The receiver got the rendered request.
        let requests = receiver.received_requests().await.unwrap();
        assert_eq!(requests.len(), 1);
        let body: Value = serde_json::from_slice(&requests[0].body).unwrap();
        assert_eq!(body["memory"], "The customer's favourite colour is teal.");
        assert_eq!(body["reply"], reply.as_str());
        assert_eq!(body["tokens"], steps[1]["output"]["usage"]["total_tokens"], "a lone expression keeps its type");
        assert_eq!(requests[0].headers.get("x-topic").unwrap(), "favourite colour");
        assert_eq!(requests[0].headers.get("content-type").unwrap(), "application/json");

        // The chat step charged credits like a chat request.
        let credits_after = json_with_status(app.get_with_token("/api/v1/billing", &token).await, 200).await["credits"]
            .as_i64()
            .unwrap();
        assert!(credits_after < credits_before, "{credits_before} → {credits_after}");

        // Started and completed events, in the outbox with their changes.
        let events = app.events(&tenant).await;
        let of = |t: &str| events.iter().filter(|e| e.event_type().as_str() == t).count();
        assert_eq!(of("workflow.execution.started"), 1);
        assert_eq!(of("workflow.execution.completed"), 1);
        assert_eq!(of("workflow.execution.failed"), 0);
        let completed = events.iter().find(|e| e.event_type().as_str() == "workflow.execution.completed").unwrap();
        let data = completed.payload.data().unwrap();
        assert_eq!(data["execution_id"], id.as_str());
        assert_eq!(data["output"]["status"], 200);
        // …and delivered to the subscriber, signed like every event.
        let mut delivered = Vec::new();
        for _ in 0..200 {
            delivered = subscriber.received_requests().await.unwrap();
            if delivered.len() >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut types: Vec<String> = delivered
            .iter()
            .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["type"].as_str().unwrap().to_owned())
            .collect();
        types.sort();
        assert_eq!(types, ["workflow.execution.completed", "workflow.execution.started"]);
        assert!(delivered.iter().all(|r| r.headers.contains_key("webhook-signature")));

        // The same workflow through a trigger URL: the call's JSON body is the input, and the
        // call itself is `trigger.*` (here its custom header).
        let path = format!("/api/v1/workflows/{workflow}/webhooks");
        let trigger = json_with_status(app.post_json_with_token(&path, &token, &json!({"name": "ci"})).await, 201).await;
        let r = app
            .client
            .post(app.url(trigger["url"].as_str().unwrap()))
            .header("X-Webhook-Secret", trigger["secret"].as_str().unwrap())
            .header("X-Source", "crm")
            .json(&json!({"topic": "favourite colour"}))
            .send()
            .await
            .unwrap();
        let by_trigger = json_with_status(r, 202).await;
        let done = finished(&app, &token, by_trigger["execution_id"].as_str().unwrap()).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["origin"], "trigger");
        assert_eq!(done["input"], json!({"topic": "favourite colour"}));
        assert_eq!(done["trigger"]["headers"]["x-source"], "crm");
        assert_eq!(done["steps"][0]["output"]["results"][0]["content"], "The customer's favourite colour is teal.");
        assert!(done["steps"].as_array().unwrap().iter().all(|s| s["status"] == "completed"), "{done}");
        let requests = receiver.received_requests().await.unwrap();
        assert_eq!(requests.len(), 2);
        let body: Value = serde_json::from_slice(&requests[1].body).unwrap();
        assert_eq!(body["reply"], done["steps"][1]["output"]["content"]);
        assert_eq!(requests[1].headers.get("x-topic").unwrap(), "favourite colour");
    })
    .await;
}

#[tokio::test]
async fn a_failing_step_fails_the_execution_and_skips_the_rest() {
    // Private targets are refused by the outbound guard (the default): nothing is contacted.
    on_both_databases(|_| {}, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let tenant = app.tenant_of(&token).await;
        let workflow = create_workflow(&app, &token, &json!({
            "name": "Fails",
            "steps": [
                {"id": "shape", "type": "transform", "output": {"n": "{{ input.n }}", "greeting": "hi {{ input.name }}"}},
                {"id": "call", "type": "http_request", "method": "GET", "url": "https://127.0.0.1:9/never"},
                {"id": "after", "type": "transform", "output": "{{ steps.shape.output.greeting }}"}
            ]
        })).await;
        let id = execute(&app, &token, &workflow, json!({"n": 3, "name": "Ada"})).await["execution_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let done = finished(&app, &token, &id).await;
        assert_eq!(done["status"], "failed", "{done}");
        let steps = done["steps"].as_array().unwrap();
        assert_eq!(steps[0]["status"], "completed");
        assert_eq!(steps[0]["output"], json!({"n": 3, "greeting": "hi Ada"}));
        assert_eq!(steps[1]["status"], "failed");
        let error = steps[1]["error"].as_str().unwrap();
        assert!(error.contains("127.0.0.1"), "{error}");
        assert_eq!(steps[2]["status"], "skipped");
        assert_eq!(steps[2]["started_at"], Value::Null);
        assert_eq!(done["output"], Value::Null);
        assert!(done["error"].as_str().unwrap().starts_with("step call failed"), "{done}");
        let events = app.events(&tenant).await;
        let failed = events.iter().find(|e| e.event_type().as_str() == "workflow.execution.failed").unwrap();
        assert_eq!(failed.payload.data().unwrap()["step_id"], "call");

        // A template that fails at run time names the parameter.
        let workflow = create_workflow(&app, &token, &json!({
            "name": "Missing input",
            "steps": [{"id": "a", "type": "transform", "output": "{{ input.absent.deeper }}"}]
        })).await;
        let id = execute(&app, &token, &workflow, json!({})).await["execution_id"].as_str().unwrap().to_owned();
        let done = finished(&app, &token, &id).await;
        assert_eq!(done["status"], "failed");
        assert!(done["steps"][0]["error"].as_str().unwrap().contains("absent"), "{done}");

        // The rendered URL is held to the webhooks' rule: https, a host, no credentials, no
        // fragment (checked before anything is sent).
        for (url, why) in [
            ("http://example.com/in", "must use https"),
            ("https://user:secret@example.com/in", "user name or password"),
            ("https://example.com/in#part", "fragment"),
            ("ftp://example.com/in", "must use https"),
        ] {
            let workflow = create_workflow(&app, &token, &json!({
                "name": "Bad URL",
                "steps": [{"id": "call", "type": "http_request", "method": "GET", "url": "{{ input.url }}"}]
            })).await;
            let id = execute(&app, &token, &workflow, json!({"url": url})).await["execution_id"].as_str().unwrap().to_owned();
            let done = finished(&app, &token, &id).await;
            assert_eq!(done["status"], "failed", "{url}");
            let error = done["steps"][0]["error"].as_str().unwrap();
            assert!(error.contains(why), "{url}: {error}");
        }
    })
    .await;
}

#[tokio::test]
async fn cancelling_lets_the_running_step_finish_and_starts_no_other() {
    on_both_databases(loopback, |app| async move {
        let receiver = receiver(Duration::from_millis(1500)).await;
        let token = app.access_token("ada@example.com").await;
        let tenant = app.tenant_of(&token).await;
        let workflow = create_workflow(&app, &token, &json!({
            "name": "Slow",
            "steps": [
                {"id": "slow", "type": "http_request", "method": "POST", "url": format!("{}/in", receiver.uri()), "body": "x"},
                {"id": "next", "type": "transform", "output": "never"}
            ]
        })).await;
        let id = execute(&app, &token, &workflow, json!({})).await["execution_id"].as_str().unwrap().to_owned();
        wait_until(&app, &tenant, &id, |e| e.steps()[0].status() == agentry_domain::workflows::StepStatus::Running).await;
        let path = format!("/api/v1/executions/{id}/cancel");
        let cancelled = json_with_status(app.post_json_with_token(&path, &token, &json!({})).await, 202).await;
        assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
        assert_eq!(cancelled["steps"][1]["status"], "skipped");

        let done = wait_until(&app, &tenant, &id, |e| e.steps()[0].status().is_terminal()).await;
        assert_eq!(done.steps()[0].status().as_str(), "completed", "the running step finished");
        assert_eq!(done.status().as_str(), "cancelled", "and the execution stays cancelled");
        app.drain().await;
        let shown = json_with_status(app.get_with_token(&format!("/api/v1/executions/{id}"), &token).await, 200).await;
        assert_eq!(shown["steps"][1]["status"], "skipped");
        assert_eq!(receiver.received_requests().await.unwrap().len(), 1);

        let again = json_with_status(app.post_json_with_token(&path, &token, &json!({})).await, 409).await;
        assert!(again["message"].as_str().unwrap().contains("cancelled"), "{again}");
        let events = app.events(&tenant).await;
        assert!(events.iter().all(|e| e.event_type().as_str() != "workflow.execution.completed"));
    })
    .await;
}

#[tokio::test]
async fn executions_are_listed_filtered_and_refused_where_they_must_be() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let workflow = create_workflow(
                &app,
                &token,
                &json!({
                    "name": "Echo", "steps": [{"id": "echo", "type": "transform", "output": "{{ input }}"}]
                }),
            )
            .await;
            let mut ids = Vec::new();
            for i in 0..3 {
                let id = execute(&app, &token, &workflow, json!({"i": i})).await["execution_id"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                let done = finished(&app, &token, &id).await;
                assert_eq!(done["output"], json!({"i": i}), "{done}");
                ids.push(id);
            }
            let list_path = format!("/api/v1/workflows/{workflow}/executions");
            let listed =
                json_with_status(app.get_with_token(&format!("{list_path}?per_page=2"), &token).await, 200)
                    .await;
            assert_eq!(listed["total"], 3);
            assert_eq!(listed["per_page"], 2);
            let page: Vec<&str> = listed["executions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["execution_id"].as_str().unwrap())
                .collect();
            assert_eq!(page, [ids[2].as_str(), ids[1].as_str()], "newest first");
            let completed = json_with_status(
                app.get_with_token(&format!("{list_path}?status=completed"), &token).await,
                200,
            )
            .await;
            assert_eq!(completed["total"], 3);
            let failed = json_with_status(
                app.get_with_token(&format!("{list_path}?status=failed"), &token).await,
                200,
            )
            .await;
            assert_eq!(failed["total"], 0);
            let bad =
                json_with_status(app.get_with_token(&format!("{list_path}?status=done"), &token).await, 422)
                    .await;
            assert_eq!(bad["details"][0]["field"], "status");

            // Input must be an object; absent means {}.
            let r = app
                .post_json_with_token(
                    &format!("/api/v1/workflows/{workflow}/execute"),
                    &token,
                    &json!({"input": [1]}),
                )
                .await;
            assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "input");
            let r = app
                .post_json_with_token(&format!("/api/v1/workflows/{workflow}/execute"), &token, &json!({}))
                .await;
            assert_eq!(r.status(), 202);

            // An inactive workflow is not executed.
            let r = app
                .patch_json_with_token(
                    &format!("/api/v1/workflows/{workflow}"),
                    &token,
                    &json!({"is_active": false}),
                )
                .await;
            assert_eq!(r.status(), 200);
            let r = app
                .post_json_with_token(
                    &format!("/api/v1/workflows/{workflow}/execute"),
                    &token,
                    &json!({"input": {}}),
                )
                .await;
            assert_eq!(json_with_status(r, 409).await["error"], "conflict");

            // Another tenant sees none of it.
            let other = app.access_token("eve@example.com").await;
            for path in [format!("/api/v1/executions/{}", ids[0]), list_path.clone()] {
                assert_eq!(app.get_with_token(&path, &other).await.status(), 404, "{path}");
            }
            let r = app
                .post_json_with_token(&format!("/api/v1/executions/{}/cancel", ids[0]), &other, &json!({}))
                .await;
            assert_eq!(r.status(), 404);
            let r = app
                .post_json_with_token(&format!("/api/v1/workflows/{workflow}/execute"), &other, &json!({}))
                .await;
            assert_eq!(r.status(), 404);
            assert_eq!(app.get_with_token("/api/v1/executions/exe_missing", &token).await.status(), 404);

            // A key needs workflows:execute to execute, workflows:read to read.
            let key = json_with_status(
                app.post_json_with_token(
                    "/api/v1/auth/api-keys",
                    &token,
                    &json!({"name": "r", "scopes": ["workflows:read"]}),
                )
                .await,
                201,
            )
            .await["key"]
                .as_str()
                .unwrap()
                .to_owned();
            assert_eq!(
                app.get_with_token(&format!("/api/v1/executions/{}", ids[0]), &key).await.status(),
                200
            );
            let r = app
                .post_json_with_token(&format!("/api/v1/executions/{}/cancel", ids[0]), &key, &json!({}))
                .await;
            assert_eq!(r.status(), 403);
        },
    )
    .await;
}

#[tokio::test]
async fn a_memory_add_step_stores_an_entry_a_later_step_finds() {
    on_both_databases(|_| {}, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let workflow = create_workflow(&app, &token, &json!({
            "name": "Remember",
            "steps": [
                {"id": "keep", "type": "memory_add", "content": "{{ input.fact }}", "memory_type": "semantic",
                 "metadata": {"from": "{{ input.who }}"}},
                {"id": "find", "type": "memory_search", "query": "{{ input.fact }}", "memory_type": "semantic", "top_k": 1}
            ]
        })).await;
        let input = json!({"fact": "The office plants are watered on Tuesdays.", "who": "Ada"});
        let id = execute(&app, &token, &workflow, input).await["execution_id"].as_str().unwrap().to_owned();
        let done = finished(&app, &token, &id).await;
        assert_eq!(done["status"], "completed", "{done}");
        let entry = &done["steps"][0]["output"];
        let entry_id = entry["id"].as_str().unwrap();
        assert!(entry_id.starts_with("mem_"), "{entry}");
        assert_eq!(entry["source"], "workflow");
        assert_eq!(entry["metadata"], json!({"from": "Ada"}));
        assert_eq!(done["steps"][1]["output"]["results"][0]["id"], entry_id);
        // The entry is the tenant's, as if added through the API.
        let r = app.get_with_token(&format!("/api/v1/memory/{entry_id}"), &token).await;
        assert_eq!(json_with_status(r, 200).await["content"], "The office plants are watered on Tuesdays.");
    })
    .await;
}

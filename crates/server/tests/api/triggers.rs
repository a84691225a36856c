//! Workflow webhook triggers over HTTP: the secret shown once, calls proved by the secret or a
//! signature, methods, idempotency, counting under concurrency, the tenant's plan limit, and
//! tenant isolation, on both databases.

use agentry_domain::billing::CreditRepository as _;
use agentry_domain::ids::TenantId;
use agentry_domain::tenancy::Plan;
use agentry_domain::workflows::TriggerRepository as _;
use reqwest::Method;
use serde_json::{Value, json};

use crate::executions::{create_workflow, finished};
use crate::helpers::{TestApp, json_with_status, on_both_databases, spawn_with_clock};

/// Lowercase hex HMAC-SHA256 of `message` under `key`, as a sender computes it.
pub fn hmac_hex(key: &str, message: &[u8]) -> String {
    let tag = ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes()), message);
    tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A one-step workflow that echoes what the call sent.
pub fn echo() -> Value {
    json!({
        "name": "Echo",
        "steps": [{"id": "echo", "type": "transform", "output": {"method": "{{ trigger.method }}", "order": "{{ input.order }}"}}]
    })
}

async fn create_trigger(app: &TestApp, token: &str, workflow: &str, body: &Value) -> Value {
    let r = app.post_json_with_token(&format!("/api/v1/workflows/{workflow}/webhooks"), token, body).await;
    json_with_status(r, 201).await
}

async fn list_triggers(app: &TestApp, token: &str, workflow: &str) -> Value {
    json_with_status(app.get_with_token(&format!("/api/v1/workflows/{workflow}/webhooks"), token).await, 200)
        .await
}

/// A signed-in user with a workflow and a trigger on it: (token, workflow id, trigger).
async fn setup(app: &TestApp, email: &str, trigger: Value) -> (String, String, Value) {
    let token = app.access_token(email).await;
    let workflow = create_workflow(app, &token, &echo()).await;
    let created = create_trigger(app, &token, &workflow, &trigger).await;
    (token, workflow, created)
}

fn url(app: &TestApp, trigger: &Value) -> String {
    app.url(trigger["url"].as_str().unwrap())
}

fn secret_of(trigger: &Value) -> String {
    trigger["secret"].as_str().unwrap().to_owned()
}

async fn call(app: &TestApp, trigger: &Value, headers: &[(&str, &str)], body: &str) -> reqwest::Response {
    let mut request = app.client.post(url(app, trigger)).body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

async fn set_plan(app: &TestApp, token: &str, plan: Plan) {
    let tenant = TenantId::from_string(app.tenant_of(token).await);
    assert!(agentry_store::CreditStore::new(app.db.clone()).set_plan(&tenant, plan).await.unwrap());
}

#[tokio::test]
async fn the_secret_is_shown_only_at_creation_and_kept_sealed() {
    on_both_databases(
        |_| {},
        |app| async move {
            let (token, workflow, created) =
                setup(&app, "ada@example.com", json!({"name": "CRM leads"})).await;
            let id = created["id"].as_str().unwrap();
            assert!(id.starts_with("trg_"), "{created}");
            assert_eq!(created["workflow_id"], workflow);
            assert_eq!(created["name"], "CRM leads");
            assert_eq!(created["is_active"], true);
            assert_eq!(created["trigger_count"], 0);
            assert_eq!(created["allowed_methods"], json!(["POST"]));
            let path = created["path"].as_str().unwrap();
            assert!(path.len() >= 22, "at least 128 bits: {path}");
            assert!(
                path.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "URL-safe: {path}"
            );
            assert_eq!(created["url"], format!("/api/v1/webhooks/trigger/{path}"));
            assert!(created["created_at"].as_str().unwrap().ends_with('Z'));
            let secret = secret_of(&created);
            assert!(secret.starts_with("whsec_") && secret.len() > 40, "{secret}");

            let listed = list_triggers(&app, &token, &workflow).await;
            assert_eq!(listed["items"].as_array().unwrap().len(), 1);
            let item = &listed["items"][0];
            assert_eq!(item["id"], created["id"]);
            assert_eq!(item["path"], created["path"]);
            assert!(item.get("secret").is_none(), "{item}");
            assert!(!listed.to_string().contains(&secret));

            let stored =
                agentry_store::TriggerStore::new(app.db.clone()).find_by_path(path).await.unwrap().unwrap();
            assert!(!stored.trigger.secret.0.contains(&secret), "the secret is sealed at rest");
            assert_eq!(stored.trigger.run_as.user_id.as_str(), {
                let me = json_with_status(app.get_with_token("/api/v1/auth/me", &token).await, 200).await;
                me["id"].as_str().unwrap().to_owned()
            });

            // Bad requests name their field.
            let r = app
                .post_json_with_token(
                    &format!("/api/v1/workflows/{workflow}/webhooks"),
                    &token,
                    &json!({"name": "x", "allowed_methods": ["POST", "TRACE"]}),
                )
                .await;
            assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "allowed_methods[1]");
            let r = app
                .post_json_with_token(&format!("/api/v1/workflows/{workflow}/webhooks"), &token, &json!({}))
                .await;
            assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "name");
            let r = app
                .post_json_with_token("/api/v1/workflows/wf_missing/webhooks", &token, &json!({"name": "x"}))
                .await;
            assert_eq!(r.status(), 404);
        },
    )
    .await;
}

#[tokio::test]
async fn a_call_with_the_secret_executes_the_workflow_with_the_request_as_input() {
    on_both_databases(
        |_| {},
        |app| async move {
            let (token, workflow, trigger) = setup(&app, "ada@example.com", json!({"name": "Orders"})).await;
            let secret = secret_of(&trigger);
            let r = app
                .client
                .post(format!("{}?source=crm&tag=a&tag=b", url(&app, &trigger)))
                .header("X-Webhook-Secret", &secret)
                .header("X-Custom", "yes")
                .json(&json!({"order": 42}))
                .send()
                .await
                .unwrap();
            assert!(r.headers().contains_key("x-ratelimit-limit"), "counted against the tenant's plan");
            assert!(r.headers().contains_key("x-ratelimit-remaining"));
            let started = json_with_status(r, 202).await;
            assert_eq!(started["status"], "running");
            assert_eq!(started["trigger_id"], trigger["id"]);
            assert_eq!(started["duplicate"], false);
            assert!(started["started_at"].as_str().unwrap().ends_with('Z'));
            let id = started["execution_id"].as_str().unwrap();

            let execution = finished(&app, &token, id).await;
            assert_eq!(execution["status"], "completed", "{execution}");
            assert_eq!(execution["origin"], "trigger");
            assert_eq!(execution["workflow_id"], workflow);
            assert_eq!(execution["output"], json!({"method": "POST", "order": 42}));
            assert_eq!(
                execution["input"],
                json!({"order": 42}),
                "the body is the input, as /execute takes it"
            );
            let details = &execution["trigger"];
            assert_eq!(details["method"], "POST");
            assert_eq!(details["query"], json!({"source": "crm", "tag": ["a", "b"]}));
            assert_eq!(details["body"], json!({"order": 42}));
            assert_eq!(details["headers"]["x-custom"], "yes");
            assert_eq!(details["headers"]["content-type"], "application/json");
            assert!(details["headers"].get("x-webhook-secret").is_none(), "{details}");
            assert!(!execution.to_string().contains(&secret));

            // A form body is parsed; other text is kept as text.
            let form = call(
                &app,
                &trigger,
                &[("X-Webhook-Secret", &secret), ("Content-Type", "application/x-www-form-urlencoded")],
                "order=7&note=a+b",
            )
            .await;
            let form = json_with_status(form, 202).await;
            let text = call(
                &app,
                &trigger,
                &[("X-Webhook-Secret", &secret), ("Content-Type", "text/plain")],
                "plain words",
            )
            .await;
            let text = json_with_status(text, 202).await;
            for (started, body, input) in [
                (form, json!({"order": "7", "note": "a b"}), json!({"order": "7", "note": "a b"})),
                (text, json!("plain words"), json!({"body": "plain words"})),
            ] {
                let e = json_with_status(
                    app.get_with_token(
                        &format!("/api/v1/executions/{}", started["execution_id"].as_str().unwrap()),
                        &token,
                    )
                    .await,
                    200,
                )
                .await;
                assert_eq!((&e["input"], &e["trigger"]["body"]), (&input, &body));
            }
            let listed = list_triggers(&app, &token, &workflow).await;
            assert_eq!(listed["items"][0]["trigger_count"], 3);
        },
    )
    .await;
}

#[tokio::test]
async fn a_wrong_or_missing_secret_is_refused_and_a_signed_body_accepted() {
    on_both_databases(
        |_| {},
        |app| async move {
            let (token, workflow, trigger) = setup(&app, "ada@example.com", json!({"name": "Signed"})).await;
            let secret = secret_of(&trigger);
            let body = r#"{"order":42}"#;
            let json = ("Content-Type", "application/json");

            let r = call(&app, &trigger, &[json], body).await;
            assert!(r.headers().get("www-authenticate").is_none(), "no bearer challenge on a trigger");
            assert_eq!(json_with_status(r, 401).await["error"], "unauthorized");
            let wrong = format!("{secret}x");
            assert_eq!(call(&app, &trigger, &[json, ("X-Webhook-Secret", &wrong)], body).await.status(), 401);

            let now = chrono::Utc::now().timestamp();
            let signed = |t: i64, body: &str| {
                format!("t={t},v1={}", hmac_hex(&secret, format!("{t}.{body}").as_bytes()))
            };
            let good = signed(now, body);
            let tampered = r#"{"order":43}"#;
            assert_eq!(
                call(&app, &trigger, &[json, ("X-Service-Signature", &good)], tampered).await.status(),
                401
            );
            let stale = signed(now - 600, body);
            assert_eq!(
                call(&app, &trigger, &[json, ("X-Service-Signature", &stale)], body).await.status(),
                401
            );
            let other_key =
                format!("t={now},v1={}", hmac_hex("whsec_other", format!("{now}.{body}").as_bytes()));
            assert_eq!(
                call(&app, &trigger, &[json, ("X-Service-Signature", &other_key)], body).await.status(),
                401
            );

            let r = call(&app, &trigger, &[json, ("X-Service-Signature", &good)], body).await;
            let started = json_with_status(r, 202).await;
            let e = json_with_status(
                app.get_with_token(
                    &format!("/api/v1/executions/{}", started["execution_id"].as_str().unwrap()),
                    &token,
                )
                .await,
                200,
            )
            .await;
            assert!(e["trigger"]["headers"].get("x-service-signature").is_none(), "{e}");
            assert_eq!(e["input"], json!({"order": 42}));

            // Refused calls started nothing and counted nothing.
            let listed = list_triggers(&app, &token, &workflow).await;
            assert_eq!(listed["items"][0]["trigger_count"], 1);
            let executions = json_with_status(
                app.get_with_token(&format!("/api/v1/workflows/{workflow}/executions"), &token).await,
                200,
            )
            .await;
            assert_eq!(executions["total"], 1, "{executions}");

            // A JSON body that is not JSON, and one past the size limit.
            let r = call(&app, &trigger, &[json, ("X-Webhook-Secret", &secret)], "{oops").await;
            assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "body");
            let big = "x".repeat(1024 * 1024 + 1);
            let r =
                call(&app, &trigger, &[("Content-Type", "text/plain"), ("X-Webhook-Secret", &secret)], &big)
                    .await;
            assert_eq!(json_with_status(r, 413).await["error"], "payload_too_large");
        },
    )
    .await;
}

#[tokio::test]
async fn a_method_not_allowed_is_405_with_allow() {
    on_both_databases(
        |_| {},
        |app| async move {
            let (_, _, trigger) = setup(
                &app,
                "ada@example.com",
                json!({"name": "Put or post", "allowed_methods": ["post", "PUT"]}),
            )
            .await;
            assert_eq!(trigger["allowed_methods"], json!(["POST", "PUT"]));
            let secret = secret_of(&trigger);
            for method in [Method::GET, Method::DELETE, Method::PATCH, Method::OPTIONS] {
                let r = app
                    .client
                    .request(method.clone(), url(&app, &trigger))
                    .header("X-Webhook-Secret", &secret)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.headers()["allow"], "POST, PUT", "{method}");
                assert_eq!(json_with_status(r, 405).await["error"], "method_not_allowed", "{method}");
            }
            for method in [Method::POST, Method::PUT] {
                let r = app
                    .client
                    .request(method.clone(), url(&app, &trigger))
                    .header("X-Webhook-Secret", &secret)
                    .send()
                    .await
                    .unwrap();
                let started = json_with_status(r, 202).await;
                assert_eq!(started["duplicate"], false, "{method}");
            }

            // A GET trigger: its query is the input, HEAD is served where GET is.
            let (token, _, get) =
                setup(&app, "eve@example.com", json!({"name": "Get", "allowed_methods": ["GET"]})).await;
            let r = app
                .client
                .get(format!("{}?id=9", url(&app, &get)))
                .header("X-Webhook-Secret", secret_of(&get))
                .send()
                .await
                .unwrap();
            let started = json_with_status(r, 202).await;
            let e = json_with_status(
                app.get_with_token(
                    &format!("/api/v1/executions/{}", started["execution_id"].as_str().unwrap()),
                    &token,
                )
                .await,
                200,
            )
            .await;
            assert_eq!(e["trigger"]["method"], "GET");
            assert_eq!(e["trigger"]["query"], json!({"id": "9"}));
            assert_eq!((&e["input"], &e["trigger"]["body"]), (&json!({}), &Value::Null));
            let r = app
                .client
                .post(url(&app, &get))
                .header("X-Webhook-Secret", secret_of(&get))
                .send()
                .await
                .unwrap();
            assert_eq!(r.headers()["allow"], "GET, HEAD");
            assert_eq!(r.status(), 405);
        },
    )
    .await;
}

#[tokio::test]
async fn a_deleted_trigger_or_one_of_a_deleted_workflow_is_404() {
    on_both_databases(
        |_| {},
        |app| async move {
            let (token, workflow, trigger) =
                setup(&app, "ada@example.com", json!({"name": "Short-lived"})).await;
            let secret = secret_of(&trigger);
            let headers = [("X-Webhook-Secret", secret.as_str())];
            let first = json_with_status(call(&app, &trigger, &headers, "").await, 202).await;
            let path = format!("/api/v1/workflows/{workflow}/webhooks/{}", trigger["id"].as_str().unwrap());
            assert_eq!(app.delete_with_token(&path, &token).await.status(), 204);
            let r = call(&app, &trigger, &headers, "").await;
            assert_eq!(json_with_status(r, 404).await["error"], "not_found");
            assert_eq!(app.delete_with_token(&path, &token).await.status(), 404);
            assert!(list_triggers(&app, &token, &workflow).await["items"].as_array().unwrap().is_empty());
            let r = app
                .client
                .post(app.url("/api/v1/webhooks/trigger/no-such-path"))
                .header("X-Webhook-Secret", &secret)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 404);

            let again = create_trigger(&app, &token, &workflow, &json!({"name": "Again"})).await;
            let headers = [("X-Webhook-Secret", secret_of(&again))];
            let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            let second = json_with_status(call(&app, &again, &headers, "").await, 202).await;
            // Deleting a workflow while one of its executions records its last step can deadlock
            // on PostgreSQL (the executions' area, reported); here the executions end first.
            for started in [first, second] {
                finished(&app, &token, started["execution_id"].as_str().unwrap()).await;
            }
            let r = app.delete_with_token(&format!("/api/v1/workflows/{workflow}"), &token).await;
            let status = r.status();
            assert_eq!(status, 204, "{}", r.text().await.unwrap());
            assert_eq!(
                call(&app, &again, &headers, "").await.status(),
                404,
                "the workflow's triggers went with it"
            );
        },
    )
    .await;
}

#[tokio::test]
async fn an_inactive_workflow_is_a_conflict() {
    on_both_databases(
        |_| {},
        |app| async move {
            let (token, workflow, trigger) = setup(&app, "ada@example.com", json!({"name": "Paused"})).await;
            let r = app
                .patch_json_with_token(
                    &format!("/api/v1/workflows/{workflow}"),
                    &token,
                    &json!({"is_active": false}),
                )
                .await;
            assert_eq!(r.status(), 200);
            let r = call(&app, &trigger, &[("X-Webhook-Secret", &secret_of(&trigger))], "").await;
            assert_eq!(json_with_status(r, 409).await["error"], "conflict");
            assert_eq!(list_triggers(&app, &token, &workflow).await["items"][0]["trigger_count"], 0);
        },
    )
    .await;
}

#[tokio::test]
async fn fifty_concurrent_calls_leave_trigger_count_at_fifty() {
    on_both_databases(
        |_| {},
        |app| async move {
            let (token, workflow, trigger) = setup(&app, "ada@example.com", json!({"name": "Busy"})).await;
            set_plan(&app, &token, Plan::Pro).await;
            let secret = secret_of(&trigger);
            let calls = (0..50).map(|i| {
                let request = app
                    .client
                    .post(url(&app, &trigger))
                    .header("X-Webhook-Secret", &secret)
                    .json(&json!({"order": i}));
                async move { request.send().await.unwrap() }
            });
            let responses = futures_util::future::join_all(calls).await;
            let mut ids = std::collections::HashSet::new();
            for r in responses {
                let started = json_with_status(r, 202).await;
                ids.insert(started["execution_id"].as_str().unwrap().to_owned());
            }
            assert_eq!(ids.len(), 50, "fifty executions");
            assert_eq!(list_triggers(&app, &token, &workflow).await["items"][0]["trigger_count"], 50);
        },
    )
    .await;
}

#[tokio::test]
async fn a_repeated_idempotency_key_returns_the_first_execution() {
    on_both_databases(
        |_| {},
        |app| async move {
            let (token, workflow, trigger) = setup(&app, "ada@example.com", json!({"name": "Once"})).await;
            let secret = secret_of(&trigger);
            let send = |key: &'static str| {
                let request = app
                    .client
                    .post(url(&app, &trigger))
                    .header("X-Webhook-Secret", &secret)
                    .header("Idempotency-Key", key)
                    .json(&json!({"order": 1}));
                async move { request.send().await.unwrap() }
            };
            let first = json_with_status(send("order-1").await, 202).await;
            let again = json_with_status(send("order-1").await, 202).await;
            assert_eq!(again["execution_id"], first["execution_id"]);
            assert_eq!((first["duplicate"].clone(), again["duplicate"].clone()), (json!(false), json!(true)));
            let other = json_with_status(send("order-2").await, 202).await;
            assert_ne!(other["execution_id"], first["execution_id"]);
            assert_eq!(list_triggers(&app, &token, &workflow).await["items"][0]["trigger_count"], 2);
            let long: &'static str = Box::leak("k".repeat(256).into_boxed_str());
            assert_eq!(
                json_with_status(send(long).await, 422).await["details"][0]["field"],
                "Idempotency-Key"
            );
        },
    )
    .await;
}

#[tokio::test]
async fn trigger_calls_spend_the_tenants_plan_limit() {
    let app = spawn_with_clock(|_| {}).await;
    let (token, _, trigger) = setup(&app, "ada@example.com", json!({"name": "Limited"})).await;
    let secret = secret_of(&trigger);
    let mut accepted = 0;
    loop {
        let r = call(&app, &trigger, &[("X-Webhook-Secret", &secret)], "").await;
        if r.status() == 429 {
            assert_eq!(r.headers()["x-ratelimit-limit"], "60");
            assert_eq!(r.headers()["x-ratelimit-remaining"], "0");
            let retry_after: u64 = r.headers()["retry-after"].to_str().unwrap().parse().unwrap();
            assert!((1..=60).contains(&retry_after));
            let body = json_with_status(r, 429).await;
            assert_eq!(body["error"], "rate_limit_exceeded");
            assert!(body["retry_after"].as_u64().is_some());
            break;
        }
        assert_eq!(r.status(), 202);
        assert_eq!(r.headers()["x-ratelimit-limit"], "60");
        accepted += 1;
        assert!(accepted <= 60, "the limit never applied");
    }
    // Setting up (the workflow, the trigger) spent some of the same budget.
    assert!((55..60).contains(&accepted), "{accepted} calls before the limit");
    let r = app.get_with_token("/api/v1/agents", &token).await;
    assert_eq!(r.status(), 429, "the tenant's requests share the budget");
    app.clock().advance(chrono::Duration::seconds(60));
    assert_eq!(call(&app, &trigger, &[("X-Webhook-Secret", &secret)], "").await.status(), 202);
}

#[tokio::test]
async fn another_tenant_gets_404_on_every_trigger_route() {
    on_both_databases(
        |_| {},
        |app| async move {
            let (_, workflow, trigger) = setup(&app, "ada@example.com", json!({"name": "Ada's"})).await;
            let eve = app.access_token("eve@example.com").await;
            let own = create_workflow(&app, &eve, &echo()).await;
            let trg = trigger["id"].as_str().unwrap();
            let base = format!("/api/v1/workflows/{workflow}/webhooks");
            assert_eq!(app.get_with_token(&base, &eve).await.status(), 404);
            assert_eq!(app.post_json_with_token(&base, &eve, &json!({"name": "mine"})).await.status(), 404);
            assert_eq!(app.delete_with_token(&format!("{base}/{trg}"), &eve).await.status(), 404);
            assert_eq!(
                app.delete_with_token(&format!("/api/v1/workflows/{own}/webhooks/{trg}"), &eve)
                    .await
                    .status(),
                404
            );
            assert!(
                json_with_status(
                    app.get_with_token(&format!("/api/v1/workflows/{own}/webhooks"), &eve).await,
                    200
                )
                .await["items"]
                    .as_array()
                    .unwrap()
                    .is_empty()
            );
            // Ada's trigger is untouched.
            assert_eq!(
                call(&app, &trigger, &[("X-Webhook-Secret", &secret_of(&trigger))], "").await.status(),
                202
            );
        },
    )
    .await;
}

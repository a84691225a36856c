//! Outbound webhooks over HTTP: subscriptions, signed deliveries to a real receiver on
//! loopback, retries, the delivery log, manual retries, rotation, the outbound guard, and
//! tenant isolation. Receivers are wiremock servers on 127.0.0.1; nothing else is contacted.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{TestApp, json_with_status, on_both_databases, spawn_with};

/// Webhooks to loopback receivers, retried after 1 s, looked for every 50 ms.
fn loopback(config: &mut agentry_server::Config) {
    config.webhook_allow_insecure = true;
    config.webhook_allow_private = true;
    config.webhook_retry_schedule = "0,1,1,1,1".into();
    config.webhook_poll_interval_ms = 50;
}

async fn receiver(status: u16) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(status))
        .mount(&server)
        .await;
    server
}

async fn subscribe(app: &TestApp, token: &str, url: &str, events: Value) -> Value {
    let r = app.post_json_with_token("/api/v1/webhooks", token, &json!({"url": url, "events": events})).await;
    json_with_status(r, 201).await
}

/// Waits until `done` holds for the receiver's requests (at most 20 s), and returns them.
async fn received_until(
    server: &MockServer,
    done: impl Fn(&[wiremock::Request]) -> bool,
) -> Vec<wiremock::Request> {
    for _ in 0..400 {
        let requests = server.received_requests().await.unwrap_or_default();
        if done(&requests) {
            return requests;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the receiver did not get what was expected in time");
}

/// Waits until the subscription's newest delivery has `status`, and returns the deliveries.
/// Looks every 250 ms, within the plan's per-minute request limit.
async fn deliveries_until(app: &TestApp, token: &str, webhook: &str, status: &str) -> Vec<Value> {
    for _ in 0..80 {
        let r = app.get_with_token(&format!("/api/v1/webhooks/{webhook}/deliveries"), token).await;
        let items = json_with_status(r, 200).await["items"].as_array().cloned().unwrap_or_default();
        if items.first().is_some_and(|d| d["status"] == status) {
            return items;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("no delivery of {webhook} became {status}");
}

fn header(request: &wiremock::Request, name: &str) -> String {
    request.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

/// Runs `scripts/webhook_verify.py` (a hand-written `X-Service-Signature` check and the
/// `standardwebhooks` reference library) on a delivery; `None` when the Python tools are not
/// installed here (a failure under `AGENTRY_REQUIRE_TOOLS=1`).
fn verify_with_python(secret: &str, body: &str, request: &wiremock::Request) -> Option<(bool, bool)> {
    let (root, python) = crate::helpers::python_tools("the Standard Webhooks check")?;
    let headers: serde_json::Map<String, Value> =
        ["X-Service-Signature", "webhook-id", "webhook-timestamp", "webhook-signature"]
            .iter()
            .map(|n| ((*n).to_owned(), Value::String(header(request, n))))
            .collect();
    let input = json!({"secret": secret, "body": body, "headers": headers}).to_string();
    let mut child = std::process::Command::new(python)
        .arg(root.join("scripts/webhook_verify.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "webhook_verify.py failed");
    let verdict: Value = serde_json::from_slice(&out.stdout).unwrap();
    Some((verdict["service_signature"] == true, verdict["standard_webhooks"] == true))
}

/// The `X-Service-Signature` check, by hand with ring's HMAC: `t=<unix>,v1=<hex>` over
/// `"<t>.<body>"` keyed with the secret's bytes.
fn service_signature_valid(secret: &str, body: &[u8], header: &str) -> bool {
    let mut t = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => t = Some(v.to_owned()),
            Some(("v1", v)) => signatures.push(v.to_owned()),
            _ => {}
        }
    }
    let Some(t) = t else { return false };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let message = [t.as_bytes(), b".", body].concat();
    signatures.iter().any(|hex| {
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|i| hex.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
            .collect();
        bytes.is_some_and(|b| ring::hmac::verify(&key, &message, &b).is_ok())
    })
}

#[tokio::test]
async fn a_subscriber_gets_agent_created_signed_both_ways() {
    on_both_databases(loopback, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let server = receiver(200).await;
        let hook = subscribe(&app, &token, &format!("{}/hook", server.uri()), json!(["agent.created"])).await;
        let secret = hook["signing_secret"].as_str().unwrap().to_owned();
        assert!(secret.starts_with("whsec_"), "{hook}");
        assert_eq!(hook["status"], "active");
        let agent = app.create_agent(&token, json!({"name": "Helper"})).await;
        let requests = received_until(&server, |r| !r.is_empty()).await;
        let request = &requests[0];
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["type"], "agent.created");
        assert_eq!(body["data"]["id"], agent["id"]);
        assert_eq!(body["api_version"], "2026-11-01");
        for key in ["id", "created_at", "tenant_id"] {
            assert!(body[key].is_string(), "{key} missing: {body}");
        }
        assert_eq!(header(request, "webhook-id"), body["id"].as_str().unwrap());
        assert_eq!(header(request, "content-type"), "application/json");
        assert!(header(request, "user-agent").starts_with("Agentry-Webhooks/"));
        // The hand-written check accepts it; a wrong secret or an altered body does not.
        let signature = header(request, "X-Service-Signature");
        assert!(service_signature_valid(&secret, &request.body, &signature));
        assert!(!service_signature_valid("whsec_wrong", &request.body, &signature));
        let mut altered = request.body.clone();
        altered.push(b' ');
        assert!(!service_signature_valid(&secret, &altered, &signature));
        // And so do the reference library and the documented receiver script.
        let raw = String::from_utf8(request.body.clone()).unwrap();
        if let Some(verdict) = verify_with_python(&secret, &raw, request) {
            assert_eq!(verdict, (true, true), "a genuine delivery must verify both ways");
            let wrong = verify_with_python("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", &raw, request).unwrap();
            assert_eq!(wrong, (false, false), "a wrong secret must be rejected both ways");
            let altered = verify_with_python(&secret, &raw.replace("Helper", "Helpers"), request).unwrap();
            assert_eq!(altered, (false, false), "an altered body must be rejected both ways");
        }
        // The delivery log shows it.
        let items = deliveries_until(&app, &token, hook["id"].as_str().unwrap(), "delivered").await;
        assert_eq!(items.len(), 1);
        let d = &items[0];
        assert_eq!(
            (d["event_type"].as_str(), d["attempts"].as_u64(), d["response_status"].as_u64()),
            (Some("agent.created"), Some(1), Some(200))
        );
        assert!(d["delivered_at"].is_string() && d["response_time_ms"].is_u64());
        assert_eq!(d["event_id"], body["id"]);
    })
    .await;
}

#[tokio::test]
async fn a_failing_receiver_gets_five_attempts_then_the_subscription_fails_until_reactivated() {
    on_both_databases(loopback, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let server = MockServer::start().await;
        let failing = Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(500).set_body_string("receiver is down"))
            .mount_as_scoped(&server)
            .await;
        let hook = subscribe(&app, &token, &format!("{}/hook", server.uri()), json!(["*"])).await;
        let id = hook["id"].as_str().unwrap().to_owned();
        app.create_agent(&token, json!({"name": "One"})).await;
        let items = deliveries_until(&app, &token, &id, "failed").await;
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests.len(), 5, "exactly five attempts");
        // One event id on every attempt, and the configured delays (1 s) between them.
        let ids: std::collections::HashSet<String> =
            requests.iter().map(|r| header(r, "webhook-id")).collect();
        assert_eq!(ids.len(), 1);
        let times: Vec<i64> =
            requests.iter().map(|r| header(r, "webhook-timestamp").parse().unwrap()).collect();
        assert!(times.windows(2).all(|w| w[1] - w[0] >= 1), "attempts must wait their delay: {times:?}");
        let delivery = &items[0];
        assert_eq!(delivery["attempts"], 5);
        assert_eq!(delivery["response_status"], 500);
        let delivery_id = delivery["id"].as_str().unwrap().to_owned();
        let r = app
            .get_with_token(&format!("/api/v1/webhooks/{id}/deliveries/{delivery_id}/attempts"), &token)
            .await;
        let attempts = json_with_status(r, 200).await;
        let log = attempts["items"].as_array().unwrap();
        assert_eq!(log.len(), 5);
        assert!(log.iter().all(|a| a["status"] == "failed" && a["error_kind"] == "http_status"));
        assert_eq!(log[4]["response_body"], "receiver is down");
        let r = app.get_with_token(&format!("/api/v1/webhooks/{id}"), &token).await;
        assert_eq!(json_with_status(r, 200).await["status"], "failed");

        // While failed, new events are kept as skipped deliveries, not sent.
        app.create_agent(&token, json!({"name": "Two"})).await;
        app.drain().await;
        let r = app.get_with_token(&format!("/api/v1/webhooks/{id}/deliveries"), &token).await;
        let items = json_with_status(r, 200).await["items"].as_array().unwrap().clone();
        assert_eq!(items.len(), 2);
        assert_eq!((items[0]["status"].as_str(), items[0]["attempts"].as_u64()), (Some("skipped"), Some(0)));
        assert_eq!(server.received_requests().await.unwrap().len(), 5);

        // The receiver is fixed: a manual retry delivers the failed delivery.
        drop(failing);
        Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
        let r = app
            .client
            .post(app.url(&format!("/api/v1/webhooks/{id}/deliveries/{delivery_id}/retry")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        let retried = json_with_status(r, 200).await;
        assert_eq!((retried["status"].as_str(), retried["attempts"].as_u64()), (Some("delivered"), Some(6)));

        // Set active again: new events are delivered.
        let r = app
            .patch_json_with_token(&format!("/api/v1/webhooks/{id}"), &token, &json!({"status": "active"}))
            .await;
        assert_eq!(json_with_status(r, 200).await["status"], "active");
        app.create_agent(&token, json!({"name": "Three"})).await;
        received_until(&server, |r| {
            r.iter()
                .any(|q| serde_json::from_slice::<Value>(&q.body).is_ok_and(|b| b["data"]["name"] == "Three"))
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn gone_disables_the_subscription_at_once() {
    let app = spawn_with(loopback).await;
    let token = app.access_token("ada@example.com").await;
    let server = receiver(410).await;
    let hook = subscribe(&app, &token, &format!("{}/hook", server.uri()), json!(["agent.created"])).await;
    let id = hook["id"].as_str().unwrap();
    app.create_agent(&token, json!({"name": "One"})).await;
    let items = deliveries_until(&app, &token, id, "failed").await;
    assert_eq!(items[0]["attempts"], 1);
    let r = app.get_with_token(&format!("/api/v1/webhooks/{id}"), &token).await;
    assert_eq!(json_with_status(r, 200).await["status"], "disabled");
}

#[tokio::test]
async fn a_test_send_reports_the_receivers_answer_and_rotation_signs_with_both_secrets() {
    let app = spawn_with(loopback).await;
    let token = app.access_token("ada@example.com").await;
    let server = receiver(202).await;
    let hook = subscribe(&app, &token, &format!("{}/hook", server.uri()), json!(["agent.message"])).await;
    let id = hook["id"].as_str().unwrap();
    let old = hook["signing_secret"].as_str().unwrap().to_owned();
    let r = app
        .post_json_with_token(
            &format!("/api/v1/webhooks/{id}/test"),
            &token,
            &json!({"event_type": "billing.credits.low"}),
        )
        .await;
    let report = json_with_status(r, 200).await;
    assert_eq!((report["success"].as_bool(), report["response_status"].as_u64()), (Some(true), Some(202)));
    assert!(report["response_time_ms"].is_u64() && report["delivery_id"].is_string());
    let r = app
        .post_json_with_token(
            &format!("/api/v1/webhooks/{id}/test"),
            &token,
            &json!({"event_type": "agent.deleted"}),
        )
        .await;
    assert_eq!(r.status(), 422);

    let r =
        app.post_json_with_token(&format!("/api/v1/webhooks/{id}/rotate-secret"), &token, &json!({})).await;
    let rotated = json_with_status(r, 200).await;
    let new = rotated["signing_secret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert!(rotated["previous_secret_expires_at"].is_string());
    let r = app
        .post_json_with_token(
            &format!("/api/v1/webhooks/{id}/test"),
            &token,
            // The test send takes every name a subscription takes: an alias sends its last type.
            &json!({"event_type": "agent.message"}),
        )
        .await;
    json_with_status(r, 200).await;
    let requests = received_until(&server, |r| r.len() == 2).await;
    let last = &requests[1];
    let sample: Value = serde_json::from_slice(&last.body).unwrap();
    assert_eq!(sample["type"], "agent.message.completed");
    let signature = header(last, "X-Service-Signature");
    assert_eq!(signature.matches("v1=").count(), 2);
    assert!(service_signature_valid(&new, &last.body, &signature));
    assert!(service_signature_valid(&old, &last.body, &signature));
    assert_eq!(header(last, "webhook-signature").split(' ').count(), 2);
}

#[tokio::test]
async fn subscriptions_are_validated() {
    let app = spawn_with(|c| c.webhook_allow_private = true).await;
    let token = app.access_token("ada@example.com").await;
    for (body, field) in [
        (json!({"url": "http://hooks.example.com/in", "events": ["*"]}), "url"),
        (json!({"url": "https://hooks.example.com/in", "events": ["agent.deleted"]}), "agent.deleted"),
        (json!({"url": "https://hooks.example.com/in", "events": []}), "events"),
        (json!({"events": ["*"]}), "url"),
        (json!({"url": "https://hooks.example.com/in", "events": ["*"], "secret": "short"}), "secret"),
    ] {
        let r = app.post_json_with_token("/api/v1/webhooks", &token, &body).await;
        let error = json_with_status(r, 422).await;
        assert!(error.to_string().contains(field), "{body} → {error}");
    }
    // A secret of the user's own is used as given.
    let r = app
        .post_json_with_token(
            "/api/v1/webhooks",
            &token,
            &json!({"url": "https://hooks.example.com/in", "events": ["workflow.completed"], "secret": "my-own-secret-0123456789",
                "description": "ops", "metadata": {"team": "ops"}}),
        )
        .await;
    let hook = json_with_status(r, 201).await;
    assert_eq!(hook["signing_secret"], "my-own-secret-0123456789");
    assert_eq!(hook["metadata"]["team"], "ops");
    let id = hook["id"].as_str().unwrap();
    let r = app
        .patch_json_with_token(&format!("/api/v1/webhooks/{id}"), &token, &json!({"status": "failed"}))
        .await;
    assert_eq!(r.status(), 422);
    let r = app
        .patch_json_with_token(
            &format!("/api/v1/webhooks/{id}"),
            &token,
            &json!({"events": ["agent.message"], "description": null}),
        )
        .await;
    let changed = json_with_status(r, 200).await;
    assert_eq!(changed["events"], json!(["agent.message"]));
    assert!(changed["description"].is_null());
    let r = app.get_with_token("/api/v1/webhooks", &token).await;
    assert_eq!(json_with_status(r, 200).await["items"].as_array().unwrap().len(), 1);
    let r = app.delete_with_token(&format!("/api/v1/webhooks/{id}"), &token).await;
    assert_eq!(r.status(), 204);
    let r = app.get_with_token(&format!("/api/v1/webhooks/{id}"), &token).await;
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn private_and_loopback_targets_are_refused_unless_allowed() {
    let app = spawn_with(|c| c.webhook_allow_insecure = true).await;
    let token = app.access_token("ada@example.com").await;
    // Nothing listens on these ports, and nothing is contacted: refused before any connection.
    for url in [
        "http://127.0.0.1:9/hook",
        "http://[::ffff:127.0.0.1]:9/hook",
        "http://[::1]:9/hook",
        "http://localhost:9/hook",
    ] {
        let r =
            app.post_json_with_token("/api/v1/webhooks", &token, &json!({"url": url, "events": ["*"]})).await;
        let error = json_with_status(r, 422).await;
        assert!(error.to_string().contains("AGENTRY_WEBHOOK_ALLOW_PRIVATE"), "{url} → {error}");
    }
}

#[tokio::test]
async fn another_tenants_subscriptions_and_deliveries_are_not_found() {
    let app = spawn_with(loopback).await;
    let ada = app.access_token("ada@example.com").await;
    let bob = app.access_token("bob@example.com").await;
    let server = receiver(200).await;
    let hook = subscribe(&app, &ada, &format!("{}/hook", server.uri()), json!(["*"])).await;
    let id = hook["id"].as_str().unwrap();
    app.create_agent(&ada, json!({"name": "One"})).await;
    let items = deliveries_until(&app, &ada, id, "delivered").await;
    let delivery = items[0]["id"].as_str().unwrap();
    let r = app.get_with_token("/api/v1/webhooks", &bob).await;
    assert_eq!(json_with_status(r, 200).await["items"], json!([]));
    let get = |path: String| {
        let (app, bob) = (&app, &bob);
        async move { app.get_with_token(&path, bob).await.status().as_u16() }
    };
    assert_eq!(get(format!("/api/v1/webhooks/{id}")).await, 404);
    assert_eq!(get(format!("/api/v1/webhooks/{id}/deliveries")).await, 404);
    assert_eq!(get(format!("/api/v1/webhooks/{id}/deliveries/{delivery}/attempts")).await, 404);
    for path in [
        format!("/api/v1/webhooks/{id}/test"),
        format!("/api/v1/webhooks/{id}/rotate-secret"),
        format!("/api/v1/webhooks/{id}/deliveries/{delivery}/retry"),
    ] {
        let r = app.post_json_with_token(&path, &bob, &json!({"event_type": "agent.created"})).await;
        assert_eq!(r.status(), 404, "{path}");
    }
    let r = app
        .patch_json_with_token(&format!("/api/v1/webhooks/{id}"), &bob, &json!({"status": "active"}))
        .await;
    assert_eq!(r.status(), 404);
    let r = app.delete_with_token(&format!("/api/v1/webhooks/{id}"), &bob).await;
    assert_eq!(r.status(), 404);
    // Bob's own events never reach Ada's subscriber.
    app.create_agent(&bob, json!({"name": "Bobs"})).await;
    app.drain().await;
    let requests = server.received_requests().await.unwrap();
    assert!(requests.iter().all(|r| !String::from_utf8_lossy(&r.body).contains("Bobs")));
}

#[tokio::test]
async fn only_a_caller_who_may_sign_reads_the_signing_secret() {
    on_both_databases(loopback, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let server = receiver(200).await;
        let hook = subscribe(&app, &token, &format!("{}/hook", server.uri()), json!(["agent.created"])).await;
        let id = hook["id"].as_str().unwrap();
        let secret = hook["signing_secret"].as_str().unwrap();
        let key = |scopes: Value| {
            let app = &app;
            let token = &token;
            async move {
                let r = app
                    .post_json_with_token(
                        "/api/v1/auth/api-keys",
                        token,
                        &json!({"name": "k", "scopes": scopes}),
                    )
                    .await;
                json_with_status(r, 201).await["key"].as_str().unwrap().to_owned()
            }
        };
        let reader = key(json!(["webhooks:read"])).await;
        let writer = key(json!(["webhooks:read", "webhooks:write"])).await;
        // Neither a list nor a read carries it, for any caller.
        for caller in [&token, &reader, &writer] {
            let listed = json_with_status(app.get_with_token("/api/v1/webhooks", caller).await, 200).await;
            assert!(!listed.to_string().contains(secret), "{listed}");
            assert!(listed["items"][0].get("signing_secret").is_none(), "{listed}");
            let one =
                json_with_status(app.get_with_token(&format!("/api/v1/webhooks/{id}"), caller).await, 200)
                    .await;
            assert!(one.get("signing_secret").is_none() && !one.to_string().contains(secret), "{one}");
        }
        let r = app.get_with_token(&format!("/api/v1/webhooks/{id}/secret"), &reader).await;
        assert_eq!(json_with_status(r, 403).await["error"], "forbidden");
        for caller in [&token, &writer] {
            let r = app.get_with_token(&format!("/api/v1/webhooks/{id}/secret"), caller).await;
            let shown = json_with_status(r, 200).await;
            assert_eq!((shown["id"].as_str(), shown["signing_secret"].as_str()), (Some(id), Some(secret)));
        }
        // An update answers without it; another tenant's caller finds nothing.
        let r = app
            .patch_json_with_token(&format!("/api/v1/webhooks/{id}"), &token, &json!({"description": "x"}))
            .await;
        assert!(json_with_status(r, 200).await.get("signing_secret").is_none());
        let eve = app.access_token("eve@example.com").await;
        let r = app.get_with_token(&format!("/api/v1/webhooks/{id}/secret"), &eve).await;
        assert_eq!(json_with_status(r, 404).await["error"], "not_found");
    })
    .await;
}

/// The event ids (`webhook-id`) the receiver got, in order.
async fn received_ids(server: &MockServer) -> Vec<String> {
    server.received_requests().await.unwrap_or_default().iter().map(|r| header(r, "webhook-id")).collect()
}

#[tokio::test]
async fn events_sent_while_disabled_are_delivered_once_each_after_a_recovery() {
    on_both_databases(loopback, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let server = receiver(200).await;
        let hook = subscribe(&app, &token, &format!("{}/hook", server.uri()), json!(["agent.created"])).await;
        let id = hook["id"].as_str().unwrap().to_owned();
        let since = hook["created_at"].as_str().unwrap().to_owned();
        let r = app
            .patch_json_with_token(&format!("/api/v1/webhooks/{id}"), &token, &json!({"status": "disabled"}))
            .await;
        assert_eq!(json_with_status(r, 200).await["status"], "disabled");

        // Twenty events while it is disabled: kept, none sent.
        for n in 0..20 {
            app.create_agent(&token, json!({"name": format!("Agent {n}")})).await;
        }
        app.drain().await;
        assert!(received_ids(&server).await.is_empty());
        let list = format!("/api/v1/webhooks/{id}/deliveries?limit=100");
        let kept = json_with_status(app.get_with_token(&list, &token).await, 200).await;
        let kept = kept["items"].as_array().unwrap().clone();
        assert_eq!(kept.len(), 20);
        assert!(kept.iter().all(|d| d["status"] == "skipped" && d["next_attempt_at"].is_null()));
        let mut event_ids: Vec<String> =
            kept.iter().map(|d| d["event_id"].as_str().unwrap().to_owned()).collect();
        event_ids.sort();
        let stats = format!("/api/v1/webhooks/{id}/stats");
        let before = json_with_status(app.get_with_token(&stats, &token).await, 200).await;
        assert_eq!(before["deliveries"]["skipped"], 20);
        assert_eq!((before["attempts"].as_u64(), before["window_hours"].as_u64()), (Some(0), Some(24)));
        assert!(before["response_time_ms"]["p50"].is_null());

        // A bulk retry is refused while disabled: the recovery is what it needs.
        let retry = format!("/api/v1/webhooks/{id}/deliveries/retry");
        let r = app.post_json_with_token(&retry, &token, &json!({})).await;
        let refused = json_with_status(r, 409).await;
        assert!(refused["message"].as_str().unwrap().contains("recover"), "{refused}");

        // Recovered: all twenty queued, the subscription active, each sent once with its
        // original event id.
        let recover = format!("/api/v1/webhooks/{id}/recover");
        let r = app.post_json_with_token(&recover, &token, &json!({"since": since})).await;
        assert_eq!(json_with_status(r, 202).await, json!({"queued": 20}));
        let r = app.get_with_token(&format!("/api/v1/webhooks/{id}"), &token).await;
        assert_eq!(json_with_status(r, 200).await["status"], "active");
        app.drain().await;
        let mut sent = received_ids(&server).await;
        sent.sort();
        assert_eq!(sent, event_ids, "each event once, with its own webhook-id");
        let after = json_with_status(app.get_with_token(&stats, &token).await, 200).await;
        assert_eq!(
            (after["deliveries"]["delivered"].as_u64(), after["deliveries"]["skipped"].as_u64()),
            (Some(20), Some(0))
        );
        assert_eq!((after["attempts"].as_u64(), after["answered"].as_u64()), (Some(20), Some(20)));
        assert!(after["response_time_ms"]["p50"].as_u64().is_some());
        assert!(after["response_time_ms"]["p99"].as_u64() >= after["response_time_ms"]["p50"].as_u64());

        // Nothing left: a second recovery and a bulk retry queue nothing, and nothing is sent twice.
        let r = app.post_json_with_token(&recover, &token, &json!({"since": since})).await;
        assert_eq!(json_with_status(r, 202).await, json!({"queued": 0}));
        let r = app.post_json_with_token(&retry, &token, &json!({"status": "failed", "since": since})).await;
        assert_eq!(json_with_status(r, 202).await, json!({"queued": 0}));
        app.drain().await;
        assert_eq!(received_ids(&server).await.len(), 20);
    })
    .await;
}

#[tokio::test]
async fn recovery_bulk_retry_and_stats_are_validated_scoped_and_tenant_bound() {
    let app = spawn_with(loopback).await;
    let token = app.access_token("ada@example.com").await;
    let server = receiver(200).await;
    let hook = subscribe(&app, &token, &format!("{}/hook", server.uri()), json!(["*"])).await;
    let id = hook["id"].as_str().unwrap();
    let (recover, retry, stats) = (
        format!("/api/v1/webhooks/{id}/recover"),
        format!("/api/v1/webhooks/{id}/deliveries/retry"),
        format!("/api/v1/webhooks/{id}/stats"),
    );
    for (path, body, field) in [
        (&recover, json!({}), "since"),
        (&recover, json!({"since": "yesterday"}), "since"),
        (&retry, json!({"status": "delivered"}), "status"),
        (&retry, json!({"status": "lost"}), "status"),
        (&retry, json!({"since": "2026-13-01T00:00:00Z"}), "since"),
    ] {
        let r = app.post_json_with_token(path, &token, &body).await;
        let e = json_with_status(r, 422).await;
        assert!(e.to_string().contains(field), "{path} {body}: {e}");
    }
    // A reader sees the statistics but cannot queue anything.
    let r = app
        .post_json_with_token(
            "/api/v1/auth/api-keys",
            &token,
            &json!({"name": "r", "scopes": ["webhooks:read"]}),
        )
        .await;
    let reader = json_with_status(r, 201).await["key"].as_str().unwrap().to_owned();
    assert_eq!(app.get_with_token(&stats, &reader).await.status(), 200);
    let since = json!({"since": "2026-01-01T00:00:00Z"});
    assert_eq!(app.post_json_with_token(&recover, &reader, &since).await.status(), 403);
    assert_eq!(app.post_json_with_token(&retry, &reader, &json!({})).await.status(), 403);
    // Another tenant finds nothing.
    let eve = app.access_token("eve@example.com").await;
    assert_eq!(app.get_with_token(&stats, &eve).await.status(), 404);
    assert_eq!(app.post_json_with_token(&recover, &eve, &since).await.status(), 404);
    assert_eq!(app.post_json_with_token(&retry, &eve, &json!({})).await.status(), 404);
}

/// `AGENTRY_WEBHOOK_RETRY_SCHEDULE=5`: one attempt, five seconds after the event, not at once.
#[tokio::test]
async fn the_first_attempt_waits_for_the_schedules_first_delay() {
    let server = receiver(200).await;
    let app = crate::helpers::spawn_with_clock(|c| {
        loopback(c);
        c.webhook_retry_schedule = "5".into();
    })
    .await;
    let token = app.access_token("ada@example.com").await;
    let webhook = subscribe(&app, &token, &format!("{}/hook", server.uri()), json!(["agent.created"])).await;
    app.create_agent(&token, json!({"name": "Helper"})).await;
    app.drain().await;
    let path = format!("/api/v1/webhooks/{}/deliveries", webhook["id"].as_str().unwrap());
    let items = json_with_status(app.get_with_token(&path, &token).await, 200).await["items"].clone();
    assert_eq!(items[0]["status"], "pending", "{items}");
    assert!(server.received_requests().await.unwrap().is_empty(), "nothing sent before its time");
    app.clock().advance(chrono::Duration::seconds(4));
    app.drain().await;
    assert!(server.received_requests().await.unwrap().is_empty(), "nor after four seconds");
    app.clock().advance(chrono::Duration::seconds(1));
    app.drain().await;
    let items = json_with_status(app.get_with_token(&path, &token).await, 200).await["items"].clone();
    assert_eq!(items[0]["status"], "delivered", "{items}");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

//! Automation follows membership, on both databases: what a member made (a trigger, a
//! schedule, an integration, a webhook subscription) stops acting the moment they are removed,
//! or demoted below what it needs; the removal's answer and event list it; an owner takes it
//! over and it acts again, as them. Receivers are wiremock servers on 127.0.0.1.

use agentry_domain::events::EventPayload;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use agentry_mailer::test_support::SmtpSink;
use secrecy::SecretString;

use crate::helpers::{TestApp, json_with_status, on_both_databases_with_clock};
use crate::triggers::hmac_hex;

const PASSWORD: &str = "correct horse battery";
const SIGNING_SECRET: &str = "code-host-secret-02";

/// Mail goes to `sink`, and links point at `https://agentry.test`.
fn with_mail(c: &mut agentry_server::Config, sink: &SmtpSink) {
    c.smtp_url = Some(SecretString::from(sink.url()));
    c.public_url = Some("https://agentry.test".into());
    c.webhook_allow_insecure = true;
    c.webhook_allow_private = true;
}

/// `email` (an account of its own) is invited into `owner`'s tenant as `role` and accepts with
/// the mailed link: their access token and user id.
async fn join(
    app: &TestApp,
    sink: &SmtpSink,
    owner: &str,
    tenant: &str,
    email: &str,
    role: &str,
) -> (String, String) {
    let token = app.access_token(email).await;
    let me = json_with_status(app.get_with_token("/api/v1/auth/me", &token).await, 200).await;
    let user = me["id"].as_str().unwrap().to_owned();
    let before = sink.received().len();
    let r = app
        .post_json_with_token(
            &format!("/api/v1/tenants/{tenant}/invitations"),
            owner,
            &json!({"email": email, "role": role}),
        )
        .await;
    json_with_status(r, 201).await;
    app.drain().await;
    let mails = sink.wait_for(before + 1, std::time::Duration::from_secs(10)).await;
    let mail = mails.iter().rev().find(|m| m.to == [email]).unwrap();
    let data = mail.data.replace("=\r\n", "").replace("=3D", "=");
    let marker = "https://agentry.test/invitation?token=";
    let start = data.find(marker).unwrap() + marker.len();
    let link: String =
        data[start..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
    let r =
        app.post_json("/api/v1/auth/invitations/accept", &json!({"token": link, "password": PASSWORD})).await;
    json_with_status(r, 200).await;
    (token, user)
}

async fn call_trigger(app: &TestApp, trigger: &Value) -> reqwest::Response {
    app.client
        .post(app.url(trigger["url"].as_str().unwrap()))
        .header("x-webhook-secret", trigger["secret"].as_str().unwrap())
        .json(&json!({"order": 1}))
        .send()
        .await
        .unwrap()
}

async fn send_integration_event(app: &TestApp, integration: &Value, delivery: &str) -> reqwest::Response {
    let body = r#"{"ref": "main"}"#;
    app.client
        .post(app.url(integration["receiver_url"].as_str().unwrap()))
        .header("content-type", "application/json")
        .header("x-github-event", "push")
        .header("x-github-delivery", delivery)
        .header("x-hub-signature-256", format!("sha256={}", hmac_hex(SIGNING_SECRET, body.as_bytes())))
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn executions(app: &TestApp, token: &str, workflow: &str, tenant: &str) -> Vec<Value> {
    let r = app
        .get_with_token(&format!("/api/v1/workflows/{workflow}/executions?tenant_id={tenant}"), token)
        .await;
    json_with_status(r, 200).await["executions"].as_array().unwrap().clone()
}

/// A workflow whatever starts it can run.
fn simple() -> Value {
    json!({"name": "Simple", "steps": [{"id": "t", "type": "transform", "output": "ran"}]})
}

/// A workflow of `token`'s (in the tenant `q` names) and a trigger of it.
async fn workflow_with_trigger(app: &TestApp, token: &str, q: &str) -> (String, Value) {
    let r = app.post_json_with_token(&format!("/api/v1/workflows{q}"), token, &simple()).await;
    let workflow = json_with_status(r, 201).await["id"].as_str().unwrap().to_owned();
    let r = app
        .post_json_with_token(
            &format!("/api/v1/workflows/{workflow}/webhooks{q}"),
            token,
            &json!({"name": "in"}),
        )
        .await;
    (workflow, json_with_status(r, 201).await)
}

fn kinds(list: &Value) -> Vec<&str> {
    list.as_array().unwrap().iter().map(|a| a["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_removed_members_automations_stop_at_once_and_an_owner_takes_them_over() {
    let receiver = MockServer::start().await;
    let hook_url = format!("{}/hook", receiver.uri());
    let sink = SmtpSink::start().await;
    on_both_databases_with_clock(
        |c| with_mail(c, &sink),
        |app| {
            let (receiver, hook_url, sink) = (&receiver, hook_url.clone(), &sink);
            async move {
                receiver.reset().await;
                Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(receiver).await;
                let ada = app.access_token("ada@example.com").await;
                let tenant = app.tenant_of(&ada).await;
                let (bob, bob_id) = join(&app, sink, &ada, &tenant, "bob@example.com", "admin").await;
                let q = format!("?tenant_id={tenant}");

                // Bob makes one of each.
                let (workflow, trigger) = workflow_with_trigger(&app, &bob, &q).await;
                let schedule = json_with_status(
                    app.post_json_with_token(&format!("/api/v1/workflows/{workflow}/schedules{q}"), &bob, &json!({"cron": "* * * * *"})).await,
                    201,
                )
                .await;
                let integration = json_with_status(
                    app.post_json_with_token(
                        &format!("/api/v1/integrations{q}"),
                        &bob,
                        &json!({"kind": "code-host", "name": "repo", "signing_secret": SIGNING_SECRET, "workflow_id": workflow}),
                    )
                    .await,
                    201,
                )
                .await;
                let hook = json_with_status(
                    app.post_json_with_token(&format!("/api/v1/webhooks{q}"), &bob, &json!({"url": hook_url, "events": ["agent.created"]})).await,
                    201,
                )
                .await;
                // While Bob is a member, each acts.
                assert_eq!(call_trigger(&app, &trigger).await.status(), 202);
                assert_eq!(send_integration_event(&app, &integration, "d-1").await.status(), 202);
                app.create_agent(&ada, json!({"name": "First"})).await;
                app.drain().await;
                assert_eq!(receiver.received_requests().await.unwrap().len(), 1, "delivered while Bob is an admin");

                // Removed: the answer and the event list what acted as him.
                let path = format!("/api/v1/tenants/{tenant}/members/{bob_id}");
                let removed = json_with_status(app.delete_with_token(&path, &ada).await, 200).await;
                assert_eq!(kinds(&removed["paused"]), ["trigger", "schedule", "integration", "webhook_subscription"]);
                assert_eq!(removed["paused"][0]["id"], trigger["id"]);
                assert_eq!(removed["paused"][1]["id"], schedule["id"]);
                assert_eq!(removed["paused"][2]["id"], integration["id"]);
                assert_eq!(removed["paused"][3]["id"], hook["id"]);
                assert_eq!(removed["paused"][3]["name"], Value::Null, "a subscription's URL is not shown");
                assert!(removed["paused"].as_array().unwrap().iter().all(|a| a["acts_as"] == bob_id.as_str()));
                let events = app.events(&tenant).await;
                let listed = events.iter().find_map(|e| match &e.payload {
                    EventPayload::TenantMemberRemoved { paused, .. } => Some(paused.len()),
                    _ => None,
                });
                assert_eq!(listed, Some(4), "the event lists them too");

                // None of them acts now.
                let before = executions(&app, &ada, &workflow, &tenant).await.len();
                let refused = json_with_status(call_trigger(&app, &trigger).await, 409).await;
                assert!(refused["message"].as_str().unwrap().contains("no longer a member"), "{refused}");
                assert_eq!(send_integration_event(&app, &integration, "d-2").await.status(), 409);
                app.clock().advance(chrono::Duration::seconds(61));
                app.create_agent(&ada, json!({"name": "Second"})).await;
                app.drain().await;
                assert_eq!(executions(&app, &ada, &workflow, &tenant).await.len(), before, "no tick, no call started one");
                assert_eq!(receiver.received_requests().await.unwrap().len(), 1, "nothing sent to Bob's receiver");
                let listed = json_with_status(
                    app.get_with_token(&format!("/api/v1/tenants/{tenant}/automations?acts_as={bob_id}"), &ada).await,
                    200,
                )
                .await;
                assert_eq!(listed["total"], 4, "a former member's automations are listed");

                // Ada takes them over: they act again, as her.
                let taken = json_with_status(
                    app.post_json_with_token(
                        &format!("/api/v1/tenants/{tenant}/automations/take-over"),
                        &ada,
                        &json!({"from_user_id": bob_id}),
                    )
                    .await,
                    200,
                )
                .await;
                assert_eq!(taken["total"], 4);
                let me = json_with_status(app.get_with_token("/api/v1/auth/me", &ada).await, 200).await;
                assert!(taken["automations"].as_array().unwrap().iter().all(|a| a["acts_as"] == me["id"]));
                assert_eq!(call_trigger(&app, &trigger).await.status(), 202);
                assert_eq!(send_integration_event(&app, &integration, "d-3").await.status(), 202);
                app.clock().advance(chrono::Duration::seconds(60));
                app.create_agent(&ada, json!({"name": "Third"})).await;
                app.drain().await;
                let runs = executions(&app, &ada, &workflow, &tenant).await;
                assert_eq!(runs.len(), before + 3, "the call, the event and a tick");
                assert!(runs.iter().take(3).all(|r| r["status"] == "completed"), "{runs:?}");
                assert_eq!(receiver.received_requests().await.unwrap().len(), 2, "the receiver hears again");
                // The events Bob's subscription skipped meanwhile are kept for a recovery.
                let deliveries = json_with_status(
                    app.get_with_token(&format!("/api/v1/webhooks/{}/deliveries", hook["id"].as_str().unwrap()), &ada).await,
                    200,
                )
                .await;
                let statuses: Vec<&str> =
                    deliveries["items"].as_array().unwrap().iter().map(|d| d["status"].as_str().unwrap()).collect();
                assert_eq!(statuses, ["delivered", "skipped", "delivered"]);
            }
        },
    )
    .await;
}

#[tokio::test]
async fn a_demotion_stops_only_what_the_new_role_does_not_allow() {
    let sink = SmtpSink::start().await;
    on_both_databases_with_clock(
        |c| with_mail(c, &sink),
        |app| {
            let sink = &sink;
            async move {
                let ada = app.access_token("ada@example.com").await;
                let tenant = app.tenant_of(&ada).await;
                let (carol, carol_id) = join(&app, sink, &ada, &tenant, "carol@example.com", "admin").await;
                let q = format!("?tenant_id={tenant}");
                let (_, trigger) = workflow_with_trigger(&app, &carol, &q).await;
                let hook = json_with_status(
                    app.post_json_with_token(
                        &format!("/api/v1/webhooks{q}"),
                        &carol,
                        &json!({"url": "http://127.0.0.1:9/hook", "events": ["agent.created"]}),
                    )
                    .await,
                    201,
                )
                .await;
                // To member: webhooks are an admin's; workflows still hers to run.
                let path = format!("/api/v1/tenants/{tenant}/members/{carol_id}");
                let changed = json_with_status(
                    app.patch_json_with_token(&path, &ada, &json!({"role": "member"})).await,
                    200,
                )
                .await;
                assert_eq!(changed["role"], "member");
                assert_eq!(kinds(&changed["paused"]), ["webhook_subscription"]);
                assert_eq!(changed["paused"][0]["id"], hook["id"]);
                assert_eq!(call_trigger(&app, &trigger).await.status(), 202, "a member may run workflows");
                // To viewer: the trigger stops too.
                let changed = json_with_status(
                    app.patch_json_with_token(&path, &ada, &json!({"role": "viewer"})).await,
                    200,
                )
                .await;
                assert_eq!(kinds(&changed["paused"]), ["trigger"]);
                let refused = json_with_status(call_trigger(&app, &trigger).await, 409).await;
                assert!(refused["message"].as_str().unwrap().contains("role (viewer)"), "{refused}");
                // A member of lower rank cannot take over an owner's; an admin cannot take over from
                // an owner either.
                let forbidden = app
                    .post_json_with_token(
                        &format!("/api/v1/tenants/{tenant}/automations/take-over"),
                        &carol,
                        &json!({"from_user_id": carol_id}),
                    )
                    .await;
                assert_eq!(forbidden.status(), 403);
                app.drain().await;
            }
        },
    )
    .await;
}

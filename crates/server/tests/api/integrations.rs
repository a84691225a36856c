//! Inbound integrations over HTTP: the signing secret never shown, each of the six receivers
//! verifying its service's signature (GitHub's and Slack's documented examples among them),
//! redeliveries starting nothing new, Slack's URL verification, and tenant isolation, on both
//! databases.

use serde_json::{Value, json};

use crate::executions::{create_workflow, finished};
use crate::helpers::{TestApp, json_with_status, on_both_databases, spawn_with};
use crate::triggers::{echo, hmac_hex};

// docs.github.com, "Validating webhook deliveries".
const GITHUB_SECRET: &str = "It's a Secret to Everybody";
const GITHUB_BODY: &str = "Hello, World!";
const GITHUB_SIGNATURE: &str = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

// Slack's "Verifying requests from Slack": its signing secret and slash-command body (signed
// here with a fresh timestamp: the documented one is years outside Slack's 5-minute window).
const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const SLACK_BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
const SLACK_TRIGGER_ID: &str = "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";

async fn create_integration(app: &TestApp, token: &str, body: &Value) -> Value {
    json_with_status(app.post_json_with_token("/api/v1/integrations", token, body).await, 201).await
}

fn slack_headers(body: &str) -> Vec<(String, String)> {
    let ts = chrono::Utc::now().timestamp().to_string();
    let signature = format!("v0={}", hmac_hex(SLACK_SECRET, format!("v0:{ts}:{body}").as_bytes()));
    vec![("X-Slack-Signature".into(), signature), ("X-Slack-Request-Timestamp".into(), ts)]
}

/// One kind's signed delivery: its secret, body, content type, headers and delivery id.
struct Delivery {
    kind: &'static str,
    secret: &'static str,
    content_type: &'static str,
    body: String,
    headers: Vec<(String, String)>,
    delivery_id: Value,
}

/// A correctly signed delivery of each kind, signed as its service signs.
fn deliveries() -> Vec<Delivery> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let linear = format!(
        r#"{{"action":"create","type":"Issue","data":{{"id":"iss_1"}},"webhookTimestamp":{now_ms}}}"#
    );
    let jira = r#"{"webhookEvent":"jira:issue_created","issue":{"key":"OPS-1"}}"#.to_owned();
    let pagerduty =
        r#"{"event":{"id":"01DEN1HNLBC1R4FZ5CX2TQKAY7","event_type":"incident.triggered"}}"#.to_owned();
    let wiki = r#"{"event":"page_updated","page":{"id":"42"}}"#.to_owned();
    vec![
        Delivery {
            kind: "chat",
            secret: SLACK_SECRET,
            content_type: "application/x-www-form-urlencoded",
            headers: slack_headers(SLACK_BODY),
            body: SLACK_BODY.into(),
            delivery_id: json!(SLACK_TRIGGER_ID),
        },
        Delivery {
            kind: "code-host",
            secret: GITHUB_SECRET,
            content_type: "text/plain",
            headers: vec![
                ("X-Hub-Signature-256".into(), GITHUB_SIGNATURE.into()),
                ("X-GitHub-Delivery".into(), "72d3162e-cc78-11e3-81ab-4c9367dc0958".into()),
                ("X-GitHub-Event".into(), "ping".into()),
            ],
            body: GITHUB_BODY.into(),
            delivery_id: json!("72d3162e-cc78-11e3-81ab-4c9367dc0958"),
        },
        Delivery {
            kind: "issue-tracker",
            secret: "lin_wh_secret_0001",
            content_type: "application/json",
            headers: vec![
                ("Linear-Signature".into(), hmac_hex("lin_wh_secret_0001", linear.as_bytes())),
                ("Linear-Delivery".into(), "lin-delivery-1".into()),
            ],
            body: linear,
            delivery_id: json!("lin-delivery-1"),
        },
        Delivery {
            kind: "issue-tracker-2",
            secret: "jira-secret-0002",
            content_type: "application/json",
            headers: vec![
                (
                    "X-Hub-Signature".into(),
                    format!("sha256={}", hmac_hex("jira-secret-0002", jira.as_bytes())),
                ),
                ("X-Atlassian-Webhook-Identifier".into(), "atl-1".into()),
            ],
            body: jira,
            delivery_id: json!("atl-1"),
        },
        Delivery {
            kind: "incident",
            secret: "pd-secret-00003",
            content_type: "application/json",
            headers: vec![(
                "X-PagerDuty-Signature".into(),
                format!("v1={}", hmac_hex("pd-secret-00003", pagerduty.as_bytes())),
            )],
            body: pagerduty,
            delivery_id: json!("01DEN1HNLBC1R4FZ5CX2TQKAY7"),
        },
        Delivery {
            kind: "wiki",
            secret: "wiki-secret-0004",
            content_type: "application/json",
            headers: vec![
                (
                    "X-Hub-Signature".into(),
                    format!("sha256={}", hmac_hex("wiki-secret-0004", wiki.as_bytes())),
                ),
                ("X-Atlassian-Webhook-Identifier".into(), "atl-wiki-1".into()),
            ],
            body: wiki,
            delivery_id: json!("atl-wiki-1"),
        },
    ]
}

async fn deliver(app: &TestApp, receiver_url: &str, d: &Delivery, body: &str) -> reqwest::Response {
    let mut request =
        app.client.post(app.url(receiver_url)).header("Content-Type", d.content_type).body(body.to_owned());
    for (name, value) in &d.headers {
        request = request.header(name, value);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn an_integration_never_shows_its_signing_secret() {
    on_both_databases(|_| {}, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let workflow = create_workflow(&app, &token, &echo()).await;
        let body = json!({"kind": "code-host", "name": "Repo events", "signing_secret": GITHUB_SECRET, "workflow_id": workflow});
        let created = create_integration(&app, &token, &body).await;
        let id = created["id"].as_str().unwrap();
        assert!(id.starts_with("int_"), "{created}");
        assert_eq!(created["kind"], "code-host");
        assert_eq!(created["name"], "Repo events");
        assert_eq!(created["workflow_id"], workflow);
        assert_eq!(created["receiver_url"], format!("/api/v1/webhooks/integrations/code-host?integration_id={id}"));
        assert!(created.get("signing_secret").is_none(), "{created}");
        let got = json_with_status(app.get_with_token(&format!("/api/v1/integrations/{id}"), &token).await, 200).await;
        assert_eq!(got, created);
        let listed = json_with_status(app.get_with_token("/api/v1/integrations", &token).await, 200).await;
        assert_eq!(listed["items"], json!([created]));
        for shown in [&created, &got, &listed] {
            assert!(!shown.to_string().contains(GITHUB_SECRET));
        }

        // Every field is checked; a workflow must be the tenant's.
        let r = app
            .post_json_with_token(
                "/api/v1/integrations",
                &token,
                &json!({"kind": "slack", "name": "x", "signing_secret": "short", "workflow_id": workflow}),
            )
            .await;
        let fields: Vec<Value> = json_with_status(r, 422).await["details"].as_array().unwrap().iter().map(|d| d["field"].clone()).collect();
        assert_eq!(fields, [json!("kind"), json!("signing_secret")]);
        let r = app.post_json_with_token("/api/v1/integrations", &token, &json!({"kind": "wiki", "name": "x"})).await;
        let fields: Vec<Value> = json_with_status(r, 422).await["details"].as_array().unwrap().iter().map(|d| d["field"].clone()).collect();
        assert_eq!(fields, [json!("signing_secret"), json!("workflow_id")]);
        let eve = app.access_token("eve@example.com").await;
        let r = app
            .post_json_with_token(
                "/api/v1/integrations",
                &eve,
                &json!({"kind": "wiki", "name": "x", "signing_secret": "wiki-secret-0004", "workflow_id": workflow}),
            )
            .await;
        assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "workflow_id", "Ada's workflow is not Eve's");
    })
    .await;
}

#[tokio::test]
async fn each_receiver_accepts_its_signed_event_once_and_refuses_a_tampered_one() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let tenant = app.tenant_of(&token).await;
            use agentry_domain::billing::CreditRepository as _;
            agentry_store::CreditStore::new(app.db.clone())
                .set_plan(
                    &agentry_domain::ids::TenantId::from_string(tenant),
                    agentry_domain::tenancy::Plan::Pro,
                )
                .await
                .unwrap();
            let workflow = create_workflow(&app, &token, &echo()).await;
            for d in deliveries() {
                let integration = create_integration(
                &app,
                &token,
                &json!({"kind": d.kind, "name": d.kind, "signing_secret": d.secret, "workflow_id": workflow}),
            )
            .await;
                let receiver = integration["receiver_url"].as_str().unwrap();

                let tampered = format!("{} ", d.body);
                let r = deliver(&app, receiver, &d, &tampered).await;
                assert_eq!(json_with_status(r, 401).await["error"], "unauthorized", "{}", d.kind);

                let r = deliver(&app, receiver, &d, &d.body).await;
                assert!(r.headers().contains_key("x-ratelimit-remaining"), "{}", d.kind);
                let first = json_with_status(r, 202).await;
                assert_eq!(first["duplicate"], false, "{}", d.kind);
                assert_eq!(first["integration_id"], integration["id"]);
                assert_eq!(first["delivery_id"], d.delivery_id, "{}", d.kind);
                assert_eq!(first["status"], "running");

                let again = json_with_status(deliver(&app, receiver, &d, &d.body).await, 202).await;
                assert_eq!(again["duplicate"], true, "{}: a redelivery", d.kind);
                assert_eq!(again["execution_id"], first["execution_id"], "{}", d.kind);

                let id = first["execution_id"].as_str().unwrap();
                let e = json_with_status(
                    app.get_with_token(&format!("/api/v1/executions/{id}"), &token).await,
                    200,
                )
                .await;
                assert_eq!(e["origin"], "integration");
                assert_eq!(e["trigger"]["kind"], d.kind);
                assert_eq!(e["trigger"]["delivery_id"], d.delivery_id);
                assert_eq!(e["trigger"]["headers"]["content-type"], d.content_type);
                // The provider's payload is the input.
                match d.kind {
                    "chat" => {
                        assert_eq!(e["input"]["command"], "/webhook-collect");
                        assert_eq!(e["input"]["user_name"], "roadrunner");
                    }
                    "code-host" => assert_eq!(e["input"], json!({"body": "Hello, World!"})),
                    _ => assert_eq!(e["input"], serde_json::from_str::<Value>(&d.body).unwrap()),
                }
            }
            let executions = json_with_status(
                app.get_with_token(&format!("/api/v1/workflows/{workflow}/executions"), &token).await,
                200,
            )
            .await;
            assert_eq!(
                executions["total"], 6,
                "one execution per kind, none for tampered or repeated deliveries"
            );
        },
    )
    .await;
}

#[tokio::test]
async fn slacks_url_verification_is_answered_with_its_challenge_in_any_envelope() {
    for envelope in [agentry_server::ApiEnvelope::Bare, agentry_server::ApiEnvelope::Wrapped] {
        let app = spawn_with(|c| c.api_envelope = envelope).await;
        // The resource of a success answer, in either envelope.
        let data =
            |v: Value| if envelope == agentry_server::ApiEnvelope::Wrapped { v["data"].clone() } else { v };
        let token = data(app.signed_in("ada@example.com").await)["access_token"].as_str().unwrap().to_owned();
        let r = app.post_json_with_token("/api/v1/workflows", &token, &echo()).await;
        let workflow = data(json_with_status(r, 201).await)["id"].as_str().unwrap().to_owned();
        let body =
            json!({"kind": "chat", "name": "Slack", "signing_secret": SLACK_SECRET, "workflow_id": workflow});
        let r = app.post_json_with_token("/api/v1/integrations", &token, &body).await;
        let created = data(json_with_status(r, 201).await);
        let challenge = r#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
        let d = Delivery {
            kind: "chat",
            secret: SLACK_SECRET,
            content_type: "application/json",
            headers: slack_headers(challenge),
            body: challenge.into(),
            delivery_id: Value::Null,
        };
        let receiver = created["receiver_url"].as_str().unwrap();
        let r = deliver(&app, receiver, &d, challenge).await;
        assert_eq!(
            json_with_status(r, 200).await,
            json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}),
            "{envelope:?}: never wrapped"
        );
        // Unsigned, it is refused like any other delivery.
        let r = app
            .client
            .post(app.url(receiver))
            .header("Content-Type", "application/json")
            .body(challenge)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        let executions =
            app.get_with_token(&format!("/api/v1/workflows/{workflow}/executions"), &token).await;
        assert_eq!(data(json_with_status(executions, 200).await)["total"], 0, "a challenge starts nothing");
    }
}

#[tokio::test]
async fn another_tenant_and_unknown_receivers_get_404() {
    on_both_databases(|_| {}, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let workflow = create_workflow(&app, &token, &echo()).await;
        let body = json!({"kind": "code-host", "name": "Repo", "signing_secret": GITHUB_SECRET, "workflow_id": workflow});
        let created = create_integration(&app, &token, &body).await;
        let id = created["id"].as_str().unwrap();
        let eve = app.access_token("eve@example.com").await;
        assert_eq!(app.get_with_token(&format!("/api/v1/integrations/{id}"), &eve).await.status(), 404);
        assert_eq!(app.delete_with_token(&format!("/api/v1/integrations/{id}"), &eve).await.status(), 404);
        let listed = json_with_status(app.get_with_token("/api/v1/integrations", &eve).await, 200).await;
        assert!(listed["items"].as_array().unwrap().is_empty());

        let github = deliveries().into_iter().find(|d| d.kind == "code-host").unwrap();
        let receiver = created["receiver_url"].as_str().unwrap();
        for wrong in [
            format!("/api/v1/webhooks/integrations/wiki?integration_id={id}"),
            format!("/api/v1/webhooks/integrations/slack?integration_id={id}"),
            "/api/v1/webhooks/integrations/code-host?integration_id=int_nope".to_owned(),
            "/api/v1/webhooks/integrations/code-host".to_owned(),
        ] {
            let r = deliver(&app, &wrong, &github, GITHUB_BODY).await;
            assert_eq!(json_with_status(r, 404).await["error"], "not_found", "{wrong}");
        }
        // Ada's integration still works, until it is deleted, or its workflow is.
        let started = json_with_status(deliver(&app, receiver, &github, GITHUB_BODY).await, 202).await;
        assert_eq!(app.delete_with_token(&format!("/api/v1/integrations/{id}"), &token).await.status(), 204);
        assert_eq!(deliver(&app, receiver, &github, GITHUB_BODY).await.status(), 404);
        let again = create_integration(&app, &token, &body).await;
        let receiver = again["receiver_url"].as_str().unwrap();
        // Deleting a workflow while one of its executions records its last step can deadlock on
        // PostgreSQL (the executions' area, reported); here the execution ends first.
        finished(&app, &token, started["execution_id"].as_str().unwrap()).await;
        assert_eq!(app.delete_with_token(&format!("/api/v1/workflows/{workflow}"), &token).await.status(), 204);
        assert_eq!(deliver(&app, receiver, &github, GITHUB_BODY).await.status(), 404);
        assert_eq!(app.get_with_token(&format!("/api/v1/integrations/{}", again["id"].as_str().unwrap()), &token).await.status(), 404);
    })
    .await;
}

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use mockall::predicate::eq;
use secrecy::SecretString;
use serde_json::json;

use super::*;
use crate::ids::{TenantId, UserId};
use crate::tenancy::{Plan, Role};
use crate::webhooks::SealedSecret;
use crate::workflows::MockWorkflowRepository;
use crate::workflows::ports::MockExecutionRepository;
use crate::workflows::ports::{IntegrationTarget, MockIntegrationRepository};
use crate::workflows::signatures::SignatureError;
use crate::workflows::test_support::{
    Ring, Stored, VisibleCipher, caller, clock, execution_repo, execution_service, ids, key_caller, limiter,
    no_executions, sign, t0, workflow,
};

// docs.github.com, "Validating webhook deliveries".
const GITHUB_SECRET: &str = "It's a Secret to Everybody";
const GITHUB_BODY: &[u8] = b"Hello, World!";
const GITHUB_SIGNATURE: &str = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

// Slack's "Verifying requests from Slack" walkthrough: its secret and slash-command body.
const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const SLACK_BODY: &[u8] = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";

struct Setup {
    integrations: MockIntegrationRepository,
    workflows: MockWorkflowRepository,
    executions: MockExecutionRepository,
    count: Option<u64>,
}

impl Setup {
    fn new() -> Self {
        Self {
            integrations: MockIntegrationRepository::new(),
            workflows: MockWorkflowRepository::new(),
            executions: no_executions(),
            count: None,
        }
    }

    fn service(self) -> IntegrationService {
        IntegrationService::new(IntegrationServiceDeps {
            integrations: Arc::new(self.integrations),
            workflows: Arc::new(self.workflows),
            executions: execution_service(self.executions),
            cipher: Arc::new(VisibleCipher),
            hmac: Arc::new(Ring),
            limiter: limiter(self.count),
            plans: PlanTable::Two,
            ids: Arc::new(ids()),
            clock: Arc::new(clock()),
        })
    }

    /// `int_1` of `kind` signed with `secret`, bound to a workflow `active` or not.
    fn with_integration(mut self, kind: IntegrationKind, secret: &str, active_workflow: bool) -> Self {
        let integration = stored(kind, secret);
        self.integrations.expect_find_target().with(eq(IntegrationId::from_string("int_1"))).returning(
            move |_| {
                Ok(Some(IntegrationTarget {
                    integration: integration.clone(),
                    workflow: workflow(active_workflow),
                    plan: Plan::Pro,
                }))
            },
        );
        self.integrations.expect_find_target().returning(|_| Ok(None));
        self
    }

    fn starting(mut self, existing: bool) -> (Self, Stored) {
        let (repo, stored) = execution_repo(existing);
        self.executions = repo;
        self.count = Some(1);
        (self, stored)
    }
}

fn stored(kind: IntegrationKind, secret: &str) -> Integration {
    Integration {
        id: IntegrationId::from_string("int_1"),
        tenant_id: TenantId::from_string("ten_1"),
        kind,
        name: "Repo events".into(),
        workflow_id: WorkflowId::from_string("wf_1"),
        signing_secret: SealedSecret(format!("sealed[int_1]:{secret}")),
        run_as: RunAs { user_id: UserId::from_string("usr_creator"), role: Role::Admin },
        created_at: t0(),
    }
}

fn delivery(kind: &str, headers: &[(&str, &str)], body: &[u8]) -> IntegrationDelivery {
    IntegrationDelivery {
        kind: kind.into(),
        integration_id: Some("int_1".into()),
        headers: headers.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect(),
        body: body.to_vec(),
    }
}

fn new_integration(kind: &str, secret: &str, workflow_id: &str) -> NewIntegration {
    NewIntegration {
        kind: kind.into(),
        name: "Repo events".into(),
        signing_secret: SecretString::from(secret),
        workflow_id: workflow_id.into(),
    }
}

fn slack_headers(body: &[u8]) -> (String, String) {
    let ts = t0().timestamp().to_string();
    let signature = format!("v0={}", sign(SLACK_SECRET, &[b"v0:", ts.as_bytes(), b":", body].concat()));
    (signature, ts)
}

fn started(received: Received) -> IntegrationStarted {
    match received {
        Received::Started(s) => *s,
        other @ Received::Challenge(_) => panic!("{other:?}"),
    }
}

// --- creation, reading, deletion ---

#[tokio::test]
async fn create_seals_the_signing_secret_under_the_integration_id_and_runs_as_the_creator() {
    let mut s = Setup::new();
    s.workflows.expect_get().returning(|_, _| Ok(Some(workflow(true))));
    s.integrations
        .expect_create()
        .withf(|i| {
            i.signing_secret.0 == format!("sealed[int_1]:{GITHUB_SECRET}")
                && i.kind == IntegrationKind::CodeHost
                && i.run_as == RunAs { user_id: UserId::from_string("usr_1"), role: Role::Member }
        })
        .times(1)
        .returning(|_| Ok(true));
    let created = s
        .service()
        .create(&caller(Role::Member), new_integration("code-host", GITHUB_SECRET, "wf_1"))
        .await
        .unwrap();
    assert_eq!(created.receiver_url(), "/api/v1/webhooks/integrations/code-host?integration_id=int_1");
    assert!(!format!("{created:?}").contains(GITHUB_SECRET), "Debug never shows the secret");
}

#[tokio::test]
async fn create_names_every_invalid_field_and_a_workflow_outside_the_tenant() {
    let mut s = Setup::new();
    s.workflows.expect_get().never();
    s.integrations.expect_create().never();
    let e = s
        .service()
        .create(&caller(Role::Owner), new_integration("slack", "short", "wf\u{1}"))
        .await
        .unwrap_err();
    let IntegrationError::Invalid(errors) = e else { panic!("{e:?}") };
    let fields: Vec<&str> = errors.0.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["kind", "signing_secret", "workflow_id"]);

    for exists_meanwhile in [false, true] {
        let mut s = Setup::new();
        s.workflows
            .expect_get()
            .with(eq(TenantId::from_string("ten_1")), eq(WorkflowId::from_string("wf_other")))
            .returning(move |_, _| Ok(exists_meanwhile.then(|| workflow(true))));
        // Deleted between the check and the insert: the store says so.
        s.integrations.expect_create().returning(|_| Ok(false));
        let e = s
            .service()
            .create(&caller(Role::Owner), new_integration("chat", SLACK_SECRET, "wf_other"))
            .await
            .unwrap_err();
        let IntegrationError::Invalid(errors) = e else { panic!("{e:?}") };
        assert_eq!(errors.0[0].field, "workflow_id");
    }
}

#[tokio::test]
async fn reading_needs_read_and_making_or_deleting_needs_write_and_execute() {
    let mut s = Setup::new();
    s.integrations.expect_list().returning(|_| Ok(vec![stored(IntegrationKind::Wiki, "s3cret-wiki")]));
    s.integrations
        .expect_get()
        .with(eq(TenantId::from_string("ten_1")), eq(IntegrationId::from_string("int_1")))
        .returning(|_, _| Ok(Some(stored(IntegrationKind::Wiki, "s3cret-wiki"))));
    s.integrations.expect_get().returning(|_, _| Ok(None));
    s.integrations.expect_delete().returning(|_, id| Ok(id.as_str() == "int_1"));
    s.integrations.expect_create().never();
    let service = s.service();
    let viewer = caller(Role::Viewer);
    assert_eq!(service.list(&viewer).await.unwrap().len(), 1);
    assert_eq!(
        service.get(&viewer, &IntegrationId::from_string("int_1")).await.unwrap().kind,
        IntegrationKind::Wiki
    );
    assert!(matches!(
        service.get(&viewer, &IntegrationId::from_string("int_2")).await,
        Err(IntegrationError::NotFound)
    ));
    assert!(matches!(
        service.create(&viewer, new_integration("wiki", "s3cret-wiki", "wf_1")).await,
        Err(IntegrationError::Forbidden(_))
    ));
    assert!(matches!(
        service.delete(&viewer, &IntegrationId::from_string("int_1")).await,
        Err(IntegrationError::Forbidden(_))
    ));
    let write_only = key_caller(&["workflows:write"]);
    assert!(matches!(
        service.create(&write_only, new_integration("wiki", "s3cret-wiki", "wf_1")).await,
        Err(IntegrationError::Forbidden(_))
    ));
    let member = caller(Role::Member);
    service.delete(&member, &IntegrationId::from_string("int_1")).await.unwrap();
    assert!(matches!(
        service.delete(&member, &IntegrationId::from_string("int_2")).await,
        Err(IntegrationError::NotFound)
    ));
}

#[test]
fn signing_secrets_keep_their_spaces_but_not_control_characters() {
    assert!(check_signing_secret(GITHUB_SECRET).is_ok());
    assert!(check_signing_secret(&"x".repeat(512)).is_ok());
    assert_eq!(check_signing_secret("1234567").unwrap_err().kind, FieldErrorKind::TooShort);
    assert_eq!(check_signing_secret(&"x".repeat(513)).unwrap_err().kind, FieldErrorKind::TooLong);
    assert_eq!(check_signing_secret("secret\nsecret").unwrap_err().kind, FieldErrorKind::InvalidFormat);
    assert_eq!(check_signing_secret("          ").unwrap_err().kind, FieldErrorKind::InvalidFormat);
}

// --- deliveries ---

#[tokio::test]
async fn unknown_kinds_integrations_and_kind_mismatches_are_not_found() {
    let s = Setup::new().with_integration(IntegrationKind::CodeHost, GITHUB_SECRET, true);
    let service = s.service();
    let headers = [("X-Hub-Signature-256", GITHUB_SIGNATURE)];
    for d in [
        delivery("slack", &headers, GITHUB_BODY),
        delivery("wiki", &headers, GITHUB_BODY),
        IntegrationDelivery { integration_id: None, ..delivery("code-host", &headers, GITHUB_BODY) },
        IntegrationDelivery {
            integration_id: Some("int_2".into()),
            ..delivery("code-host", &headers, GITHUB_BODY)
        },
        IntegrationDelivery {
            integration_id: Some("int\u{0}".into()),
            ..delivery("code-host", &headers, GITHUB_BODY)
        },
    ] {
        let e = service.receive(d.clone()).await.unwrap_err();
        assert!(matches!(e, InboundError::NotFound), "{d:?}: {e:?}");
    }
}

#[tokio::test]
async fn githubs_documented_delivery_starts_the_workflow_as_the_creator() {
    let (s, stored) =
        Setup::new().with_integration(IntegrationKind::CodeHost, GITHUB_SECRET, true).starting(false);
    let headers = [
        ("X-Hub-Signature-256", GITHUB_SIGNATURE),
        ("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
        ("X-GitHub-Event", "push"),
        ("Content-Type", "text/plain"),
    ];
    let got = started(s.service().receive(delivery("code-host", &headers, GITHUB_BODY)).await.unwrap());
    assert!(!got.duplicate);
    assert_eq!(got.delivery_id.as_deref(), Some("72d3162e-cc78-11e3-81ab-4c9367dc0958"));
    assert_eq!((got.rate.limit, got.rate.remaining), (Some(300), 299), "table 2, Pro");
    let stored = stored.lock().unwrap();
    let new = &stored[0];
    assert_eq!(new.execution.origin, ExecutionOrigin::Integration(IntegrationId::from_string("int_1")));
    assert_eq!(new.dedup_key.as_deref(), Some("72d3162e-cc78-11e3-81ab-4c9367dc0958"));
    // The creator, with the role they have now (a member, in these tests' directory), not the
    // one they had when they made it (admin).
    assert_eq!(new.run_as, RunAs { user_id: UserId::from_string("usr_creator"), role: Role::Member });
    assert_eq!(
        new.execution.input,
        json!({"body": "Hello, World!"}),
        "a payload of text is the input's body"
    );
    assert_eq!(
        new.execution.trigger,
        json!({
            "kind": "code-host",
            "delivery_id": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
            "headers": {
                "x-hub-signature-256": GITHUB_SIGNATURE,
                "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
                "x-github-event": "push",
                "content-type": "text/plain"
            }
        })
    );
}

#[tokio::test]
async fn a_tampered_or_unsigned_delivery_is_unauthorized_and_starts_nothing() {
    let s = Setup::new().with_integration(IntegrationKind::CodeHost, GITHUB_SECRET, true);
    let service = s.service();
    let e = service
        .receive(delivery("code-host", &[("X-Hub-Signature-256", GITHUB_SIGNATURE)], b"Hello, World?"))
        .await
        .unwrap_err();
    assert!(matches!(e, InboundError::Unauthorized(SignatureError::Mismatch)), "{e:?}");
    let e = service.receive(delivery("code-host", &[], GITHUB_BODY)).await.unwrap_err();
    assert!(matches!(e, InboundError::Unauthorized(SignatureError::Missing { .. })), "{e:?}");
}

#[tokio::test]
async fn a_redelivery_returns_the_first_execution() {
    let (s, stored) =
        Setup::new().with_integration(IntegrationKind::CodeHost, GITHUB_SECRET, true).starting(true);
    let headers = [("X-Hub-Signature-256", GITHUB_SIGNATURE), ("X-GitHub-Delivery", "d-1")];
    let got = started(s.service().receive(delivery("code-host", &headers, GITHUB_BODY)).await.unwrap());
    assert!(got.duplicate);
    assert_eq!(got.execution.id.as_str(), "exe_first");
    assert_eq!(stored.lock().unwrap()[0].dedup_key.as_deref(), Some("d-1"));
}

#[tokio::test]
async fn a_slack_slash_command_is_parsed_from_its_form() {
    let (s, stored) =
        Setup::new().with_integration(IntegrationKind::Chat, SLACK_SECRET, true).starting(false);
    let (signature, ts) = slack_headers(SLACK_BODY);
    let headers = [
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("X-Slack-Signature", signature.as_str()),
        ("X-Slack-Request-Timestamp", ts.as_str()),
    ];
    let got = started(s.service().receive(delivery("chat", &headers, SLACK_BODY)).await.unwrap());
    assert_eq!(got.delivery_id.as_deref(), Some("398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"));
    let execution = &stored.lock().unwrap()[0].execution;
    let input = &execution.input;
    assert_eq!(execution.trigger["kind"], "chat");
    assert_eq!(execution.trigger["delivery_id"], got.delivery_id.clone().unwrap());
    assert_eq!(input["command"], "/webhook-collect", "the provider's payload is the input");
    assert_eq!(input["user_name"], "roadrunner");
    assert_eq!(input["text"], "");
}

#[tokio::test]
async fn slack_interactivity_payloads_are_parsed_inside_the_form() {
    let (s, stored) =
        Setup::new().with_integration(IntegrationKind::Chat, SLACK_SECRET, true).starting(false);
    let body = b"payload=%7B%22type%22%3A%22block_actions%22%2C%22trigger_id%22%3A%2213345.42%22%7D";
    let (signature, ts) = slack_headers(body);
    let headers = [
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("X-Slack-Signature", signature.as_str()),
        ("X-Slack-Request-Timestamp", ts.as_str()),
    ];
    s.service().receive(delivery("chat", &headers, body)).await.unwrap();
    let execution = &stored.lock().unwrap()[0].execution;
    assert_eq!(execution.input, json!({"payload": {"type": "block_actions", "trigger_id": "13345.42"}}));
    assert_eq!(execution.trigger["delivery_id"], "13345.42");
}

#[tokio::test]
async fn slacks_url_verification_is_answered_only_when_signed_and_starts_nothing() {
    let s = Setup::new().with_integration(IntegrationKind::Chat, SLACK_SECRET, true);
    let service = s.service();
    let body = br#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let (signature, ts) = slack_headers(body);
    let headers = [
        ("Content-Type", "application/json"),
        ("X-Slack-Signature", signature.as_str()),
        ("X-Slack-Request-Timestamp", ts.as_str()),
    ];
    assert_eq!(
        service.receive(delivery("chat", &headers, body)).await.unwrap(),
        Received::Challenge("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".into())
    );
    let forged = [("X-Slack-Signature", "v0=00"), ("X-Slack-Request-Timestamp", ts.as_str())];
    assert!(matches!(
        service.receive(delivery("chat", &forged, body)).await,
        Err(InboundError::Unauthorized(_))
    ));
}

#[tokio::test]
async fn each_kind_is_verified_with_its_own_scheme() {
    let body = br#"{"event":{"id":"01DEN1HNLBC1R4FZ5CX2TQKAY7"}}"#;
    let hex = sign("kind-secret", body);
    type Case<'a> = (IntegrationKind, Vec<(&'a str, String)>, Option<&'a str>);
    let cases: [Case<'_>; 4] = [
        (
            IntegrationKind::Incident,
            vec![("X-PagerDuty-Signature", format!("v1={hex}"))],
            Some("01DEN1HNLBC1R4FZ5CX2TQKAY7"),
        ),
        (
            IntegrationKind::IssueTracker,
            vec![("Linear-Signature", hex.clone()), ("Linear-Delivery", "lin-1".into())],
            Some("lin-1"),
        ),
        (
            IntegrationKind::IssueTracker2,
            vec![
                ("X-Hub-Signature", format!("sha256={hex}")),
                ("X-Atlassian-Webhook-Identifier", "atl-1".into()),
            ],
            Some("atl-1"),
        ),
        (IntegrationKind::Wiki, vec![("X-Hub-Signature", format!("sha256={hex}"))], None),
    ];
    for (kind, headers, id) in cases {
        let (s, stored) = Setup::new().with_integration(kind, "kind-secret", true).starting(false);
        let mut headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        headers.push(("Content-Type", "application/json"));
        let service = s.service();
        let got = started(service.receive(delivery(kind.as_str(), &headers, body)).await.unwrap());
        assert_eq!(got.delivery_id.as_deref(), id, "{kind}");
        assert_eq!(stored.lock().unwrap()[0].execution.input["event"]["id"], "01DEN1HNLBC1R4FZ5CX2TQKAY7");
        let e = service.receive(delivery(kind.as_str(), &headers, b"{}")).await.unwrap_err();
        assert!(matches!(e, InboundError::Unauthorized(SignatureError::Mismatch)), "{kind}: {e:?}");
    }
}

#[tokio::test]
async fn an_inactive_workflow_is_a_conflict_after_the_signature() {
    let s = Setup::new().with_integration(IntegrationKind::CodeHost, GITHUB_SECRET, false);
    let service = s.service();
    let e = service
        .receive(delivery("code-host", &[("X-Hub-Signature-256", GITHUB_SIGNATURE)], GITHUB_BODY))
        .await
        .unwrap_err();
    assert!(matches!(e, InboundError::Inactive), "{e:?}");
    let e = service.receive(delivery("code-host", &[], GITHUB_BODY)).await.unwrap_err();
    assert!(matches!(e, InboundError::Unauthorized(_)), "{e:?}");
}

#[tokio::test]
async fn a_tenant_past_its_plan_limit_is_refused() {
    let mut s = Setup::new().with_integration(IntegrationKind::CodeHost, GITHUB_SECRET, true);
    s.count = Some(301);
    let e = s
        .service()
        .receive(delivery("code-host", &[("X-Hub-Signature-256", GITHUB_SIGNATURE)], GITHUB_BODY))
        .await
        .unwrap_err();
    assert!(matches!(e, InboundError::RateLimited(_)), "{e:?}");
}

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use mockall::predicate::eq;
use serde_json::json;

use super::*;
use crate::ids::TenantId;
use crate::secrets::MockSecrets;
use crate::tenancy::{Plan, Role};
use crate::webhooks::SealedSecret;
use crate::workflows::MockWorkflowRepository;
use crate::workflows::ports::{MockTriggerRepository, TriggerTarget};
use crate::workflows::signatures::SignatureError;
use crate::workflows::test_support::{
    Stored, VisibleCipher, caller, clock, execution_repo, execution_service, ids, key_caller, limiter,
    no_executions, sign, t0, workflow,
};

const SECRET: &str = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
const PATH: &str = "p4th-t0ken_0123456789abcdefghijklmnopqrstuvw";

struct Setup {
    triggers: MockTriggerRepository,
    workflows: MockWorkflowRepository,
    executions: MockExecutionRepository,
    count: Option<u64>,
}

use crate::workflows::ports::MockExecutionRepository;

impl Setup {
    fn new() -> Self {
        Self {
            triggers: MockTriggerRepository::new(),
            workflows: MockWorkflowRepository::new(),
            executions: no_executions(),
            count: None,
        }
    }

    fn service(self) -> TriggerService {
        let mut secrets = MockSecrets::new();
        secrets.expect_random_bytes().returning(|n| vec![0; n]);
        secrets.expect_random_token().returning(|| PATH.to_owned());
        TriggerService::new(TriggerServiceDeps {
            triggers: Arc::new(self.triggers),
            workflows: Arc::new(self.workflows),
            executions: execution_service(self.executions),
            cipher: Arc::new(VisibleCipher),
            hmac: Arc::new(crate::workflows::test_support::Ring),
            secrets: Arc::new(secrets),
            limiter: limiter(self.count),
            plans: PlanTable::One,
            ids: Arc::new(ids()),
            clock: Arc::new(clock()),
        })
    }

    /// A trigger at [`PATH`] accepting `methods`, of a workflow `active` or not.
    fn with_trigger(mut self, methods: &[&str], active_trigger: bool, active_workflow: bool) -> Self {
        let trigger = stored_trigger(methods, active_trigger);
        self.triggers.expect_find_by_path().with(eq(PATH)).returning(move |_| {
            Ok(Some(TriggerTarget {
                trigger: trigger.clone(),
                workflow: workflow(active_workflow),
                plan: Plan::Starter,
            }))
        });
        self
    }

    /// Executions are stored (or found, with `existing`) and the rate counter says `count`.
    fn starting(mut self, existing: bool, count: u64) -> (Self, Stored) {
        let (repo, stored) = execution_repo(existing);
        self.executions = repo;
        self.count = Some(count);
        (self, stored)
    }
}

fn stored_trigger(methods: &[&str], active: bool) -> Trigger {
    Trigger {
        id: TriggerId::from_string("trg_1"),
        tenant_id: TenantId::from_string("ten_1"),
        workflow_id: WorkflowId::from_string("wf_1"),
        path: PATH.into(),
        name: "Inbound".into(),
        allowed_methods: methods.iter().map(|m| (*m).to_owned()).collect(),
        secret: SealedSecret(format!("sealed[trg_1]:{SECRET}")),
        is_active: active,
        trigger_count: 3,
        run_as: RunAs { user_id: crate::ids::UserId::from_string("usr_creator"), role: Role::Member },
        created_at: t0(),
    }
}

fn call(method: &str, headers: &[(&str, &str)], body: &[u8]) -> TriggerCall {
    TriggerCall {
        path: PATH.into(),
        method: method.into(),
        query: "source=crm&tag=a&tag=b".into(),
        headers: headers.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect(),
        body: body.to_vec(),
    }
}

fn with_secret() -> Vec<(&'static str, &'static str)> {
    vec![("Content-Type", "application/json"), ("X-Webhook-Secret", SECRET), ("X-Request-Source", "crm")]
}

// --- creation, listing, deletion ---

#[tokio::test]
async fn create_generates_a_path_and_a_secret_shown_once_and_sealed_under_the_trigger_id() {
    let mut s = Setup::new();
    s.workflows.expect_get().returning(|_, _| Ok(Some(workflow(true))));
    s.triggers
        .expect_create()
        .withf(|t| {
            t.secret.0.starts_with("sealed[trg_1]:whsec_")
                && t.path == PATH
                && t.allowed_methods == ["POST"]
                && t.run_as == RunAs { user_id: crate::ids::UserId::from_string("usr_1"), role: Role::Member }
                && t.trigger_count == 0
                && t.is_active
        })
        .times(1)
        .returning(|_| Ok(true));
    let new = NewTrigger { name: " CRM hook ".into(), allowed_methods: None };
    let (trigger, secret) =
        s.service().create(&caller(Role::Member), &WorkflowId::from_string("wf_1"), new).await.unwrap();
    assert_eq!(secret, format!("whsec_{}", "A".repeat(43) + "="), "whsec_ + base64 of 32 bytes");
    assert_eq!(trigger.secret.0, format!("sealed[trg_1]:{secret}"), "only the sealed form is kept");
    assert!(!format!("{trigger:?}").contains(&secret), "Debug never shows the secret");
    assert_eq!(trigger.name, "CRM hook");
    assert_eq!(trigger.url(), format!("/api/v1/webhooks/trigger/{PATH}"));
    assert_eq!(trigger.workflow_id.as_str(), "wf_1");
}

#[tokio::test]
async fn create_checks_name_and_methods_together_and_stores_nothing() {
    let mut s = Setup::new();
    s.workflows.expect_get().never();
    s.triggers.expect_create().never();
    let new = NewTrigger { name: " ".into(), allowed_methods: Some(vec!["GET".into(), "TRACE".into()]) };
    let e =
        s.service().create(&caller(Role::Member), &WorkflowId::from_string("wf_1"), new).await.unwrap_err();
    let TriggerError::Invalid(errors) = e else { panic!("{e:?}") };
    let fields: Vec<&str> = errors.0.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["name", "allowed_methods[1]"]);
}

#[tokio::test]
async fn methods_are_kept_upper_case_without_repeats() {
    let mut s = Setup::new();
    s.workflows.expect_get().returning(|_, _| Ok(Some(workflow(true))));
    s.triggers.expect_create().returning(|_| Ok(true));
    let new = NewTrigger {
        name: "x".into(),
        allowed_methods: Some(vec!["get".into(), "POST".into(), "GET".into()]),
    };
    let (trigger, _) =
        s.service().create(&caller(Role::Admin), &WorkflowId::from_string("wf_1"), new).await.unwrap();
    assert_eq!(trigger.allowed_methods, ["GET", "POST"]);
}

#[tokio::test]
async fn a_workflow_of_another_tenant_or_deleted_meanwhile_is_not_found() {
    let mut s = Setup::new();
    s.workflows
        .expect_get()
        .with(eq(TenantId::from_string("ten_1")), eq(WorkflowId::from_string("wf_x")))
        .returning(|_, _| Ok(None));
    s.triggers.expect_create().never();
    s.triggers.expect_list().never();
    let service = s.service();
    let new = NewTrigger { name: "x".into(), allowed_methods: None };
    let wf = WorkflowId::from_string("wf_x");
    assert!(matches!(
        service.create(&caller(Role::Owner), &wf, new).await,
        Err(TriggerError::WorkflowNotFound)
    ));
    assert!(matches!(service.list(&caller(Role::Viewer), &wf).await, Err(TriggerError::WorkflowNotFound)));

    let mut s = Setup::new();
    s.workflows.expect_get().returning(|_, _| Ok(Some(workflow(true))));
    s.triggers.expect_create().returning(|_| Ok(false));
    let new = NewTrigger { name: "x".into(), allowed_methods: None };
    let e = s.service().create(&caller(Role::Owner), &WorkflowId::from_string("wf_1"), new).await;
    assert!(matches!(e, Err(TriggerError::WorkflowNotFound)));
}

#[tokio::test]
async fn listing_needs_read_and_making_or_deleting_needs_write_and_execute() {
    let mut s = Setup::new();
    s.workflows.expect_get().returning(|_, _| Ok(Some(workflow(true))));
    s.triggers.expect_list().returning(|_, _| Ok(vec![stored_trigger(&["POST"], true)]));
    s.triggers.expect_create().never();
    s.triggers.expect_delete().never();
    let service = s.service();
    let wf = WorkflowId::from_string("wf_1");
    let trg = TriggerId::from_string("trg_1");
    let new = || NewTrigger { name: "x".into(), allowed_methods: None };

    assert_eq!(service.list(&caller(Role::Viewer), &wf).await.unwrap().len(), 1);
    assert!(matches!(
        service.create(&caller(Role::Viewer), &wf, new()).await,
        Err(TriggerError::Forbidden(_))
    ));
    assert!(matches!(
        service.delete(&caller(Role::Viewer), &wf, &trg).await,
        Err(TriggerError::Forbidden(_))
    ));
    // A key that may edit workflows but not run them cannot make itself a way to run one.
    let write_only = key_caller(&["workflows:read", "workflows:write"]);
    assert!(matches!(service.create(&write_only, &wf, new()).await, Err(TriggerError::Forbidden(_))));
    let read_only = key_caller(&["workflows:execute"]);
    assert!(matches!(service.list(&read_only, &wf).await, Err(TriggerError::Forbidden(_))));
}

#[tokio::test]
async fn delete_is_scoped_to_the_tenant_and_workflow() {
    let mut s = Setup::new();
    s.triggers
        .expect_delete()
        .with(
            eq(TenantId::from_string("ten_1")),
            eq(WorkflowId::from_string("wf_1")),
            eq(TriggerId::from_string("trg_1")),
        )
        .times(1)
        .returning(|_, _, _| Ok(true));
    s.triggers.expect_delete().returning(|_, _, _| Ok(false));
    let service = s.service();
    let wf = WorkflowId::from_string("wf_1");
    service.delete(&caller(Role::Member), &wf, &TriggerId::from_string("trg_1")).await.unwrap();
    assert!(matches!(
        service.delete(&caller(Role::Member), &wf, &TriggerId::from_string("trg_2")).await,
        Err(TriggerError::NotFound)
    ));
}

// --- calls ---

#[tokio::test]
async fn an_unknown_path_is_not_found_before_anything_else() {
    let mut s = Setup::new();
    s.triggers.expect_find_by_path().returning(|_| Ok(None));
    s.triggers.expect_count_call().never();
    let e = s.service().call(call("POST", &with_secret(), b"{}")).await.unwrap_err();
    assert!(matches!(e, InboundError::NotFound), "{e:?}");

    // Paths no trigger can have are not even looked up.
    let mut s = Setup::new();
    s.triggers.expect_find_by_path().never();
    let service = s.service();
    for path in [String::new(), "x".repeat(129)] {
        let mut c = call("POST", &with_secret(), b"{}");
        c.path = path;
        assert!(matches!(service.call(c).await, Err(InboundError::NotFound)));
    }
}

#[tokio::test]
async fn an_inactive_trigger_is_not_found_even_with_its_secret() {
    let s = Setup::new().with_trigger(&["POST"], false, true);
    let e = s.service().call(call("POST", &with_secret(), b"{}")).await.unwrap_err();
    assert!(matches!(e, InboundError::NotFound), "{e:?}");
}

#[tokio::test]
async fn a_method_not_allowed_is_refused_with_the_allowed_ones_before_the_secret_is_checked() {
    let s = Setup::new().with_trigger(&["POST", "PUT"], true, true);
    let service = s.service();
    for method in ["GET", "DELETE", "post", "OPTIONS"] {
        let e = service.call(call(method, &[], b"")).await.unwrap_err();
        match e {
            InboundError::MethodNotAllowed { allow } => assert_eq!(allow, "POST, PUT"),
            other => panic!("{method}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_missing_or_wrong_secret_is_unauthorized_and_starts_nothing() {
    let mut s = Setup::new().with_trigger(&["POST"], true, true);
    s.triggers.expect_count_call().never();
    let service = s.service();
    let e = service.call(call("POST", &[("Content-Type", "application/json")], b"{}")).await.unwrap_err();
    assert!(matches!(e, InboundError::Unauthorized(SignatureError::Missing { .. })), "{e:?}");
    let wrong = [("X-Webhook-Secret", "whsec_guess")];
    let e = service.call(call("POST", &wrong, b"{}")).await.unwrap_err();
    assert!(matches!(e, InboundError::Unauthorized(SignatureError::Mismatch)), "{e:?}");
    // A signature over another body.
    let t = t0().timestamp();
    let header = format!("t={t},v1={}", sign(SECRET, format!("{t}.{{\"a\":2}}").as_bytes()));
    let e = service
        .call(call("POST", &[("X-Service-Signature", header.as_str())], br#"{"a":1}"#))
        .await
        .unwrap_err();
    assert!(matches!(e, InboundError::Unauthorized(SignatureError::Mismatch)), "{e:?}");
}

#[tokio::test]
async fn a_call_with_the_secret_starts_an_execution_as_the_creator_and_counts_it() {
    let (mut s, stored) = Setup::new().with_trigger(&["POST"], true, true).starting(false, 1);
    s.triggers
        .expect_count_call()
        .with(eq(TriggerId::from_string("trg_1")))
        .times(1)
        .returning(|_| Ok(Some(4)));
    let fired = s.service().call(call("POST", &with_secret(), br#"{"order": 42}"#)).await.unwrap();
    assert!(!fired.duplicate);
    assert_eq!(fired.trigger_id.as_str(), "trg_1");
    assert_eq!(fired.execution.status(), crate::workflows::ExecutionStatus::Running);
    assert_eq!((fired.rate.limit, fired.rate.remaining), (Some(60), 59));
    let stored = stored.lock().unwrap();
    let new = &stored[0];
    assert_eq!(new.execution.origin, ExecutionOrigin::Trigger(TriggerId::from_string("trg_1")));
    assert_eq!(new.run_as.user_id.as_str(), "usr_creator");
    assert_eq!(new.run_as.role, Role::Member);
    assert_eq!(new.dedup_key, None);
    assert_eq!(new.execution.input, json!({"order": 42}), "the input is the body, as /execute takes it");
    assert_eq!(
        new.execution.trigger,
        json!({
            "method": "POST",
            "query": {"source": "crm", "tag": ["a", "b"]},
            "headers": {"content-type": "application/json", "x-request-source": "crm"},
            "body": {"order": 42}
        }),
        "the secret is not part of the call's details"
    );
}

#[tokio::test]
async fn a_signed_call_is_accepted_and_its_signature_left_out_of_the_input() {
    let (mut s, stored) = Setup::new().with_trigger(&["PUT"], true, true).starting(false, 1);
    s.triggers.expect_count_call().times(1).returning(|_| Ok(Some(4)));
    let body = b"name=Ada&plan=pro";
    let t = t0().timestamp() - 30;
    let header = format!("t={t},v1={}", sign(SECRET, &[t.to_string().as_bytes(), b".", body].concat()));
    let headers =
        [("content-type", "application/x-www-form-urlencoded"), ("x-service-signature", header.as_str())];
    s.service().call(call("PUT", &headers, body)).await.unwrap();
    let execution = &stored.lock().unwrap()[0].execution;
    assert_eq!(execution.input, json!({"name": "Ada", "plan": "pro"}), "a form is the input");
    let details = &execution.trigger;
    assert_eq!(details["body"], json!({"name": "Ada", "plan": "pro"}));
    assert_eq!(details["headers"], json!({"content-type": "application/x-www-form-urlencoded"}));
    assert_eq!(details["method"], "PUT");
}

#[tokio::test]
async fn an_idempotency_key_is_the_dedup_key_and_a_repeat_counts_nothing() {
    let (mut s, stored) = Setup::new().with_trigger(&["POST"], true, true).starting(true, 1);
    s.triggers.expect_count_call().never();
    let mut headers = with_secret();
    headers.push(("Idempotency-Key", "order-42"));
    let fired = s.service().call(call("POST", &headers, b"{}")).await.unwrap();
    assert!(fired.duplicate);
    assert_eq!(fired.execution.id.as_str(), "exe_first");
    assert_eq!(stored.lock().unwrap()[0].dedup_key.as_deref(), Some("order-42"));
}

#[tokio::test]
async fn a_malformed_idempotency_key_or_body_is_refused_after_the_secret() {
    let mut s = Setup::new().with_trigger(&["POST"], true, true);
    s.triggers.expect_count_call().never();
    let service = s.service();
    let long = "k".repeat(256);
    for key in ["", "  ", long.as_str()] {
        let mut headers = with_secret();
        headers.push(("Idempotency-Key", key));
        match service.call(call("POST", &headers, b"{}")).await {
            Err(InboundError::Invalid(e)) => assert_eq!(e.0[0].field, "Idempotency-Key", "{key:?}"),
            other => panic!("{key:?}: {other:?}"),
        }
    }
    match service.call(call("POST", &with_secret(), b"{not json")).await {
        Err(InboundError::Invalid(e)) => assert_eq!(e.0[0].field, "body"),
        other => panic!("{other:?}"),
    }
    let binary = [("X-Webhook-Secret", SECRET), ("Content-Type", "application/octet-stream")];
    assert!(matches!(
        service.call(call("POST", &binary, &[0xff, 0x00])).await,
        Err(InboundError::UnsupportedBody)
    ));
    let nul = [("X-Webhook-Secret", SECRET), ("Content-Type", "text/plain")];
    assert!(matches!(service.call(call("POST", &nul, b"a\0b")).await, Err(InboundError::Invalid(_))));
    // A wrong secret is told before a bad body.
    let wrong = [("X-Webhook-Secret", "nope"), ("Content-Type", "application/json")];
    assert!(matches!(
        service.call(call("POST", &wrong, b"{not json")).await,
        Err(InboundError::Unauthorized(_))
    ));
}

#[tokio::test]
async fn an_inactive_workflow_is_a_conflict_and_is_not_counted() {
    let s = Setup::new().with_trigger(&["POST"], true, false);
    // `limiter(None)` fails the test if the call is counted; `no_executions` if one starts.
    let e = s.service().call(call("POST", &with_secret(), b"{}")).await.unwrap_err();
    assert!(matches!(e, InboundError::Inactive), "{e:?}");
}

#[tokio::test]
async fn a_tenant_past_its_plan_limit_is_refused_and_nothing_starts() {
    let mut s = Setup::new().with_trigger(&["POST"], true, true);
    s.count = Some(61);
    s.triggers.expect_count_call().never();
    let e = s.service().call(call("POST", &with_secret(), b"{}")).await.unwrap_err();
    match e {
        InboundError::RateLimited(status) => {
            assert_eq!((status.limit, status.remaining), (Some(60), 0));
            assert!(status.retry_after.is_some());
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_failed_count_does_not_fail_a_started_call() {
    let (mut s, stored) = Setup::new().with_trigger(&["POST"], true, true).starting(false, 1);
    s.triggers.expect_count_call().times(1).returning(|_| Err(anyhow::anyhow!("database gone")));
    let fired = s.service().call(call("POST", &with_secret(), b"")).await.unwrap();
    assert!(!fired.duplicate);
    let execution = &stored.lock().unwrap()[0].execution;
    assert_eq!((&execution.input, &execution.trigger["body"]), (&json!({}), &serde_json::Value::Null));
}

#[test]
fn a_call_never_prints_its_secret_path_or_body() {
    let printed = format!("{:?}", call("POST", &with_secret(), br#"{"card": "4111"}"#));
    assert!(!printed.contains(SECRET) && !printed.contains(PATH) && !printed.contains("4111"), "{printed}");
    assert!(printed.contains("X-Webhook-Secret"), "header names are shown: {printed}");
}

#[test]
fn idempotency_keys_are_trimmed_and_bounded() {
    assert_eq!(idempotency_key(None).unwrap(), None);
    assert_eq!(idempotency_key(Some(" a-1 ")).unwrap().as_deref(), Some("a-1"));
    assert_eq!(idempotency_key(Some(&"k".repeat(255))).unwrap().map(|k| k.len()), Some(255));
    assert!(idempotency_key(Some("a\u{7}")).is_err());
}

#[test]
fn a_body_that_is_not_an_object_is_the_inputs_body() {
    use crate::workflows::inbound::input_of;
    assert_eq!(input_of(&json!({"a": 1})), json!({"a": 1}));
    assert_eq!(input_of(&serde_json::Value::Null), json!({}));
    assert_eq!(input_of(&json!("plain text")), json!({"body": "plain text"}));
    assert_eq!(input_of(&json!([1, 2])), json!({"body": [1, 2]}));
}

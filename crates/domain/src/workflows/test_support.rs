//! What the trigger and integration tests share: a caller, a workflow, a real HMAC, a cipher
//! that shows what it sealed, an execution service over mocks, a rate limiter at a set count.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;

use super::executions::{ExecutionService, ExecutionServiceDeps, ExecutionSettings, MockStepPerformer};
use super::model::Workflow;
use super::ports::{MockExecutionRepository, MockWorkflowRepository, NewExecution, Started};
use super::steps::validate_steps;
use crate::ids::{ApiKeyId, MockIdGenerator, TenantId, WorkflowId};
use crate::ratelimit::{MockRateCounter, RateLimiter};
use crate::tenancy::{Credential, Principal, Role, Scope};
use crate::time::MockClock;
use crate::webhooks::{Hmac, SealedSecret, SecretCipher};

pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap()
}

pub fn clock() -> MockClock {
    let mut clock = MockClock::new();
    clock.expect_now().returning(t0);
    clock
}

pub fn ids() -> MockIdGenerator {
    let mut ids = MockIdGenerator::new();
    ids.expect_generate().returning(|prefix| format!("{prefix}_1"));
    ids
}

pub fn caller(role: Role) -> Principal {
    Principal::test(role)
}

/// An owner's API key with only these scopes.
pub fn key_caller(scopes: &[&str]) -> Principal {
    Principal {
        credential: Credential::ApiKey {
            key_id: ApiKeyId::from_string("key_1"),
            scopes: scopes.iter().map(|s| s.parse::<Scope>().unwrap()).collect(),
        },
        ..caller(Role::Owner)
    }
}

pub fn workflow(active: bool) -> Workflow {
    Workflow {
        id: WorkflowId::from_string("wf_1"),
        tenant_id: TenantId::from_string("ten_1"),
        name: "Echo".into(),
        description: None,
        steps: validate_steps(&json!([{"id": "echo", "type": "transform", "output": "{{ input.body }}"}]))
            .unwrap(),
        is_active: active,
        created_at: t0(),
        updated_at: t0(),
    }
}

/// HMAC-SHA256 as the service computes it (crates/crypto's `RingHmac`).
pub struct Ring;
impl Hmac for Ring {
    fn sha256(&self, key: &[u8], message: &[u8]) -> [u8; 32] {
        let tag = ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key), message);
        tag.as_ref().try_into().unwrap()
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sign(secret: &str, message: &[u8]) -> String {
    hex(&Ring.sha256(secret.as_bytes(), message))
}

/// Seals visibly (`sealed[<context>]:<plaintext>`) and opens only under the same context, as
/// the real cipher binds a secret to its row.
pub struct VisibleCipher;
impl SecretCipher for VisibleCipher {
    fn seal(&self, context: &str, plaintext: &str) -> anyhow::Result<SealedSecret> {
        Ok(SealedSecret(format!("sealed[{context}]:{plaintext}")))
    }
    fn open(&self, context: &str, sealed: &SealedSecret) -> anyhow::Result<String> {
        sealed
            .0
            .strip_prefix(&format!("sealed[{context}]:"))
            .map(str::to_owned)
            .ok_or_else(|| anyhow::anyhow!("sealed under another context"))
    }
}

/// What the execution repository was asked to store.
pub type Stored = Arc<Mutex<Vec<NewExecution>>>;

/// An execution repository that stores every start, or with `existing` answers each start
/// with an execution it already has.
pub fn execution_repo(existing: bool) -> (MockExecutionRepository, Stored) {
    let stored: Stored = Arc::default();
    let seen = stored.clone();
    let mut repo = MockExecutionRepository::new();
    repo.expect_create().returning(move |new| {
        seen.lock().unwrap().push(new.clone());
        if existing {
            let mut first = new.execution.clone();
            first.id = crate::ids::ExecutionId::from_string("exe_first");
            Ok(Started::Existing(first))
        } else {
            Ok(Started::New(new.execution.clone()))
        }
    });
    (repo, stored)
}

/// An execution repository that must not be asked to store anything.
pub fn no_executions() -> MockExecutionRepository {
    let mut repo = MockExecutionRepository::new();
    repo.expect_create().never();
    repo
}

pub fn execution_service(repo: MockExecutionRepository) -> ExecutionService {
    ExecutionService::new(
        ExecutionServiceDeps {
            workflows: Arc::new(MockWorkflowRepository::new()),
            executions: Arc::new(repo),
            performer: Arc::new(MockStepPerformer::new()),
            due: Arc::new(crate::work::MockLeaseQueue::new()),
            clock: Arc::new(clock()),
            ids: Arc::new(ids()),
            members: Arc::new(members(Some(Role::Member))),
        },
        ExecutionSettings::default(),
    )
}

/// Members' roles where every user has `role` (`None`: nobody is a member).
pub fn members(role: Option<Role>) -> crate::tenancy::MockMemberRoles {
    let mut members = crate::tenancy::MockMemberRoles::new();
    members.expect_role_of().returning(move |_, _| Ok(role));
    members
}

/// A limiter whose counter answers `count` for every window; `None` fails the test if it is
/// asked at all.
pub fn limiter(count: Option<u64>) -> RateLimiter {
    let mut counter = MockRateCounter::new();
    match count {
        Some(n) => {
            counter
                .expect_hit()
                .withf(|subject, _| subject == "tenant:ten_1")
                .returning(move |_, windows| Ok(vec![n; windows.len()]));
        }
        None => {
            counter.expect_hit().never();
        }
    }
    RateLimiter::new(Arc::new(counter), Arc::new(clock()))
}

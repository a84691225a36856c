//! Webhook triggers: URLs (`/api/v1/webhooks/trigger/<path>`) whose calls execute a workflow.
//!
//! A trigger is made for a workflow with a generated secret, shown once and kept sealed; its
//! path is an opaque random token. Executions it starts act as the user who created it, with
//! the role they had then.
//!
//! A call goes through these gates, in this order, and the first that refuses answers:
//!
//! ```text
//!  path unknown, or trigger inactive ─▶ 404     (nothing about the trigger is revealed)
//!  method not in allowed_methods ─────▶ 405 + Allow
//!  secret / signature missing, wrong ─▶ 401     (verify_trigger, constant time)
//!  Idempotency-Key or body malformed ─▶ 422 / 415
//!  workflow inactive ─────────────────▶ 409
//!  tenant's plan limit spent ─────────▶ 429     (the tenant's `tenant:<id>` budget)
//!  otherwise ─────────────────────────▶ 202, an execution (new, or the first one for a
//!                                       repeated Idempotency-Key); trigger_count + 1 when new
//! ```

use std::sync::Arc;

use serde_json::{Value, json};

use super::execution_state::{Execution, ExecutionOrigin};
use super::executions::ExecutionService;
use super::inbound::{
    self, InboundError, check_storable, count_against_plan, header_object, media_type, parse_body,
};
use super::model::{DEFAULT_TRIGGER_METHODS, RunAs, Trigger, check_allowed_methods, check_name};
use super::ports::{TriggerRepository, WorkflowRepository};
use super::signatures::{Headers, SERVICE_SIGNATURE_HEADER, WEBHOOK_SECRET_HEADER, verify_trigger};
use crate::ids::{IdGenerator, TriggerId, WorkflowId};
use crate::ratelimit::{PlanTable, RateLimiter, RateStatus};
use crate::secrets::Secrets;
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::validation::{TextKind, ValidationErrors, Validator, check_length, check_text};
use crate::webhooks::signing::new_secret;
use crate::webhooks::{Hmac, SecretCipher};

/// Where trigger URLs live; a trigger's `url` is this followed by its path.
pub const TRIGGER_URL_PREFIX: &str = "/api/v1/webhooks/trigger/";
/// The header that makes a repeated call return the first execution.
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";
/// Longest `Idempotency-Key`, in characters.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 255;
/// Longest path a look-up is tried for: generated paths are 43 characters.
const MAX_PATH_CHARS: usize = 128;

impl Trigger {
    /// Its URL relative to the service's base address: `/api/v1/webhooks/trigger/<path>`.
    pub fn url(&self) -> String {
        format!("{TRIGGER_URL_PREFIX}{}", self.path)
    }
}

/// Why a trigger operation (create, list, delete) failed.
#[derive(Debug, thiserror::Error)]
pub enum TriggerError {
    /// The caller lacks the permission.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// The request is invalid; every problem is listed.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No such workflow in the caller's tenant.
    #[error("no such workflow")]
    WorkflowNotFound,
    /// No such trigger of that workflow.
    #[error("no such trigger")]
    NotFound,
    /// Storage or the cipher failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// A trigger to create, as the request gave it.
#[derive(Debug, Clone)]
pub struct NewTrigger {
    /// Its name.
    pub name: String,
    /// The methods it accepts; absent: `POST` only.
    pub allowed_methods: Option<Vec<String>>,
}

/// A call to a trigger URL, as it arrived. Its `Debug` shows neither the path nor any header
/// value nor the body: they carry the trigger's secret and the caller's data.
#[derive(Clone)]
pub struct TriggerCall {
    /// The path segment after `/webhooks/trigger/`.
    pub path: String,
    /// The request method, as sent (methods are case-sensitive).
    pub method: String,
    /// The raw query string, without `?`.
    pub query: String,
    /// The request headers, in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Vec<u8>,
}

impl std::fmt::Debug for TriggerCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("TriggerCall")
            .field("method", &self.method)
            .field("headers", &names)
            .field("body_bytes", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// What a call that passed every gate did.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerFired {
    /// The trigger called.
    pub trigger_id: TriggerId,
    /// The execution it started, or for a repeated `Idempotency-Key` the first one.
    pub execution: Execution,
    /// Whether the execution is the first one of a repeated `Idempotency-Key` (nothing was
    /// started now).
    pub duplicate: bool,
    /// The tenant's rate-limit budget after this call.
    pub rate: RateStatus,
}

/// What the service needs.
#[derive(Clone)]
#[allow(missing_debug_implementations)] // trait objects
pub struct TriggerServiceDeps {
    /// Triggers.
    pub triggers: Arc<dyn TriggerRepository>,
    /// Workflows (a trigger is made for one of the caller's).
    pub workflows: Arc<dyn WorkflowRepository>,
    /// Starts executions.
    pub executions: ExecutionService,
    /// Seals secrets at rest.
    pub cipher: Arc<dyn SecretCipher>,
    /// Checks signatures.
    pub hmac: Arc<dyn Hmac>,
    /// Generates secrets and paths.
    pub secrets: Arc<dyn Secrets>,
    /// Counts calls against the tenant's plan.
    pub limiter: RateLimiter,
    /// The plan limits.
    pub plans: PlanTable,
    /// Ids.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

/// Triggers for requests, and the calls to their URLs.
#[derive(Clone)]
pub struct TriggerService {
    deps: TriggerServiceDeps,
}

impl std::fmt::Debug for TriggerService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TriggerService").finish_non_exhaustive()
    }
}

impl TriggerService {
    /// A service over its dependencies.
    pub fn new(deps: TriggerServiceDeps) -> Self {
        Self { deps }
    }

    /// Makes a trigger for a workflow of the caller's tenant. Returns it with its secret in
    /// clear: the only time the secret is shown. Executions the trigger starts act as the
    /// caller, with the caller's present role.
    ///
    /// A trigger lets whoever holds its secret execute the workflow, so making one needs
    /// `workflows:execute` as well as `workflows:write`.
    ///
    /// # Errors
    /// [`TriggerError::Forbidden`], [`TriggerError::Invalid`], [`TriggerError::WorkflowNotFound`].
    pub async fn create(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
        new: NewTrigger,
    ) -> Result<(Trigger, String), TriggerError> {
        caller.require(Permission::WorkflowsWrite)?;
        caller.require(Permission::WorkflowsExecute)?;
        let mut v = Validator::new();
        let name = v.check("name", check_name(&new.name));
        // Nested: the error names the refused item (`allowed_methods[1]`).
        let methods = v.check_nested(match new.allowed_methods {
            Some(methods) => check_allowed_methods(&methods),
            None => Ok(DEFAULT_TRIGGER_METHODS.iter().map(|m| m.as_str().to_owned()).collect()),
        });
        let (name, allowed_methods) = v.finish((name, methods))?;
        let d = &self.deps;
        if d.workflows.get(&caller.tenant_id, workflow_id).await?.is_none() {
            return Err(TriggerError::WorkflowNotFound);
        }
        let id = TriggerId::generate(d.ids.as_ref());
        let secret = new_secret(d.secrets.as_ref());
        let trigger = Trigger {
            secret: d.cipher.seal(id.as_str(), &secret)?,
            id,
            tenant_id: caller.tenant_id.clone(),
            workflow_id: workflow_id.clone(),
            path: d.secrets.random_token(),
            name,
            allowed_methods,
            is_active: true,
            trigger_count: 0,
            run_as: RunAs { user_id: caller.user_id.clone(), role: caller.role },
            created_at: d.clock.now(),
        };
        if !d.triggers.create(&trigger).await? {
            return Err(TriggerError::WorkflowNotFound);
        }
        Ok((trigger, secret))
    }

    /// The triggers of a workflow of the caller's tenant, oldest first.
    ///
    /// # Errors
    /// [`TriggerError::Forbidden`], [`TriggerError::WorkflowNotFound`].
    pub async fn list(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
    ) -> Result<Vec<Trigger>, TriggerError> {
        caller.require(Permission::WorkflowsRead)?;
        if self.deps.workflows.get(&caller.tenant_id, workflow_id).await?.is_none() {
            return Err(TriggerError::WorkflowNotFound);
        }
        Ok(self.deps.triggers.list(&caller.tenant_id, workflow_id).await?)
    }

    /// Deletes a trigger of a workflow of the caller's tenant: its URL answers 404 from then
    /// on.
    ///
    /// # Errors
    /// [`TriggerError::Forbidden`], [`TriggerError::NotFound`].
    pub async fn delete(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
        id: &TriggerId,
    ) -> Result<(), TriggerError> {
        caller.require(Permission::WorkflowsWrite)?;
        if self.deps.triggers.delete(&caller.tenant_id, workflow_id, id).await? {
            Ok(())
        } else {
            Err(TriggerError::NotFound)
        }
    }

    /// Handles a call to a trigger URL (see the module documentation for its gates).
    ///
    /// # Errors
    /// Each gate's [`InboundError`]; storage, cipher and counter failures.
    pub async fn call(&self, call: TriggerCall) -> Result<TriggerFired, InboundError> {
        let d = &self.deps;
        if call.path.is_empty() || call.path.chars().count() > MAX_PATH_CHARS {
            return Err(InboundError::NotFound);
        }
        let target = d
            .triggers
            .find_by_path(&call.path)
            .await?
            .filter(|t| t.trigger.is_active)
            .ok_or(InboundError::NotFound)?;
        let trigger = &target.trigger;
        if !trigger.allows(&call.method) {
            return Err(InboundError::MethodNotAllowed { allow: trigger.allow_header() });
        }
        let headers = call.headers.as_slice();
        let secret = d.cipher.open(trigger.id.as_str(), &trigger.secret)?;
        verify_trigger(
            d.hmac.as_ref(),
            headers.header(WEBHOOK_SECRET_HEADER),
            headers.header(SERVICE_SIGNATURE_HEADER),
            &call.body,
            &secret,
            d.clock.now(),
        )
        .map_err(InboundError::Unauthorized)?;
        let key = idempotency_key(headers.header(IDEMPOTENCY_KEY_HEADER))?;
        let (input, details) = call_input(&call)?;
        let workflow = &target.workflow;
        if !workflow.is_active {
            return Err(InboundError::Inactive);
        }
        let rate = count_against_plan(&d.limiter, d.plans, &workflow.tenant_id, target.plan).await?;
        let started = d
            .executions
            .start(
                workflow,
                input,
                details,
                ExecutionOrigin::Trigger(trigger.id.clone()),
                trigger.run_as.clone(),
                key,
            )
            .await?;
        if started.is_new() {
            // The execution is stored: a failure to count it must not make the caller send the
            // call again (and start a second one).
            if let Err(e) = d.triggers.count_call(&trigger.id).await {
                tracing::warn!(trigger_id = %trigger.id, error = %e, "trigger_count was not incremented");
            }
        }
        let duplicate = !started.is_new();
        Ok(TriggerFired {
            trigger_id: trigger.id.clone(),
            execution: started.execution().clone(),
            duplicate,
            rate,
        })
    }
}

/// Checks an `Idempotency-Key` header: 1–255 characters, no control characters.
///
/// # Errors
/// [`InboundError::Invalid`] naming `Idempotency-Key`.
pub fn idempotency_key(value: Option<&str>) -> Result<Option<String>, InboundError> {
    let Some(value) = value else { return Ok(None) };
    let check = check_text(value, IDEMPOTENCY_KEY_HEADER, TextKind::SingleLine)
        .and_then(|()| check_length(value.trim(), 1, MAX_IDEMPOTENCY_KEY_CHARS, IDEMPOTENCY_KEY_HEADER));
    match check {
        Ok(()) => Ok(Some(value.trim().to_owned())),
        Err(e) => Err(InboundError::Invalid(ValidationErrors::one(e))),
    }
}

/// The input and the trigger details of an execution a call starts.
///
/// The input is what the workflow reads alike from every entry point: the body parsed by its
/// content type (see [`parse_body`]) when that is an object (JSON object or form), `{}` for an
/// empty body, else `{"body": <the body>}`. The details, read as `trigger.*`, are `{method,
/// query, headers, body}`: `query` an object of the query parameters (a repeated one becomes an
/// array), `headers` the headers with lower-case names, without the trigger's proof
/// (`X-Webhook-Secret`, `X-Service-Signature`) and other credentials.
///
/// # Errors
/// [`InboundError::Invalid`] or [`InboundError::UnsupportedBody`] for a body that cannot be
/// read as its content type says, or any text holding U+0000.
pub fn call_input(call: &TriggerCall) -> Result<(Value, Value), InboundError> {
    let headers = call.headers.as_slice();
    let body = parse_body(media_type(&headers).as_deref(), &call.body)?;
    let input = inbound::input_of(&body);
    let trigger = json!({
        "method": call.method,
        "query": inbound::form_object(call.query.as_bytes()),
        "headers": header_object(headers, &["x-webhook-secret", "x-service-signature"]),
        "body": body,
    });
    // The body first, named as the caller sent it (`body.name`); then the rest of what the call
    // carried (a query parameter: `trigger.query.q`).
    check_storable(&input)?;
    inbound::check_storable_as(&trigger, "trigger")?;
    Ok((input, trigger))
}

#[cfg(test)]
mod tests;

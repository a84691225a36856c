//! Inbound integrations: a receiver of one [`IntegrationKind`] bound to a workflow. The
//! service of that kind (Slack, GitHub, …) signs its deliveries with a secret it gave the user,
//! who gives it to us; each verified delivery starts the workflow.
//!
//! A delivery to `/api/v1/webhooks/integrations/<kind>?integration_id=<id>` goes through these
//! gates, in this order:
//!
//! ```text
//!  unknown kind or integration, or kinds differ ─▶ 404
//!  signature missing, wrong or stale ───────────▶ 401  (verify_integration; nothing stored)
//!  Slack url_verification ──────────────────────▶ 200 {challenge}
//!  body malformed ──────────────────────────────▶ 422 / 415
//!  workflow inactive ───────────────────────────▶ 409
//!  tenant's plan limit spent ───────────────────▶ 429
//!  otherwise ───────────────────────────────────▶ 202, an execution; a redelivery (same
//!                                                 delivery id) returns the first one
//! ```
//!
//! The execution is the record of the event: its origin is the integration, its input holds
//! the kind, the delivery id and the payload. Redeliveries are recognised by
//! [`delivery_id`], passed as the execution's deduplication key.

use std::sync::Arc;

use secrecy::{ExposeSecret as _, SecretString};
use serde_json::{Value, json};

use super::execution_state::{Execution, ExecutionOrigin};
use super::executions::ExecutionService;
use super::inbound::{
    self, InboundError, check_storable, count_against_plan, header_object, media_type, parse_body,
};
use super::model::{Integration, IntegrationKind, RunAs, check_name};
use super::ports::{IntegrationRepository, WorkflowRepository};
use super::signatures::{delivery_id, url_verification_challenge, verify_integration};
use crate::ids::{IdGenerator, IntegrationId, WorkflowId};
use crate::ratelimit::{PlanTable, RateLimiter, RateStatus};
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::validation::{
    FieldError, FieldErrorKind, TextKind, ValidationErrors, Validator, check_length, check_path_id,
    check_text,
};
use crate::webhooks::{Hmac, SecretCipher};

/// Where the receivers live; an integration's `receiver_url` is this, its kind, and
/// `?integration_id=<id>`.
pub const RECEIVER_URL_PREFIX: &str = "/api/v1/webhooks/integrations/";
/// Shortest signing secret, in characters.
pub const MIN_SIGNING_SECRET_CHARS: usize = 8;
/// Longest signing secret, in characters.
pub const MAX_SIGNING_SECRET_CHARS: usize = 512;

impl Integration {
    /// Its receiver's URL relative to the service's base address:
    /// `/api/v1/webhooks/integrations/<kind>?integration_id=<id>`.
    pub fn receiver_url(&self) -> String {
        format!("{RECEIVER_URL_PREFIX}{}?integration_id={}", self.kind, self.id)
    }
}

/// Why an integration operation (create, get, list, delete) failed.
#[derive(Debug, thiserror::Error)]
pub enum IntegrationError {
    /// The caller lacks the permission.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// The request is invalid (a `workflow_id` that is no workflow of the tenant included);
    /// every problem is listed.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No such integration in the caller's tenant.
    #[error("no such integration")]
    NotFound,
    /// Storage or the cipher failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// An integration to create, as the request gave it.
#[derive(Debug, Clone)]
pub struct NewIntegration {
    /// One of the six kinds' names.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// The secret the service signs its deliveries with.
    pub signing_secret: SecretString,
    /// The workflow its deliveries execute.
    pub workflow_id: String,
}

/// A delivery to a receiver, as it arrived.
#[derive(Debug, Clone)]
pub struct IntegrationDelivery {
    /// The kind in the path.
    pub kind: String,
    /// The `integration_id` query parameter.
    pub integration_id: Option<String>,
    /// The request headers, in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Vec<u8>,
}

/// What a delivery that passed every gate did.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    /// A Slack URL verification: answer with this challenge.
    Challenge(String),
    /// An event: its execution.
    Started(Box<IntegrationStarted>),
}

/// An event's execution.
#[derive(Debug, Clone, PartialEq)]
pub struct IntegrationStarted {
    /// The integration.
    pub integration_id: IntegrationId,
    /// The service's id of the delivery, when it carries one.
    pub delivery_id: Option<String>,
    /// The execution it started, or for a redelivery the first one.
    pub execution: Execution,
    /// Whether this was a redelivery (nothing was started now).
    pub duplicate: bool,
    /// The tenant's rate-limit budget after this delivery.
    pub rate: RateStatus,
}

/// What the service needs.
#[derive(Clone)]
#[allow(missing_debug_implementations)] // trait objects
pub struct IntegrationServiceDeps {
    /// Integrations.
    pub integrations: Arc<dyn IntegrationRepository>,
    /// Workflows (an integration is bound to one of the caller's).
    pub workflows: Arc<dyn WorkflowRepository>,
    /// Starts executions.
    pub executions: ExecutionService,
    /// Seals signing secrets at rest.
    pub cipher: Arc<dyn SecretCipher>,
    /// Checks signatures.
    pub hmac: Arc<dyn Hmac>,
    /// Counts deliveries against the tenant's plan.
    pub limiter: RateLimiter,
    /// The plan limits.
    pub plans: PlanTable,
    /// Ids.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

/// Integrations for requests, and the deliveries to their receivers.
#[derive(Clone)]
pub struct IntegrationService {
    deps: IntegrationServiceDeps,
}

impl std::fmt::Debug for IntegrationService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntegrationService").finish_non_exhaustive()
    }
}

/// Checks a signing secret as the user copied it from the service: 8–512 characters, no
/// control characters. Spaces are kept (GitHub's own example secret has them): the secret is
/// a key, used exactly as given.
///
/// # Errors
/// A [`FieldError`] naming `signing_secret`.
pub fn check_signing_secret(secret: &str) -> Result<(), FieldError> {
    check_text(secret, "signing_secret", TextKind::SingleLine)?;
    check_length(secret, MIN_SIGNING_SECRET_CHARS, MAX_SIGNING_SECRET_CHARS, "signing_secret")?;
    if secret.trim().is_empty() {
        return Err(FieldError::new(
            "signing_secret",
            FieldErrorKind::InvalidFormat,
            "signing_secret is blank",
        ));
    }
    Ok(())
}

impl IntegrationService {
    /// A service over its dependencies.
    pub fn new(deps: IntegrationServiceDeps) -> Self {
        Self { deps }
    }

    /// Binds a receiver of `kind` to a workflow of the caller's tenant. The signing secret is
    /// sealed at rest and never shown again. Executions its deliveries start act as the
    /// caller, with the caller's present role; so making one needs `workflows:execute` as well
    /// as `workflows:write`.
    ///
    /// # Errors
    /// [`IntegrationError::Forbidden`], [`IntegrationError::Invalid`] (also naming
    /// `workflow_id` when it is no workflow of the tenant).
    pub async fn create(
        &self,
        caller: &Principal,
        new: NewIntegration,
    ) -> Result<Integration, IntegrationError> {
        caller.require(Permission::WorkflowsWrite)?;
        caller.require(Permission::WorkflowsExecute)?;
        let mut v = Validator::new();
        let kind = v.check("kind", IntegrationKind::check(&new.kind));
        let name = v.check("name", check_name(&new.name));
        let secret = v.check("signing_secret", check_signing_secret(new.signing_secret.expose_secret()));
        let workflow = v.check("workflow_id", check_path_id(&new.workflow_id, "workflow_id"));
        let (kind, name, (), ()) = v.finish((kind, name, secret, workflow))?;
        let d = &self.deps;
        let workflow_id = WorkflowId::from_string(new.workflow_id);
        let no_workflow = || {
            IntegrationError::Invalid(ValidationErrors::one(FieldError::new(
                "workflow_id",
                FieldErrorKind::InvalidValue,
                "no workflow with this id in the tenant",
            )))
        };
        if d.workflows.get(&caller.tenant_id, &workflow_id).await?.is_none() {
            return Err(no_workflow());
        }
        let id = IntegrationId::generate(d.ids.as_ref());
        let integration = Integration {
            signing_secret: d.cipher.seal(id.as_str(), new.signing_secret.expose_secret())?,
            id,
            tenant_id: caller.tenant_id.clone(),
            kind,
            name,
            workflow_id,
            run_as: RunAs { user_id: caller.user_id.clone(), role: caller.role },
            created_at: d.clock.now(),
        };
        if !d.integrations.create(&integration).await? {
            return Err(no_workflow());
        }
        Ok(integration)
    }

    /// One integration of the caller's tenant.
    ///
    /// # Errors
    /// [`IntegrationError::Forbidden`], [`IntegrationError::NotFound`].
    pub async fn get(&self, caller: &Principal, id: &IntegrationId) -> Result<Integration, IntegrationError> {
        caller.require(Permission::WorkflowsRead)?;
        self.deps.integrations.get(&caller.tenant_id, id).await?.ok_or(IntegrationError::NotFound)
    }

    /// The caller's tenant's integrations, oldest first.
    ///
    /// # Errors
    /// [`IntegrationError::Forbidden`].
    pub async fn list(&self, caller: &Principal) -> Result<Vec<Integration>, IntegrationError> {
        caller.require(Permission::WorkflowsRead)?;
        Ok(self.deps.integrations.list(&caller.tenant_id).await?)
    }

    /// Deletes an integration: its receiver answers 404 for it from then on.
    ///
    /// # Errors
    /// [`IntegrationError::Forbidden`], [`IntegrationError::NotFound`].
    pub async fn delete(&self, caller: &Principal, id: &IntegrationId) -> Result<(), IntegrationError> {
        caller.require(Permission::WorkflowsWrite)?;
        if self.deps.integrations.delete(&caller.tenant_id, id).await? {
            Ok(())
        } else {
            Err(IntegrationError::NotFound)
        }
    }

    /// Handles a delivery to a receiver (see the module documentation for its gates).
    ///
    /// # Errors
    /// Each gate's [`InboundError`]; storage, cipher and counter failures.
    pub async fn receive(&self, delivery: IntegrationDelivery) -> Result<Received, InboundError> {
        let d = &self.deps;
        let kind = IntegrationKind::parse(&delivery.kind).ok_or(InboundError::NotFound)?;
        let id = delivery
            .integration_id
            .filter(|id| !id.is_empty() && id.len() <= 128 && check_path_id(id, "integration_id").is_ok())
            .ok_or(InboundError::NotFound)?;
        let target = d
            .integrations
            .find_target(&IntegrationId::from_string(id))
            .await?
            .filter(|t| t.integration.kind == kind)
            .ok_or(InboundError::NotFound)?;
        let integration = &target.integration;
        let headers = delivery.headers.as_slice();
        let secret = d.cipher.open(integration.id.as_str(), &integration.signing_secret)?;
        verify_integration(d.hmac.as_ref(), kind, &headers, &delivery.body, &secret, d.clock.now())
            .map_err(InboundError::Unauthorized)?;
        if kind == IntegrationKind::Chat
            && let Some(challenge) = url_verification_challenge(&delivery.body)
        {
            return Ok(Received::Challenge(challenge));
        }
        let delivery_id = delivery_id(kind, &headers, &delivery.body);
        // The provider's payload is the input (`{"body": …}` when it is not an object); what
        // delivered it is `trigger.*`.
        let input = inbound::input_of(&event(kind, media_type(&headers).as_deref(), &delivery.body)?);
        let details = json!({
            "kind": kind.as_str(),
            "delivery_id": delivery_id,
            "headers": header_object(headers, &[]),
        });
        check_storable(&input)?;
        inbound::check_storable_as(&details, "trigger")?;
        let workflow = &target.workflow;
        if !workflow.is_active {
            return Err(InboundError::Inactive);
        }
        let rate = count_against_plan(&d.limiter, d.plans, &workflow.tenant_id, target.plan).await?;
        let origin = ExecutionOrigin::Integration(integration.id.clone());
        let started = d
            .executions
            .start(workflow, input, details, origin, integration.run_as.clone(), delivery_id.clone())
            .await?;
        Ok(Received::Started(Box::new(IntegrationStarted {
            integration_id: integration.id.clone(),
            delivery_id,
            duplicate: !started.is_new(),
            execution: started.execution().clone(),
            rate,
        })))
    }
}

/// An event's payload as the execution reads it: the body parsed by content type; for Slack,
/// the JSON inside an interactivity form's `payload` field is parsed too.
///
/// # Errors
/// As [`parse_body`].
pub fn event(kind: IntegrationKind, media: Option<&str>, body: &[u8]) -> Result<Value, InboundError> {
    let mut event = parse_body(media, body)?;
    if kind == IntegrationKind::Chat
        && let Some(payload) = event.get_mut("payload")
        && let Some(parsed) = payload.as_str().and_then(|p| serde_json::from_str::<Value>(p).ok())
    {
        *payload = parsed;
    }
    Ok(event)
}

#[cfg(test)]
mod tests;

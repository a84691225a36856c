//! Workflow webhook triggers (spec "Workflow triggers"; PRODUCT.md §7): managing a workflow's
//! triggers under `/workflows/{workflow_id}/webhooks`, and the calls to their URLs,
//! `/webhooks/trigger/{path}`, which execute the workflow.
//!
//! A call presents the trigger's secret as `X-Webhook-Secret`, or signs the body as outbound
//! webhooks are signed (`X-Service-Signature`); docs/integrations.md has the details.

use actix_web::{HttpMessage as _, HttpRequest, web};
use agentry_domain::ids::{TriggerId, WorkflowId};
use agentry_domain::validation::{ValidationErrors, Validator, check_path_id};
use agentry_domain::workflows::{InboundError, NewTrigger, Trigger, TriggerCall, TriggerFired};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::access::{Caller, rate_limited};
use crate::error::ApiError;
use crate::extract::{JsonBody, RawBody};
use crate::reply::{Reply, timestamp};

/// Registers the management routes under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/workflows/{workflow_id}/webhooks")
            .route(web::get().to(list))
            .route(web::post().to(create)),
    )
    .service(web::resource("/workflows/{workflow_id}/webhooks/{webhook_id}").route(web::delete().to(delete)));
}

/// Registers the trigger URLs; before the webhook subscriptions' `/webhooks/{webhook_id}`
/// routes, so `trigger` is never taken for a subscription id. Every method reaches the
/// trigger, which answers 405 with `Allow` for one it does not accept.
pub fn configure_calls(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/webhooks/trigger/{path}")
            .route(web::post().to(call_post))
            .route(web::get().to(call_get))
            .route(web::put().to(call_put))
            .route(web::patch().to(call_patch))
            .route(web::delete().to(call_delete))
            .default_service(web::to(call)),
    );
}

fn workflow_id(raw: String) -> Result<WorkflowId, ApiError> {
    check_path_id(&raw, "workflow_id")?;
    Ok(WorkflowId::from_string(raw))
}

pub(crate) fn trigger_id(raw: String) -> Result<TriggerId, ApiError> {
    check_path_id(&raw, "webhook_id")?;
    Ok(TriggerId::from_string(raw))
}

/// A new trigger.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateTriggerRequest {
    /// 1–100 characters.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 100,
        extensions(("x-text" = json!("name"))), example = "CRM leads")]
    pub name: Option<String>,
    /// The methods the URL accepts, any of `GET`, `POST`, `PUT`, `PATCH`, `DELETE` (any case);
    /// default `["POST"]`.
    #[schema(schema_with = crate::schemas::trigger_methods)]
    pub allowed_methods: Option<Vec<String>>,
}

impl CreateTriggerRequest {
    pub(crate) fn try_into_domain(self) -> Result<NewTrigger, ValidationErrors> {
        let mut v = Validator::new();
        let name = v.required("name", self.name, Ok);
        let name = v.finish(name)?;
        Ok(NewTrigger { name, allowed_methods: self.allowed_methods })
    }
}

/// A trigger (spec "Workflow webhook trigger").
#[derive(Debug, Serialize, ToSchema)]
pub struct TriggerResponse {
    /// Trigger id.
    pub id: String,
    /// The workflow it executes.
    pub workflow_id: String,
    /// Name.
    pub name: String,
    /// The opaque token of its URL.
    pub path: String,
    /// `/api/v1/webhooks/trigger/<path>`, to be prefixed with the service's address.
    pub url: String,
    /// Whether calls are accepted.
    pub is_active: bool,
    /// Calls that started an execution.
    pub trigger_count: u64,
    /// The methods its URL accepts.
    pub allowed_methods: Vec<String>,
    /// Creation time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

impl From<Trigger> for TriggerResponse {
    fn from(t: Trigger) -> Self {
        Self {
            url: t.url(),
            id: t.id.into_string(),
            workflow_id: t.workflow_id.into_string(),
            name: t.name,
            path: t.path,
            is_active: t.is_active,
            trigger_count: t.trigger_count,
            allowed_methods: t.allowed_methods,
            created_at: t.created_at,
        }
    }
}

/// A new trigger with its secret: the only answer that shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedTriggerResponse {
    /// The trigger.
    #[serde(flatten)]
    pub trigger: TriggerResponse,
    /// The secret a call presents as `X-Webhook-Secret`, or signs with
    /// (`X-Service-Signature`). Shown only here: keep it.
    pub secret: String,
}

impl CreatedTriggerResponse {
    fn new(t: Trigger, secret: String) -> Self {
        Self { trigger: TriggerResponse::from(t), secret }
    }
}

/// A workflow's triggers.
#[derive(Debug, Serialize, ToSchema)]
pub struct TriggerList {
    /// Oldest first.
    pub items: Vec<TriggerResponse>,
}

/// What a call to a trigger started.
#[derive(Debug, Serialize, ToSchema)]
pub struct TriggerCallResponse {
    /// The execution (for a repeated `Idempotency-Key`, the first call's).
    pub execution_id: String,
    /// Its status now: `running` for a new one.
    #[schema(example = "running")]
    pub status: &'static str,
    /// When it started.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub started_at: DateTime<Utc>,
    /// The trigger called.
    pub trigger_id: String,
    /// Whether this call repeated an `Idempotency-Key`, so nothing new started.
    pub duplicate: bool,
}

impl From<TriggerFired> for TriggerCallResponse {
    fn from(f: TriggerFired) -> Self {
        Self {
            status: f.execution.status().as_str(),
            execution_id: f.execution.id.into_string(),
            started_at: f.execution.started_at,
            trigger_id: f.trigger_id.into_string(),
            duplicate: f.duplicate,
        }
    }
}

/// List a workflow's triggers (without their secrets).
#[utoipa::path(
    get, path = "/api/v1/workflows/{workflow_id}/webhooks", tag = "workflows", operation_id = "listWorkflowTriggers",
    security(("bearer" = [])),
    params(("workflow_id" = String, Path, description = "Workflow id")),
    responses((status = 200, description = "The workflow's triggers", body = TriggerList))
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<TriggerList>, ApiError> {
    let triggers = state.triggers.list(&caller, &workflow_id(path.into_inner())?).await?;
    Ok(Reply::ok(TriggerList { items: triggers.into_iter().map(TriggerResponse::from).collect() }))
}

/// Make a trigger URL for a workflow. The answer carries the trigger's `secret`, shown only
/// this once. Executions the trigger starts act as you, with your present role. Needs
/// `workflows:write` and `workflows:execute`.
#[utoipa::path(
    post, path = "/api/v1/workflows/{workflow_id}/webhooks", tag = "workflows", operation_id = "createWorkflowTrigger",
    security(("bearer" = [])),
    params(("workflow_id" = String, Path, description = "Workflow id")),
    request_body = CreateTriggerRequest,
    responses((status = 201, description = "The trigger, with its `secret`", body = CreatedTriggerResponse))
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<CreateTriggerRequest>,
) -> Result<Reply<CreatedTriggerResponse>, ApiError> {
    let id = workflow_id(path.into_inner())?;
    let new = body.0.try_into_domain()?;
    let (trigger, secret) = state.triggers.create(&caller, &id, new).await?;
    Ok(Reply::created(CreatedTriggerResponse::new(trigger, secret)))
}

/// Delete a trigger: its URL answers 404 from then on.
#[utoipa::path(
    delete, path = "/api/v1/workflows/{workflow_id}/webhooks/{webhook_id}", tag = "workflows",
    operation_id = "deleteWorkflowTrigger",
    security(("bearer" = [])),
    params(
        ("workflow_id" = String, Path, description = "Workflow id"),
        ("webhook_id" = String, Path, description = "Trigger id"),
    ),
    responses((status = 204, description = "Deleted"))
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<actix_web::HttpResponse, ApiError> {
    let (workflow, trigger) = path.into_inner();
    state.triggers.delete(&caller, &workflow_id(workflow)?, &trigger_id(trigger)?).await?;
    Ok(actix_web::HttpResponse::NoContent().finish())
}

/// The request's headers as (name, value) pairs; a value that is not visible ASCII is read
/// lossily (no scheme signs such a header).
pub(crate) fn header_pairs(req: &HttpRequest) -> Vec<(String, String)> {
    req.headers()
        .iter()
        .map(|(name, value)| {
            (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned())
        })
        .collect()
}

/// Puts the tenant's rate status of an inbound call into its response's `X-RateLimit-*`
/// headers (the request middleware adds them).
pub(crate) fn record_rate(req: &HttpRequest, status: agentry_domain::ratelimit::RateStatus) {
    req.extensions_mut().insert(status);
}

/// Any call to a trigger URL.
async fn call(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    body: RawBody,
) -> Result<Reply<TriggerCallResponse>, ApiError> {
    let call = TriggerCall {
        path: path.into_inner(),
        method: req.method().as_str().to_owned(),
        query: req.query_string().to_owned(),
        headers: header_pairs(&req),
        body: body.0,
    };
    match state.triggers.call(call).await {
        Ok(fired) => {
            record_rate(&req, fired.rate);
            Ok(Reply::with_status(actix_web::http::StatusCode::ACCEPTED, fired.into()))
        }
        Err(InboundError::RateLimited(status)) => {
            record_rate(&req, status);
            Err(rate_limited("plan", status.retry_after.unwrap_or(1)))
        }
        Err(e) => Err(e.into()),
    }
}

/// The trigger URL's route, the same for each method but for the body: a method with a body
/// documents it (and so, through the document's post-processing, 413 and 415); one without
/// lists those two itself, since a body may still be sent.
macro_rules! trigger_call {
    ($name:ident, $method:ident, $operation:literal, $about:literal, $signed:literal,
     $(request_body($($body:tt)*))? responses($($more:tt)*)) => {
        #[doc = concat!("Call a trigger URL with ", stringify!($method), ": executes the trigger's workflow.")]
        ///
        #[doc = $about]
        #[utoipa::path(
            $method, path = "/api/v1/webhooks/trigger/{path}", tag = "workflows", operation_id = $operation,
            params(
                ("path" = String, Path, description = "The trigger's path"),
                ("X-Webhook-Secret" = Option<String>, Header, description = "The trigger's secret"),
                ("X-Service-Signature" = Option<String>, Header, description = $signed),
                ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 255, pattern = r"^[^\x00-\x1F\x7F-\x9F]*[^\s\x00-\x1F\x7F-\x9F][^\x00-\x1F\x7F-\x9F]*$",
                    description = "1–255 characters: a repeated call with the same key returns the first call's execution and starts nothing"),
            ),
            $(request_body($($body)*),)?
            extensions(("x-rate-limit" = json!("the trigger's tenant"))),
            responses(
                (status = 202, description = "The execution started (or, for a repeated `Idempotency-Key`, the first one)", body = TriggerCallResponse),
                (status = 401, description = "`unauthorized`: the secret or signature is missing, wrong or stale"),
                (status = 404, description = "`not_found`: no such trigger (or it was deleted)"),
                (status = 405, description = "`method_not_allowed`: the trigger does not accept this method; `Allow` lists those it does"),
                (status = 409, description = "`conflict`: the workflow is inactive"),
                $($more)*
                (status = 429, description = "`rate_limit_exceeded`: the workflow's tenant has spent its plan limit"),
            )
        )]
        pub async fn $name(
            state: web::Data<AppState>,
            req: HttpRequest,
            path: web::Path<String>,
            body: RawBody,
        ) -> Result<Reply<TriggerCallResponse>, ApiError> {
            call(state, req, path, body).await
        }
    };
    ($name:ident, $method:ident, $operation:literal, body) => {
        trigger_call!($name, $method, $operation,
            "Present the trigger's secret as `X-Webhook-Secret`, or sign the raw body as outbound webhooks are signed: `X-Service-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, \"<t>.<body>\")>` (within 5 minutes). The execution's input is the body when it is a JSON object or a form (else `{\"body\": <the body>}`), so the workflow reads `input.*` as through `/execute`; the call itself is the template root `trigger` = `{method, query, headers, body}`. The call counts against the workflow's tenant's plan limit.",
            "`t=<unix seconds>,v1=<hex>`: the body signed with the secret",
            request_body(description = "Any body: JSON and forms are parsed, other UTF-8 text kept as text (at most 1 MiB)",
                content((serde_json::Value = "application/json"), (String = "application/x-www-form-urlencoded"), (String = "text/plain")))
            responses());
    };
    ($name:ident, $method:ident, $operation:literal) => {
        trigger_call!($name, $method, $operation,
            "As the POST call, without a body: the input is `{}`, `trigger.body` null.",
            "`t=<unix seconds>,v1=<hex>`: the (empty) body signed with the secret",
            responses(
                (status = 413, description = "`payload_too_large`: the body is larger than the limit (1 MiB by default)"),
                (status = 415, description = "`unsupported_media_type`: a body that is neither JSON, a form nor UTF-8 text"),
            ));
    };
}

trigger_call!(call_post, post, "callTriggerPost", body);
trigger_call!(call_put, put, "callTriggerPut", body);
trigger_call!(call_patch, patch, "callTriggerPatch", body);
trigger_call!(call_get, get, "callTriggerGet");
trigger_call!(call_delete, delete, "callTriggerDelete");

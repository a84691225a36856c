//! Inbound integrations (spec "Inbound integration receivers"; PRODUCT.md §7): binding a
//! receiver of one kind to a workflow under `/integrations`, and the six receivers,
//! `/webhooks/integrations/{kind}?integration_id=<id>`, which verify each service's signature
//! and execute the workflow (docs/integrations.md).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use agentry_domain::ids::IntegrationId;
use agentry_domain::validation::{ValidationErrors, Validator, check_path_id};
use agentry_domain::workflows::{
    InboundError, Integration, IntegrationDelivery, IntegrationStarted, NewIntegration, Received,
};
use chrono::{DateTime, Utc};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::access::{Caller, rate_limited};
use crate::error::ApiError;
use crate::extract::{JsonBody, QueryParams, RawBody};
use crate::reply::{Reply, timestamp};
use crate::routes::triggers::{header_pairs, record_rate};

/// Registers the management routes under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/integrations").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            web::resource("/integrations/{integration_id}")
                .route(web::get().to(get))
                .route(web::delete().to(delete)),
        );
}

/// Registers the receivers; before the webhook subscriptions' `/webhooks/{webhook_id}` routes.
pub fn configure_receivers(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/webhooks/integrations/{kind}").route(web::post().to(receive)));
}

pub(crate) fn integration_id(raw: String) -> Result<IntegrationId, ApiError> {
    check_path_id(&raw, "integration_id")?;
    Ok(IntegrationId::from_string(raw))
}

/// A new integration.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateIntegrationRequest {
    /// Which receiver: `chat` (Slack), `code-host` (GitHub), `issue-tracker` (Linear),
    /// `issue-tracker-2` (Jira), `incident` (PagerDuty) or `wiki` (Confluence).
    #[schema(required = true, schema_with = crate::schemas::integration_kind, example = "code-host")]
    pub kind: Option<String>,
    /// 1–100 characters.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 100,
        extensions(("x-text" = json!("name"))), example = "Repository events")]
    pub name: Option<String>,
    /// The secret the service signs its deliveries with (8–512 characters, as the service
    /// shows it). Kept encrypted; never shown again.
    #[schema(required = true, value_type = String, min_length = 8, max_length = 512,
        pattern = r"^[^\x00-\x1F\x7F-\x9F]*\S[^\x00-\x1F\x7F-\x9F]*$")]
    pub signing_secret: Option<SecretString>,
    /// The workflow each event executes (one of your tenant's).
    #[schema(required = true, value_type = String, min_length = 1, max_length = 128,
        extensions(("x-text" = json!("one-line"))))]
    pub workflow_id: Option<String>,
}

impl CreateIntegrationRequest {
    pub(crate) fn try_into_domain(self) -> Result<NewIntegration, ValidationErrors> {
        let mut v = Validator::new();
        let kind = v.required("kind", self.kind, Ok);
        let name = v.required("name", self.name, Ok);
        let signing_secret = v.required("signing_secret", self.signing_secret, Ok);
        let workflow_id = v.required("workflow_id", self.workflow_id, Ok);
        let (kind, name, signing_secret, workflow_id) =
            v.finish((kind, name, signing_secret, workflow_id))?;
        Ok(NewIntegration { kind, name, signing_secret, workflow_id })
    }
}

/// An integration (its signing secret is never shown).
#[derive(Debug, Serialize, ToSchema)]
pub struct IntegrationResponse {
    /// Integration id.
    pub id: String,
    /// Which receiver.
    pub kind: &'static str,
    /// Name.
    pub name: String,
    /// The workflow each event executes.
    pub workflow_id: String,
    /// Where the service sends its events: `/api/v1/webhooks/integrations/<kind>?integration_id=<id>`,
    /// to be prefixed with this service's address.
    pub receiver_url: String,
    /// Creation time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

impl From<Integration> for IntegrationResponse {
    fn from(i: Integration) -> Self {
        Self {
            receiver_url: i.receiver_url(),
            id: i.id.into_string(),
            kind: i.kind.as_str(),
            name: i.name,
            workflow_id: i.workflow_id.into_string(),
            created_at: i.created_at,
        }
    }
}

/// The tenant's integrations.
#[derive(Debug, Serialize, ToSchema)]
pub struct IntegrationList {
    /// Oldest first.
    pub items: Vec<IntegrationResponse>,
}

/// The receiver's query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReceiverQuery {
    /// The integration the delivery is for, as in its `receiver_url`.
    #[param(required = true, value_type = String, min_length = 1, max_length = 128)]
    pub integration_id: Option<String>,
}

/// What an event started.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReceivedEventResponse {
    /// The execution (for a redelivery, the first delivery's).
    pub execution_id: String,
    /// Its status now: `running` for a new one.
    #[schema(example = "running")]
    pub status: &'static str,
    /// When it started.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub started_at: DateTime<Utc>,
    /// The integration.
    pub integration_id: String,
    /// The service's id of the delivery, when it sends one.
    pub delivery_id: Option<String>,
    /// Whether this was a redelivery, so nothing new started.
    pub duplicate: bool,
}

impl From<IntegrationStarted> for ReceivedEventResponse {
    fn from(s: IntegrationStarted) -> Self {
        Self {
            status: s.execution.status().as_str(),
            execution_id: s.execution.id.into_string(),
            started_at: s.execution.started_at,
            integration_id: s.integration_id.into_string(),
            delivery_id: s.delivery_id,
            duplicate: s.duplicate,
        }
    }
}

/// Slack's URL verification, answered as Slack expects it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChallengeResponse {
    /// The challenge Slack sent.
    pub challenge: String,
}

/// List the tenant's integrations.
#[utoipa::path(
    get, path = "/api/v1/integrations", tag = "integrations", operation_id = "listIntegrations",
    security(("bearer" = [])),
    responses((status = 200, description = "The integrations", body = IntegrationList))
)]
pub async fn list(state: web::Data<AppState>, caller: Caller) -> Result<Reply<IntegrationList>, ApiError> {
    let integrations = state.integrations.list(&caller).await?;
    Ok(Reply::ok(IntegrationList {
        items: integrations.into_iter().map(IntegrationResponse::from).collect(),
    }))
}

/// Bind a receiver to a workflow. Configure the service of that kind to send its events to
/// the answer's `receiver_url`, signed with `signing_secret`. Executions its events start act
/// as you, with your present role. Needs `workflows:write` and `workflows:execute`.
#[utoipa::path(
    post, path = "/api/v1/integrations", tag = "integrations", operation_id = "createIntegration",
    security(("bearer" = [])),
    request_body = CreateIntegrationRequest,
    responses((status = 201, description = "The integration, with its `receiver_url`", body = IntegrationResponse))
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<CreateIntegrationRequest>,
) -> Result<Reply<IntegrationResponse>, ApiError> {
    let new = body.0.try_into_domain()?;
    let integration = state.integrations.create(&caller, new).await?;
    Ok(Reply::created(integration.into()))
}

/// One integration.
#[utoipa::path(
    get, path = "/api/v1/integrations/{integration_id}", tag = "integrations", operation_id = "getIntegration",
    security(("bearer" = [])),
    params(("integration_id" = String, Path, description = "Integration id")),
    responses((status = 200, description = "The integration", body = IntegrationResponse))
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<IntegrationResponse>, ApiError> {
    let integration = state.integrations.get(&caller, &integration_id(path.into_inner())?).await?;
    Ok(Reply::ok(integration.into()))
}

/// Delete an integration: its receiver answers 404 for it from then on.
#[utoipa::path(
    delete, path = "/api/v1/integrations/{integration_id}", tag = "integrations", operation_id = "deleteIntegration",
    security(("bearer" = [])),
    params(("integration_id" = String, Path, description = "Integration id")),
    responses((status = 204, description = "Deleted"))
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.integrations.delete(&caller, &integration_id(path.into_inner())?).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The receiver of one kind of service's events; the service calls it, not you.
///
/// Each kind verifies its service's signature over the raw body (docs/integrations.md): `chat`
/// `X-Slack-Signature` with `X-Slack-Request-Timestamp`; `code-host` `X-Hub-Signature-256`;
/// `issue-tracker` `Linear-Signature`; `issue-tracker-2` and `wiki` `X-Hub-Signature`;
/// `incident` `X-PagerDuty-Signature`. A verified event executes the bound workflow with input
/// `{kind, delivery_id, event, headers}`; a redelivery (the same delivery id) starts nothing
/// and answers the first execution. Slack's `url_verification` is answered with its challenge,
/// as a bare `{challenge}` whatever the envelope. Events count against the tenant's plan limit.
#[utoipa::path(
    post, path = "/api/v1/webhooks/integrations/{kind}", tag = "integrations", operation_id = "receiveIntegrationEvent",
    params(
        ("kind" = String, Path, description = "The receiver's kind",
            pattern = "^(chat|code-host|issue-tracker|issue-tracker-2|incident|wiki)$"),
        ReceiverQuery,
    ),
    request_body(description = "The service's event as it sends it (JSON or a form; at most 1 MiB)",
        content((serde_json::Value = "application/json"), (String = "application/x-www-form-urlencoded"))),
    extensions(("x-rate-limit" = json!("the integration's tenant"))),
    responses(
        (status = 200, description = "Slack's URL verification: its challenge (never wrapped)", body = ChallengeResponse),
        (status = 202, description = "The event's execution (for a redelivery, the first one's)", body = ReceivedEventResponse),
        (status = 401, description = "`unauthorized`: the signature is missing, wrong or stale; nothing was recorded"),
        (status = 404, description = "`not_found`: no integration of this kind with this id"),
        (status = 409, description = "`conflict`: the workflow is inactive"),
        (status = 429, description = "`rate_limit_exceeded`: the integration's tenant has spent its plan limit"),
    )
)]
pub async fn receive(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    query: QueryParams<ReceiverQuery>,
    body: RawBody,
) -> Result<HttpResponse, ApiError> {
    let delivery = IntegrationDelivery {
        kind: path.into_inner(),
        integration_id: query.0.integration_id,
        headers: header_pairs(&req),
        body: body.0,
    };
    match state.integrations.receive(delivery).await {
        // Slack reads the challenge at the top level: never wrapped.
        Ok(Received::Challenge(challenge)) => Ok(HttpResponse::Ok().json(ChallengeResponse { challenge })),
        Ok(Received::Started(started)) => {
            record_rate(&req, started.rate);
            let body = ReceivedEventResponse::from(*started);
            Ok(actix_web::Responder::respond_to(Reply::with_status(StatusCode::ACCEPTED, body), &req))
        }
        Err(InboundError::RateLimited(status)) => {
            record_rate(&req, status);
            Err(rate_limited("plan", status.retry_after.unwrap_or(1)))
        }
        Err(e) => Err(e.into()),
    }
}

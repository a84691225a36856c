//! `/tenants/{tenant_id}/automations`: what acts with a member's rights when they are not there
//! (triggers, schedules, integrations, webhook subscriptions), and taking over what a removed
//! or demoted member left. See `agentry_domain::tenancy::Automation`.

use actix_web::web;
use agentry_domain::ids::UserId;
use agentry_domain::tenancy::Automation;
use agentry_domain::validation::{TextKind, ValidationErrors, Validator, check_text};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::access::TenantCaller;
use crate::error::ApiError;
use crate::extract::{JsonBody, QueryParams};
use crate::reply::Reply;

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/tenants/{tenant_id}/automations").route(web::get().to(list))).service(
        web::resource("/tenants/{tenant_id}/automations/take-over").route(web::post().to(take_over)),
    );
}

/// An automation: something that acts with a member's rights when they are not there.
#[derive(Debug, Serialize, ToSchema)]
pub struct AutomationResponse {
    /// `trigger`, `schedule`, `integration` or `webhook_subscription`.
    #[serde(rename = "type")]
    #[schema(example = "trigger")]
    pub kind: &'static str,
    /// Its id.
    pub id: String,
    /// The workflow it starts (triggers, schedules and integrations).
    pub workflow_id: Option<String>,
    /// Its name (a schedule: its cron expression); null for a subscription, whose URL may carry
    /// its receiver's secret (read it with `GET /webhooks/{id}` and `webhooks:read`).
    pub name: Option<String>,
    /// The user it acts as; null for a subscription owned by the tenant (made before makers
    /// were recorded).
    pub acts_as: Option<String>,
}

impl From<Automation> for AutomationResponse {
    fn from(a: Automation) -> Self {
        Self {
            kind: a.kind.as_str(),
            id: a.id,
            workflow_id: a.workflow_id,
            name: a.name,
            acts_as: a.acts_as.map(UserId::into_string),
        }
    }
}

/// Automations.
#[derive(Debug, Serialize, ToSchema)]
pub struct AutomationList {
    /// By type, then id.
    pub automations: Vec<AutomationResponse>,
    /// How many.
    pub total: usize,
}

impl AutomationList {
    pub(crate) fn of(automations: Vec<Automation>) -> Self {
        let automations: Vec<AutomationResponse> = automations.into_iter().map(Into::into).collect();
        Self { total: automations.len(), automations }
    }
}

/// Which automations to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AutomationQuery {
    /// Only those acting as this user (a member, or a former one).
    #[param(min_length = 1, max_length = 128, pattern = r"^[^\x00-\x1F\x7F-\x9F]*$")]
    pub acts_as: Option<String>,
}

/// The tenant's automations: what acts as whom (a removed member's too: they stopped acting
/// with the removal, until an owner or admin takes them over).
#[utoipa::path(
    get, path = "/api/v1/tenants/{tenant_id}/automations", tag = "members", operation_id = "listAutomations",
    security(("bearer" = [])),
    params(
        ("tenant_id" = String, Path, description = "Tenant id (one you are a member of)", max_length = 128),
        AutomationQuery,
    ),
    responses(
        (status = 200, description = "The automations", body = AutomationList),
        (status = 403, description = "`forbidden`: listing needs `members:read`"),
        (status = 404, description = "`not_found`: no such tenant of yours"),
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: TenantCaller,
    query: QueryParams<AutomationQuery>,
) -> Result<Reply<AutomationList>, ApiError> {
    let acts_as = match query.0.acts_as {
        Some(raw) => Some(user_id(raw, "acts_as")?),
        None => None,
    };
    let automations = state.team.automations(&caller, acts_as.as_ref()).await?;
    Ok(Reply::ok(AutomationList::of(automations)))
}

/// A take-over.
#[derive(Debug, Deserialize, ToSchema)]
pub struct TakeOverRequest {
    /// The user whose automations you take over (a removed or demoted member, usually).
    #[schema(required = true, value_type = String, min_length = 1, max_length = 128, extensions(("x-text" = json!("one-line"))))]
    pub from_user_id: Option<Value>,
}

fn user_id(raw: String, field: &str) -> Result<UserId, ValidationErrors> {
    check_text(&raw, field, TextKind::SingleLine).map_err(ValidationErrors::one)?;
    agentry_domain::validation::check_length(&raw, 1, 128, field).map_err(ValidationErrors::one)?;
    Ok(UserId::from_string(raw))
}

impl TakeOverRequest {
    pub(crate) fn try_into_domain(self) -> Result<UserId, ValidationErrors> {
        let mut v = Validator::new();
        let from = v.required("from_user_id", self.from_user_id, |raw| match raw {
            Value::String(s) => user_id(s, "from_user_id").map_err(|mut e| e.0.remove(0)),
            _ => Err(agentry_domain::validation::FieldError::new(
                "from_user_id",
                agentry_domain::validation::FieldErrorKind::InvalidType,
                "from_user_id must be a string",
            )),
        });
        v.finish(from)
    }
}

/// Take over every automation that acts as a user: from now on it acts as you, with your role.
/// What a removed or demoted member left acts again; a trigger or schedule they had paused
/// stays paused.
#[utoipa::path(
    post, path = "/api/v1/tenants/{tenant_id}/automations/take-over", tag = "members", operation_id = "takeOverAutomations",
    security(("bearer" = [])),
    params(("tenant_id" = String, Path, description = "Tenant id (one you are a member of)", max_length = 128)),
    request_body = TakeOverRequest,
    responses(
        (status = 200, description = "What you took over", body = AutomationList),
        (status = 403, description = "`forbidden`: needs `members:write` (owners and admins); the user's role cannot be above yours"),
        (status = 404, description = "`not_found`: no such tenant of yours"),
        (status = 422, description = "`validation_error`: `from_user_id` missing or not a string"),
    )
)]
pub async fn take_over(
    state: web::Data<AppState>,
    caller: TenantCaller,
    body: JsonBody<TakeOverRequest>,
) -> Result<Reply<AutomationList>, ApiError> {
    let from = body.0.try_into_domain()?;
    let taken = state.team.take_over(&caller, &from).await?;
    Ok(Reply::ok(AutomationList::of(taken)))
}

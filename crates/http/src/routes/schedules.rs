//! `/workflows/{workflow_id}/schedules`: cron schedules that start a workflow (PRODUCT.md §13).

use actix_web::web;
use agentry_domain::ids::{ScheduleId, WorkflowId};
use agentry_domain::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator, check_path_id};
use agentry_domain::workflows::{NewSchedule, Schedule, SchedulePatch};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::reply::{Reply, timestamp};

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/workflows/{workflow_id}/schedules")
            .route(web::get().to(list))
            .route(web::post().to(create)),
    )
    .service(
        web::resource("/workflows/{workflow_id}/schedules/{schedule_id}")
            .route(web::patch().to(update))
            .route(web::delete().to(delete)),
    );
}

fn workflow_id(raw: String) -> Result<WorkflowId, ApiError> {
    check_path_id(&raw, "workflow_id")?;
    Ok(WorkflowId::from_string(raw))
}

pub(crate) fn schedule_ids(
    (workflow, schedule): (String, String),
) -> Result<(WorkflowId, ScheduleId), ApiError> {
    check_path_id(&schedule, "schedule_id")?;
    Ok((workflow_id(workflow)?, ScheduleId::from_string(schedule)))
}

fn text(field: &str, raw: Value) -> Result<String, FieldError> {
    match raw {
        Value::String(s) => Ok(s),
        _ => Err(FieldError::new(field, FieldErrorKind::InvalidType, format!("{field} must be a string"))),
    }
}

fn flag(raw: Value) -> Result<bool, FieldError> {
    raw.as_bool().ok_or_else(|| {
        FieldError::new("is_active", FieldErrorKind::InvalidType, "is_active must be a boolean")
    })
}

/// A new schedule. A field it does not know is refused (a misspelt `is_actve` would otherwise
/// leave a schedule running that its author meant to pause).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateScheduleRequest {
    /// A standard 5-field cron expression (minute hour day-of-month month day-of-week), or
    /// `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 100, example = "0 9 * * MON-FRI")]
    pub cron: Option<Value>,
    /// The IANA time zone the expression is read in (default `UTC`); daylight-saving changes
    /// run a skipped time once after the change and a repeated time once.
    #[schema(value_type = Option<String>, example = "Europe/Berlin")]
    pub timezone: Option<Value>,
    /// The input of every execution it starts (default `{}`).
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    /// Whether it runs (default `true`).
    #[schema(value_type = Option<bool>)]
    pub is_active: Option<Value>,
}

/// A change of a schedule: absent fields stay. A new expression or zone, or resuming, computes
/// the next tick from now. A field it does not know is refused.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateScheduleRequest {
    /// A new cron expression.
    #[schema(value_type = Option<String>, min_length = 1, max_length = 100)]
    pub cron: Option<Value>,
    /// A new time zone.
    #[schema(value_type = Option<String>)]
    pub timezone: Option<Value>,
    /// A new input.
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    /// `false` pauses it, `true` resumes it.
    #[schema(value_type = Option<bool>)]
    pub is_active: Option<Value>,
}

impl CreateScheduleRequest {
    pub(crate) fn try_into_domain(self) -> Result<NewSchedule, ValidationErrors> {
        let mut v = Validator::new();
        let cron = v.required("cron", self.cron, |c| text("cron", c));
        let timezone = v.optional("timezone", self.timezone, |t| text("timezone", t));
        let input = v.optional("input", self.input, super::input_object);
        let is_active = v.optional("is_active", self.is_active, flag);
        let (cron, timezone, input, is_active) = v.finish((cron, timezone, input, is_active))?;
        Ok(NewSchedule { cron, timezone, input, is_active })
    }
}

impl UpdateScheduleRequest {
    pub(crate) fn try_into_domain(self) -> Result<SchedulePatch, ValidationErrors> {
        let mut v = Validator::new();
        let cron = v.optional("cron", self.cron, |c| text("cron", c));
        let timezone = v.optional("timezone", self.timezone, |t| text("timezone", t));
        let input = v.optional("input", self.input, super::input_object);
        let is_active = v.optional("is_active", self.is_active, flag);
        let (cron, timezone, input, is_active) = v.finish((cron, timezone, input, is_active))?;
        Ok(SchedulePatch { cron, timezone, input, is_active })
    }
}

/// A schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleResponse {
    /// Schedule id.
    pub id: String,
    /// The workflow it starts.
    pub workflow_id: String,
    /// Its cron expression.
    pub cron: String,
    /// Its IANA time zone.
    pub timezone: String,
    /// The input of the executions it starts.
    #[schema(value_type = Object)]
    pub input: Map<String, Value>,
    /// Whether it runs.
    pub is_active: bool,
    /// Its next tick (null while paused, or when the expression never matches again).
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_run_at: Option<DateTime<Utc>>,
    /// The last tick that started an execution.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_run_at: Option<DateTime<Utc>>,
    /// Ticks that started nothing: missed while the service was down (after downtime only the
    /// latest runs), refused by the plan limit, or due while the workflow was inactive.
    pub missed_count: u64,
    /// Creation time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// Last change.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
}

impl From<Schedule> for ScheduleResponse {
    fn from(s: Schedule) -> Self {
        Self {
            id: s.id.into_string(),
            workflow_id: s.workflow_id.into_string(),
            cron: s.cron,
            timezone: s.timezone,
            input: s.input,
            is_active: s.is_active,
            next_run_at: s.next_run_at,
            last_run_at: s.last_run_at,
            missed_count: s.missed_count,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

/// A workflow's schedules.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleList {
    /// Oldest first.
    pub items: Vec<ScheduleResponse>,
}

/// A workflow's schedules.
#[utoipa::path(
    get, path = "/api/v1/workflows/{workflow_id}/schedules", tag = "workflows", operation_id = "listSchedules",
    security(("bearer" = [])),
    params(("workflow_id" = String, Path, description = "Workflow id")),
    responses(
        (status = 200, description = "The workflow's schedules", body = ScheduleList),
        (status = 404, description = "`not_found`: no such workflow in your tenant"),
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<ScheduleList>, ApiError> {
    let workflow = workflow_id(path.into_inner())?;
    let items = state.schedules.list(&caller, &workflow).await?;
    Ok(Reply::ok(ScheduleList { items: items.into_iter().map(ScheduleResponse::from).collect() }))
}

/// Schedule a workflow: each tick of the cron expression starts one execution (origin
/// `schedule`, the template root `trigger` = `{schedule_id, tick}`), acting as you with your
/// present role. Needs `workflows:write` and `workflows:execute`.
#[utoipa::path(
    post, path = "/api/v1/workflows/{workflow_id}/schedules", tag = "workflows", operation_id = "createSchedule",
    security(("bearer" = [])),
    params(("workflow_id" = String, Path, description = "Workflow id")),
    request_body = CreateScheduleRequest,
    responses(
        (status = 201, description = "The schedule, with its next tick", body = ScheduleResponse),
        (status = 404, description = "`not_found`: no such workflow in your tenant"),
    )
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<CreateScheduleRequest>,
) -> Result<Reply<ScheduleResponse>, ApiError> {
    let workflow = workflow_id(path.into_inner())?;
    let new = body.0.try_into_domain()?;
    let schedule = state.schedules.create(&caller, &workflow, new).await?;
    Ok(Reply::created(schedule.into()))
}

/// Change a schedule (pause, resume, a new expression, zone or input).
#[utoipa::path(
    patch, path = "/api/v1/workflows/{workflow_id}/schedules/{schedule_id}", tag = "workflows", operation_id = "updateSchedule",
    security(("bearer" = [])),
    params(("workflow_id" = String, Path, description = "Workflow id"), ("schedule_id" = String, Path, description = "Schedule id")),
    request_body = UpdateScheduleRequest,
    responses(
        (status = 200, description = "The schedule after the change", body = ScheduleResponse),
        (status = 404, description = "`not_found`: no such schedule of this workflow in your tenant"),
    )
)]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    body: JsonBody<UpdateScheduleRequest>,
) -> Result<Reply<ScheduleResponse>, ApiError> {
    let (workflow, id) = schedule_ids(path.into_inner())?;
    let patch = body.0.try_into_domain()?;
    let schedule = state.schedules.update(&caller, &workflow, &id, patch).await?;
    Ok(Reply::ok(schedule.into()))
}

/// Delete a schedule: it starts nothing more.
#[utoipa::path(
    delete, path = "/api/v1/workflows/{workflow_id}/schedules/{schedule_id}", tag = "workflows", operation_id = "deleteSchedule",
    security(("bearer" = [])),
    params(("workflow_id" = String, Path, description = "Workflow id"), ("schedule_id" = String, Path, description = "Schedule id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not_found`: no such schedule of this workflow in your tenant"),
    )
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<actix_web::HttpResponse, ApiError> {
    let (workflow, id) = schedule_ids(path.into_inner())?;
    state.schedules.delete(&caller, &workflow, &id).await?;
    Ok(actix_web::HttpResponse::NoContent().finish())
}

//! Executions: `POST /workflows/{id}/execute`, `GET /workflows/{id}/executions`,
//! `GET /executions/{id}` and `POST /executions/{id}/cancel`. An execution runs in the
//! background; these routes start it and show where it stands, step by step.

use actix_web::http::StatusCode;
use actix_web::web;
use agentry_domain::ids::{ExecutionId, WorkflowId};
use agentry_domain::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator, check_path_id};
use agentry_domain::workflows::{Execution, ExecutionStatus, StepRecord};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, QueryParams};
use crate::reply::{Reply, timestamp};

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/workflows/{workflow_id}/execute").route(web::post().to(execute)))
        .service(web::resource("/workflows/{workflow_id}/executions").route(web::get().to(list)))
        .service(web::resource("/executions/{execution_id}").route(web::get().to(get)))
        .service(web::resource("/executions/{execution_id}/cancel").route(web::post().to(cancel)))
        .service(web::resource("/executions/{execution_id}/retry").route(web::post().to(retry)));
}

fn workflow_id(raw: String) -> Result<WorkflowId, ApiError> {
    check_path_id(&raw, "workflow_id")?;
    Ok(WorkflowId::from_string(raw))
}

pub(crate) fn execution_id(raw: String) -> Result<ExecutionId, ApiError> {
    check_path_id(&raw, "execution_id")?;
    Ok(ExecutionId::from_string(raw))
}

/// What to execute a workflow on.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ExecuteRequest {
    /// Free-form object the steps' templates read as `input.*` (default `{}`).
    #[schema(schema_with = crate::schemas::execution_input)]
    pub input: Option<Value>,
}

impl ExecuteRequest {
    /// The execution's input: an object, `{}` when absent or null.
    pub(crate) fn try_into_domain(self) -> Result<Value, ValidationErrors> {
        let input = match self.input {
            None | Some(Value::Null) => Map::new(),
            Some(raw) => super::input_object(raw).map_err(ValidationErrors::one)?,
        };
        Ok(Value::Object(input))
    }
}

/// Where a failed execution runs again from.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryRequest {
    /// The step to run again from (it and every step listed after it start afresh; the steps
    /// before keep their results); default: the step it failed at.
    #[schema(pattern = r"^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)]
    pub from_step: Option<String>,
}

/// A started execution (the spec's Workflow execution).
#[derive(Debug, Serialize, ToSchema)]
pub struct ExecutionStarted {
    /// Execution id (`exe_…`).
    pub execution_id: String,
    /// `running`.
    pub status: &'static str,
    /// When it started.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub started_at: DateTime<Utc>,
}

impl From<&Execution> for ExecutionStarted {
    fn from(e: &Execution) -> Self {
        Self { execution_id: e.id.to_string(), status: e.status().as_str(), started_at: e.started_at }
    }
}

/// What one step of an execution did.
#[derive(Debug, Serialize, ToSchema)]
pub struct StepResultResponse {
    /// The step's id.
    pub id: String,
    /// The step's type.
    #[serde(rename = "type")]
    pub step_type: &'static str,
    /// `pending`, `running`, `waiting` (a `wait` until `next_run_at`), `completed`, `failed` or
    /// `skipped`.
    pub status: &'static str,
    /// Its output, once completed.
    #[schema(schema_with = crate::schemas::any_json)]
    pub output: Option<Value>,
    /// Why it failed.
    pub error: Option<String>,
    /// When it started.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub started_at: Option<DateTime<Utc>>,
    /// When it finished.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<DateTime<Utc>>,
    /// Attempts of its current run (0 before the first; more than 1 when its `retry` tried
    /// it again).
    pub attempts: u32,
    /// When it is tried again, while it backs off after a failed attempt.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_run_at: Option<DateTime<Utc>>,
    /// The step the execution went on at after it, when not the next in the list (its
    /// `next`, or its `on_error` route).
    pub branch: Option<String>,
    /// The error of each attempt that was tried again, oldest first.
    pub attempt_errors: Vec<AttemptErrorResponse>,
}

/// A failed attempt of a step that was tried again.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptErrorResponse {
    /// Which attempt, from 1.
    pub attempt: u32,
    /// Why it failed.
    pub error: String,
    /// When it failed.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub at: DateTime<Utc>,
}

impl From<StepRecord> for StepResultResponse {
    fn from(r: StepRecord) -> Self {
        Self {
            id: r.step_id,
            step_type: r.step_type.as_str(),
            status: r.status.as_str(),
            output: r.output,
            error: r.error,
            started_at: r.started_at,
            finished_at: r.finished_at,
            attempts: r.attempts,
            next_run_at: r.next_run_at,
            branch: r.branch,
            attempt_errors: r
                .attempt_errors
                .into_iter()
                .map(|e| AttemptErrorResponse { attempt: e.attempt, error: e.error, at: e.at })
                .collect(),
        }
    }
}

/// An execution and each of its steps.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExecutionResponse {
    /// Execution id.
    pub execution_id: String,
    /// Its workflow.
    pub workflow_id: String,
    /// `running`, `waiting` (a step waits), `completed`, `failed` or `cancelled`.
    pub status: &'static str,
    /// What started it: `api`, `trigger`, `integration`, `agent` or `schedule`.
    pub origin: &'static str,
    /// Its input: the `/execute` body's `input`, a trigger call's parsed body, an integration
    /// event's payload.
    #[schema(value_type = Object)]
    pub input: Value,
    /// What started it, as templates read `trigger.*`: a trigger call's `{method, query,
    /// headers, body}`, an integration event's `{kind, delivery_id, headers}`, a schedule's
    /// `{schedule_id, tick}`; null for the API and agents.
    #[schema(schema_with = crate::schemas::any_json)]
    pub trigger: Value,
    /// The last step's output, once completed.
    #[schema(schema_with = crate::schemas::any_json)]
    pub output: Option<Value>,
    /// Why it failed or ended.
    pub error: Option<String>,
    /// When it started.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub started_at: DateTime<Utc>,
    /// When it finished.
    #[serde(serialize_with = "timestamp::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<DateTime<Utc>>,
    /// One entry per step, in order (left empty in lists).
    pub steps: Vec<StepResultResponse>,
}

impl From<Execution> for ExecutionResponse {
    fn from(e: Execution) -> Self {
        let e = e.into_record();
        Self {
            execution_id: e.id.into_string(),
            workflow_id: e.workflow_id.into_string(),
            status: e.status.as_str(),
            origin: e.origin.kind(),
            input: e.input,
            trigger: e.trigger,
            output: e.output,
            error: e.error,
            started_at: e.started_at,
            finished_at: e.finished_at,
            steps: e.steps.into_iter().map(StepResultResponse::from).collect(),
        }
    }
}

/// A page of executions.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExecutionList {
    /// This page, newest first.
    pub executions: Vec<ExecutionResponse>,
    /// All executions that match.
    pub total: u64,
    /// This page.
    pub page: u32,
    /// Page size.
    pub per_page: u32,
}

/// Which executions to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExecutionQuery {
    /// Page number, from 1 (default 1).
    #[param(minimum = 1, maximum = 4_294_967_295_i64)]
    pub page: Option<i64>,
    /// Items per page, 1–100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub per_page: Option<i64>,
    /// Only executions in this status: `running`, `waiting`, `completed`, `failed` or
    /// `cancelled`.
    #[param(value_type = Option<String>, pattern = "^(running|completed|failed|cancelled)$")]
    pub status: Option<String>,
}

impl ExecutionQuery {
    /// The page and the status filter.
    pub(crate) fn try_into_domain(
        self,
    ) -> Result<(agentry_domain::pagination::Page, Option<ExecutionStatus>), ValidationErrors> {
        let mut v = Validator::new();
        let page =
            v.check_all(agentry_domain::pagination::Page::new(self.page, self.per_page).map_err(|e| e.0));
        let status = v.optional("status", self.status, status_filter);
        v.finish((page, status))
    }
}

fn status_filter(raw: String) -> Result<ExecutionStatus, FieldError> {
    ExecutionStatus::parse(&raw).ok_or_else(|| {
        FieldError::new(
            "status",
            FieldErrorKind::InvalidValue,
            "status must be one of: running, waiting, completed, failed, cancelled",
        )
    })
}

/// Execute a workflow: the execution is stored and runs in the background; follow it with
/// `GET /executions/{execution_id}`.
#[utoipa::path(
    post, path = "/api/v1/workflows/{workflow_id}/execute", tag = "workflows", operation_id = "executeWorkflow",
    security(("bearer" = [])),
    params(("workflow_id" = String, Path, description = "Workflow id")),
    request_body = ExecuteRequest,
    responses(
        (status = 202, description = "Started", body = ExecutionStarted),
        (status = 404, description = "`not_found`: no such workflow in your tenant"),
        (status = 409, description = "`conflict`: the workflow is inactive"),
    )
)]
pub async fn execute(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<ExecuteRequest>,
) -> Result<Reply<ExecutionStarted>, ApiError> {
    let id = workflow_id(path.into_inner())?;
    let input = body.0.try_into_domain()?;
    let execution = state.executions.execute(&caller, &id, input).await?;
    Ok(Reply::with_status(StatusCode::ACCEPTED, ExecutionStarted::from(&execution)))
}

/// A workflow's executions, newest first.
#[utoipa::path(
    get, path = "/api/v1/workflows/{workflow_id}/executions", tag = "workflows", operation_id = "listExecutions",
    security(("bearer" = [])),
    params(("workflow_id" = String, Path, description = "Workflow id"), ExecutionQuery),
    responses(
        (status = 200, description = "A page of executions (without their steps)", body = ExecutionList),
        (status = 404, description = "`not_found`: no such workflow in your tenant"),
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    query: QueryParams<ExecutionQuery>,
) -> Result<Reply<ExecutionList>, ApiError> {
    let id = workflow_id(path.into_inner())?;
    let (page, status) = query.0.try_into_domain()?;
    let (executions, total) = state.executions.list(&caller, &id, status, page).await?;
    Ok(Reply::ok(ExecutionList {
        executions: executions.into_iter().map(ExecutionResponse::from).collect(),
        total,
        page: page.page,
        per_page: page.per_page,
    }))
}

/// One execution with each step's status, output, error and times.
#[utoipa::path(
    get, path = "/api/v1/executions/{execution_id}", tag = "workflows", operation_id = "getExecution",
    security(("bearer" = [])),
    params(("execution_id" = String, Path, description = "Execution id")),
    responses(
        (status = 200, description = "The execution", body = ExecutionResponse),
        (status = 404, description = "`not_found`: no such execution in your tenant"),
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<ExecutionResponse>, ApiError> {
    let execution = state.executions.get(&caller, &execution_id(path.into_inner())?).await?;
    Ok(Reply::ok(execution.into()))
}

/// Cancel a running execution: no further step starts; a step already running may finish and
/// record its result.
#[utoipa::path(
    post, path = "/api/v1/executions/{execution_id}/cancel", tag = "workflows", operation_id = "cancelExecution",
    security(("bearer" = [])),
    params(("execution_id" = String, Path, description = "Execution id")),
    responses(
        (status = 202, description = "Cancelled", body = ExecutionResponse),
        (status = 404, description = "`not_found`: no such execution in your tenant"),
        (status = 409, description = "`conflict`: the execution has already finished"),
    )
)]
pub async fn cancel(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<ExecutionResponse>, ApiError> {
    let execution = state.executions.cancel(&caller, &execution_id(path.into_inner())?).await?;
    Ok(Reply::with_status(StatusCode::ACCEPTED, execution.into()))
}

/// Run a failed execution again from a step: it and every step listed after it start afresh,
/// the steps before keep their results (whose outputs the later steps read); a worker takes it
/// up at once.
#[utoipa::path(
    post, path = "/api/v1/executions/{execution_id}/retry", tag = "workflows", operation_id = "retryExecution",
    security(("bearer" = [])),
    params(("execution_id" = String, Path, description = "Execution id")),
    request_body = RetryRequest,
    responses(
        (status = 202, description = "Running again", body = ExecutionResponse),
        (status = 404, description = "`not_found`: no such execution in your tenant"),
        (status = 409, description = "`conflict`: the execution has not failed"),
        (status = 422, description = "`validation_error`: the execution has no such step"),
    )
)]
pub async fn retry(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<RetryRequest>,
) -> Result<Reply<ExecutionResponse>, ApiError> {
    let id = execution_id(path.into_inner())?;
    let execution = state.executions.retry(&caller, &id, body.0.from_step).await?;
    Ok(Reply::with_status(StatusCode::ACCEPTED, execution.into()))
}

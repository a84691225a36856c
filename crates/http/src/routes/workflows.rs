//! `/workflows`: saving workflows — named lists of steps whose parameters are templates.

use actix_web::web;
use agentry_domain::ids::WorkflowId;
use agentry_domain::patch::Patch;
use agentry_domain::validation::{ValidationErrors, Validator, check_path_id};
use agentry_domain::workflows::{NewWorkflow, Workflow, WorkflowPatch};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, QueryParams};
use crate::reply::{Reply, timestamp};
use crate::routes::agents::PageQuery;
use crate::routes::not_null;

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/workflows").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            web::resource("/workflows/{workflow_id}")
                .route(web::get().to(get))
                .route(web::patch().to(update))
                .route(web::delete().to(delete)),
        );
}

/// A workflow id from a path.
pub(crate) fn workflow_id(raw: String) -> Result<WorkflowId, ApiError> {
    check_path_id(&raw, "workflow_id")?;
    Ok(WorkflowId::from_string(raw))
}

/// A new workflow.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateWorkflowRequest {
    /// 1–100 characters.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 100,
        extensions(("x-text" = json!("name"))), example = "Greeter")]
    pub name: Option<String>,
    /// Up to 2,000 characters.
    #[schema(max_length = 2000, extensions(("x-text" = json!("long-text"))))]
    pub description: Option<String>,
    /// The steps, run in order: 1–50 objects `{id, type, …parameters}`; `type` is one of
    /// `transform`, `agent_chat`, `http_request`, `memory_search`, `memory_add`,
    /// `knowledge_search`. Every string
    /// inside a parameter is a template reading `input.*` and `steps.<earlier id>.output.*`.
    #[schema(required = true, schema_with = crate::schemas::workflow_steps,
        example = json!([{"id": "greet", "type": "transform", "output": "Hello {{ input.name }}"}]))]
    pub steps: Option<Value>,
    /// Whether it may be executed (default true).
    pub is_active: Option<bool>,
}

impl CreateWorkflowRequest {
    pub(crate) fn try_into_domain(self) -> Result<NewWorkflow, ValidationErrors> {
        let mut v = Validator::new();
        let name = v.required("name", self.name, Ok);
        let steps = v.required("steps", self.steps, Ok);
        let (name, steps) = v.finish((name, steps))?;
        Ok(NewWorkflow { name, description: self.description, steps, is_active: self.is_active })
    }
}

/// A partial update: absent fields keep their value.
#[derive(Debug, Deserialize, ToSchema)]
pub struct UpdateWorkflowRequest {
    /// 1–100 characters (never null).
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 100, extensions(("x-text" = json!("name"))))]
    pub name: Patch<String>,
    /// Up to 2,000 characters; null removes it.
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 2000, extensions(("x-text" = json!("long-text"))))]
    pub description: Patch<String>,
    /// New steps, validated as at creation (never null).
    #[serde(default)]
    #[schema(schema_with = crate::schemas::workflow_steps)]
    pub steps: Patch<Value>,
    /// Whether it may be executed (never null).
    #[serde(default)]
    #[schema(value_type = bool)]
    pub is_active: Patch<bool>,
}

impl UpdateWorkflowRequest {
    pub(crate) fn try_into_domain(self) -> Result<WorkflowPatch, ValidationErrors> {
        let mut v = Validator::new();
        let name = not_null(&mut v, "name", self.name, Ok);
        let steps = not_null(&mut v, "steps", self.steps, Ok);
        let is_active = not_null(&mut v, "is_active", self.is_active, Ok);
        let (name, steps, is_active) = v.finish((name, steps, is_active))?;
        Ok(WorkflowPatch { name, description: self.description, steps, is_active })
    }
}

/// A workflow.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowResponse {
    /// Workflow id.
    pub id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// Name.
    pub name: String,
    /// Description or null.
    pub description: Option<String>,
    /// The steps as saved.
    #[schema(value_type = Vec<Object>)]
    pub steps: Vec<Map<String, Value>>,
    /// Whether it may be executed.
    pub is_active: bool,
    /// Creation time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// Last change.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
}

impl From<Workflow> for WorkflowResponse {
    fn from(w: Workflow) -> Self {
        let steps = w
            .steps
            .iter()
            .filter_map(|s| match s.to_json() {
                Value::Object(map) => Some(map),
                _ => None,
            })
            .collect();
        Self {
            id: w.id.to_string(),
            tenant_id: w.tenant_id.to_string(),
            name: w.name,
            description: w.description,
            steps,
            is_active: w.is_active,
            created_at: w.created_at,
            updated_at: w.updated_at,
        }
    }
}

/// A page of workflows.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowList {
    /// The workflows of this page, oldest first.
    pub workflows: Vec<WorkflowResponse>,
    /// All workflows of the tenant.
    pub total: u64,
    /// This page.
    pub page: u32,
    /// Page size.
    pub per_page: u32,
}

/// List the tenant's workflows.
#[utoipa::path(
    get, path = "/api/v1/workflows", tag = "workflows", operation_id = "listWorkflows",
    security(("bearer" = [])), params(PageQuery),
    responses((status = 200, description = "A page of workflows", body = WorkflowList))
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    query: QueryParams<PageQuery>,
) -> Result<Reply<WorkflowList>, ApiError> {
    let page = query.0.try_into_domain()?;
    let (workflows, total) = state.workflows.list(&caller, page).await?;
    Ok(Reply::ok(WorkflowList {
        workflows: workflows.into_iter().map(WorkflowResponse::from).collect(),
        total,
        page: page.page,
        per_page: page.per_page,
    }))
}

/// Create a workflow; its steps are checked now (ids, types, parameters, templates and their
/// references), so a saved workflow never fails for a typo in a step.
#[utoipa::path(
    post, path = "/api/v1/workflows", tag = "workflows", operation_id = "createWorkflow",
    security(("bearer" = [])),
    request_body = CreateWorkflowRequest,
    responses((status = 201, description = "The workflow", body = WorkflowResponse))
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<CreateWorkflowRequest>,
) -> Result<Reply<WorkflowResponse>, ApiError> {
    let new = body.0.try_into_domain()?;
    let workflow = state.workflows.create(&caller, new).await?;
    Ok(Reply::created(workflow.into()))
}

/// One workflow.
#[utoipa::path(
    get, path = "/api/v1/workflows/{workflow_id}", tag = "workflows", operation_id = "getWorkflow",
    security(("bearer" = [])),
    params(("workflow_id" = String, Path, description = "Workflow id")),
    responses((status = 200, description = "The workflow", body = WorkflowResponse))
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<WorkflowResponse>, ApiError> {
    let workflow = state.workflows.get(&caller, &workflow_id(path.into_inner())?).await?;
    Ok(Reply::ok(workflow.into()))
}

/// Change a workflow.
#[utoipa::path(
    patch, path = "/api/v1/workflows/{workflow_id}", tag = "workflows", operation_id = "updateWorkflow",
    security(("bearer" = [])),
    params(("workflow_id" = String, Path, description = "Workflow id")),
    request_body = UpdateWorkflowRequest,
    responses((status = 200, description = "The workflow after the change", body = WorkflowResponse))
)]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: JsonBody<UpdateWorkflowRequest>,
) -> Result<Reply<WorkflowResponse>, ApiError> {
    let id = workflow_id(path.into_inner())?;
    let patch = body.0.try_into_domain()?;
    let workflow = state.workflows.update(&caller, &id, patch).await?;
    Ok(Reply::ok(workflow.into()))
}

/// Delete a workflow.
#[utoipa::path(
    delete, path = "/api/v1/workflows/{workflow_id}", tag = "workflows", operation_id = "deleteWorkflow",
    security(("bearer" = [])),
    params(("workflow_id" = String, Path, description = "Workflow id")),
    responses((status = 204, description = "Deleted"))
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<actix_web::HttpResponse, ApiError> {
    state.workflows.delete(&caller, &workflow_id(path.into_inner())?).await?;
    Ok(actix_web::HttpResponse::NoContent().finish())
}

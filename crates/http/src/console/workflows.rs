//! Workflows in the console: the list, a JSON editor of a workflow's definition (the API's
//! body as it is, refused saves shown with each error at its path), running one on an input,
//! its trigger URLs, schedules and integrations, and its executions as a timeline of steps that
//! refreshes while the execution runs.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use agentry_domain::ids::WorkflowId;
use agentry_domain::pagination::Page;
use agentry_domain::workflows::IntegrationKind;
use minijinja::{Value, context};
use serde::{Deserialize, Serialize};
use serde_json::{Map, json};

use super::render::{page, page_with_status, redirect};
use super::{Console, Form, encode};
use crate::AppState;
use crate::error::{ApiError, ErrorCode};
use crate::extract::from_json_value;
use crate::routes::executions::{
    ExecuteRequest, ExecutionQuery, ExecutionResponse, StepResultResponse, execution_id,
};
use crate::routes::integrations::{CreateIntegrationRequest, IntegrationResponse, integration_id};
use crate::routes::schedules::{
    CreateScheduleRequest, ScheduleResponse, UpdateScheduleRequest, schedule_ids,
};
use crate::routes::triggers::{CreateTriggerRequest, TriggerResponse, trigger_id};
use crate::routes::workflows::{CreateWorkflowRequest, UpdateWorkflowRequest, WorkflowResponse, workflow_id};
use crate::settings::HttpSettings;

/// Routes under `/console/{tenant_id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/workflows", web::get().to(list))
        .route("/workflows", web::post().to(create))
        .route("/workflows/{workflow_id}", web::get().to(show))
        .route("/workflows/{workflow_id}", web::post().to(update))
        .route("/workflows/{workflow_id}/delete", web::get().to(confirm_delete))
        .route("/workflows/{workflow_id}/delete", web::post().to(delete))
        .route("/workflows/{workflow_id}/run", web::post().to(run))
        .route("/workflows/{workflow_id}/executions", web::get().to(executions))
        .route("/workflows/{workflow_id}/triggers", web::post().to(create_trigger))
        .route("/workflows/{workflow_id}/triggers/{trigger_id}", web::get().to(show_trigger))
        .route("/workflows/{workflow_id}/triggers/{trigger_id}/delete", web::post().to(delete_trigger))
        .route("/workflows/{workflow_id}/schedules", web::post().to(create_schedule))
        .route("/workflows/{workflow_id}/schedules/{schedule_id}", web::post().to(update_schedule))
        .route("/workflows/{workflow_id}/schedules/{schedule_id}/delete", web::post().to(delete_schedule))
        .route("/workflows/{workflow_id}/integrations", web::post().to(create_integration))
        .route(
            "/workflows/{workflow_id}/integrations/{integration_id}/delete",
            web::post().to(delete_integration),
        )
        .route("/executions/{execution_id}", web::get().to(execution))
        .route("/executions/{execution_id}/cancel", web::post().to(cancel));
}

/// The editor's form field.
const DEFINITION: &str = "definition";

/// What the editor of a new workflow starts with: a workflow that runs as it is, to be changed.
const STARTER: &str = r#"{
  "name": "Greeter",
  "description": "Greets whoever it is run for",
  "steps": [
    {
      "id": "greet",
      "type": "transform",
      "output": {"greeting": "Hello {{ input.name | default('there') }}"}
    }
  ]
}"#;

/// Workflows per page of the list.
const PER_PAGE: i64 = 50;
/// Executions on a workflow's page (the executions page has them all).
const RECENT_EXECUTIONS: i64 = 10;
/// Executions per page of the executions page.
const EXECUTIONS_PER_PAGE: i64 = 25;

/// One refused field, at its path in the body (`steps[1].url`).
#[derive(Debug, Serialize)]
struct Refusal {
    field: String,
    message: String,
}

/// The JSON editor: the text shown, and after a refused save the refusals beside it.
#[derive(Debug, Serialize)]
struct Editor {
    text: String,
    errors: Vec<Refusal>,
}

impl Editor {
    fn new(text: String) -> Self {
        Self { text, errors: Vec::new() }
    }

    /// The submitted text again, with why it was refused.
    fn refused(form: &Form, error: &ApiError) -> Self {
        let errors = if error.details().is_empty() {
            vec![Refusal { field: DEFINITION.to_owned(), message: error.message().to_owned() }]
        } else {
            error
                .details()
                .iter()
                .map(|d| Refusal { field: d.field.clone(), message: d.message.clone() })
                .collect()
        };
        Self { text: form.get(DEFINITION).unwrap_or_default(), errors }
    }
}

/// The editor's text as a JSON value; a blank editor is an empty body, so the API's own checks
/// name what is required.
fn editor_value(form: &Form) -> Result<serde_json::Value, ApiError> {
    match form.json(DEFINITION)? {
        serde_json::Value::Null => Ok(json!({})),
        value => Ok(value),
    }
}

/// A refused save is shown in its editor (422, as the API answers it); any other error is the
/// console's error page.
fn is_refusal(error: &ApiError) -> bool {
    error.code() == ErrorCode::ValidationError
}

/// The status of a refused save, as the API's for the same error.
fn refusal_status(req: &HttpRequest, error: &ApiError) -> StatusCode {
    let settings = req.app_data::<web::Data<HttpSettings>>().map(|s| s.get_ref().clone()).unwrap_or_default();
    error.status(&settings)
}

/// The service's address as the browser reached it: the API answers paths for trigger and
/// receiver URLs, and the one to copy is whole.
fn origin(req: &HttpRequest) -> String {
    let info = req.connection_info();
    format!("{}://{}", info.scheme(), info.host())
}

/// JSON as the timeline and the pages show it.
fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// A workflow's definition as the editor shows it: the body the update takes, fields in the
/// order of the API's documentation.
fn definition(workflow: &WorkflowResponse) -> String {
    #[derive(Serialize)]
    struct Definition<'a> {
        name: &'a str,
        description: Option<&'a str>,
        is_active: bool,
        steps: &'a [Map<String, serde_json::Value>],
    }
    let shown = Definition {
        name: &workflow.name,
        description: workflow.description.as_deref(),
        is_active: workflow.is_active,
        steps: &workflow.steps,
    };
    serde_json::to_string_pretty(&shown).unwrap_or_default()
}

#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    page: Option<i64>,
}

async fn list(state: web::Data<AppState>, c: Console, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let query: ListQuery = serde_urlencoded::from_str(req.query_string()).unwrap_or_default();
    list_page(&state, &c, query.page, Editor::new(STARTER.to_owned()), StatusCode::OK).await
}

async fn list_page(
    state: &AppState,
    c: &Console,
    page_number: Option<i64>,
    editor: Editor,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let page_of = Page::new(page_number, Some(PER_PAGE)).map_err(ApiError::from)?;
    let (workflows, total) = state.workflows.list(c, page_of).await?;
    let workflows: Vec<WorkflowResponse> = workflows.into_iter().map(WorkflowResponse::from).collect();
    let pages = total.div_ceil(u64::from(page_of.per_page)).max(1);
    page_with_status(
        c,
        status,
        "workflows",
        "Workflows",
        "workflows.html",
        context! { workflows, total, page => page_of.page, pages, editor },
    )
}

/// A new workflow from the editor: the editor's text is the API's body, read and validated by
/// the create route's own code.
async fn create(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let saved = async {
        let request: CreateWorkflowRequest = from_json_value(editor_value(&form)?)?;
        Ok::<_, ApiError>(state.workflows.create(&c, request.try_into_domain()?).await?)
    }
    .await;
    match saved {
        Ok(workflow) => Ok(redirect(format!("{}/workflows/{}", c.base(), workflow.id))),
        Err(e) if is_refusal(&e) => {
            let status = refusal_status(&req, &e);
            list_page(&state, &c, None, Editor::refused(&form, &e), status).await
        }
        Err(e) => Err(e),
    }
}

async fn show(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(path.into_inner().1)?;
    workflow_page(&state, &c, &req, &id, None, StatusCode::OK).await
}

/// The workflow's page: running it, its recent executions, triggers, schedules, integrations,
/// and the editor (`editor` when a save was refused, else the current definition).
async fn workflow_page(
    state: &AppState,
    c: &Console,
    req: &HttpRequest,
    id: &WorkflowId,
    editor: Option<Editor>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let workflow = WorkflowResponse::from(state.workflows.get(c, id).await?);
    let recent = ExecutionQuery { page: Some(1), per_page: Some(RECENT_EXECUTIONS), status: None };
    let (page_of, filter) = recent.try_into_domain()?;
    let (executions, executions_total) = state.executions.list(c, id, filter, page_of).await?;
    let executions: Vec<ExecutionResponse> = executions.into_iter().map(ExecutionResponse::from).collect();
    let triggers: Vec<TriggerResponse> =
        state.triggers.list(c, id).await?.into_iter().map(TriggerResponse::from).collect();
    let schedules: Vec<ScheduleResponse> =
        state.schedules.list(c, id).await?.into_iter().map(ScheduleResponse::from).collect();
    // The API lists a tenant's integrations together; this page shows the ones bound to it.
    let integrations: Vec<IntegrationResponse> = state
        .integrations
        .list(c)
        .await?
        .into_iter()
        .filter(|i| &i.workflow_id == id)
        .map(IntegrationResponse::from)
        .collect();
    let kinds: Vec<&str> = IntegrationKind::ALL.iter().map(|k| k.as_str()).collect();
    let editor = editor.unwrap_or_else(|| Editor::new(definition(&workflow)));
    page_with_status(
        c,
        status,
        "workflows",
        &workflow.name.clone(),
        "workflow.html",
        context! {
            workflow => Value::from_serialize(&workflow),
            editor, executions, executions_total, triggers, schedules, integrations, kinds,
            origin => origin(req),
        },
    )
}

/// A change from the editor: its text is the API's update body as it is, so what it leaves
/// out keeps its value and `"description": null` removes the description, as for the API.
async fn update(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(path.into_inner().1)?;
    let saved = async {
        let request: UpdateWorkflowRequest = from_json_value(editor_value(&form)?)?;
        Ok::<_, ApiError>(state.workflows.update(&c, &id, request.try_into_domain()?).await?)
    }
    .await;
    match saved {
        Ok(_) => Ok(redirect(format!("{}/workflows/{}#definition", c.base(), id))),
        Err(e) if is_refusal(&e) => {
            let status = refusal_status(&req, &e);
            workflow_page(&state, &c, &req, &id, Some(Editor::refused(&form, &e)), status).await
        }
        Err(e) => Err(e),
    }
}

async fn confirm_delete(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(path.into_inner().1)?;
    let workflow = WorkflowResponse::from(state.workflows.get(&c, &id).await?);
    page(
        &c,
        "workflows",
        "Delete a workflow",
        "workflow_delete.html",
        context! { workflow => Value::from_serialize(&workflow) },
    )
}

async fn delete(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(path.into_inner().1)?;
    state.workflows.delete(&c, &id).await?;
    Ok(redirect(format!("{}/workflows", c.base())))
}

/// Runs the workflow on the form's input (JSON, `{}` when blank) and shows the execution.
async fn run(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(path.into_inner().1)?;
    let request: ExecuteRequest = from_json_value(json!({ "input": form.json("input")? }))?;
    let execution = state.executions.execute(&c, &id, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/executions/{}", c.base(), execution.id)))
}

#[derive(Debug, Default, Deserialize)]
struct ExecutionsQuery {
    status: Option<String>,
    page: Option<i64>,
}

/// A workflow's executions, newest first, filtered by status.
async fn executions(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(path.into_inner().1)?;
    let q: ExecutionsQuery = serde_urlencoded::from_str(req.query_string()).unwrap_or_default();
    let status = q.status.filter(|s| !s.trim().is_empty());
    let query = ExecutionQuery { page: q.page, per_page: Some(EXECUTIONS_PER_PAGE), status: status.clone() };
    let (page_of, filter) = query.try_into_domain()?;
    let workflow = WorkflowResponse::from(state.workflows.get(&c, &id).await?);
    let (executions, total) = state.executions.list(&c, &id, filter, page_of).await?;
    let executions: Vec<ExecutionResponse> = executions.into_iter().map(ExecutionResponse::from).collect();
    let pages = total.div_ceil(u64::from(page_of.per_page)).max(1);
    page(
        &c,
        "workflows",
        &format!("Executions of {}", workflow.name),
        "executions.html",
        context! {
            workflow => Value::from_serialize(&workflow),
            executions, total, pages,
            page => page_of.page,
            status,
            filters => format!("status={}", encode(status.as_deref().unwrap_or_default())),
        },
    )
}

/// A step as the timeline shows it: the API's step with its output as pretty JSON.
#[derive(Debug, Serialize)]
struct StepView {
    #[serde(flatten)]
    step: StepResultResponse,
    output_text: Option<String>,
}

/// An execution's page: its steps as a timeline, refreshed by the script (`data-live`) while
/// the execution runs; without the script a reload shows where it stands.
async fn execution(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = execution_id(path.into_inner().1)?;
    let mut shown = ExecutionResponse::from(state.executions.get(&c, &id).await?);
    let workflow =
        WorkflowResponse::from(state.workflows.get(&c, &workflow_id(shown.workflow_id.clone())?).await?);
    let steps: Vec<StepView> = std::mem::take(&mut shown.steps)
        .into_iter()
        .map(|step| StepView { output_text: step.output.as_ref().map(pretty), step })
        .collect();
    let live = matches!(shown.status, "running" | "waiting");
    page(
        &c,
        "workflows",
        &format!("Execution of {}", workflow.name),
        "execution.html",
        context! {
            workflow => Value::from_serialize(&workflow),
            input_text => pretty(&shown.input),
            trigger_text => (!shown.trigger.is_null()).then(|| pretty(&shown.trigger)),
            output_text => shown.output.as_ref().map(pretty),
            execution => Value::from_serialize(&shown),
            steps, live,
        },
    )
}

async fn cancel(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = execution_id(path.into_inner().1)?;
    state.executions.cancel(&c, &id).await?;
    Ok(redirect(format!("{}/executions/{}", c.base(), id)))
}

/// A new trigger URL: the answer to the POST is the only page that shows its secret.
async fn create_trigger(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(path.into_inner().1)?;
    let request: CreateTriggerRequest = from_json_value(json!({
        "name": form.get("name"),
        "allowed_methods": form.all("allowed_methods"),
    }))?;
    let (trigger, secret) = state.triggers.create(&c, &id, request.try_into_domain()?).await?;
    let workflow = WorkflowResponse::from(state.workflows.get(&c, &id).await?);
    page(
        &c,
        "workflows",
        "Trigger created",
        "trigger_created.html",
        context! {
            workflow => Value::from_serialize(&workflow),
            trigger => Value::from_serialize(TriggerResponse::from(trigger)),
            secret,
            origin => origin(&req),
        },
    )
}

/// A trigger's page: what it is, and deleting it (its URL stops working).
async fn show_trigger(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, workflow, trigger) = path.into_inner();
    let (id, trigger) = (workflow_id(workflow)?, trigger_id(trigger)?);
    // The API has no route for one trigger: it is found in its workflow's list, read as the
    // list route reads it.
    let trigger = state
        .triggers
        .list(&c, &id)
        .await?
        .into_iter()
        .find(|t| t.id == trigger)
        .map(TriggerResponse::from)
        .ok_or_else(|| ApiError::not_found("no such trigger for this workflow"))?;
    let workflow = WorkflowResponse::from(state.workflows.get(&c, &id).await?);
    page(
        &c,
        "workflows",
        &trigger.name.clone(),
        "trigger.html",
        context! {
            workflow => Value::from_serialize(&workflow),
            trigger => Value::from_serialize(&trigger),
            origin => origin(&req),
        },
    )
}

async fn delete_trigger(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let (_, workflow, trigger) = path.into_inner();
    let id = workflow_id(workflow)?;
    state.triggers.delete(&c, &id, &trigger_id(trigger)?).await?;
    Ok(redirect(format!("{}/workflows/{}#triggers", c.base(), id)))
}

async fn create_schedule(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(path.into_inner().1)?;
    let request: CreateScheduleRequest = from_json_value(json!({
        "cron": form.get("cron"),
        "timezone": form.text("timezone"),
        "input": form.json("input")?,
    }))?;
    state.schedules.create(&c, &id, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/workflows/{}#schedules", c.base(), id)))
}

/// Pausing (`is_active=false`) or resuming (`is_active=true`) a schedule.
async fn update_schedule(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let (_, workflow, schedule) = path.into_inner();
    let (id, schedule) = schedule_ids((workflow, schedule))?;
    // Anything but the two buttons' values goes to the API's check as text, which refuses it.
    let is_active = match form.get("is_active").as_deref() {
        Some("true") => json!(true),
        Some("false") => json!(false),
        other => json!(other),
    };
    let request: UpdateScheduleRequest = from_json_value(json!({ "is_active": is_active }))?;
    state.schedules.update(&c, &id, &schedule, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/workflows/{}#schedules", c.base(), id)))
}

async fn delete_schedule(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let (_, workflow, schedule) = path.into_inner();
    let (id, schedule) = schedule_ids((workflow, schedule))?;
    state.schedules.delete(&c, &id, &schedule).await?;
    Ok(redirect(format!("{}/workflows/{}#schedules", c.base(), id)))
}

/// An integration bound to this workflow: the receiver URL to give the service is on the
/// workflow's page; the signing secret is the service's, never shown again.
async fn create_integration(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(path.into_inner().1)?;
    let request: CreateIntegrationRequest = from_json_value(json!({
        "kind": form.text("kind"),
        "name": form.get("name"),
        "signing_secret": form.get("signing_secret"),
        "workflow_id": id.as_str(),
    }))?;
    state.integrations.create(&c, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/workflows/{}#integrations", c.base(), id)))
}

async fn delete_integration(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let (_, workflow, integration) = path.into_inner();
    let (id, integration) = (workflow_id(workflow)?, integration_id(integration)?);
    // Another workflow's integration is not this page's to delete: 404, as another tenant's.
    if state.integrations.get(&c, &integration).await?.workflow_id != id {
        return Err(ApiError::not_found("no such integration for this workflow"));
    }
    state.integrations.delete(&c, &integration).await?;
    Ok(redirect(format!("{}/workflows/{}#integrations", c.base(), id)))
}

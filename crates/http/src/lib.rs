//! Agentry's HTTP adapter (actix-web).
//!
//! [`build_app`] assembles the application: every API route under both `/api/v1` and `/v1`,
//! `/healthz`, `/readyz` and `/metrics` at the root, the OpenAPI document at `/api/v1/openapi.json` and
//! its docs page at `/docs/`. Every response carries `X-Request-Id`; every error, unknown
//! routes included, is JSON in the configured envelope ([`HttpSettings`]).

pub mod access;
pub mod connection;
pub mod console;
pub mod error;
pub mod extract;
pub mod middleware;
pub mod openapi;
pub mod origin;
pub mod reply;
pub mod routes;
pub mod schemas;
pub mod settings;
pub mod sse;

use std::sync::Arc;

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::{App, web};
use std::net::IpAddr;

use agentry_domain::agents::{AgentService, ChatService, MemoryBlocks};
use agentry_domain::billing::BillingService;
use agentry_domain::identity::{AccessService, AccountService, RecoveryService};
use agentry_domain::memory::MemoryService;
use agentry_domain::ratelimit::{PlanTable, Quota, RateLimiter};
use agentry_domain::tenancy::Plan;
use agentry_domain::time::Clock;
use agentry_domain::webhooks::WebhookService;
use agentry_domain::workflows::{
    ExecutionService, IntegrationService, ScheduleService, TriggerService, WorkflowService,
};
use async_trait::async_trait;

pub use error::{ApiError, ErrorCode};
pub use settings::{Envelope, HttpSettings};

/// Tells whether the service's dependencies answer (`GET /readyz`).
#[async_trait]
pub trait Readiness: Send + Sync {
    /// `Ok` when the service can do its work.
    async fn check(&self) -> Result<(), NotReady>;
}

/// Why the service is not ready.
#[derive(Debug, thiserror::Error)]
pub enum NotReady {
    /// The database does not answer (the cause is logged, not shown).
    #[error("the database is not reachable")]
    Unreachable(#[source] anyhow::Error),
    /// Another live instance on this database was started with different values of these
    /// settings (by name): tokens or secrets of one would be refused by the other.
    #[error(
        "instances on this database disagree on {}: start every instance with the same value",
        .0.join(", ")
    )]
    Disagreement(Vec<String>),
}

/// Renders the service's metrics in the Prometheus text format (`GET /metrics`).
#[async_trait]
pub trait MetricsExport: Send + Sync {
    /// The current metrics, gauges refreshed.
    async fn render(&self) -> String;
}

/// Rate-limit settings.
#[derive(Debug, Clone)]
pub struct RateLimits {
    /// Plan limits for authenticated calls, counted per tenant.
    pub plans: PlanTable,
    /// Budget per client address of the unauthenticated auth routes.
    pub auth_per_ip: Quota,
    /// Budget per client address of failed bearer authentications.
    pub failed_auth_per_ip: Quota,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<IpAddr>,
}

impl RateLimits {
    /// The quota of a tenant on `plan`.
    pub fn quota_for(&self, plan: Plan) -> Quota {
        self.plans.quota(plan)
    }
}

/// The services the handlers call.
#[derive(Clone)]
pub struct AppState {
    /// Accounts and sessions.
    pub accounts: AccountService,
    /// Authentication of callers and API keys.
    pub access: AccessService,
    /// Password reset and magic links.
    pub recovery: RecoveryService,
    /// Agents.
    pub agents: AgentService,
    /// Chat.
    pub chat: ChatService,
    /// Memory.
    pub memory: MemoryService,
    /// Agents' core memory blocks.
    pub blocks: MemoryBlocks,
    /// Knowledge bases.
    pub knowledge: agentry_domain::knowledge::KnowledgeService,
    /// Credits and purchases.
    pub billing: BillingService,
    /// Outbound webhooks.
    pub webhooks: WebhookService,
    /// Workflows.
    pub workflows: WorkflowService,
    /// Workflow executions.
    pub executions: ExecutionService,
    /// Runs a workflow for a caller who waits for its end (`/mcp`'s `run_workflow`).
    pub runner: Arc<dyn agentry_domain::workflows::WorkflowRunner>,
    /// Workflow triggers and the calls to their URLs.
    pub triggers: TriggerService,
    /// Workflows' cron schedules.
    pub schedules: ScheduleService,
    /// Remote MCP servers whose tools agents use.
    pub mcp_servers: agentry_domain::mcp::McpServerService,
    /// Inbound integrations and their receivers.
    pub integrations: IntegrationService,
    /// Team members and invitations.
    pub team: agentry_domain::team::TeamService,
    /// Rate limiting.
    pub limiter: RateLimiter,
    /// Rate-limit settings.
    pub limits: RateLimits,
    /// The readiness probe.
    pub readiness: Arc<dyn Readiness>,
    /// The requests in flight, which background work yields to.
    pub load: Arc<agentry_domain::work::RequestLoad>,
    /// The language model agents answer with, as `/readyz` reports it.
    pub chat_model: routes::health::ChatModelStatus,
    /// The metrics of `GET /metrics`.
    pub metrics: Arc<dyn MetricsExport>,
    /// Addresses refused after too many failed authentications.
    pub failed_auth: Arc<access::FailedAuthGate>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

/// The routes served under each API base path.
fn api_routes(cfg: &mut web::ServiceConfig) {
    cfg.configure(routes::auth::configure)
        .configure(routes::api_keys::configure)
        .configure(routes::recovery::configure)
        .configure(routes::team::configure)
        .configure(routes::automations::configure)
        .configure(routes::agents::configure)
        .configure(routes::chat::configure)
        .configure(routes::openai::configure)
        .configure(routes::memory::configure)
        .configure(routes::billing::configure)
        .configure(routes::workflows::configure)
        .configure(routes::executions::configure)
        .configure(routes::triggers::configure)
        .configure(routes::schedules::configure)
        .configure(routes::mcp_servers::configure)
        .configure(routes::knowledge::configure)
        .configure(routes::integrations::configure)
        // Static segments under /webhooks before the subscriptions' `/webhooks/{webhook_id}`.
        .configure(routes::triggers::configure_calls)
        .configure(routes::integrations::configure_receivers)
        // After every route with a static segment under /webhooks, so none is taken for a
        // subscription id.
        .configure(routes::webhooks::configure)
        .service(web::resource("/openapi.json").route(web::get().to(openapi::openapi_json)));
}

async fn no_such_route() -> Result<actix_web::HttpResponse, ApiError> {
    Err(ApiError::not_found("no such route"))
}

/// The application, ready for `HttpServer::new(move || build_app(state.clone(), settings.clone()))`.
pub fn build_app(
    state: web::Data<AppState>,
    settings: web::Data<HttpSettings>,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<BoxBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        .app_data(state)
        .app_data(settings)
        .wrap(actix_web::middleware::from_fn(middleware::request_context))
        .configure(routes::health::configure)
        .configure(routes::pages::configure)
        .configure(console::configure)
        .configure(routes::mcp::configure)
        .service(web::scope("/api/v1").configure(api_routes))
        .service(web::scope("/v1").configure(api_routes))
        .default_service(web::to(no_such_route))
}

//! `/healthz` (the process is up), `/readyz` (its dependencies answer) and `/metrics` (the
//! Prometheus text format).

use actix_web::web;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorCode};
use crate::reply::Reply;
use crate::{AppState, NotReady};

/// Registers the routes of this module at the root.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/healthz").route(web::get().to(healthz)))
        .service(web::resource("/readyz").route(web::get().to(readyz)))
        .service(web::resource("/metrics").route(web::get().to(metrics)));
}

/// Health status.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` or `ready`.
    pub status: &'static str,
    /// On `/readyz`: the embedding model memory uses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding: Option<EmbeddingStatus>,
    /// On `/readyz`: the language model agents answer with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_model: Option<ChatModelStatus>,
}

/// The language model agents answer with.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChatModelStatus {
    /// `smollm` (SmolLM2-135M-Instruct in process), `builtin` (the offline responder that
    /// reflects what it receives) or `openai` (an OpenAI-compatible server).
    pub provider: String,
    /// The model agents use when their config names none.
    pub model: String,
}

/// The embedding model in use.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmbeddingStatus {
    /// `minilm`, `openai` or `hashing` (the lexical fallback: words, not meanings).
    pub provider: String,
    /// The model's id, recorded beside every stored embedding.
    pub model: String,
    /// Length of its vectors.
    pub dimension: usize,
}

/// Liveness: answers as long as the process serves HTTP.
#[utoipa::path(
    get, path = "/healthz", tag = "operations", operation_id = "healthz",
    responses((status = 200, description = "The process serves HTTP", body = Health))
)]
pub async fn healthz() -> Reply<Health> {
    Reply::ok(Health { status: "ok", embedding: None, chat_model: None })
}

/// Readiness: answers 200 only when the database answers and every live instance on it was
/// started with the same JWT key, secret key and public URL as this one; says which embedding model memory
/// uses and which language model agents answer with.
#[utoipa::path(
    get, path = "/readyz", tag = "operations", operation_id = "readyz",
    responses(
        (status = 200, description = "The database answers", body = Health),
        (status = 503, description = "`unavailable`: the database does not answer, or another instance on this database was started with a different JWT key, secret key or public URL (the message names the setting)"),
    )
)]
pub async fn readyz(state: web::Data<AppState>) -> Result<Reply<Health>, ApiError> {
    match state.readiness.check().await {
        Ok(()) => {
            let model = state.memory.embedder().model();
            Ok(Reply::ok(Health {
                status: "ready",
                embedding: Some(EmbeddingStatus {
                    provider: model.provider.clone(),
                    model: model.id.clone(),
                    dimension: model.dimension,
                }),
                chat_model: Some(state.chat_model.clone()),
            }))
        }
        Err(e) => {
            match &e {
                NotReady::Unreachable(cause) => tracing::warn!(error = ?cause, "readiness check failed"),
                NotReady::Disagreement(settings) => {
                    tracing::error!(settings = %settings.join(", "), "{e}");
                }
            }
            Err(ApiError::new(ErrorCode::Unavailable, e.to_string()).with_retry_after(5))
        }
    }
}

/// The content type of the Prometheus text exposition format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Metrics in the Prometheus text format: requests by route template, method and status with
/// their latency, database connections, the SQLite writer's queue, chat-model latency and
/// tokens, credits charged, rate-limit refusals and background queues (see
/// `docs/operations.md`).
#[utoipa::path(
    get, path = "/metrics", tag = "operations", operation_id = "metrics",
    responses((status = 200, description = "Metrics in the Prometheus text format", content_type = "text/plain", body = String))
)]
pub async fn metrics(state: web::Data<AppState>) -> actix_web::HttpResponse {
    actix_web::HttpResponse::Ok().content_type(PROMETHEUS_TEXT).body(state.metrics.render().await)
}

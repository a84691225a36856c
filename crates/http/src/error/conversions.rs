//! Every domain error as the HTTP layer answers it.

use agentry_domain::agents::{AgentError, BlockError, ChatError, ModelError};
use agentry_domain::billing::BillingError;
use agentry_domain::identity::{
    AccessError, ApiKeyError, LoginError, LogoutError, MeError, RecoveryError, RefreshError, RegisterError,
};
use agentry_domain::knowledge::KnowledgeError;
use agentry_domain::memory::{EmbedError, MemoryError};
use agentry_domain::tenancy::Forbidden;
use agentry_domain::webhooks::WebhookError;
use agentry_domain::workflows::{
    ExecutionError, InboundError, IntegrationError, ScheduleError, TriggerError, WorkflowError,
};

use super::{ApiError, ErrorCode};

impl From<RegisterError> for ApiError {
    fn from(e: RegisterError) -> Self {
        match e {
            RegisterError::EmailTaken => {
                Self::new(ErrorCode::Conflict, "an account with this e-mail address already exists")
            }
            RegisterError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<LoginError> for ApiError {
    fn from(e: LoginError) -> Self {
        match e {
            LoginError::InvalidCredentials => {
                Self::new(ErrorCode::InvalidCredentials, "invalid e-mail or password")
            }
            LoginError::Inactive => Self::new(ErrorCode::Forbidden, "this account is deactivated"),
            LoginError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<RefreshError> for ApiError {
    fn from(e: RefreshError) -> Self {
        match e {
            RefreshError::InvalidToken => Self::unauthorized("the refresh token is invalid or expired"),
            RefreshError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<LogoutError> for ApiError {
    fn from(e: LogoutError) -> Self {
        match e {
            LogoutError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<MeError> for ApiError {
    fn from(e: MeError) -> Self {
        match e {
            MeError::Unauthorized => Self::unauthorized("the account no longer exists or is deactivated"),
            MeError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<Forbidden> for ApiError {
    fn from(e: Forbidden) -> Self {
        Self::new(ErrorCode::Forbidden, e.0)
    }
}

impl From<AccessError> for ApiError {
    fn from(e: AccessError) -> Self {
        match e {
            AccessError::Unauthorized(reason) => {
                tracing::debug!(%reason, "credentials refused");
                Self::unauthorized("the access token or API key is invalid, expired or revoked")
            }
            AccessError::Forbidden(f) => f.into(),
            AccessError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<ApiKeyError> for ApiError {
    fn from(e: ApiKeyError) -> Self {
        match e {
            ApiKeyError::Forbidden(f) => f.into(),
            ApiKeyError::NotFound => Self::not_found("no such API key"),
            ApiKeyError::Invalid(e) => e.into(),
            ApiKeyError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<RecoveryError> for ApiError {
    fn from(e: RecoveryError) -> Self {
        match e {
            RecoveryError::InvalidToken => {
                Self::new(ErrorCode::InvalidToken, "the token is invalid, used or expired")
            }
            RecoveryError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<agentry_domain::team::TeamError> for ApiError {
    fn from(e: agentry_domain::team::TeamError) -> Self {
        use agentry_domain::team::TeamError;
        match e {
            TeamError::Forbidden(f) => f.into(),
            TeamError::NotFound(what) => Self::not_found(what),
            TeamError::Invalid(v) => v.into(),
            TeamError::Conflict(message) => Self::new(ErrorCode::Conflict, message),
            e @ TeamError::LastOwner => Self::new(ErrorCode::Conflict, e.to_string()),
            e @ TeamError::InvalidToken => Self::new(ErrorCode::InvalidToken, e.to_string()),
            e @ TeamError::InvalidCredentials => Self::new(ErrorCode::InvalidCredentials, e.to_string()),
            TeamError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<AgentError> for ApiError {
    fn from(e: AgentError) -> Self {
        match e {
            AgentError::Forbidden(f) => f.into(),
            AgentError::Invalid(v) => v.into(),
            AgentError::NotFound => Self::not_found("no such agent"),
            AgentError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<BlockError> for ApiError {
    fn from(e: BlockError) -> Self {
        match e {
            BlockError::Forbidden(f) => f.into(),
            BlockError::Invalid(v) => v.into(),
            BlockError::AgentNotFound => Self::not_found("no such agent"),
            e @ BlockError::BlockNotFound(_) => Self::not_found(e.to_string()),
            e @ (BlockError::OverLimit { .. } | BlockError::TextNotFound(_)) => {
                Self::new(ErrorCode::ValidationError, e.to_string())
            }
            e @ BlockError::Conflict => Self::new(ErrorCode::Conflict, e.to_string()),
            BlockError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<ChatError> for ApiError {
    fn from(e: ChatError) -> Self {
        match e {
            ChatError::Forbidden(f) => f.into(),
            ChatError::Invalid(v) => v.into(),
            ChatError::AgentNotFound => Self::not_found("no such agent"),
            ChatError::SessionNotFound => Self::not_found("no such session for this agent"),
            ChatError::AgentPaused => {
                Self::new(ErrorCode::Conflict, "the agent is paused; set its status to active")
            }
            e @ ChatError::InsufficientCredits { .. } => {
                Self::new(ErrorCode::InsufficientCredits, e.to_string())
            }
            ChatError::Upstream(e) => {
                // The provider's own words (URLs, excerpts of its answer) stay in the log.
                tracing::warn!(error = %e, "model call failed");
                let message = match e {
                    ModelError::Timeout => "the model provider did not answer in time",
                    ModelError::Upstream(_) => "the model provider failed; nothing was charged",
                    ModelError::Busy { retry_after_secs } => {
                        return Self::new(
                            ErrorCode::ModelBusy,
                            "the language model is busy with other replies; nothing was charged, try again shortly",
                        )
                        .with_retry_after(retry_after_secs);
                    }
                };
                Self::new(ErrorCode::UpstreamError, message)
            }
            ChatError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<MemoryError> for ApiError {
    fn from(e: MemoryError) -> Self {
        match e {
            MemoryError::Forbidden(f) => f.into(),
            MemoryError::Invalid(v) => v.into(),
            MemoryError::NotFound => Self::not_found("no such memory"),
            MemoryError::AgentNotFound => Self::not_found("no such agent"),
            MemoryError::Embedding(e) => embedding_failed(e),
            MemoryError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<WebhookError> for ApiError {
    fn from(e: WebhookError) -> Self {
        match e {
            WebhookError::Forbidden(f) => f.into(),
            WebhookError::Invalid(v) => v.into(),
            WebhookError::NotFound => Self::not_found("no such webhook"),
            WebhookError::DeliveryNotFound => Self::not_found("no such delivery"),
            e @ (WebhookError::AttemptInProgress | WebhookError::NotActive(_)) => {
                Self::new(ErrorCode::Conflict, e.to_string())
            }
            WebhookError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<WorkflowError> for ApiError {
    fn from(e: WorkflowError) -> Self {
        match e {
            WorkflowError::Forbidden(f) => f.into(),
            WorkflowError::Invalid(v) => v.into(),
            WorkflowError::NotFound => Self::not_found("no such workflow"),
            WorkflowError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<ExecutionError> for ApiError {
    fn from(e: ExecutionError) -> Self {
        match e {
            ExecutionError::Forbidden(f) => f.into(),
            ExecutionError::WorkflowNotFound => Self::not_found("no such workflow"),
            ExecutionError::NotFound => Self::not_found("no such execution"),
            ExecutionError::Invalid(errors) => errors.into(),
            e @ (ExecutionError::Inactive
            | ExecutionError::Finished(_)
            | ExecutionError::NotFailed(_)
            | ExecutionError::Nesting(_)
            | ExecutionError::NotEntitled(_)) => Self::new(ErrorCode::Conflict, e.to_string()),
            ExecutionError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<TriggerError> for ApiError {
    fn from(e: TriggerError) -> Self {
        match e {
            TriggerError::Forbidden(f) => f.into(),
            TriggerError::Invalid(v) => v.into(),
            TriggerError::WorkflowNotFound => Self::not_found("no such workflow"),
            TriggerError::NotFound => Self::not_found("no such trigger of this workflow"),
            TriggerError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<ScheduleError> for ApiError {
    fn from(e: ScheduleError) -> Self {
        match e {
            ScheduleError::Forbidden(f) => f.into(),
            ScheduleError::Invalid(v) => v.into(),
            ScheduleError::WorkflowNotFound => Self::not_found("no such workflow"),
            ScheduleError::NotFound => Self::not_found("no such schedule of this workflow"),
            ScheduleError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<agentry_domain::mcp::McpError> for ApiError {
    fn from(e: agentry_domain::mcp::McpError) -> Self {
        use agentry_domain::mcp::McpError;
        match e {
            McpError::Forbidden(f) => f.into(),
            McpError::Invalid(v) => v.into(),
            McpError::NotFound => Self::not_found("no such MCP server"),
            McpError::NameTaken(_) => Self::new(ErrorCode::Conflict, e.to_string()),
            McpError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<IntegrationError> for ApiError {
    fn from(e: IntegrationError) -> Self {
        match e {
            IntegrationError::Forbidden(f) => f.into(),
            IntegrationError::Invalid(v) => v.into(),
            IntegrationError::NotFound => Self::not_found("no such integration"),
            IntegrationError::Unexpected(e) => Self::internal(e),
        }
    }
}

/// Trigger calls and integration deliveries. A refused proof says which header was wrong, not
/// the secret's value; a 429 is rendered by the handler, which also records the rate status.
impl From<InboundError> for ApiError {
    fn from(e: InboundError) -> Self {
        match e {
            InboundError::NotFound => Self::not_found("no such trigger or integration"),
            InboundError::MethodNotAllowed { allow } => {
                Self::new(ErrorCode::MethodNotAllowed, format!("this trigger accepts only {allow}"))
                    .with_allow(allow)
            }
            InboundError::Unauthorized(reason) => {
                tracing::debug!(%reason, "inbound proof refused");
                Self::unauthorized(format!("the secret or signature was refused: {reason}"))
                    .without_bearer_challenge()
            }
            InboundError::Invalid(v) => v.into(),
            e @ InboundError::UnsupportedBody => Self::new(ErrorCode::UnsupportedMediaType, e.to_string()),
            e @ (InboundError::Inactive | InboundError::Paused(_)) => {
                Self::new(ErrorCode::Conflict, e.to_string())
            }
            InboundError::RateLimited(status) => {
                let retry_after = status.retry_after.unwrap_or(1);
                Self::new(
                    ErrorCode::RateLimitExceeded,
                    format!("rate limit exceeded; retry in {retry_after} s"),
                )
                .with_retry_after(retry_after)
            }
            InboundError::Unexpected(e) => Self::internal(e),
        }
    }
}

impl From<BillingError> for ApiError {
    fn from(e: BillingError) -> Self {
        match e {
            BillingError::Forbidden(f) => f.into(),
            BillingError::Invalid(v) => v.into(),
            BillingError::PaymentsDisabled => {
                Self::new(ErrorCode::Unavailable, "purchases are not enabled on this service")
            }
            e @ BillingError::Declined(_) => Self::new(ErrorCode::PaymentDeclined, e.to_string()),
            BillingError::Unexpected(e) => Self::internal(e),
        }
    }
}

/// The embedding model failed: its provider's failure is a 502, logged.
fn embedding_failed(e: EmbedError) -> ApiError {
    tracing::warn!(error = %e, "embedding failed");
    match e {
        EmbedError::Timeout => {
            ApiError::new(ErrorCode::UpstreamError, "the embedding provider did not answer in time")
        }
        EmbedError::Upstream(_) => ApiError::new(ErrorCode::UpstreamError, "the embedding provider failed"),
        EmbedError::Model(m) => ApiError::internal(anyhow::anyhow!("embedding model: {m}")),
    }
}

impl From<KnowledgeError> for ApiError {
    fn from(e: KnowledgeError) -> Self {
        match e {
            KnowledgeError::Forbidden(f) => f.into(),
            KnowledgeError::Invalid(v) => v.into(),
            KnowledgeError::BaseNotFound => Self::new(ErrorCode::NotFound, "no such knowledge base"),
            KnowledgeError::FileNotFound => {
                Self::new(ErrorCode::NotFound, "no such file in this knowledge base")
            }
            e @ KnowledgeError::NameTaken(_) => Self::new(ErrorCode::Conflict, e.to_string()),
            e @ KnowledgeError::FileTooLarge { .. } => Self::new(ErrorCode::PayloadTooLarge, e.to_string()),
            e @ KnowledgeError::UnsupportedType { .. } => {
                Self::new(ErrorCode::UnsupportedMediaType, e.to_string())
            }
            KnowledgeError::QuotaExceeded(message) => Self::new(ErrorCode::QuotaExceeded, message),
            KnowledgeError::Embedding(e) => embedding_failed(e),
            KnowledgeError::Unexpected(e) => Self::internal(e),
        }
    }
}

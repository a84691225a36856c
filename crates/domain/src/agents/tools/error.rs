//! Why a tool call gave no output: what every kind of tool fails with, and the model reads.

use std::time::Duration;

/// Why a tool call gave no output. Its text is what the model reads as the call's result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The caller, the agent or the tool's own rules do not allow the call (a host off the
    /// allow-list, a role that no longer allows it, a cycle of workflows).
    #[error("not allowed: {0}")]
    NotAllowed(String),
    /// The model's arguments do not fit the tool.
    #[error("bad arguments: {0}")]
    BadArguments(String),
    /// No answer within the tool's time.
    #[error("timed out after {} s", .0.as_secs())]
    TimedOut(Duration),
    /// What the tool called failed or refused (an HTTP error, a failed workflow, an MCP
    /// server's error).
    #[error("{0}")]
    Failed(String),
    /// The answer is larger than a tool result may be.
    #[error("the result is larger than {limit} bytes")]
    TooLarge {
        /// The most bytes a result may have.
        limit: usize,
    },
    /// No offered tool has this name.
    #[error("there is no tool named {0:?}")]
    Unknown(String),
}

impl ToolError {
    /// A short, bounded name of the kind of failure (metrics, events).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotAllowed(_) => "not_allowed",
            Self::BadArguments(_) => "bad_arguments",
            Self::TimedOut(_) => "timed_out",
            Self::Failed(_) => "failed",
            Self::TooLarge { .. } => "too_large",
            Self::Unknown(_) => "unknown",
        }
    }
}

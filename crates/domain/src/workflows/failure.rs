//! How a step fails: the reason an execution shows and the kind a `retry` policy's `on` names
//! (a leaf: steps and ports both read it).

crate::string_enum! {
    /// What kind of failure a step's was, as a `retry` policy's `on` names them.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum FailureKind {
        /// The step ran out of its time.
        Timeout => "timeout",
        /// The server answered 5xx or 429.
        ServerError => "server_error",
        /// No answer: the name did not resolve, the connection failed or broke.
        Network => "network",
        /// Anything else (a refused address, an invalid template, a missing agent, …).
        Other => "other",
    }
}

/// A step that could not produce its output: the reason the execution shows, what kind of
/// failure it was, and how long the server asked to wait before trying again (`Retry-After`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StepFailure {
    /// Why it failed.
    pub message: String,
    /// What kind of failure it was.
    pub kind: FailureKind,
    /// The wait the answer asked for.
    pub retry_after: Option<std::time::Duration>,
}

impl StepFailure {
    /// A failure of kind [`FailureKind::Other`].
    pub fn new(message: impl Into<String>) -> Self {
        Self::of(FailureKind::Other, message)
    }

    /// A failure of `kind`.
    pub fn of(kind: FailureKind, message: impl Into<String>) -> Self {
        Self { message: message.into(), kind, retry_after: None }
    }

    /// The failure, with the wait its answer asked for.
    #[must_use]
    pub fn with_retry_after(mut self, wait: std::time::Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }
}

//! What went wrong with an outbound call, in a form callers can record and show to tenants.

/// Why an outbound call failed. The message is written for the tenant who configured the target
/// (it names the host, never the full URL, whose query string may hold a secret).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct OutboundError {
    /// The class of failure, for metrics, retry decisions and stored delivery records.
    pub kind: OutboundErrorKind,
    /// A human-readable explanation.
    pub message: String,
}

impl OutboundError {
    pub(crate) fn new(kind: OutboundErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

/// The class of an [`OutboundError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboundErrorKind {
    /// The URL is malformed, not http(s), has no host or carries credentials.
    InvalidUrl,
    /// The target is (or resolves only to) an address the guard refuses: loopback, private, ….
    RefusedAddress,
    /// The host name could not be resolved.
    Dns,
    /// No TCP connection could be made (refused, unreachable, reset while connecting).
    Connect,
    /// The whole exchange did not finish within the configured timeout.
    Timeout,
    /// The TLS handshake failed (bad certificate, protocol mismatch, …).
    Tls,
    /// The response body could not be read to the end (or to the size limit).
    Body,
    /// Anything else (an invalid header, an HTTP protocol error, …).
    Other,
}

impl OutboundErrorKind {
    /// A stable snake_case name, for stored records and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidUrl => "invalid_url",
            Self::RefusedAddress => "refused_address",
            Self::Dns => "dns",
            Self::Connect => "connection",
            Self::Timeout => "timeout",
            Self::Tls => "tls",
            Self::Body => "body",
            Self::Other => "other",
        }
    }
}

impl std::fmt::Display for OutboundErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_stable_names_and_the_error_displays_its_message() {
        let names: Vec<_> = [
            OutboundErrorKind::InvalidUrl,
            OutboundErrorKind::RefusedAddress,
            OutboundErrorKind::Dns,
            OutboundErrorKind::Connect,
            OutboundErrorKind::Timeout,
            OutboundErrorKind::Tls,
            OutboundErrorKind::Body,
            OutboundErrorKind::Other,
        ]
        .into_iter()
        .map(OutboundErrorKind::as_str)
        .collect();
        assert_eq!(
            names,
            ["invalid_url", "refused_address", "dns", "connection", "timeout", "tls", "body", "other"]
        );
        let e = OutboundError::new(OutboundErrorKind::Dns, "could not resolve x");
        assert_eq!(e.to_string(), "could not resolve x");
    }
}

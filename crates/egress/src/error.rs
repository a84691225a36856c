//! What went wrong with an outbound call, in a form callers can record and show to tenants.

/// Why an outbound call failed. The message is written for the tenant who configured the target
/// (it names the host, never the full URL, whose query string may hold a secret).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct EgressError {
    /// The class of failure, for metrics, retry decisions and stored delivery records.
    pub kind: EgressErrorKind,
    /// A human-readable explanation.
    pub message: String,
}

impl EgressError {
    pub(crate) fn new(kind: EgressErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

agentry_domain::string_enum! {
    /// The class of an [`EgressError`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum EgressErrorKind {
        /// The URL is malformed, not http(s), has no host or carries credentials.
        InvalidUrl => "invalid_url",
        /// The target is (or resolves only to) an address the guard refuses: loopback, private, ….
        RefusedAddress => "refused_address",
        /// The host name could not be resolved.
        Dns => "dns",
        /// No TCP connection could be made (refused, unreachable, reset while connecting).
        Connect => "connection",
        /// The whole exchange did not finish within the configured timeout.
        Timeout => "timeout",
        /// The TLS handshake failed (bad certificate, protocol mismatch, …).
        Tls => "tls",
        /// The response body could not be read to the end (or to the size limit).
        Body => "body",
        /// Anything else (an invalid header, an HTTP protocol error, …).
        Other => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_stable_names_and_the_error_displays_its_message() {
        let names: Vec<_> = [
            EgressErrorKind::InvalidUrl,
            EgressErrorKind::RefusedAddress,
            EgressErrorKind::Dns,
            EgressErrorKind::Connect,
            EgressErrorKind::Timeout,
            EgressErrorKind::Tls,
            EgressErrorKind::Body,
            EgressErrorKind::Other,
        ]
        .into_iter()
        .map(EgressErrorKind::as_str)
        .collect();
        assert_eq!(
            names,
            ["invalid_url", "refused_address", "dns", "connection", "timeout", "tls", "body", "other"]
        );
        let e = EgressError::new(EgressErrorKind::Dns, "could not resolve x");
        assert_eq!(e.to_string(), "could not resolve x");
    }
}

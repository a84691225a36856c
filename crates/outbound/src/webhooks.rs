//! The [`WebhookSender`] port of `agentry-domain` over the guarded client.

use agentry_domain::webhooks::{
    AttemptErrorKind, OutboundAnswer, OutboundFailure, OutboundPost, WebhookSender,
};
use async_trait::async_trait;

use crate::{GuardedClient, OutboundError, OutboundErrorKind, OutboundRequest, OutboundSettings};

/// Sends webhook deliveries through [`GuardedClient`].
#[derive(Debug, Clone)]
pub struct WebhookClient {
    client: GuardedClient,
}

impl WebhookClient {
    /// A sender with `settings`.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(settings: OutboundSettings) -> Result<Self, OutboundError> {
        Ok(Self { client: GuardedClient::new(settings)? })
    }
}

/// Whether `host` names this machine (`localhost`, `*.localhost`: RFC 6761 reserves them for
/// loopback), judged without resolving it.
fn is_local_name(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

fn attempt_kind(kind: OutboundErrorKind) -> AttemptErrorKind {
    match kind {
        OutboundErrorKind::InvalidUrl => AttemptErrorKind::InvalidUrl,
        OutboundErrorKind::RefusedAddress => AttemptErrorKind::RefusedAddress,
        OutboundErrorKind::Dns | OutboundErrorKind::Connect | OutboundErrorKind::Tls => {
            AttemptErrorKind::Connection
        }
        OutboundErrorKind::Timeout => AttemptErrorKind::Timeout,
        OutboundErrorKind::Body | OutboundErrorKind::Other => AttemptErrorKind::Other,
    }
}

#[async_trait]
impl WebhookSender for WebhookClient {
    fn check_url(&self, url: &str) -> Result<(), String> {
        let parsed = self.client.check_url(url).map_err(|e| e.message)?;
        if !self.client.settings().allow_private && parsed.host_str().is_some_and(is_local_name) {
            return Err(format!(
                "{} names this machine (loopback); set AGENTRY_WEBHOOK_ALLOW_PRIVATE=true to allow private targets",
                parsed.host_str().unwrap_or_default()
            ));
        }
        Ok(())
    }

    async fn post(&self, post: OutboundPost) -> Result<OutboundAnswer, OutboundFailure> {
        let started = std::time::Instant::now();
        let elapsed_ms =
            |started: std::time::Instant| u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let request = OutboundRequest {
            method: crate::Method::POST,
            url: post.url,
            headers: post.headers,
            body: Some(post.body),
        };
        match self.client.send(request).await {
            Ok(response) => Ok(OutboundAnswer {
                status: response.status,
                body: response.body,
                elapsed_ms: u64::try_from(response.elapsed.as_millis()).unwrap_or(u64::MAX),
            }),
            Err(e) => Err(OutboundFailure {
                kind: attempt_kind(e.kind),
                message: e.message,
                elapsed_ms: elapsed_ms(started),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_names_are_judged_without_resolving() {
        for name in ["localhost", "LOCALHOST", "localhost.", "api.localhost"] {
            assert!(is_local_name(name), "{name}");
        }
        for name in ["localhost.example.com", "example.com", "mylocalhost"] {
            assert!(!is_local_name(name), "{name}");
        }
    }
}

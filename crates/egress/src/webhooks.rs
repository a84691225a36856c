//! The [`WebhookSender`] port of `agentry-domain` over the guarded client.

use agentry_domain::webhooks::{
    AttemptErrorKind, OutboundAnswer, OutboundFailure, OutboundPost, WebhookSender,
};
use async_trait::async_trait;

use crate::{EgressError, EgressErrorKind, EgressRequest, EgressSettings, GuardedClient};

/// Sends webhook deliveries through [`GuardedClient`], optionally only to an allow-list of
/// hosts (an installation that restricts egress; the conformance run, which must not reach
/// beyond this machine).
#[derive(Debug, Clone)]
pub struct WebhookClient {
    pub(crate) client: GuardedClient,
    allowed_hosts: Vec<String>,
}

impl WebhookClient {
    /// A sender with `settings`, to any host (`allowed_hosts` empty) or only to those listed.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(settings: EgressSettings, allowed_hosts: Vec<String>) -> Result<Self, EgressError> {
        let allowed_hosts = allowed_hosts
            .into_iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        Ok(Self { client: GuardedClient::new(settings)?, allowed_hosts })
    }

    /// Sends any request to a URL [`WebhookSender::check_url`] accepts (the allow-list and the
    /// loopback names apply as for webhooks, and every resolved address is checked at connect
    /// time): what workflow `http_request` steps use.
    ///
    /// # Errors
    /// Why the URL was refused or the exchange failed, readably.
    pub async fn request(&self, request: EgressRequest) -> Result<crate::EgressResponse, crate::EgressError> {
        self.check_url(&request.url)
            .map_err(|e| crate::EgressError::new(crate::EgressErrorKind::InvalidUrl, e))?;
        self.client.send(request).await
    }

    /// Refuses a host outside the allow-list, when there is one.
    fn check_allowed(&self, url: &url::Url) -> Result<(), String> {
        let host = url
            .host_str()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if self.allowed_hosts.is_empty() || self.allowed_hosts.contains(&host) {
            Ok(())
        } else {
            Err(format!("{host} is not among the hosts AGENTRY_WEBHOOK_ALLOWED_HOSTS allows"))
        }
    }
}

/// Whether `host` names this machine (`localhost`, `*.localhost`: RFC 6761 reserves them for
/// loopback), judged without resolving it.
fn is_local_name(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

fn attempt_kind(kind: EgressErrorKind) -> AttemptErrorKind {
    match kind {
        EgressErrorKind::InvalidUrl => AttemptErrorKind::InvalidUrl,
        EgressErrorKind::RefusedAddress => AttemptErrorKind::RefusedAddress,
        EgressErrorKind::Dns | EgressErrorKind::Connect | EgressErrorKind::Tls => {
            AttemptErrorKind::Connection
        }
        EgressErrorKind::Timeout => AttemptErrorKind::Timeout,
        EgressErrorKind::Body | EgressErrorKind::Other => AttemptErrorKind::Other,
    }
}

#[async_trait]
impl WebhookSender for WebhookClient {
    fn check_url(&self, url: &str) -> Result<(), String> {
        let parsed = self.client.check_url(url).map_err(|e| e.message)?;
        self.check_allowed(&parsed)?;
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
        let request = EgressRequest {
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
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn an_allow_list_admits_only_its_hosts() {
        let settings = EgressSettings { allow_private: true, ..EgressSettings::default() };
        let open = WebhookClient::new(settings.clone(), Vec::new()).unwrap();
        assert!(open.check_url("http://127.0.0.1:9/").is_ok());
        let listed =
            WebhookClient::new(settings, vec!["127.0.0.1".into(), " Hooks.Example.com ".into()]).unwrap();
        assert!(listed.check_url("http://127.0.0.1:9/hook").is_ok());
        assert!(listed.check_url("https://hooks.example.com/in").is_ok());
        let refused = listed.check_url("https://other.example.com/in").unwrap_err();
        assert!(refused.contains("AGENTRY_WEBHOOK_ALLOWED_HOSTS"), "{refused}");
        assert!(listed.check_url("http://[::1]:9/").is_err());
    }

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

//! The guarded client: settings, requests, responses and the error mapping.

use std::error::Error as StdError;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderName, HeaderValue};
use url::{Host, Url};

use crate::address::forbidden_reason;
use crate::error::{EgressError, EgressErrorKind};
use crate::resolver::{ALLOW_PRIVATE_HINT, GuardedResolver, RefusedAddress, article};

/// How outbound calls behave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressSettings {
    /// Whether loopback, private, link-local, … targets may be contacted. Off in production:
    /// tenants choose the URLs, and must not reach Agentry's own network through them.
    pub allow_private: bool,
    /// Deadline for the whole exchange: resolving, connecting, sending and reading the answer.
    pub timeout: Duration,
    /// How much of a response body is read and kept; the rest is never read.
    pub max_response_bytes: usize,
    /// The `User-Agent` sent with every request, so receivers can tell who is calling.
    pub user_agent: String,
}

impl Default for EgressSettings {
    /// Private targets refused, 15 s, 1 KiB of body (webhook receivers only need to say "ok";
    /// the excerpt is for the delivery log), `Agentry-Webhooks/0.1`.
    fn default() -> Self {
        Self {
            allow_private: false,
            timeout: Duration::from_secs(15),
            max_response_bytes: 1024,
            user_agent: "Agentry-Webhooks/0.1".to_owned(),
        }
    }
}

/// One request to send.
#[derive(Debug, Clone)]
pub struct EgressRequest {
    /// The HTTP method.
    pub method: reqwest::Method,
    /// An absolute `http` or `https` URL.
    pub url: String,
    /// Extra headers, in order (a name may repeat). `User-Agent` comes from the settings.
    pub headers: Vec<(String, String)>,
    /// The request body, if any.
    pub body: Option<Vec<u8>>,
}

/// The answer to an [`EgressRequest`], whatever its status (a `3xx` is not followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressResponse {
    /// The HTTP status code.
    pub status: u16,
    /// The response headers, in order; values that are not UTF-8 are converted lossily.
    pub headers: Vec<(String, String)>,
    /// The start of the body: at most [`EgressSettings::max_response_bytes`] bytes.
    pub body: Vec<u8>,
    /// Whether the body went on past what was kept.
    pub truncated: bool,
    /// From sending the request to having read the (kept part of the) body.
    pub elapsed: Duration,
}

/// The only way tenant-chosen HTTP calls leave the process; see the crate documentation for the
/// rules it enforces. Cheap to clone: clones share one connection pool.
#[derive(Debug, Clone)]
pub struct GuardedClient {
    client: reqwest::Client,
    settings: EgressSettings,
}

/// Idle connections kept per host: deliveries to one receiver come in bursts, and reusing a
/// connection saves a TCP (and TLS) handshake each time.
const POOL_MAX_IDLE_PER_HOST: usize = 8;
/// How long an idle connection is kept; below the common 60–120 s server keep-alive limits
/// rarely matters, but stale sockets to thousands of tenants' hosts should not pile up.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Connecting never takes longer than this, even under a longer whole-request timeout: a host
/// that does not complete a handshake in 10 s is not going to.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl GuardedClient {
    /// A client with `settings`.
    ///
    /// reqwest (built with `rustls-no-provider`) panics when building a client if the process has
    /// no rustls crypto provider; so when none is installed yet, this installs ring's, the one
    /// the rest of Agentry uses.
    ///
    /// # Errors
    /// [`EgressErrorKind::Other`] when the HTTP client cannot be built (e.g. a user agent
    /// that is not a valid header value).
    pub fn new(settings: EgressSettings) -> Result<Self, EgressError> {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Losing a race with another installer is fine: some provider is then installed.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let user_agent = HeaderValue::from_str(&settings.user_agent).map_err(|_| {
            EgressError::new(EgressErrorKind::Other, "the user agent is not a valid header value")
        })?;
        let client = reqwest::Client::builder()
            .dns_resolver(GuardedResolver { allow_private: settings.allow_private })
            // A proxy (e.g. from HTTP_PROXY) would resolve and connect for us, past the guard.
            .no_proxy()
            // Following a redirect would contact a target nobody checked; callers see the 3xx.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout.min(MAX_CONNECT_TIMEOUT))
            .pool_max_idle_per_host(POOL_MAX_IDLE_PER_HOST)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .user_agent(user_agent)
            .build()
            .map_err(|e| {
                EgressError::new(EgressErrorKind::Other, format!("cannot build the HTTP client: {e}"))
            })?;
        Ok(Self { client, settings })
    }

    /// The guarded HTTP client itself (its resolver refuses private addresses, it follows no
    /// redirect and uses no proxy), for a protocol client that makes its own requests.
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.client
    }

    /// The settings this client was built with.
    pub fn settings(&self) -> &EgressSettings {
        &self.settings
    }

    /// Checks a URL's shape without resolving anything: `http` or `https`, a host, no
    /// `user:password@` (credentials belong in headers, and in a URL they end up in logs).
    /// A host written as an IP address is judged by [`forbidden_reason`] unless
    /// `allow_private`: the connector uses such addresses as they are, without asking the
    /// guarded resolver, so this is where they are stopped. Host names are judged when resolved.
    ///
    /// Host spellings are normalised by the WHATWG URL rules first, so `2130706433`,
    /// `0x7f.1` or `127.1` are all `127.0.0.1` here.
    ///
    /// Good for validating a webhook URL when it is saved, too; the verdict on host names may
    /// still change when they are resolved at send time.
    ///
    /// # Errors
    /// [`EgressErrorKind::InvalidUrl`] or [`EgressErrorKind::RefusedAddress`].
    pub fn check_url(&self, url: &str) -> Result<Url, EgressError> {
        let invalid = |message: String| EgressError::new(EgressErrorKind::InvalidUrl, message);
        let parsed = Url::parse(url).map_err(|e| invalid(format!("not a valid URL: {e}")))?;
        let scheme = parsed.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(invalid(format!("the URL scheme must be http or https, not {scheme}")));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(invalid("the URL must not contain credentials (user:password@)".to_owned()));
        }
        let ip = match parsed.host() {
            None => return Err(invalid("the URL has no host".to_owned())),
            Some(Host::Domain("")) => return Err(invalid("the URL has an empty host".to_owned())),
            Some(Host::Domain(_)) => None,
            Some(Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
            Some(Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
        };
        if !self.settings.allow_private
            && let Some(ip) = ip
            && let Some(reason) = forbidden_reason(ip)
        {
            return Err(EgressError::new(
                EgressErrorKind::RefusedAddress,
                format!(
                    "refusing to contact {ip}: it is {} {reason} address; {ALLOW_PRIVATE_HINT}",
                    article(reason)
                ),
            ));
        }
        Ok(parsed)
    }

    /// Sends `request` under the guard and reads at most `max_response_bytes` of the answer.
    /// Any status is a response (redirects are not followed); only failures to get one are errors.
    ///
    /// # Errors
    /// An [`EgressError`] whose kind says what failed.
    pub async fn send(&self, request: EgressRequest) -> Result<EgressResponse, EgressError> {
        // IP-literal hosts bypass the resolver, so this check is what stops them.
        let url = self.check_url(&request.url)?;
        let host = url.host_str().unwrap_or_default().to_owned();
        let mut call = self.client.request(request.method, url);
        for (name, value) in &request.headers {
            let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                EgressError::new(EgressErrorKind::Other, format!("invalid header name {name:?}"))
            })?;
            // The value is not echoed: it may be a signature or a token.
            let header_value = HeaderValue::from_str(value).map_err(|_| {
                EgressError::new(EgressErrorKind::Other, format!("invalid value for header {name}"))
            })?;
            call = call.header(header_name, header_value);
        }
        if let Some(body) = request.body {
            call = call.body(body);
        }

        let started = Instant::now();
        let mut response = call.send().await.map_err(|e| self.classify(&e, &host))?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| {
                (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned())
            })
            .collect();

        // Streamed chunk by chunk, so a huge (or endless) body costs no more than the limit plus
        // one chunk; what is past the limit is never read.
        let limit = self.settings.max_response_bytes;
        let mut body = Vec::with_capacity(limit.min(64 * 1024));
        let mut truncated = false;
        while let Some(chunk) = response.chunk().await.map_err(|e| self.classify(&e, &host))? {
            let room = limit - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(EgressResponse { status, headers, body, truncated, elapsed: started.elapsed() })
    }

    /// Maps a reqwest failure to a kind and a message naming the host (never the URL, which
    /// reqwest's own message includes, query string and all).
    fn classify(&self, err: &reqwest::Error, host: &str) -> EgressError {
        use EgressErrorKind as K;
        if let Some(refused) = find_cause::<RefusedAddress>(err) {
            return EgressError::new(K::RefusedAddress, refused.0.clone());
        }
        if err.is_timeout() {
            let timeout = self.settings.timeout;
            return EgressError::new(K::Timeout, format!("{host} did not answer within {timeout:?}"));
        }
        let (kind, what) = if find_cause::<rustls::Error>(err).is_some() {
            (K::Tls, format!("TLS with {host} failed"))
        } else if err.is_dns() {
            (K::Dns, format!("could not resolve {host}"))
        } else if err.is_connect() {
            (K::Connect, format!("could not connect to {host}"))
        } else if err.is_body() || err.is_decode() {
            (K::Body, format!("could not read the answer from {host}"))
        } else {
            (K::Other, format!("the request to {host} failed"))
        };
        let causes = causes(err);
        if causes.is_empty() {
            EgressError::new(kind, what)
        } else {
            EgressError::new(kind, format!("{what}: {causes}"))
        }
    }
}

/// The first error of type `T` among `err`'s causes, looking inside `io::Error`s too (their
/// `source()` skips the error they wrap, and TLS failures come wrapped in one).
fn find_cause<'a, T: StdError + 'static>(err: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(found) = e.downcast_ref::<T>() {
            return Some(found);
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(found) = inner.downcast_ref::<T>()
        {
            return Some(found);
        }
        current = e.source();
    }
    None
}

/// The causes below reqwest's own error, joined with ": ", repeats left out.
fn causes(err: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = err.source();
    while let Some(e) = current {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        current = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(allow_private: bool) -> GuardedClient {
        GuardedClient::new(EgressSettings { allow_private, ..EgressSettings::default() }).unwrap()
    }

    #[test]
    fn the_defaults_are_the_documented_ones() {
        let s = EgressSettings::default();
        assert!(!s.allow_private);
        assert_eq!(s.timeout, Duration::from_secs(15));
        assert_eq!(s.max_response_bytes, 1024);
        assert_eq!(s.user_agent, "Agentry-Webhooks/0.1");
        assert_eq!(client(false).settings(), &s);
    }

    #[test]
    fn malformed_urls_are_invalid_whatever_allow_private_says() {
        for allow_private in [false, true] {
            let c = client(allow_private);
            for url in [
                "ftp://example.com/file",
                "file:///etc/passwd",
                "gopher://example.com/",
                "http://user:pw@example.com/",
                "https://user@example.com/",
                "http://:pw@example.com/",
                "not a url",
                "/relative/path",
                "http://",
                "http://exa mple.com/",
            ] {
                let err = c.check_url(url).unwrap_err();
                assert_eq!(err.kind, EgressErrorKind::InvalidUrl, "{url}: {err}");
            }
        }
    }

    #[test]
    fn internal_ip_literals_are_refused_unless_private_targets_are_allowed() {
        let guarded = client(false);
        let open = client(true);
        for url in [
            "http://127.0.0.1:1/",
            "http://[::1]:1/",
            "http://[::ffff:127.0.0.1]:1/",
            "http://[::ffff:7f00:1]:1/",
            "http://0.0.0.0/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://127.0.0.1./",
            "http://169.254.169.254/latest/meta-data/",
            "https://10.0.0.1/",
            "http://[fd00::1]/",
            "http://[64:ff9b::7f00:1]/",
        ] {
            let err = guarded.check_url(url).unwrap_err();
            assert_eq!(err.kind, EgressErrorKind::RefusedAddress, "{url}: {err}");
            assert!(err.message.contains("AGENTRY_WEBHOOK_ALLOW_PRIVATE=true"), "{url}: {err}");
            open.check_url(url).unwrap_or_else(|e| panic!("{url} with allow_private: {e}"));
        }
    }

    #[test]
    fn the_url_crate_normalises_numeric_hosts_to_the_address() {
        let c = client(true);
        for url in [
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://127.1/",
        ] {
            assert_eq!(c.check_url(url).unwrap().host(), Some(Host::Ipv4([127, 0, 0, 1].into())), "{url}");
        }
        let err = client(false).check_url("http://2130706433/").unwrap_err();
        assert_eq!(
            err.message,
            "refusing to contact 127.0.0.1: it is a loopback address; \
             set AGENTRY_WEBHOOK_ALLOW_PRIVATE=true to allow private targets"
        );
        let err = client(false).check_url("http://[::ffff:127.0.0.1]/").unwrap_err();
        assert!(err.message.contains("::ffff:127.0.0.1: it is a loopback address"), "{err}");
    }

    #[test]
    fn public_ip_literals_and_host_names_pass_the_shape_check() {
        let c = client(false);
        for url in [
            "https://93.184.216.34/hook",
            "http://[2606:4700:4700::1111]:8080/x?y=1",
            "https://hooks.example.com/abc",
            // Host names are judged when resolved, not here.
            "http://localhost:8080/",
        ] {
            c.check_url(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        }
    }
}

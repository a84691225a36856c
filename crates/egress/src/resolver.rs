//! Host-name resolution that refuses internal addresses.
//!
//! Checking a URL's host before the request and letting the HTTP client resolve it again later
//! leaves a window: the name can answer differently the second time (DNS rebinding). Here the
//! check happens *inside* the client's resolver, on the very addresses the connector will then
//! connect to, so there is no second lookup to subvert.

use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::address::forbidden_reason;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What tells an operator how to lift the address rule; part of every refusal message.
pub(crate) const ALLOW_PRIVATE_HINT: &str = "set AGENTRY_WEBHOOK_ALLOW_PRIVATE=true to allow private targets";

/// Resolves with the system resolver (`getaddrinfo`, via `tokio::net::lookup_host`) and drops
/// forbidden addresses unless `allow_private`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GuardedResolver {
    pub(crate) allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let allow_private = self.allow_private;
        Box::pin(async move {
            // Port 0: the connector puts in the URL's (or the scheme's) port.
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if found.is_empty() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{host} has no addresses"),
                )
                .into());
            }
            let kept = vet(&host, found, allow_private)?;
            Ok::<Addrs, BoxError>(Box::new(kept.into_iter()))
        })
    }
}

/// The addresses of `host` that may be contacted; an error when none may.
///
/// A name with both public and internal addresses keeps only the public ones: connecting is
/// then safe, and refusing outright would break receivers whose DNS happens to list an internal
/// address as well.
pub(crate) fn vet(
    host: &str,
    found: Vec<SocketAddr>,
    allow_private: bool,
) -> Result<Vec<SocketAddr>, RefusedAddress> {
    if allow_private {
        return Ok(found);
    }
    let mut kept = Vec::with_capacity(found.len());
    let mut refused = Vec::new();
    for addr in found {
        match forbidden_reason(addr.ip()) {
            None => kept.push(addr),
            Some(reason) => {
                tracing::debug!(host, address = %addr.ip(), reason, "outbound: dropping a forbidden address");
                if !refused.iter().any(|(ip, _)| *ip == addr.ip()) {
                    refused.push((addr.ip(), reason));
                }
            }
        }
    }
    if kept.is_empty() {
        let why: Vec<String> = refused
            .iter()
            .map(|(ip, reason)| format!("{ip} is {} {reason} address", article(reason)))
            .collect();
        return Err(RefusedAddress(format!(
            "refusing to contact {host}: {}; {ALLOW_PRIVATE_HINT}",
            why.join(", ")
        )));
    }
    Ok(kept)
}

/// "a" or "an" before a reason, so messages read as English.
pub(crate) fn article(reason: &str) -> &'static str {
    let an =
        reason.starts_with(['a', 'e', 'i', 'o']) || (reason.starts_with('u') && !reason.starts_with("uni"));
    if an { "an" } else { "a" }
}

/// The marker the resolver returns when every address of a name is forbidden. The client finds
/// it in reqwest's error chain to report [`crate::EgressErrorKind::RefusedAddress`] rather than
/// a generic DNS failure.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct RefusedAddress(pub(crate) String);

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|s| SocketAddr::new(s.parse().unwrap_or_else(|e| panic!("{s}: {e}")), 0)).collect()
    }

    #[test]
    fn internal_answers_are_dropped_and_public_ones_kept() {
        let kept = vet("mixed.example", addrs(&["10.0.0.5", "93.184.216.34", "::1"]), false).unwrap();
        assert_eq!(kept, addrs(&["93.184.216.34"]));
    }

    #[test]
    fn a_name_with_only_internal_answers_is_refused_naming_host_address_and_reason() {
        let err = vet("rebind.example", addrs(&["127.0.0.1", "::1", "127.0.0.1"]), false).unwrap_err();
        assert_eq!(
            err.0,
            "refusing to contact rebind.example: 127.0.0.1 is a loopback address, ::1 is a loopback \
             address; set AGENTRY_WEBHOOK_ALLOW_PRIVATE=true to allow private targets"
        );
        let err = vet("meta.example", addrs(&["169.254.169.254"]), false).unwrap_err();
        assert!(err.0.contains("169.254.169.254 is a link-local address"), "{}", err.0);
    }

    #[test]
    fn allow_private_keeps_everything() {
        let all = addrs(&["127.0.0.1", "10.1.2.3"]);
        assert_eq!(vet("x", all.clone(), true).unwrap(), all);
    }

    #[test]
    fn articles_read_as_english() {
        assert_eq!(article("unspecified"), "an");
        assert_eq!(article("unique-local"), "a");
        assert_eq!(article("loopback"), "a");
        assert_eq!(article("shared (CGNAT)"), "a");
    }
}

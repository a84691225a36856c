//! Proofs that an inbound webhook comes from who holds the secret: trigger URLs and the six
//! integration receivers. Pure rules over header values, the raw body, the secret and the
//! time; the HMAC comes through the [`Hmac`] port, and every comparison of a MAC or a secret
//! runs in constant time.
//!
//! # Trigger URLs
//!
//! A call to a trigger proves it holds the trigger's secret in one of two ways (either is
//! enough):
//!
//! - `X-Webhook-Secret: <secret>`, the secret itself;
//! - `X-Service-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]`, the same scheme as outbound
//!   webhooks ([`signing`](crate::webhooks::signing)): lowercase hex HMAC-SHA256 keyed with
//!   the secret's UTF-8 bytes over `"<t>.<raw body>"`, `t` within
//!   [`TIMESTAMP_TOLERANCE_SECONDS`] of now in either direction; any `v1` may match.
//!
//! # Integration receivers
//!
//! Each kind checks the scheme of the leading service of its kind; header names match
//! case-insensitively. All MACs are HMAC-SHA256 keyed with the integration's signing secret
//! (its UTF-8 bytes), in hex:
//!
//! | kind              | service    | header                                                          | signed bytes                     | freshness                                      |
//! |-------------------|------------|-----------------------------------------------------------------|----------------------------------|------------------------------------------------|
//! | `chat`            | Slack      | `X-Slack-Signature: v0=<hex>` with `X-Slack-Request-Timestamp`  | `v0:<timestamp>:<raw body>`      | timestamp within 5 minutes                     |
//! | `code-host`       | GitHub     | `X-Hub-Signature-256: sha256=<hex>`                             | raw body                         | none in the scheme                             |
//! | `incident`        | PagerDuty  | `X-PagerDuty-Signature: v1=<hex>[,v1=<hex>…]` (any may match)   | raw body                         | none in the scheme                             |
//! | `issue-tracker`   | Linear     | `Linear-Signature: <hex>`                                       | raw body                         | body's `webhookTimestamp` (ms), when present, within 5 minutes |
//! | `issue-tracker-2` | Jira Cloud | `X-Hub-Signature: sha256=<hex>`                                 | raw body                         | none in the scheme                             |
//! | `wiki`            | Confluence | `X-Hub-Signature: sha256=<hex>`                                 | raw body                         | none in the scheme                             |
//!
//! The wiki scheme is our own choice: Atlassian documents a signed-webhook scheme for Jira
//! Cloud but none we can rely on for Confluence, so the wiki receiver takes Jira's scheme
//! (same vendor family, so the same sending code or automation rule works for both). A sender
//! of another wiki signs the raw body with HMAC-SHA256 under the signing secret and sends
//! `X-Hub-Signature: sha256=<lowercase hex>`.
//!
//! # Redeliveries
//!
//! [`delivery_id`] reads what stays the same when a service sends an event again, so the
//! receiver can drop the copy: GitHub `X-GitHub-Delivery`; Linear `Linear-Delivery`; Jira and
//! the wiki `X-Atlassian-Webhook-Identifier`; PagerDuty the body's `event.id`; Slack the body's
//! `event_id` (Events API), or for form posts (slash commands, interactivity) their
//! `trigger_id`.
//!
//! # Slack URL verification
//!
//! When a Slack app's request URL is set, Slack posts (signed like any event)
//! `{"type":"url_verification","challenge":"…"}` and expects the challenge back:
//! [`url_verification_challenge`], after [`verify_integration`].

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::model::IntegrationKind;
use crate::webhooks::Hmac;

/// How far a signed timestamp may be from now, either way, in seconds: Slack's and Stripe's
/// window, wide enough for clock skew and a slow hop, short enough that a captured request
/// cannot be replayed for long.
pub const TIMESTAMP_TOLERANCE_SECONDS: i64 = 300;

/// The header carrying a trigger's secret as is.
pub const WEBHOOK_SECRET_HEADER: &str = "X-Webhook-Secret";
/// The header carrying a trigger call's signature (the outbound webhooks' scheme).
pub const SERVICE_SIGNATURE_HEADER: &str = "X-Service-Signature";

const SLACK_SIGNATURE: &str = "X-Slack-Signature";
const SLACK_TIMESTAMP: &str = "X-Slack-Request-Timestamp";
const GITHUB_SIGNATURE: &str = "X-Hub-Signature-256";
const PAGERDUTY_SIGNATURE: &str = "X-PagerDuty-Signature";
const LINEAR_SIGNATURE: &str = "Linear-Signature";
const LINEAR_TIMESTAMP_FIELD: &str = "webhookTimestamp";
const HUB_SIGNATURE: &str = "X-Hub-Signature";
const GITHUB_DELIVERY: &str = "X-GitHub-Delivery";
const LINEAR_DELIVERY: &str = "Linear-Delivery";
const ATLASSIAN_DELIVERY: &str = "X-Atlassian-Webhook-Identifier";

/// Why a request's proof was refused. Every variant answers 401; they differ for logs and
/// for the message that helps whoever set the sender up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// A header (or body field) the scheme needs is absent or empty.
    #[error("missing {what}")]
    Missing {
        /// The header or field.
        what: &'static str,
    },
    /// A header (or body field) is there but not in the scheme's form.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// The header or field.
        what: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Well-formed, but no signature (or secret) matches.
    #[error("signature does not match")]
    Mismatch,
    /// The signature matches but its timestamp is outside the window.
    #[error("timestamp is {skew_seconds} s from now, outside the {TIMESTAMP_TOLERANCE_SECONDS} s window")]
    StaleTimestamp {
        /// Now minus the timestamp: positive when it is old, negative when it is ahead.
        skew_seconds: i64,
    },
}

/// Which proof a trigger call presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TriggerProof {
    /// `X-Webhook-Secret`.
    Secret,
    /// `X-Service-Signature`.
    Signature,
}

/// The headers of a request, looked up by name, case-insensitively.
pub trait Headers {
    /// The first value of header `name` (any case). (Not `get`: slices and vectors have their
    /// own.)
    fn header(&self, name: &str) -> Option<&str>;
}

impl<N: AsRef<str>, V: AsRef<str>> Headers for [(N, V)] {
    fn header(&self, name: &str) -> Option<&str> {
        self.iter().find(|(n, _)| n.as_ref().eq_ignore_ascii_case(name)).map(|(_, v)| v.as_ref())
    }
}

impl<N: AsRef<str>, V: AsRef<str>, const K: usize> Headers for [(N, V); K] {
    fn header(&self, name: &str) -> Option<&str> {
        self.as_slice().header(name)
    }
}

impl<N: AsRef<str>, V: AsRef<str>> Headers for Vec<(N, V)> {
    fn header(&self, name: &str) -> Option<&str> {
        self.as_slice().header(name)
    }
}

// So a slice, which cannot itself become a `&dyn Headers`, can through a reference to it.
impl<H: Headers + ?Sized> Headers for &H {
    fn header(&self, name: &str) -> Option<&str> {
        (**self).header(name)
    }
}

/// Checks a trigger call's proof: `X-Webhook-Secret` equal to `secret`, or a valid
/// `X-Service-Signature` over `body` (see the module documentation). Either valid proof is
/// enough, even next to a wrong other one.
///
/// # Errors
/// [`SignatureError::Missing`] when neither header is there; otherwise the signature's error
/// when it was presented, else the secret's ([`SignatureError::Mismatch`]).
pub fn verify_trigger(
    hmac: &dyn Hmac,
    webhook_secret: Option<&str>,
    service_signature: Option<&str>,
    body: &[u8],
    secret: &str,
    now: DateTime<Utc>,
) -> Result<TriggerProof, SignatureError> {
    let signature = present(service_signature).map(|header| {
        verify_service_header(hmac, header, body, secret, now).map(|()| TriggerProof::Signature)
    });
    let presented = present(webhook_secret)
        .map(|given| verify_secret(hmac, given, secret).map(|()| TriggerProof::Secret));
    match (signature, presented) {
        (Some(Ok(proof)), _) | (_, Some(Ok(proof))) => Ok(proof),
        // The signature's error says more (stale, malformed) than a bare secret mismatch.
        (Some(Err(e)), _) | (None, Some(Err(e))) => Err(e),
        (None, None) => Err(SignatureError::Missing { what: "X-Webhook-Secret or X-Service-Signature" }),
    }
}

/// Checks an `X-Service-Signature` header (`t=<unix seconds>,v1=<hex>[,v1=<hex>…]`) over
/// `body`: one `v1` must be the HMAC-SHA256 of `"<t>.<body>"` under `secret`, and `t` within
/// [`TIMESTAMP_TOLERANCE_SECONDS`] of `now`.
///
/// # Errors
/// Missing, malformed (no `t`, two `t`, no decodable `v1`), mismatching, or stale.
pub fn verify_service_signature(
    hmac: &dyn Hmac,
    header: Option<&str>,
    body: &[u8],
    secret: &str,
    now: DateTime<Utc>,
) -> Result<(), SignatureError> {
    let header = present(header).ok_or(SignatureError::Missing { what: SERVICE_SIGNATURE_HEADER })?;
    verify_service_header(hmac, header, body, secret, now)
}

/// Checks an integration delivery of `kind` with the scheme of its service (see the module
/// documentation).
///
/// # Errors
/// The header is missing or malformed, no signature matches, or (chat, issue-tracker) the
/// timestamp is outside the window.
pub fn verify_integration(
    hmac: &dyn Hmac,
    kind: IntegrationKind,
    headers: &dyn Headers,
    body: &[u8],
    secret: &str,
    now: DateTime<Utc>,
) -> Result<(), SignatureError> {
    let header =
        |name: &'static str| present(headers.header(name)).ok_or(SignatureError::Missing { what: name });
    match kind {
        IntegrationKind::Chat => {
            let signature = header(SLACK_SIGNATURE)?;
            let timestamp = header(SLACK_TIMESTAMP)?;
            let seconds = parse_seconds(timestamp, SLACK_TIMESTAMP)?;
            let hex = signature
                .strip_prefix("v0=")
                .ok_or(SignatureError::Malformed { what: SLACK_SIGNATURE, reason: "expected v0=<hex>" })?;
            let message = [b"v0:", timestamp.as_bytes(), b":", body].concat();
            match_any(&mac(hmac, secret, &message), [hex], SLACK_SIGNATURE)?;
            check_fresh(now, seconds.saturating_mul(1000))
        }
        IntegrationKind::CodeHost => {
            verify_prefixed(hmac, header(GITHUB_SIGNATURE)?, GITHUB_SIGNATURE, body, secret)
        }
        IntegrationKind::IssueTracker2 | IntegrationKind::Wiki => {
            verify_prefixed(hmac, header(HUB_SIGNATURE)?, HUB_SIGNATURE, body, secret)
        }
        IntegrationKind::Incident => {
            let signatures: Vec<&str> = header(PAGERDUTY_SIGNATURE)?
                .split(',')
                .filter_map(|s| s.trim().strip_prefix("v1="))
                .collect();
            if signatures.is_empty() {
                return Err(SignatureError::Malformed { what: PAGERDUTY_SIGNATURE, reason: "no v1=<hex>" });
            }
            match_any(&mac(hmac, secret, body), signatures, PAGERDUTY_SIGNATURE)
        }
        IntegrationKind::IssueTracker => {
            match_any(&mac(hmac, secret, body), [header(LINEAR_SIGNATURE)?], LINEAR_SIGNATURE)?;
            // Linear signs the body alone; its replay guard is the send time inside it, trusted
            // only now that the signature covers it.
            match linear_timestamp(body)? {
                Some(millis) => check_fresh(now, millis),
                None => Ok(()),
            }
        }
    }
}

/// What stays the same when the service of `kind` sends a delivery again, to drop the copy:
/// see the module documentation. `None` when the delivery carries none. Read it after
/// [`verify_integration`], so an id is never trusted from an unsigned request.
pub fn delivery_id(kind: IntegrationKind, headers: &dyn Headers, body: &[u8]) -> Option<String> {
    let header = |name: &str| present(headers.header(name)).map(str::to_owned);
    match kind {
        IntegrationKind::CodeHost => header(GITHUB_DELIVERY),
        IntegrationKind::IssueTracker => header(LINEAR_DELIVERY),
        IntegrationKind::IssueTracker2 | IntegrationKind::Wiki => header(ATLASSIAN_DELIVERY),
        IntegrationKind::Incident => json_str(&serde_json::from_slice(body).ok()?, "/event/id"),
        IntegrationKind::Chat => slack_delivery_id(body),
    }
}

/// The challenge of a Slack `url_verification` request, which the receiver answers with
/// (200, the challenge as the body) instead of starting the workflow. `None` for any other
/// body. Slack signs these too: call it after [`verify_integration`].
pub fn url_verification_challenge(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    if value.get("type")?.as_str()? != "url_verification" {
        return None;
    }
    value.get("challenge")?.as_str().map(str::to_owned)
}

/// A header value, unless absent or blank (a blank header proves nothing).
fn present(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.trim().is_empty())
}

/// The HMAC-SHA256 of `message` under the secret's UTF-8 bytes.
fn mac(hmac: &dyn Hmac, secret: &str, message: &[u8]) -> [u8; 32] {
    hmac.sha256(secret.as_bytes(), message)
}

/// Compares the presented secret with the real one without revealing, by timing, how much of
/// it (or of its length) is right: both go through the HMAC first, so the comparison is over
/// two 32-byte values.
fn verify_secret(hmac: &dyn Hmac, given: &str, secret: &str) -> Result<(), SignatureError> {
    // An unset secret must not let an empty or any other value through.
    if secret.is_empty() {
        return Err(SignatureError::Mismatch);
    }
    let expected = mac(hmac, secret, secret.as_bytes());
    if constant_time_eq(&mac(hmac, secret, given.as_bytes()), &expected) {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

fn verify_service_header(
    hmac: &dyn Hmac,
    header: &str,
    body: &[u8],
    secret: &str,
    now: DateTime<Utc>,
) -> Result<(), SignatureError> {
    let what = SERVICE_SIGNATURE_HEADER;
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", _)) if timestamp.is_some() => {
                return Err(SignatureError::Malformed { what, reason: "more than one t=" });
            }
            Some(("t", t)) => timestamp = Some(t),
            Some(("v1", v)) => signatures.push(v),
            // Other schemes are skipped, as Stripe-style receivers do, so a new one can be sent
            // next to v1 without breaking anyone.
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed { what, reason: "no t=<unix seconds>" })?;
    let seconds = parse_seconds(timestamp, what)?;
    if signatures.is_empty() {
        return Err(SignatureError::Malformed { what, reason: "no v1=<hex>" });
    }
    // The raw `t` text is what the sender signed.
    let message = [timestamp.as_bytes(), b".", body].concat();
    match_any(&mac(hmac, secret, &message), signatures, what)?;
    check_fresh(now, seconds.saturating_mul(1000))
}

/// `sha256=<hex>` of the raw body (GitHub's and Atlassian's form).
fn verify_prefixed(
    hmac: &dyn Hmac,
    value: &str,
    what: &'static str,
    body: &[u8],
    secret: &str,
) -> Result<(), SignatureError> {
    let hex = value
        .strip_prefix("sha256=")
        .ok_or(SignatureError::Malformed { what, reason: "expected sha256=<hex>" })?;
    match_any(&mac(hmac, secret, body), [hex], what)
}

/// Ok when one of the hex `candidates` is `expected`. Every candidate is compared, each in
/// constant time, so the time taken does not tell which one (or how much of it) matched.
/// Candidates that are not 64 hex digits never match; when none is, the header is malformed.
fn match_any<'a>(
    expected: &[u8; 32],
    candidates: impl IntoIterator<Item = &'a str>,
    what: &'static str,
) -> Result<(), SignatureError> {
    let mut decoded = false;
    let mut matched = false;
    for candidate in candidates {
        if let Some(given) = decode_hex_32(candidate.trim()) {
            decoded = true;
            matched |= constant_time_eq(expected, &given);
        }
    }
    match (matched, decoded) {
        (true, _) => Ok(()),
        (false, true) => Err(SignatureError::Mismatch),
        (false, false) => Err(SignatureError::Malformed { what, reason: "signature is not 64 hex digits" }),
    }
}

/// Whether two MACs are equal, looking at every byte whatever the first difference.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Keeps the optimiser from turning the fold back into an early-exit comparison.
    std::hint::black_box(diff) == 0
}

/// 64 hex digits (either case) as 32 bytes.
fn decode_hex_32(text: &str) -> Option<[u8; 32]> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let [hi, lo] = pair else { return None };
        *byte = (nibble(*hi)? << 4) | nibble(*lo)?;
    }
    Some(out)
}

fn parse_seconds(text: &str, what: &'static str) -> Result<i64, SignatureError> {
    text.trim()
        .parse()
        .map_err(|_| SignatureError::Malformed { what, reason: "timestamp is not unix seconds" })
}

/// Ok when `at_millis` is within the window around `now`.
fn check_fresh(now: DateTime<Utc>, at_millis: i64) -> Result<(), SignatureError> {
    let skew = now.timestamp_millis().saturating_sub(at_millis);
    if skew.unsigned_abs() <= TIMESTAMP_TOLERANCE_SECONDS.unsigned_abs() * 1000 {
        Ok(())
    } else {
        Err(SignatureError::StaleTimestamp { skew_seconds: skew / 1000 })
    }
}

/// Linear's `webhookTimestamp` (ms since the epoch), when the body is a JSON object carrying
/// it.
fn linear_timestamp(body: &[u8]) -> Result<Option<i64>, SignatureError> {
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(body) else { return Ok(None) };
    match object.get(LINEAR_TIMESTAMP_FIELD) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_i64().map(Some).ok_or(SignatureError::Malformed {
            what: LINEAR_TIMESTAMP_FIELD,
            reason: "not milliseconds since the epoch",
        }),
    }
}

/// A non-empty string at `pointer` in `value`.
fn json_str(value: &Value, pointer: &str) -> Option<String> {
    value.pointer(pointer)?.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
}

/// Slack: `event_id` of an Events API body (JSON); for form posts, `trigger_id`, as a field
/// (slash commands) or inside the `payload` field's JSON (interactivity). Slack puts no id on
/// form posts, and trigger ids are unique per user action, the closest thing to one.
fn slack_delivery_id(body: &[u8]) -> Option<String> {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        return json_str(&value, "/event_id");
    }
    let mut payload = None;
    for (name, value) in url::form_urlencoded::parse(body) {
        match name.as_ref() {
            "trigger_id" if !value.is_empty() => return Some(value.into_owned()),
            "payload" => payload = Some(value),
            _ => {}
        }
    }
    json_str(&serde_json::from_str(&payload?).ok()?, "/trigger_id")
}

#[cfg(test)]
mod tests;

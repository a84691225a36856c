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
mod tests {
    #![allow(clippy::unwrap_used)]

    use chrono::TimeZone as _;

    use super::*;
    use crate::webhooks::signing::sign;

    /// The port as the service implements it (crates/auth's `RingHmac`).
    struct Ring;
    impl Hmac for Ring {
        fn sha256(&self, key: &[u8], message: &[u8]) -> [u8; 32] {
            let tag = ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key), message);
            tag.as_ref().try_into().unwrap()
        }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn sig(secret: &str, message: &[u8]) -> String {
        hex(&Ring.sha256(secret.as_bytes(), message))
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(seconds, 0).unwrap()
    }

    const NOW: i64 = 1_700_000_000;

    // docs.github.com, "Validating webhook deliveries".
    const GITHUB_SECRET: &str = "It's a Secret to Everybody";
    const GITHUB_BODY: &[u8] = b"Hello, World!";
    const GITHUB_SIGNATURE_VALUE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    // Slack's "Verifying requests from Slack" walkthrough. Its body's command is
    // `%2Fwebhook-collect`; the signature does not verify with another command.
    const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const SLACK_TS: &str = "1531420618";
    const SLACK_BODY: &[u8] = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SLACK_SIG: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    fn slack(body: &[u8], ts: &str, now: i64) -> Result<(), SignatureError> {
        let signature = format!("v0={}", sig("s", &[b"v0:", ts.as_bytes(), b":", body].concat()));
        let headers = [(SLACK_SIGNATURE, signature.as_str()), (SLACK_TIMESTAMP, ts)];
        verify_integration(&Ring, IntegrationKind::Chat, &headers, body, "s", at(now))
    }

    #[test]
    fn githubs_documented_vector_verifies() {
        let headers = [("X-Hub-Signature-256", GITHUB_SIGNATURE_VALUE)];
        let check = |body: &[u8]| {
            verify_integration(&Ring, IntegrationKind::CodeHost, &headers, body, GITHUB_SECRET, at(NOW))
        };
        assert_eq!(check(GITHUB_BODY), Ok(()));
        assert_eq!(check(b"Hello, World?"), Err(SignatureError::Mismatch));
    }

    #[test]
    fn slacks_documented_vector_verifies_within_its_window() {
        let headers = [("X-Slack-Signature", SLACK_SIG), ("X-Slack-Request-Timestamp", SLACK_TS)];
        let ts: i64 = SLACK_TS.parse().unwrap();
        let check = |body: &[u8], now| {
            verify_integration(&Ring, IntegrationKind::Chat, &headers, body, SLACK_SECRET, at(now))
        };
        assert_eq!(check(SLACK_BODY, ts + 60), Ok(()));
        let tampered = [SLACK_BODY, b"x"].concat();
        assert_eq!(check(&tampered, ts + 60), Err(SignatureError::Mismatch));
        // The same authentic request, replayed later.
        assert_eq!(check(SLACK_BODY, ts + 3600), Err(SignatureError::StaleTimestamp { skew_seconds: 3600 }));
    }

    #[test]
    fn slack_timestamps_are_accepted_up_to_five_minutes_either_way() {
        let ts = NOW.to_string();
        assert_eq!(slack(b"{}", &ts, NOW + 300), Ok(()));
        assert_eq!(slack(b"{}", &ts, NOW - 300), Ok(()));
        assert_eq!(slack(b"{}", &ts, NOW + 360), Err(SignatureError::StaleTimestamp { skew_seconds: 360 }));
        // From the future beyond the window.
        assert_eq!(slack(b"{}", &ts, NOW - 301), Err(SignatureError::StaleTimestamp { skew_seconds: -301 }));
    }

    #[test]
    fn slack_needs_both_headers_a_numeric_timestamp_and_the_v0_prefix() {
        let v0 = format!("v0={}", "0".repeat(64));
        let missing =
            |h: &[(&str, &str)]| verify_integration(&Ring, IntegrationKind::Chat, &h, b"{}", "s", at(NOW));
        assert_eq!(
            missing(&[(SLACK_TIMESTAMP, "1")]),
            Err(SignatureError::Missing { what: SLACK_SIGNATURE })
        );
        assert_eq!(
            missing(&[(SLACK_SIGNATURE, v0.as_str())]),
            Err(SignatureError::Missing { what: SLACK_TIMESTAMP })
        );
        assert!(matches!(
            missing(&[(SLACK_SIGNATURE, v0.as_str()), (SLACK_TIMESTAMP, "yesterday")]),
            Err(SignatureError::Malformed { what: SLACK_TIMESTAMP, .. })
        ));
        let v1 = format!("v1={}", "0".repeat(64));
        assert!(matches!(
            missing(&[(SLACK_SIGNATURE, v1.as_str()), (SLACK_TIMESTAMP, "1")]),
            Err(SignatureError::Malformed { what: SLACK_SIGNATURE, .. })
        ));
    }

    #[test]
    fn header_names_match_in_any_case() {
        let headers = vec![("x-hub-signature-256".to_owned(), GITHUB_SIGNATURE_VALUE.to_owned())];
        assert_eq!(
            verify_integration(
                &Ring,
                IntegrationKind::CodeHost,
                &headers,
                GITHUB_BODY,
                GITHUB_SECRET,
                at(NOW)
            ),
            Ok(())
        );
        let headers = [("X-SLACK-SIGNATURE", SLACK_SIG), ("x-slack-request-timestamp", SLACK_TS)];
        assert_eq!(
            verify_integration(
                &Ring,
                IntegrationKind::Chat,
                &headers,
                SLACK_BODY,
                SLACK_SECRET,
                at(1_531_420_618)
            ),
            Ok(())
        );
    }

    #[test]
    fn github_wants_the_sha256_prefix_and_64_hex_digits() {
        let check = |value: &str| {
            verify_integration(
                &Ring,
                IntegrationKind::CodeHost,
                &[(GITHUB_SIGNATURE, value)],
                GITHUB_BODY,
                GITHUB_SECRET,
                at(NOW),
            )
        };
        let bare = GITHUB_SIGNATURE_VALUE.strip_prefix("sha256=").unwrap();
        assert!(matches!(check(&format!("sha1={bare}")), Err(SignatureError::Malformed { .. })));
        assert!(matches!(check(bare), Err(SignatureError::Malformed { .. })));
        assert!(matches!(check("sha256=zz"), Err(SignatureError::Malformed { .. })));
        // Uppercase hex is the same MAC.
        assert_eq!(check(&format!("sha256={}", bare.to_uppercase())), Ok(()));
    }

    #[test]
    fn every_kind_reports_its_missing_header() {
        let expected = [
            (IntegrationKind::Chat, SLACK_SIGNATURE),
            (IntegrationKind::CodeHost, GITHUB_SIGNATURE),
            (IntegrationKind::Incident, PAGERDUTY_SIGNATURE),
            (IntegrationKind::IssueTracker, LINEAR_SIGNATURE),
            (IntegrationKind::IssueTracker2, HUB_SIGNATURE),
            (IntegrationKind::Wiki, HUB_SIGNATURE),
        ];
        for (kind, what) in expected {
            // A blank header is no header.
            let headers = [("Content-Type", "application/json"), (what, " ")];
            assert_eq!(
                verify_integration(&Ring, kind, &headers, b"{}", "s", at(NOW)),
                Err(SignatureError::Missing { what }),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn pagerduty_accepts_any_of_several_v1_signatures() {
        let body = br#"{"event":{"id":"01DEN1HNLBC1R4FZ5CX2TQKAY7"}}"#;
        let good = sig("current", body);
        let other = sig("previous", body);
        let check = |value: &str| {
            verify_integration(
                &Ring,
                IntegrationKind::Incident,
                &[(PAGERDUTY_SIGNATURE, value)],
                body,
                "current",
                at(NOW),
            )
        };
        assert_eq!(check(&format!("v1={other},v1={good}")), Ok(()));
        assert_eq!(check(&format!("v1={good}, v1={other}")), Ok(()));
        // Unknown versions and undecodable entries are skipped, not fatal.
        assert_eq!(check(&format!("v2=abc,v1=nothex,v1={good}")), Ok(()));
        assert_eq!(check(&format!("v1={other}")), Err(SignatureError::Mismatch));
        assert!(matches!(check(&format!("v2={good}")), Err(SignatureError::Malformed { .. })));
        assert!(matches!(check(&format!("sha256={good}")), Err(SignatureError::Malformed { .. })));
        let tampered = br#"{"event":{"id":"other"}}"#;
        assert_eq!(
            verify_integration(
                &Ring,
                IntegrationKind::Incident,
                &[(PAGERDUTY_SIGNATURE, format!("v1={good}"))],
                tampered,
                "current",
                at(NOW)
            ),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn linear_checks_the_bare_hex_then_the_body_timestamp() {
        let check = |body: &[u8], signature: &str| {
            verify_integration(
                &Ring,
                IntegrationKind::IssueTracker,
                &[("linear-signature", signature)],
                body,
                "lin",
                at(NOW),
            )
        };
        let fresh = format!(r#"{{"action":"create","webhookTimestamp":{}}}"#, (NOW - 10) * 1000);
        assert_eq!(check(fresh.as_bytes(), &sig("lin", fresh.as_bytes())), Ok(()));
        let old = format!(r#"{{"action":"create","webhookTimestamp":{}}}"#, (NOW - 360) * 1000);
        assert_eq!(
            check(old.as_bytes(), &sig("lin", old.as_bytes())),
            Err(SignatureError::StaleTimestamp { skew_seconds: 360 })
        );
        let ahead = format!(r#"{{"webhookTimestamp":{}}}"#, (NOW + 400) * 1000);
        assert_eq!(
            check(ahead.as_bytes(), &sig("lin", ahead.as_bytes())),
            Err(SignatureError::StaleTimestamp { skew_seconds: -400 })
        );
        // No timestamp in the body: the signature alone decides.
        assert_eq!(check(br#"{"action":"remove"}"#, &sig("lin", br#"{"action":"remove"}"#)), Ok(()));
        let odd = br#"{"webhookTimestamp":"soon"}"#;
        assert!(matches!(
            check(odd, &sig("lin", odd)),
            Err(SignatureError::Malformed { what: "webhookTimestamp", .. })
        ));
        // A stale timestamp never hides a wrong signature.
        assert_eq!(check(old.as_bytes(), &sig("other", old.as_bytes())), Err(SignatureError::Mismatch));
    }

    #[test]
    fn jira_and_the_wiki_use_x_hub_signature_sha256() {
        let body = br#"{"webhookEvent":"jira:issue_created"}"#;
        let value = format!("sha256={}", sig("atl", body));
        for kind in [IntegrationKind::IssueTracker2, IntegrationKind::Wiki] {
            assert_eq!(
                verify_integration(&Ring, kind, &[("X-Hub-Signature", value.as_str())], body, "atl", at(NOW)),
                Ok(())
            );
            assert_eq!(
                verify_integration(
                    &Ring,
                    kind,
                    &[("X-Hub-Signature", value.as_str())],
                    b"{}",
                    "atl",
                    at(NOW)
                ),
                Err(SignatureError::Mismatch)
            );
            // GitHub's header is not theirs.
            assert_eq!(
                verify_integration(
                    &Ring,
                    kind,
                    &[("X-Hub-Signature-256", value.as_str())],
                    body,
                    "atl",
                    at(NOW)
                ),
                Err(SignatureError::Missing { what: HUB_SIGNATURE })
            );
        }
    }

    #[test]
    fn a_trigger_accepts_its_secret_in_x_webhook_secret() {
        let check = |given: Option<&str>| verify_trigger(&Ring, given, None, b"{}", "whsec_abc", at(NOW));
        assert_eq!(check(Some("whsec_abc")), Ok(TriggerProof::Secret));
        assert_eq!(check(Some("whsec_abd")), Err(SignatureError::Mismatch));
        // Prefixes and extensions of the secret are wrong, whatever their length.
        assert_eq!(check(Some("whsec_ab")), Err(SignatureError::Mismatch));
        assert_eq!(check(Some("whsec_abcd")), Err(SignatureError::Mismatch));
        assert!(matches!(check(Some("")), Err(SignatureError::Missing { .. })));
        assert!(matches!(check(None), Err(SignatureError::Missing { .. })));
        // A trigger without a secret lets nothing in.
        assert_eq!(verify_trigger(&Ring, Some("x"), None, b"{}", "", at(NOW)), Err(SignatureError::Mismatch));
    }

    #[test]
    fn a_trigger_accepts_the_outbound_signature_scheme() {
        let body = br#"{"order":42}"#;
        // Signed as outbound deliveries are, here with a rotated-out secret first.
        let header = sign(&Ring, &["whsec_old", "whsec_new"], "evt_1", NOW, body).service_signature;
        let check = |header: &str, body: &[u8], now: i64| {
            verify_trigger(&Ring, None, Some(header), body, "whsec_new", at(now))
        };
        assert_eq!(check(&header, body, NOW + 10), Ok(TriggerProof::Signature));
        assert_eq!(check(&header, br#"{"order":43}"#, NOW), Err(SignatureError::Mismatch));
        assert_eq!(
            check(&header, body, NOW + 360),
            Err(SignatureError::StaleTimestamp { skew_seconds: 360 })
        );
        assert_eq!(
            check(&header, body, NOW - 360),
            Err(SignatureError::StaleTimestamp { skew_seconds: -360 })
        );
        // Hand-built: the layout and the signed "<t>.<body>".
        let v1 = sig("whsec_new", &[NOW.to_string().as_bytes(), b".", body].concat());
        assert_eq!(check(&format!("t={NOW}, v0=ignored, v1={v1}"), body, NOW), Ok(TriggerProof::Signature));
        assert_eq!(
            verify_service_signature(&Ring, Some(&format!("t={NOW},v1={v1}")), body, "whsec_new", at(NOW)),
            Ok(())
        );
        assert!(matches!(
            verify_service_signature(&Ring, None, body, "whsec_new", at(NOW)),
            Err(SignatureError::Missing { .. })
        ));
    }

    #[test]
    fn malformed_service_signatures_are_told_apart() {
        let v1 = "0".repeat(64);
        let check = |header: &str| verify_service_signature(&Ring, Some(header), b"{}", "s", at(NOW));
        for header in [
            format!("v1={v1}"),
            format!("t=,v1={v1}"),
            format!("t=soon,v1={v1}"),
            format!("t={NOW},t={NOW},v1={v1}"),
            format!("t={NOW}"),
            format!("t={NOW},v1=xyz"),
            "garbage".to_owned(),
        ] {
            assert!(matches!(check(&header), Err(SignatureError::Malformed { .. })), "{header}");
        }
        assert_eq!(check(&format!("t={NOW},v1={v1}")), Err(SignatureError::Mismatch));
    }

    #[test]
    fn either_valid_trigger_proof_is_enough() {
        let body = b"{}";
        let good = format!("t={NOW},v1={}", sig("s", &[NOW.to_string().as_bytes(), b".", body].concat()));
        let bad = format!("t={NOW},v1={}", sig("other", body));
        assert_eq!(
            verify_trigger(&Ring, Some("wrong"), Some(&good), body, "s", at(NOW)),
            Ok(TriggerProof::Signature)
        );
        assert_eq!(
            verify_trigger(&Ring, Some("s"), Some(&bad), body, "s", at(NOW)),
            Ok(TriggerProof::Secret)
        );
        // Both wrong: the signature's reason is reported.
        let stale = format!(
            "t={},v1={}",
            NOW - 600,
            sig("s", &[(NOW - 600).to_string().as_bytes(), b".", body].concat())
        );
        assert_eq!(
            verify_trigger(&Ring, Some("wrong"), Some(&stale), body, "s", at(NOW)),
            Err(SignatureError::StaleTimestamp { skew_seconds: 600 })
        );
    }

    #[test]
    fn delivery_ids_come_from_each_services_redelivery_key() {
        let id = |kind, headers: &[(&str, &str)], body: &[u8]| delivery_id(kind, &headers, body);
        assert_eq!(
            id(
                IntegrationKind::CodeHost,
                &[("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")],
                b"{}"
            ),
            Some("72d3162e-cc78-11e3-81ab-4c9367dc0958".to_owned())
        );
        assert_eq!(
            id(IntegrationKind::IssueTracker, &[("Linear-Delivery", "d-1")], b"{}"),
            Some("d-1".to_owned())
        );
        for kind in [IntegrationKind::IssueTracker2, IntegrationKind::Wiki] {
            assert_eq!(id(kind, &[("X-Atlassian-Webhook-Identifier", "a-1")], b"{}"), Some("a-1".to_owned()));
            assert_eq!(id(kind, &[], b"{}"), None);
        }
        assert_eq!(
            id(
                IntegrationKind::Incident,
                &[],
                br#"{"event":{"id":"01DEN1HNLBC1R4FZ5CX2TQKAY7","event_type":"incident.triggered"}}"#
            ),
            Some("01DEN1HNLBC1R4FZ5CX2TQKAY7".to_owned())
        );
        assert_eq!(id(IntegrationKind::Incident, &[], b"not json"), None);
        assert_eq!(id(IntegrationKind::CodeHost, &[("X-GitHub-Delivery", "")], b"{}"), None);
    }

    #[test]
    fn slack_delivery_ids_are_event_ids_or_trigger_ids() {
        let id = |body: &[u8]| delivery_id(IntegrationKind::Chat, &[("Content-Type", "x")], body);
        assert_eq!(
            id(br#"{"type":"event_callback","event_id":"Ev08MFMKH6"}"#),
            Some("Ev08MFMKH6".to_owned())
        );
        assert_eq!(
            id(SLACK_BODY),
            Some("398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c".to_owned())
        );
        // Interactivity: the JSON inside the form's `payload` field, percent-encoded.
        assert_eq!(
            id(b"payload=%7B%22type%22%3A%22block_actions%22%2C%22trigger_id%22%3A%2213345.42%22%7D"),
            Some("13345.42".to_owned())
        );
        assert_eq!(id(br#"{"type":"url_verification","challenge":"c"}"#), None);
        assert_eq!(id(b"command=%2Fwebbot&text="), None);
    }

    #[test]
    fn slack_url_verification_returns_the_challenge() {
        let body = br#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
        // Slack signs the challenge request like any other.
        assert_eq!(slack(body, &NOW.to_string(), NOW), Ok(()));
        assert_eq!(
            url_verification_challenge(body),
            Some("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".to_owned())
        );
        assert_eq!(url_verification_challenge(br#"{"type":"event_callback","challenge":"x"}"#), None);
        assert_eq!(url_verification_challenge(br#"{"type":"url_verification"}"#), None);
        assert_eq!(url_verification_challenge(SLACK_BODY), None);
    }

    #[test]
    fn hex_decoding_and_comparison() {
        let mac = Ring.sha256(b"k", b"m");
        assert_eq!(decode_hex_32(&hex(&mac)), Some(mac));
        assert_eq!(decode_hex_32(&hex(&mac)[..62]), None);
        assert_eq!(decode_hex_32(&format!("{}g", &hex(&mac)[..63])), None);
        assert!(constant_time_eq(&mac, &mac));
        let mut other = mac;
        other[31] ^= 1;
        assert!(!constant_time_eq(&mac, &other));
    }
}

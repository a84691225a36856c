#![allow(clippy::unwrap_used)]

use chrono::TimeZone as _;

use super::*;
use crate::webhooks::signing::sign;

/// The port as the service implements it (crates/crypto's `RingHmac`).
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
    assert_eq!(missing(&[(SLACK_TIMESTAMP, "1")]), Err(SignatureError::Missing { what: SLACK_SIGNATURE }));
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
        verify_integration(&Ring, IntegrationKind::CodeHost, &headers, GITHUB_BODY, GITHUB_SECRET, at(NOW)),
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
            verify_integration(&Ring, kind, &[("X-Hub-Signature", value.as_str())], b"{}", "atl", at(NOW)),
            Err(SignatureError::Mismatch)
        );
        // GitHub's header is not theirs.
        assert_eq!(
            verify_integration(&Ring, kind, &[("X-Hub-Signature-256", value.as_str())], body, "atl", at(NOW)),
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
    assert_eq!(check(&header, body, NOW + 360), Err(SignatureError::StaleTimestamp { skew_seconds: 360 }));
    assert_eq!(check(&header, body, NOW - 360), Err(SignatureError::StaleTimestamp { skew_seconds: -360 }));
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
    assert_eq!(verify_trigger(&Ring, Some("s"), Some(&bad), body, "s", at(NOW)), Ok(TriggerProof::Secret));
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
    assert_eq!(id(br#"{"type":"event_callback","event_id":"Ev08MFMKH6"}"#), Some("Ev08MFMKH6".to_owned()));
    assert_eq!(id(SLACK_BODY), Some("398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c".to_owned()));
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

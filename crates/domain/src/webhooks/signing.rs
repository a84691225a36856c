//! Signatures of deliveries, in two forms a receiver can check with what it already has:
//!
//! - `X-Service-Signature: t=<unix seconds>,v1=<hex>`: lowercase hex HMAC-SHA256 over
//!   `"<t>.<raw body>"`, keyed with the secret's UTF-8 bytes exactly as shown to the user (the
//!   spec's header, Stripe's layout);
//! - Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>`):
//!   HMAC-SHA256 over `"<id>.<t>.<raw body>"`, keyed with the base64-decoded part after
//!   `whsec_` — so the `standardwebhooks` libraries verify it with the secret as given.
//!
//! While a rotated-out secret still signs, each header carries one signature per secret
//! (`v1=` pairs after the timestamp; space-separated `v1,` entries), as both schemes allow:
//! a receiver holding either secret accepts.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::ports::Hmac;
use crate::secrets::Secrets;

/// What generated secrets start with (as in Standard Webhooks).
pub const SECRET_PREFIX: &str = "whsec_";

/// A new signing secret: `whsec_` + base64 of 32 random bytes.
pub fn new_secret(secrets: &dyn Secrets) -> String {
    format!("{SECRET_PREFIX}{}", STANDARD.encode(secrets.random_bytes(32)))
}

/// The key of the Standard Webhooks signature: the base64-decoded part after `whsec_`, or the
/// secret's UTF-8 bytes when it has another form.
pub fn standard_webhooks_key(secret: &str) -> Vec<u8> {
    secret
        .strip_prefix(SECRET_PREFIX)
        .and_then(|rest| STANDARD.decode(rest).ok())
        .unwrap_or_else(|| secret.as_bytes().to_vec())
}

/// The signature headers of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeaders {
    /// `X-Service-Signature`.
    pub service_signature: String,
    /// `webhook-id`: the event id, the same on every attempt.
    pub webhook_id: String,
    /// `webhook-timestamp`: unix seconds.
    pub webhook_timestamp: String,
    /// `webhook-signature`.
    pub webhook_signature: String,
}

impl SignatureHeaders {
    /// As `(name, value)` pairs.
    pub fn into_pairs(self) -> Vec<(String, String)> {
        vec![
            ("X-Service-Signature".into(), self.service_signature),
            ("webhook-id".into(), self.webhook_id),
            ("webhook-timestamp".into(), self.webhook_timestamp),
            ("webhook-signature".into(), self.webhook_signature),
        ]
    }
}

/// Signs `body` of event `event_id` at `timestamp` with each of `secrets` (the current one
/// first).
pub fn sign(
    hmac: &dyn Hmac,
    secrets: &[&str],
    event_id: &str,
    timestamp: i64,
    body: &[u8],
) -> SignatureHeaders {
    let mut service = format!("t={timestamp}");
    let mut standard = Vec::with_capacity(secrets.len());
    let service_message = [timestamp.to_string().as_bytes(), b".", body].concat();
    let standard_message = [event_id.as_bytes(), b".", timestamp.to_string().as_bytes(), b".", body].concat();
    for secret in secrets {
        service.push_str(",v1=");
        service.push_str(&hex(&hmac.sha256(secret.as_bytes(), &service_message)));
        let mac = hmac.sha256(&standard_webhooks_key(secret), &standard_message);
        standard.push(format!("v1,{}", STANDARD.encode(mac)));
    }
    SignatureHeaders {
        service_signature: service,
        webhook_id: event_id.to_owned(),
        webhook_timestamp: timestamp.to_string(),
        webhook_signature: standard.join(" "),
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::MockSecrets;

    /// Records what it was asked to sign; the "MAC" is the key's length and the message's
    /// first byte, enough to see which key and message each signature used.
    struct Echo;
    impl Hmac for Echo {
        fn sha256(&self, key: &[u8], message: &[u8]) -> [u8; 32] {
            let mut out = [0u8; 32];
            out[0] = u8::try_from(key.len()).unwrap_or(u8::MAX);
            out[1] = message[0];
            out
        }
    }

    #[test]
    fn generated_secrets_are_whsec_and_32_bytes_of_base64() {
        let mut secrets = MockSecrets::new();
        secrets.expect_random_bytes().withf(|n| *n == 32).returning(|n| vec![7; n]);
        let secret = new_secret(&secrets);
        assert!(secret.starts_with("whsec_"));
        assert_eq!(standard_webhooks_key(&secret), vec![7; 32]);
    }

    #[test]
    fn the_standard_key_is_decoded_after_the_prefix_else_the_raw_bytes() {
        assert_eq!(standard_webhooks_key("whsec_AAEC"), vec![0, 1, 2]);
        assert_eq!(standard_webhooks_key("my-own-secret-value"), b"my-own-secret-value".to_vec());
        // Not base64 after the prefix: the whole text is the key.
        assert_eq!(standard_webhooks_key("whsec_!!"), b"whsec_!!".to_vec());
    }

    #[test]
    fn each_header_names_timestamp_and_one_signature_per_secret() {
        let h = sign(&Echo, &["whsec_AAEC", "0123456789abcdef"], "evt_1", 1_700_000_000, b"{}");
        assert_eq!(h.webhook_id, "evt_1");
        assert_eq!(h.webhook_timestamp, "1700000000");
        // X-Service-Signature keys with the secret's own bytes (10 and 16 long) over "<t>.<body>".
        let first = format!("0a{:02x}{}", b'1', "00".repeat(30));
        let second = format!("10{:02x}{}", b'1', "00".repeat(30));
        assert_eq!(h.service_signature, format!("t=1700000000,v1={first},v1={second}"));
        // Standard Webhooks keys with the decoded bytes (3) over "<id>.<t>.<body>".
        let parts: Vec<&str> = h.webhook_signature.split(' ').collect();
        assert_eq!(parts.len(), 2);
        let mac = STANDARD.decode(parts[0].strip_prefix("v1,").unwrap()).unwrap();
        assert_eq!((mac[0], mac[1]), (3, b'e'));
        let mac = STANDARD.decode(parts[1].strip_prefix("v1,").unwrap()).unwrap();
        assert_eq!((mac[0], mac[1]), (16, b'e'));
    }
}

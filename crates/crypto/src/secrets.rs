//! Random bearer secrets from the operating system's CSPRNG, and their digests.

use agentry_domain::secrets::{SecretDigest, Secrets};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::digest::{SHA256, digest};
use ring::rand::{SecureRandom, SystemRandom};

const ALPHANUMERIC: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// [`Secrets`] backed by `ring`: `SystemRandom` and SHA-256.
#[derive(Debug)]
pub struct RingSecrets {
    rng: SystemRandom,
}

impl Default for RingSecrets {
    fn default() -> Self {
        Self { rng: SystemRandom::new() }
    }
}

impl RingSecrets {
    /// A source over the operating system's random number generator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fills `buf` with random bytes.
    ///
    /// # Panics
    /// When the operating system cannot provide randomness, which leaves no safe way to go on.
    pub fn fill(&self, buf: &mut [u8]) {
        #[allow(clippy::expect_used)]
        self.rng.fill(buf).expect("the operating system's random number generator failed");
    }
}

impl Secrets for RingSecrets {
    fn random_token(&self) -> String {
        let mut bytes = [0u8; 32];
        self.fill(&mut bytes);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    fn random_bytes(&self, len: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; len];
        self.fill(&mut bytes);
        bytes
    }

    fn random_alphanumeric(&self, len: usize) -> String {
        // Rejection sampling: 62 does not divide 256, so bytes >= 248 are thrown away to keep
        // every character equally likely.
        let mut out = String::with_capacity(len);
        let mut buf = [0u8; 64];
        while out.len() < len {
            self.fill(&mut buf);
            for b in buf {
                if b < 248 && out.len() < len {
                    out.push(ALPHANUMERIC[usize::from(b % 62)] as char);
                }
            }
        }
        out
    }

    fn digest(&self, secret: &str) -> SecretDigest {
        let hash = digest(&SHA256, secret.as_bytes());
        SecretDigest::from_string(hex(hash.as_ref()))
    }
}

/// Lowercase hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_256_bit_url_safe_and_distinct() {
        let s = RingSecrets::new();
        let a = s.random_token();
        assert_eq!(a.len(), 43);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_ne!(a, s.random_token());
    }

    #[test]
    fn alphanumeric_has_the_requested_length_and_alphabet() {
        let s = RingSecrets::new();
        let k = s.random_alphanumeric(40);
        assert_eq!(k.len(), 40);
        assert!(k.chars().all(|c| c.is_ascii_alphanumeric()));
    }

    #[test]
    fn digest_is_sha256_hex() {
        let d = RingSecrets::new().digest("abc");
        assert_eq!(d.as_str(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}

/// SHA-256 of uploads, as they stream in (`ring`'s digest context).
#[derive(Debug, Clone, Copy, Default)]
pub struct RingDigests;

struct RingSha256(ring::digest::Context);

impl agentry_domain::knowledge::ContentDigest for RingSha256 {
    fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(self: Box<Self>) -> String {
        self.0.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl agentry_domain::knowledge::DigestFactory for RingDigests {
    fn sha256(&self) -> Box<dyn agentry_domain::knowledge::ContentDigest> {
        Box::new(RingSha256(ring::digest::Context::new(&SHA256)))
    }
}

#[cfg(test)]
mod digest_tests {
    use agentry_domain::knowledge::DigestFactory as _;

    use super::RingDigests;

    #[test]
    fn a_streamed_digest_is_the_sha256_of_the_whole() {
        let mut d = RingDigests.sha256();
        d.update(b"ab");
        d.update(b"c");
        assert_eq!(d.finish(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            RingDigests.sha256().finish(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}

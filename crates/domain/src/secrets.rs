//! Random bearer secrets (refresh tokens, reset tokens, API keys) and their digests.
//!
//! Secrets handed to users are never stored: only a digest is. A digest is a one-way function of
//! a high-entropy secret, so a plain cryptographic hash suffices (no salt, no slow KDF), and it
//! can be looked up by equality.

use std::fmt;

/// The stored, one-way form of a bearer secret (lowercase hex SHA-256 in the shipped adapter).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SecretDigest(String);

impl SecretDigest {
    /// Wraps a digest computed by a [`Secrets`] implementation or read from storage.
    pub fn from_string(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The digest as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A digest is not a secret, but printing it helps nobody and invites copy-paste.
        f.write_str("SecretDigest(..)")
    }
}

/// Source of random secrets and their digests.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Secrets: Send + Sync {
    /// A new secret with at least 256 bits of entropy, URL-safe, without padding.
    fn random_token(&self) -> String;

    /// `len` random bytes (key material, such as a webhook signing secret).
    fn random_bytes(&self, len: usize) -> Vec<u8>;

    /// `len` random characters from `[0-9A-Za-z]`.
    fn random_alphanumeric(&self, len: usize) -> String;

    /// The digest under which `secret` is stored and looked up. Deterministic.
    fn digest(&self, secret: &str) -> SecretDigest;
}

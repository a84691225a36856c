//! Users and the value objects they are made of, API keys and one-time tokens as stored, and
//! why registering a user fails.

use std::fmt;

use chrono::{DateTime, Duration, Utc};
use secrecy::{ExposeSecret, SecretString};

use crate::ids::{ApiKeyId, OneTimeTokenId, TenantId, UserId};
use crate::secrets::SecretDigest;
use crate::tenancy::{Plan, Role, Scope};
use crate::validation::{FieldError, FieldErrorKind, TextKind, check_length, check_text};

/// An e-mail address: trimmed, lower-cased and checked for a plausible form.
///
/// Lower-casing the whole address (not only the domain) makes `Ada@x.io` and `ada@x.io` one
/// account, which is what users expect even though RFC 5321 allows case-sensitive local parts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Email(String);

impl Email {
    /// Normalises and validates an address.
    ///
    /// # Errors
    /// [`FieldErrorKind::InvalidFormat`] for a control character, or unless the address has one `@`, a local part of 1–64
    /// characters, a dotted domain of valid labels, and at most 254 characters in all;
    /// [`FieldErrorKind::TooShort`] when it is empty.
    pub fn parse(raw: &str) -> Result<Self, FieldError> {
        check_text(raw, "email", TextKind::SingleLine)?;
        let value = raw.trim().to_lowercase();
        if value.is_empty() {
            return Err(FieldError::new("email", FieldErrorKind::TooShort, "email must not be empty"));
        }
        let invalid =
            || FieldError::new("email", FieldErrorKind::InvalidFormat, "email is not a valid e-mail address");
        if value.len() > 254 || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid());
        }
        let (local, domain) = value.split_once('@').ok_or_else(invalid)?;
        if local.is_empty()
            || local.len() > 64
            || local.starts_with('.')
            || local.ends_with('.')
            || local.contains("..")
            || local.contains(['"', '(', ')', ',', ':', ';', '<', '>', '[', ']', '\\', '@'])
        {
            return Err(invalid());
        }
        let labels: Vec<&str> = domain.split('.').collect();
        let label_ok = |l: &&str| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_alphanumeric() || c == '-')
        };
        if labels.len() < 2 || !labels.iter().all(label_ok) {
            return Err(invalid());
        }
        Ok(Self(value))
    }

    /// The normalised address.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A new password: 8 to 128 characters, kept secret (its `Debug` prints nothing) and never
/// truncated.
#[derive(Debug, Clone)]
pub struct Password(SecretString);

impl Password {
    /// Shortest accepted password, in characters.
    pub const MIN_CHARS: usize = 8;
    /// Longest accepted password, in characters; bounds the hashing cost of one request.
    pub const MAX_CHARS: usize = 128;

    /// Validates a new password.
    ///
    /// # Errors
    /// [`FieldErrorKind::TooShort`] or [`FieldErrorKind::TooLong`] outside 8–128 characters.
    pub fn new(raw: String) -> Result<Self, FieldError> {
        check_text(&raw, "password", TextKind::SingleLine)?;
        check_length(&raw, Self::MIN_CHARS, Self::MAX_CHARS, "password")?;
        Ok(Self(SecretString::from(raw)))
    }

    /// Validates a new password that arrived as a secret.
    ///
    /// # Errors
    /// As [`Password::new`].
    pub fn from_secret(raw: SecretString) -> Result<Self, FieldError> {
        Self::new(raw.expose_secret().to_owned())
    }

    /// Wraps a password presented at login without checking its length: a login must fail with
    /// the same answer and in the same time whatever was typed.
    pub fn presented(raw: SecretString) -> Self {
        Self(raw)
    }

    /// The password in clear, for the hasher only.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

crate::bounded_text!(
    /// A user's full name: 1–200 characters after trimming.
    FullName,
    "full_name",
    1..=200
);

crate::bounded_text!(
    /// A company name given at registration; it names the user's first tenant.
    Company,
    "company",
    1..=200
);

/// A password hash in PHC string form (`$argon2id$v=19$…`).
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash(String);

impl PasswordHash {
    /// Wraps a PHC string produced by a [`crate::identity::PasswordHasher`] or read from storage.
    pub fn from_phc(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The PHC string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordHash(..)")
    }
}

/// A user account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Its identifier.
    pub id: UserId,
    /// Its normalised, unique e-mail address.
    pub email: Email,
    /// The user's name.
    pub full_name: FullName,
    /// Inactive users cannot sign in.
    pub is_active: bool,
    /// When the account was created.
    pub created_at: DateTime<Utc>,
}

/// A user together with the hash of their password, as login needs it.
#[derive(Debug, Clone)]
pub struct UserCredentials {
    /// The user.
    pub user: User,
    /// The hash their password is checked against.
    pub password_hash: PasswordHash,
}

crate::bounded_text!(
    /// An API key's name: 1–100 characters.
    ApiKeyName,
    "name",
    1..=100
);

/// An API key as stored: everything but the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// Its id.
    pub id: ApiKeyId,
    /// The user who made it.
    pub user_id: UserId,
    /// The tenant it acts in.
    pub tenant_id: TenantId,
    /// Its name.
    pub name: ApiKeyName,
    /// The first 12 characters of the key, to recognise it by.
    pub key_prefix: String,
    /// The digest of the key.
    pub digest: SecretDigest,
    /// What it may do.
    pub scopes: Vec<Scope>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it stops working, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was last used (updated at most once a minute).
    pub last_used_at: Option<DateTime<Utc>>,
}

impl ApiKey {
    /// The literal every key starts with.
    pub const PREFIX: &'static str = "agk_";
    /// Random characters after the prefix.
    pub const RANDOM_CHARS: usize = 40;
    /// Length of the shown prefix.
    pub const SHOWN_PREFIX_CHARS: usize = 12;
    /// How stale `last_used_at` may get before a use writes it again.
    pub const LAST_USED_RESOLUTION: Duration = Duration::seconds(60);

    /// Whether a presented bearer token is an API key (rather than a JWT).
    pub fn looks_like_key(token: &str) -> bool {
        token.starts_with(Self::PREFIX)
    }
}

/// A stored key found by its digest, with what its user is in the key's tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyGrant {
    /// The key.
    pub key: ApiKey,
    /// Its user's current role in the key's tenant.
    pub role: Role,
    /// The tenant's plan.
    pub plan: Plan,
}

crate::string_enum! {
    /// What a one-time token is for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum TokenPurpose {
        /// Choosing a new password.
        PasswordReset => "password_reset",
        /// Signing in without a password.
        MagicLink => "magic_link",
    }
    impl Serde;
}

/// A one-time token as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneTimeToken {
    /// Its id.
    pub id: OneTimeTokenId,
    /// Whose it is.
    pub user_id: UserId,
    /// What it is for.
    pub purpose: TokenPurpose,
    /// The digest of the token.
    pub digest: SecretDigest,
    /// When it was issued.
    pub created_at: DateTime<Utc>,
    /// When it stops being accepted.
    pub expires_at: DateTime<Utc>,
}

/// Why registration failed.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// A user with this e-mail exists.
    #[error("an account with this e-mail address already exists")]
    EmailTaken,
    /// Storage or hashing failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn email_is_trimmed_and_lower_cased() {
        assert_eq!(Email::parse("  Ada.Lovelace@Example.ORG ").unwrap().as_str(), "ada.lovelace@example.org");
    }

    #[test]
    fn plausible_addresses_are_accepted() {
        for ok in ["a@b.co", "first.last+tag@sub.example.com", "x_y-z@xn--bcher-kva.example"] {
            assert!(Email::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn implausible_addresses_are_refused() {
        for bad in [
            "plain",
            "@example.com",
            "a@",
            "a@b",
            "a@@b.com",
            "a b@c.com",
            "a@b..com",
            ".a@b.com",
            "a.@b.com",
            "a..b@c.com",
            "a@-b.com",
            "a@b-.com",
            "a@b.com.",
            "<a>@b.com",
        ] {
            let err = Email::parse(bad).unwrap_err();
            assert_eq!(err.kind, FieldErrorKind::InvalidFormat, "{bad}");
            assert_eq!(err.field, "email");
        }
        assert_eq!(Email::parse("   ").unwrap_err().kind, FieldErrorKind::TooShort);
        let long = format!("{}@example.com", "a".repeat(250));
        assert!(Email::parse(&long).is_err());
    }

    #[test]
    fn password_length_is_bounded_in_characters_without_truncation() {
        assert_eq!(Password::new("1234567".into()).unwrap_err().kind, FieldErrorKind::TooShort);
        assert!(Password::new("12345678".into()).is_ok());
        assert!(Password::new("é".repeat(128)).is_ok());
        assert_eq!(Password::new("x".repeat(129)).unwrap_err().kind, FieldErrorKind::TooLong);
        let p = Password::new("correct horse".into()).unwrap();
        assert_eq!(p.expose(), "correct horse");
        assert!(!format!("{p:?}").contains("horse"));
    }

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(FullName::new(" Ada ").unwrap().as_str(), "Ada");
        assert!(FullName::new("").is_err());
        assert!(FullName::new(&"a".repeat(201)).is_err());
        assert!(Company::new("  ").is_err());
        assert_eq!(Company::new("Acme").unwrap().as_str(), "Acme");
    }
}

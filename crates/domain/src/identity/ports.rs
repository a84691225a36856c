//! The ports the identity services need from the outside world.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::model::{
    ApiKey, ApiKeyGrant, Email, OneTimeToken, Password, PasswordHash, RegisterError, TokenPurpose, User,
    UserCredentials,
};
use super::refresh::RefreshToken;
use crate::billing::LedgerEntry;
use crate::ids::{ApiKeyId, OneTimeTokenId, RefreshTokenId, TenantId, TokenFamilyId, UserId};
use crate::secrets::SecretDigest;
use crate::tenancy::{Membership, Tenant};

/// Everything registration creates, to be stored in one transaction.
#[derive(Debug, Clone)]
pub struct NewAccount {
    /// The new user.
    pub user: User,
    /// The hash of their password.
    pub password_hash: PasswordHash,
    /// Their first tenant.
    pub tenant: Tenant,
    /// Their membership in it (role `owner`).
    pub membership: Membership,
    /// The welcome grant on the tenant's ledger; its `balance_after` is the opening balance.
    pub welcome_grant: LedgerEntry,
}

/// Users, tenants and memberships.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait AccountRepository: Send + Sync {
    /// Stores a new account atomically: either every part of [`NewAccount`] is stored or none.
    ///
    /// # Errors
    /// MUST return [`RegisterError::EmailTaken`] when a user with the same (normalised) e-mail
    /// exists, also when that user was stored concurrently; [`RegisterError::Unexpected`]
    /// otherwise.
    async fn create_account(&self, account: &NewAccount) -> Result<(), RegisterError>;

    /// The user with this e-mail and their password hash, if any.
    async fn find_credentials(&self, email: &Email) -> anyhow::Result<Option<UserCredentials>>;

    /// The user with this id, if any.
    async fn find_user(&self, id: &UserId) -> anyhow::Result<Option<User>>;

    /// The user's memberships, oldest first (the first is the tenant created at registration).
    /// A deactivated user is a member of nothing.
    async fn memberships(&self, user: &UserId) -> anyhow::Result<Vec<Membership>>;

    /// The memberships of an access token's user, as [`Self::memberships`], read only while
    /// its session lives: `None` when the user is deactivated or the session (the refresh-token
    /// family the token was issued with) was revoked by logout, reuse detection or a password
    /// reset. One query: it runs on every request made with an access token.
    async fn session_memberships(
        &self,
        user: &UserId,
        session: &TokenFamilyId,
    ) -> anyhow::Result<Option<Vec<Membership>>>;
}

/// What happened when a refresh token was presented for rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RotateOutcome {
    /// The token was active; it is now rotated and its successor stored.
    Rotated,
    /// The token was no longer active when the rotation was applied (a concurrent request
    /// rotated or revoked it first); nothing was stored.
    NotActive,
}

/// Refresh tokens, stored by digest.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait RefreshTokenRepository: Send + Sync {
    /// Stores a new token (the first of a new family, at login).
    async fn insert(&self, token: &RefreshToken) -> anyhow::Result<()>;

    /// The token stored under `digest`, in any status.
    async fn find_by_digest(&self, digest: &SecretDigest) -> anyhow::Result<Option<RefreshToken>>;

    /// Marks `current` rotated and stores `successor`, atomically, only if `current` is still
    /// active. MUST return [`RotateOutcome::NotActive`] without storing anything when another
    /// request changed `current` first: this is what makes a raced refresh detectable.
    async fn rotate(
        &self,
        current: &RefreshTokenId,
        successor: &RefreshToken,
        now: DateTime<Utc>,
    ) -> anyhow::Result<RotateOutcome>;

    /// Revokes every token of the family that is not revoked yet; returns how many changed.
    async fn revoke_family(&self, family: &TokenFamilyId, now: DateTime<Utc>) -> anyhow::Result<u64>;

    /// Revokes every token of the user that is not revoked yet; returns how many changed.
    async fn revoke_all_for_user(&self, user: &UserId, now: DateTime<Utc>) -> anyhow::Result<u64>;
}

/// Password hashing. Implementations must be slow on purpose (argon2id) and must not block the
/// async executor.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait PasswordHasher: Send + Sync {
    /// A new salted hash of `password`.
    async fn hash(&self, password: &Password) -> anyhow::Result<PasswordHash>;

    /// Whether `password` matches `hash`. With `hash` absent (unknown user) it MUST still spend
    /// the time of a real verification and answer `false`, so that the time of a login does not
    /// reveal whether an account exists.
    async fn verify<'a>(&self, password: &Password, hash: Option<&'a PasswordHash>) -> anyhow::Result<bool>;
}

/// What an access token asserts once verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessClaims {
    /// The user.
    pub user_id: UserId,
    /// The session it belongs to (`sid`): the refresh-token family of the sign-in.
    pub session_id: TokenFamilyId,
    /// The token's own id (`jti`).
    pub token_id: String,
    /// When it stops being valid.
    pub expires_at: DateTime<Utc>,
}

/// A signed access token and its lifetime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedAccessToken {
    /// The encoded token (a JWT in the shipped adapter).
    pub token: String,
    /// Seconds until it expires.
    pub expires_in: i64,
}

/// Why an access token was refused. Callers answer all of them the same way; the distinction
/// is for logs.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AccessTokenError {
    /// Past its expiry.
    #[error("the access token has expired")]
    Expired,
    /// Not a token this service issued: bad signature, wrong algorithm, issuer, audience or
    /// type, or not a token at all.
    #[error("the access token is invalid: {0}")]
    Invalid(String),
}

/// Issues and verifies access tokens.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait AccessTokens: Send + Sync {
    /// A new access token for `user` in `session`, issued at `now`.
    ///
    /// # Errors
    /// Only on an encoding failure, which is a bug or a misconfiguration.
    fn issue(
        &self,
        user: &UserId,
        session: &TokenFamilyId,
        now: DateTime<Utc>,
    ) -> anyhow::Result<IssuedAccessToken>;

    /// The claims of `token` if this service issued it and it is valid at `now`: not expired,
    /// and not issued (`iat`) or valid from (`nbf`) in the future beyond a small leeway.
    ///
    /// # Errors
    /// [`AccessTokenError::Expired`] past its expiry, [`AccessTokenError::Invalid`] for anything
    /// else that is not a valid access token (refresh tokens and tokens without a session
    /// included).
    fn verify(&self, token: &str, now: DateTime<Utc>) -> Result<AccessClaims, AccessTokenError>;
}

/// API keys, stored by digest.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait ApiKeyRepository: Send + Sync {
    /// Stores a new key.
    async fn insert(&self, key: &ApiKey) -> anyhow::Result<()>;

    /// The unrevoked key stored under `digest`, with its user's role in its tenant. MUST return
    /// `None` when the key is revoked or its user is no longer a member of the tenant.
    async fn find_grant(&self, digest: &SecretDigest) -> anyhow::Result<Option<ApiKeyGrant>>;

    /// The user's unrevoked keys in the tenant, newest first.
    async fn list(&self, user: &UserId, tenant: &TenantId) -> anyhow::Result<Vec<ApiKey>>;

    /// Revokes the user's key in the tenant; `false` when the user has no such unrevoked key
    /// there (another user's key, or a key of another tenant, included).
    async fn revoke(
        &self,
        user: &UserId,
        tenant: &TenantId,
        key: &ApiKeyId,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool>;

    /// Records a use at `now`.
    async fn touch(&self, key: &ApiKeyId, now: DateTime<Utc>) -> anyhow::Result<()>;
}

/// One-time tokens, stored by digest.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait OneTimeTokenRepository: Send + Sync {
    /// Stores a new token.
    async fn insert(&self, token: &OneTimeToken) -> anyhow::Result<()>;

    /// Stores `token` only if fewer than `max` tokens for its purpose were issued to its user
    /// since `since`; whether it was stored. Counting and storing are one decision: MUST let
    /// no more than `max` of any number of concurrent calls (from any instance) store.
    async fn insert_within_budget(
        &self,
        token: &OneTimeToken,
        since: DateTime<Utc>,
        max: u64,
    ) -> anyhow::Result<bool>;

    /// The unused, unexpired token for `purpose` stored under `digest`.
    async fn find_usable(
        &self,
        digest: &SecretDigest,
        purpose: TokenPurpose,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<OneTimeToken>>;

    /// Marks the token used and returns its user — only if it was unused and unexpired. MUST
    /// let exactly one of several concurrent calls for the same token succeed.
    async fn consume(
        &self,
        digest: &SecretDigest,
        purpose: TokenPurpose,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<UserId>>;

    /// Deletes a token that was never sent (its e-mail could not be delivered).
    async fn delete(&self, id: &OneTimeTokenId) -> anyhow::Result<()>;

    /// In one transaction: consumes a password-reset token as [`Self::consume`] does, sets the
    /// user's password hash, revokes every refresh token of the user (which ends every access
    /// token of theirs) and spends every other unused reset and magic-link token of theirs.
    /// Nothing changes when the token is not usable.
    async fn reset_password(
        &self,
        digest: &SecretDigest,
        new_hash: &PasswordHash,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<UserId>>;
}

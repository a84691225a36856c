//! Who is calling: the [`AccessService`] resolves every authenticated request, whether it
//! presented a JWT access token or an API key, to one [`Principal`] acting in one tenant with
//! one role and, for keys, scopes. Also the making, listing and revoking of API keys.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::model::{ApiKey, ApiKeyName};
use super::ports::{AccessTokens, AccountRepository, ApiKeyRepository};
use crate::ids::{ApiKeyId, IdGenerator, TenantId};
use crate::secrets::Secrets;
use crate::tenancy::{Credential, Forbidden, Membership, Principal, Scope};
use crate::time::Clock;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator};

/// Why a caller was not let in.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// Missing, malformed, expired, revoked or forged credentials.
    #[error("{0}")]
    Unauthorized(String),
    /// Valid credentials, but not for the requested tenant.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// Chooses the tenant a user's request acts on: the requested one if the user is a member of
/// it, else (nothing requested) the user's first tenant — the one made at registration.
///
/// # Errors
/// [`Forbidden`] when the user is not a member of the requested tenant, or of any tenant.
pub fn resolve_tenant<'m>(
    memberships: &'m [Membership],
    requested: Option<&TenantId>,
) -> Result<&'m Membership, Forbidden> {
    match requested {
        Some(tenant) => memberships
            .iter()
            .find(|m| &m.tenant_id == tenant)
            .ok_or_else(|| Forbidden("you are not a member of this tenant".into())),
        None => memberships.first().ok_or_else(|| Forbidden("you are not a member of any tenant".into())),
    }
}

/// The ports the access service uses.
#[derive(Clone)]
pub struct AccessServiceDeps {
    /// Memberships.
    pub accounts: Arc<dyn AccountRepository>,
    /// API keys.
    pub api_keys: Arc<dyn ApiKeyRepository>,
    /// Access token verification.
    pub access_tokens: Arc<dyn AccessTokens>,
    /// Key generation and digests.
    pub secrets: Arc<dyn Secrets>,
    /// Identifiers.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for AccessServiceDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessServiceDeps { .. }")
    }
}

/// A validated request for a new key.
#[derive(Debug, Clone)]
pub struct NewApiKey {
    /// Its name.
    pub name: ApiKeyName,
    /// Its scopes, without duplicates, in a stable order.
    pub scopes: Vec<Scope>,
    /// When it stops working, if ever.
    pub expires_at: Option<DateTime<Utc>>,
}

impl NewApiKey {
    /// Validates the raw fields of a key request. Whether the expiry is in the future is
    /// checked when the key is made ([`AccessService::create_key`]).
    ///
    /// # Errors
    /// [`ValidationErrors`] for a missing or bad name, or a missing, empty or unknown scope.
    pub fn new(
        name: Option<String>,
        scopes: Option<Vec<String>>,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<Self, ValidationErrors> {
        let mut v = Validator::new();
        let name = v.required("name", name, |n| ApiKeyName::new(&n));
        let scopes = v.required("scopes", scopes, |raw| {
            if raw.is_empty() {
                return Err(FieldError::new(
                    "scopes",
                    FieldErrorKind::TooShort,
                    "a key needs at least one scope",
                ));
            }
            let mut scopes = raw.iter().map(|s| s.parse::<Scope>()).collect::<Result<Vec<_>, _>>()?;
            scopes.sort();
            scopes.dedup();
            Ok(scopes)
        });
        let (name, scopes) = v.finish((name, scopes))?;
        Ok(Self { name, scopes, expires_at })
    }
}

/// A key just made, with the key itself (shown only now).
#[derive(Debug, Clone)]
pub struct CreatedApiKey {
    /// The stored key.
    pub key: ApiKey,
    /// The full key.
    pub secret: secrecy::SecretString,
}

/// Why managing a key failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiKeyError {
    /// The caller may not manage keys (it used a key).
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// No such key of the caller's.
    #[error("no such API key")]
    NotFound,
    /// The request for a new key is invalid.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// Authenticates callers and manages API keys.
#[derive(Clone)]
pub struct AccessService {
    deps: AccessServiceDeps,
}

impl std::fmt::Debug for AccessService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessService { .. }")
    }
}

impl AccessService {
    /// A service over `deps`.
    pub fn new(deps: AccessServiceDeps) -> Self {
        Self { deps }
    }

    /// The principal behind a bearer token (a JWT access token or an API key), acting in the
    /// `requested` tenant or, when none is requested, in the credential's own.
    ///
    /// # Errors
    /// [`AccessError::Unauthorized`] for a missing, invalid, expired or revoked credential;
    /// [`AccessError::Forbidden`] for a tenant the caller is not a member of.
    pub async fn authenticate(
        &self,
        bearer: &str,
        requested: Option<&TenantId>,
    ) -> Result<Principal, AccessError> {
        if ApiKey::looks_like_key(bearer) {
            return self.authenticate_key(bearer, requested).await;
        }
        let claims = self
            .deps
            .access_tokens
            .verify(bearer, self.deps.clock.now())
            .map_err(|e| AccessError::Unauthorized(format!("the access token is not valid: {e}")))?;
        let memberships =
            self.deps.accounts.session_memberships(&claims.user_id, &claims.session_id).await?.ok_or_else(
                || AccessError::Unauthorized("the session has ended or the user is deactivated".into()),
            )?;
        let membership = resolve_tenant(&memberships, requested)?;
        Ok(Principal {
            user_id: claims.user_id,
            tenant_id: membership.tenant_id.clone(),
            plan: membership.tenant_plan,
            role: membership.role,
            credential: Credential::AccessToken,
            chain: Default::default(),
        })
    }

    async fn authenticate_key(
        &self,
        presented: &str,
        requested: Option<&TenantId>,
    ) -> Result<Principal, AccessError> {
        let d = &self.deps;
        let unauthorized =
            || AccessError::Unauthorized("the API key is not valid, or revoked or expired".into());
        let digest = d.secrets.digest(presented);
        let grant = d.api_keys.find_grant(&digest).await?.ok_or_else(unauthorized)?;
        let now = d.clock.now();
        if grant.key.expires_at.is_some_and(|e| e <= now) {
            return Err(unauthorized());
        }
        if requested.is_some_and(|t| t != &grant.key.tenant_id) {
            return Err(Forbidden("this API key belongs to another tenant".into()).into());
        }
        let stale = grant.key.last_used_at.is_none_or(|t| now - t >= ApiKey::LAST_USED_RESOLUTION);
        if stale {
            d.api_keys.touch(&grant.key.id, now).await?;
        }
        Ok(Principal {
            user_id: grant.key.user_id,
            tenant_id: grant.key.tenant_id,
            plan: grant.plan,
            role: grant.role,
            credential: Credential::ApiKey { key_id: grant.key.id, scopes: grant.key.scopes },
            chain: Default::default(),
        })
    }

    /// Makes a key for the caller in the caller's tenant.
    ///
    /// # Errors
    /// [`ApiKeyError::Forbidden`] when the caller used an API key (checked before anything
    /// else); [`ApiKeyError::Invalid`] for an expiry that is not in the future.
    pub async fn create_key(
        &self,
        caller: &Principal,
        request: NewApiKey,
    ) -> Result<CreatedApiKey, ApiKeyError> {
        caller.require_user_session()?;
        let d = &self.deps;
        if request.expires_at.is_some_and(|e| e <= d.clock.now()) {
            return Err(ValidationErrors::one(FieldError::new(
                "expires_at",
                FieldErrorKind::OutOfRange,
                "expires_at must be in the future",
            ))
            .into());
        }
        let secret = format!("{}{}", ApiKey::PREFIX, d.secrets.random_alphanumeric(ApiKey::RANDOM_CHARS));
        let key = ApiKey {
            id: ApiKeyId::generate(d.ids.as_ref()),
            user_id: caller.user_id.clone(),
            tenant_id: caller.tenant_id.clone(),
            name: request.name,
            key_prefix: secret.chars().take(ApiKey::SHOWN_PREFIX_CHARS).collect(),
            digest: d.secrets.digest(&secret),
            scopes: request.scopes,
            created_at: d.clock.now(),
            expires_at: request.expires_at,
            last_used_at: None,
        };
        d.api_keys.insert(&key).await?;
        Ok(CreatedApiKey { key, secret: secrecy::SecretString::from(secret) })
    }

    /// The caller's keys in the caller's tenant.
    ///
    /// # Errors
    /// [`ApiKeyError::Forbidden`] when the caller used an API key.
    pub async fn list_keys(&self, caller: &Principal) -> Result<Vec<ApiKey>, ApiKeyError> {
        caller.require_user_session()?;
        Ok(self.deps.api_keys.list(&caller.user_id, &caller.tenant_id).await?)
    }

    /// Revokes one of the caller's keys.
    ///
    /// # Errors
    /// [`ApiKeyError::NotFound`] when the caller has no such key; [`ApiKeyError::Forbidden`]
    /// when the caller used an API key.
    pub async fn revoke_key(&self, caller: &Principal, key: &ApiKeyId) -> Result<(), ApiKeyError> {
        caller.require_user_session()?;
        let revoked =
            self.deps.api_keys.revoke(&caller.user_id, &caller.tenant_id, key, self.deps.clock.now()).await?;
        if revoked { Ok(()) } else { Err(ApiKeyError::NotFound) }
    }
}

#[cfg(test)]
mod tests;

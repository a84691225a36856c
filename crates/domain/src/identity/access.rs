//! Who is calling: one [`Principal`] for every authenticated request, whether it presented a
//! JWT access token or an API key, resolved to one tenant with one role and, for keys, scopes.
//! Also the API keys themselves.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};

use super::ports::AccessTokens;
use super::ports::AccountRepository;
use crate::ids::{ApiKeyId, IdGenerator, TenantId, UserId};
use crate::secrets::{SecretDigest, Secrets};
use crate::tenancy::{Membership, Permission, Plan, Role, Scope};
use crate::time::Clock;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator};

/// How the caller proved who they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A user's JWT access token: the user's role applies in full.
    AccessToken,
    /// An API key: its scopes, intersected with its user's role.
    ApiKey {
        /// The key.
        key_id: ApiKeyId,
        /// What the key may do.
        scopes: Vec<Scope>,
    },
}

/// The caller of a request, in the tenant the request acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The user (for a key: the user who made it).
    pub user_id: UserId,
    /// The tenant the request acts on.
    pub tenant_id: TenantId,
    /// The tenant's plan.
    pub plan: Plan,
    /// The user's role in that tenant.
    pub role: Role,
    /// The credential presented.
    pub credential: Credential,
}

/// The caller lacks a right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Forbidden(pub String);

impl Principal {
    /// Whether the caller may do what `permission` names: the role must grant it and, for a
    /// key, one of the key's scopes must name it.
    pub fn can(&self, permission: Permission) -> bool {
        let delegated = match &self.credential {
            Credential::AccessToken => true,
            Credential::ApiKey { scopes, .. } => scopes.iter().any(|s| s.permission() == permission),
        };
        self.role.grants(permission) && delegated
    }

    /// [`Principal::can`] as a result.
    ///
    /// # Errors
    /// [`Forbidden`] naming the missing permission.
    pub fn require(&self, permission: Permission) -> Result<(), Forbidden> {
        if self.can(permission) {
            Ok(())
        } else {
            Err(Forbidden(format!("this action needs the {permission} permission")))
        }
    }

    /// Some actions (managing API keys) are reserved to a user's own session.
    ///
    /// # Errors
    /// [`Forbidden`] when the caller used an API key.
    pub fn require_user_session(&self) -> Result<(), Forbidden> {
        match self.credential {
            Credential::AccessToken => Ok(()),
            Credential::ApiKey { .. } => {
                Err(Forbidden("API keys are managed with a user access token, not with an API key".into()))
            }
        }
    }
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
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::identity::ports::{AccessClaims, AccessTokenError, MockAccessTokens, MockAccountRepository};
    use crate::ids::{MockIdGenerator, TokenFamilyId};
    use crate::secrets::MockSecrets;
    use crate::time::MockClock;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
    }

    fn principal(role: Role, credential: Credential) -> Principal {
        Principal {
            user_id: UserId::from_string("usr_1"),
            tenant_id: TenantId::from_string("ten_1"),
            plan: Plan::Starter,
            role,
            credential,
        }
    }

    fn key_with(scopes: &[&str]) -> Credential {
        Credential::ApiKey {
            key_id: ApiKeyId::from_string("key_1"),
            scopes: scopes.iter().map(|s| s.parse().unwrap()).collect(),
        }
    }

    /// Role × credential × permission: a key can never exceed its user's role, and never does
    /// more than its scopes say.
    #[test]
    fn permission_table_is_role_intersected_with_scopes() {
        use Permission::*;
        let cases: &[(Role, Credential, Permission, bool)] = &[
            (Role::Owner, Credential::AccessToken, BillingWrite, true),
            (Role::Admin, Credential::AccessToken, BillingWrite, false),
            (Role::Admin, Credential::AccessToken, WebhooksWrite, true),
            (Role::Member, Credential::AccessToken, AgentsWrite, true),
            (Role::Member, Credential::AccessToken, WebhooksRead, false),
            (Role::Viewer, Credential::AccessToken, AgentsRead, true),
            (Role::Viewer, Credential::AccessToken, AgentsWrite, false),
            (Role::Owner, key_with(&["agents:read"]), AgentsRead, true),
            (Role::Owner, key_with(&["agents:read"]), AgentsWrite, false),
            (Role::Owner, key_with(&["agents:read", "agents:write"]), AgentsWrite, true),
            (Role::Owner, key_with(&["agents:read"]), BillingWrite, false),
            (Role::Viewer, key_with(&["agents:write"]), AgentsWrite, false),
            (Role::Member, key_with(&["workflows:execute"]), WorkflowsExecute, true),
            (Role::Member, key_with(&["webhooks:write"]), WebhooksWrite, false),
        ];
        for (role, credential, permission, expected) in cases {
            let p = principal(*role, credential.clone());
            assert_eq!(p.can(*permission), *expected, "{role} via {credential:?} for {permission}");
            assert_eq!(p.require(*permission).is_ok(), *expected);
        }
    }

    #[test]
    fn only_a_user_session_manages_keys() {
        assert!(principal(Role::Viewer, Credential::AccessToken).require_user_session().is_ok());
        assert!(principal(Role::Owner, key_with(&["agents:read"])).require_user_session().is_err());
    }

    fn membership(tenant: &str, role: Role) -> Membership {
        Membership {
            tenant_id: TenantId::from_string(tenant),
            tenant_name: tenant.into(),
            tenant_plan: Plan::Pro,
            user_id: UserId::from_string("usr_1"),
            role,
            created_at: t0(),
        }
    }

    #[test]
    fn tenant_resolution_defaults_to_the_first_and_refuses_strangers() {
        let ms = [membership("ten_a", Role::Owner), membership("ten_b", Role::Viewer)];
        assert_eq!(resolve_tenant(&ms, None).unwrap().tenant_id.as_str(), "ten_a");
        assert_eq!(resolve_tenant(&ms, Some(&TenantId::from_string("ten_b"))).unwrap().role, Role::Viewer);
        assert!(resolve_tenant(&ms, Some(&TenantId::from_string("ten_x"))).is_err());
        assert!(resolve_tenant(&[], None).is_err());
    }

    #[test]
    fn key_requests_are_validated() {
        let ok = NewApiKey::new(
            Some("ci".into()),
            Some(vec!["agents:write".into(), "agents:read".into(), "agents:read".into()]),
            None,
        )
        .unwrap();
        assert_eq!(ok.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(), ["agents:read", "agents:write"]);
        let err = NewApiKey::new(None, Some(vec![]), Some(t0())).unwrap_err();
        let fields: Vec<_> = err.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["name", "scopes"]);
        assert!(NewApiKey::new(Some("x".into()), Some(vec!["root".into()]), None).is_err());
    }

    struct Deps {
        accounts: MockAccountRepository,
        api_keys: MockApiKeyRepository,
        access_tokens: MockAccessTokens,
        now: DateTime<Utc>,
    }

    impl Deps {
        fn new() -> Self {
            Self {
                accounts: MockAccountRepository::new(),
                api_keys: MockApiKeyRepository::new(),
                access_tokens: MockAccessTokens::new(),
                now: t0(),
            }
        }

        fn service(self) -> AccessService {
            let mut secrets = MockSecrets::new();
            secrets.expect_digest().returning(|s| SecretDigest::from_string(format!("digest({s})")));
            secrets.expect_random_alphanumeric().returning(|n| "a".repeat(n));
            let mut ids = MockIdGenerator::new();
            ids.expect_generate().returning(|p| format!("{p}_new"));
            let mut clock = MockClock::new();
            let now = self.now;
            clock.expect_now().returning(move || now);
            AccessService::new(AccessServiceDeps {
                accounts: Arc::new(self.accounts),
                api_keys: Arc::new(self.api_keys),
                access_tokens: Arc::new(self.access_tokens),
                secrets: Arc::new(secrets),
                ids: Arc::new(ids),
                clock: Arc::new(clock),
            })
        }
    }

    fn stored_key(expires_at: Option<DateTime<Utc>>, last_used_at: Option<DateTime<Utc>>) -> ApiKeyGrant {
        ApiKeyGrant {
            key: ApiKey {
                id: ApiKeyId::from_string("key_1"),
                user_id: UserId::from_string("usr_1"),
                tenant_id: TenantId::from_string("ten_1"),
                name: ApiKeyName::new("ci").unwrap(),
                key_prefix: "agk_aaaaaaaa".into(),
                digest: SecretDigest::from_string("digest(agk_x)"),
                scopes: vec!["agents:read".parse().unwrap()],
                created_at: t0() - Duration::days(1),
                expires_at,
                last_used_at,
            },
            role: Role::Admin,
            plan: Plan::Pro,
        }
    }

    #[tokio::test]
    async fn an_access_token_acts_in_the_first_tenant_or_the_requested_one() {
        let mut d = Deps::new();
        d.access_tokens.expect_verify().returning(|_, _| {
            Ok(AccessClaims {
                user_id: UserId::from_string("usr_1"),
                session_id: TokenFamilyId::from_string("rtf_1"),
                token_id: "j".into(),
                expires_at: t0(),
            })
        });
        d.accounts.expect_session_memberships().withf(|_, session| session.as_str() == "rtf_1").returning(
            |_, _| Ok(Some(vec![membership("ten_a", Role::Owner), membership("ten_b", Role::Viewer)])),
        );
        let s = d.service();
        let p = s.authenticate("jwt", None).await.unwrap();
        assert_eq!(
            (p.tenant_id.as_str(), p.role, p.credential),
            ("ten_a", Role::Owner, Credential::AccessToken)
        );
        let p = s.authenticate("jwt", Some(&TenantId::from_string("ten_b"))).await.unwrap();
        assert_eq!(p.role, Role::Viewer);
        let err = s.authenticate("jwt", Some(&TenantId::from_string("ten_z"))).await.unwrap_err();
        assert!(matches!(err, AccessError::Forbidden(_)));
    }

    #[tokio::test]
    async fn a_bad_access_token_is_unauthorized() {
        let mut d = Deps::new();
        d.access_tokens.expect_verify().returning(|_, _| Err(AccessTokenError::Expired));
        d.accounts.expect_session_memberships().never();
        let err = d.service().authenticate("jwt", None).await.unwrap_err();
        assert!(matches!(err, AccessError::Unauthorized(_)));
    }

    #[tokio::test]
    async fn an_access_token_of_an_ended_session_is_unauthorized() {
        let mut d = Deps::new();
        d.access_tokens.expect_verify().returning(|_, _| {
            Ok(AccessClaims {
                user_id: UserId::from_string("usr_1"),
                session_id: TokenFamilyId::from_string("rtf_gone"),
                token_id: "j".into(),
                expires_at: t0(),
            })
        });
        d.accounts.expect_session_memberships().returning(|_, _| Ok(None));
        let err = d.service().authenticate("jwt", None).await.unwrap_err();
        assert!(matches!(err, AccessError::Unauthorized(_)));
    }

    #[tokio::test]
    async fn a_key_authenticates_in_its_tenant_and_records_its_use() {
        let mut d = Deps::new();
        d.access_tokens.expect_verify().never();
        d.api_keys
            .expect_find_grant()
            .withf(|digest| digest.as_str() == "digest(agk_x)")
            .returning(|_| Ok(Some(stored_key(None, None))));
        d.api_keys
            .expect_touch()
            .withf(|id, now| id.as_str() == "key_1" && *now == t0())
            .times(1)
            .returning(|_, _| Ok(()));
        let p = d.service().authenticate("agk_x", None).await.unwrap();
        assert_eq!(p.tenant_id.as_str(), "ten_1");
        assert_eq!(p.role, Role::Admin);
        assert!(p.can(Permission::AgentsRead));
        assert!(!p.can(Permission::AgentsWrite));
    }

    #[tokio::test]
    async fn a_recently_used_key_is_not_written_again() {
        let mut d = Deps::new();
        d.api_keys
            .expect_find_grant()
            .returning(|_| Ok(Some(stored_key(None, Some(t0() - Duration::seconds(30))))));
        d.api_keys.expect_touch().never();
        d.service().authenticate("agk_x", None).await.unwrap();

        let mut d = Deps::new();
        d.api_keys
            .expect_find_grant()
            .returning(|_| Ok(Some(stored_key(None, Some(t0() - Duration::seconds(61))))));
        d.api_keys.expect_touch().times(1).returning(|_, _| Ok(()));
        d.service().authenticate("agk_x", None).await.unwrap();
    }

    #[tokio::test]
    async fn expired_unknown_and_foreign_tenant_keys_are_refused() {
        let mut d = Deps::new();
        d.api_keys.expect_find_grant().returning(|_| Ok(Some(stored_key(Some(t0()), None))));
        d.api_keys.expect_touch().never();
        assert!(matches!(d.service().authenticate("agk_x", None).await, Err(AccessError::Unauthorized(_))));

        let mut d = Deps::new();
        d.api_keys.expect_find_grant().returning(|_| Ok(None));
        assert!(matches!(d.service().authenticate("agk_x", None).await, Err(AccessError::Unauthorized(_))));

        let mut d = Deps::new();
        d.api_keys.expect_find_grant().returning(|_| Ok(Some(stored_key(None, None))));
        let other = TenantId::from_string("ten_2");
        assert!(matches!(
            d.service().authenticate("agk_x", Some(&other)).await,
            Err(AccessError::Forbidden(_))
        ));
    }

    #[tokio::test]
    async fn a_new_key_is_shown_once_and_stored_as_a_digest() {
        let mut d = Deps::new();
        d.api_keys
            .expect_insert()
            .withf(|k| {
                k.digest.as_str() == format!("digest(agk_{})", "a".repeat(40))
                    && k.key_prefix == "agk_aaaaaaaa"
                    && k.tenant_id.as_str() == "ten_1"
                    && k.id.as_str() == "key_new"
            })
            .times(1)
            .returning(|_| Ok(()));
        let owner = principal(Role::Owner, Credential::AccessToken);
        let request = NewApiKey::new(Some("ci".into()), Some(vec!["agents:read".into()]), None).unwrap();
        let created = d.service().create_key(&owner, request).await.unwrap();
        use secrecy::ExposeSecret as _;
        assert_eq!(created.secret.expose_secret().len(), 44);
    }

    #[tokio::test]
    async fn keys_cannot_manage_keys_and_unknown_keys_are_not_found() {
        let mut d = Deps::new();
        d.api_keys.expect_insert().never();
        d.api_keys.expect_revoke().returning(|_, _, _, _| Ok(false));
        let s = d.service();
        // Forbidden comes first, even for a request that is invalid as well.
        let via_key = principal(Role::Owner, key_with(&["agents:read"]));
        let expired =
            NewApiKey::new(Some("ci".into()), Some(vec!["agents:read".into()]), Some(t0())).unwrap();
        let err = s.create_key(&via_key, expired.clone()).await.unwrap_err();
        assert!(matches!(err, ApiKeyError::Forbidden(_)));
        let owner = principal(Role::Owner, Credential::AccessToken);
        let err = s.create_key(&owner, expired).await.unwrap_err();
        assert!(matches!(err, ApiKeyError::Invalid(_)), "an expiry that is not in the future");
        let err = s
            .revoke_key(&principal(Role::Owner, Credential::AccessToken), &ApiKeyId::from_string("key_x"))
            .await;
        assert!(matches!(err, Err(ApiKeyError::NotFound)));
    }
}

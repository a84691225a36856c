//! The account service: registration, login, the current user, refresh and logout.

use std::sync::Arc;

use chrono::Duration;
use secrecy::SecretString;

use super::model::{Company, Email, FullName, Password, User};
use super::ports::{
    AccessTokens, AccountRepository, IssuedAccessToken, NewAccount, PasswordHasher, RefreshTokenRepository,
    RotateOutcome,
};
use super::refresh::{self, Decision, RefreshToken, RefreshTokenStatus};
use crate::billing::{LedgerEntry, LedgerReason};
use crate::ids::{IdGenerator, LedgerEntryId, RefreshTokenId, TenantId, TokenFamilyId, UserId};
use crate::secrets::Secrets;
use crate::tenancy::{Membership, Plan, Role, Tenant, TenantName};
use crate::time::Clock;
use crate::validation::{ValidationErrors, Validator};

/// Settings of the account service.
#[derive(Debug, Clone)]
pub struct AccountPolicy {
    /// Credits granted to the tenant created at registration.
    pub welcome_credits: i64,
    /// How long a refresh token is accepted.
    pub refresh_token_ttl: Duration,
}

impl Default for AccountPolicy {
    fn default() -> Self {
        Self { welcome_credits: 1000, refresh_token_ttl: Duration::days(30) }
    }
}

/// A validated registration request.
#[derive(Debug, Clone)]
pub struct RegisterCommand {
    /// The new user's address.
    pub email: Email,
    /// Their password.
    pub password: Password,
    /// Their name.
    pub full_name: FullName,
    /// Their company, which names the first tenant.
    pub company: Option<Company>,
}

impl RegisterCommand {
    /// Validates the raw fields of a registration, reporting every bad field at once.
    ///
    /// # Errors
    /// [`ValidationErrors`] naming each missing or invalid field.
    pub fn new(
        email: Option<String>,
        password: Option<SecretString>,
        full_name: Option<String>,
        company: Option<String>,
    ) -> Result<Self, ValidationErrors> {
        let mut v = Validator::new();
        let email = v.required("email", email, |s| Email::parse(&s));
        let password = v.required("password", password, Password::from_secret);
        let full_name = v.required("full_name", full_name, |s| FullName::new(&s));
        // An empty company is the same as none: the tenant is then named after the user.
        let company = company.filter(|c| !c.trim().is_empty());
        let company = v.optional("company", company, |s| Company::new(&s));
        let (email, password, full_name, company) = v.finish((email, password, full_name, company))?;
        Ok(Self { email, password, full_name, company })
    }
}

/// What registration created.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The new user.
    pub user: User,
    /// Their first tenant.
    pub tenant: Tenant,
    /// The tenant's opening credit balance.
    pub credits: i64,
}

/// An access token and the refresh token that renews it.
#[derive(Debug, Clone)]
pub struct TokenPair {
    /// The access token.
    pub access: IssuedAccessToken,
    /// The opaque refresh token, shown to the client only now.
    pub refresh_token: SecretString,
}

/// The signed-in user and their tenants.
#[derive(Debug, Clone)]
pub struct CurrentUser {
    /// The user.
    pub user: User,
    /// Their memberships, oldest first.
    pub memberships: Vec<Membership>,
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

/// Why login failed.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// Unknown e-mail or wrong password; deliberately indistinguishable.
    #[error("invalid e-mail or password")]
    InvalidCredentials,
    /// The password was right but the account is deactivated.
    #[error("this account is deactivated")]
    Inactive,
    /// Storage, hashing or signing failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// Why a refresh failed.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// Unknown, expired, revoked or reused refresh token.
    #[error("the refresh token is invalid or expired")]
    InvalidToken,
    /// Storage or signing failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// Why logout failed.
#[derive(Debug, thiserror::Error)]
pub enum LogoutError {
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// Why reading the current user failed.
#[derive(Debug, thiserror::Error)]
pub enum MeError {
    /// The token's user no longer exists or is deactivated.
    #[error("the account no longer exists or is deactivated")]
    Unauthorized,
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// The ports the account service uses.
#[derive(Clone)]
pub struct AccountServiceDeps {
    /// Users, tenants, memberships.
    pub accounts: Arc<dyn AccountRepository>,
    /// Refresh tokens.
    pub refresh_tokens: Arc<dyn RefreshTokenRepository>,
    /// Password hashing.
    pub hasher: Arc<dyn PasswordHasher>,
    /// Access tokens.
    pub access_tokens: Arc<dyn AccessTokens>,
    /// Random secrets and digests.
    pub secrets: Arc<dyn Secrets>,
    /// Identifiers.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for AccountServiceDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccountServiceDeps { .. }")
    }
}

/// Registers users, signs them in and keeps their sessions.
#[derive(Clone)]
pub struct AccountService {
    deps: AccountServiceDeps,
    policy: AccountPolicy,
}

impl std::fmt::Debug for AccountService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountService").field("policy", &self.policy).finish_non_exhaustive()
    }
}

impl AccountService {
    /// A service over `deps` with `policy`.
    pub fn new(deps: AccountServiceDeps, policy: AccountPolicy) -> Self {
        Self { deps, policy }
    }

    /// Creates a user, their tenant (named after the company, else "<name>'s workspace") with
    /// the user as `owner`, and the tenant's welcome credits — all or nothing.
    ///
    /// # Errors
    /// [`RegisterError::EmailTaken`] when the address is registered already.
    pub async fn register(&self, cmd: RegisterCommand) -> Result<Registration, RegisterError> {
        let d = &self.deps;
        // Checked first only to avoid spending a password hash on a doomed request; the unique
        // constraint behind `create_account` is what decides under concurrency.
        if d.accounts.find_credentials(&cmd.email).await?.is_some() {
            return Err(RegisterError::EmailTaken);
        }
        let password_hash = d.hasher.hash(&cmd.password).await?;
        let now = d.clock.now();
        let user = User {
            id: UserId::generate(d.ids.as_ref()),
            email: cmd.email,
            full_name: cmd.full_name,
            is_active: true,
            created_at: now,
        };
        let tenant_name = match &cmd.company {
            Some(company) => company.as_str().to_owned(),
            None => format!("{}'s workspace", user.full_name.as_str()),
        };
        let tenant = Tenant {
            id: TenantId::generate(d.ids.as_ref()),
            name: TenantName::new(&truncate_chars(&tenant_name, 200))
                .map_err(|e| anyhow::anyhow!("derived tenant name is invalid: {e}"))?,
            plan: Plan::Starter,
            created_at: now,
        };
        let membership = Membership {
            tenant_id: tenant.id.clone(),
            tenant_name: tenant.name.as_str().to_owned(),
            tenant_plan: tenant.plan,
            user_id: user.id.clone(),
            role: Role::Owner,
            created_at: now,
        };
        let welcome_grant = LedgerEntry {
            id: LedgerEntryId::generate(d.ids.as_ref()),
            tenant_id: tenant.id.clone(),
            delta: self.policy.welcome_credits,
            balance_after: self.policy.welcome_credits,
            reason: LedgerReason::WelcomeGrant,
            reference: None,
            created_at: now,
        };
        let account = NewAccount { user, password_hash, tenant, membership, welcome_grant };
        d.accounts.create_account(&account).await?;
        Ok(Registration {
            credits: account.welcome_grant.balance_after,
            user: account.user,
            tenant: account.tenant,
        })
    }

    /// Checks an e-mail and password and starts a new session (a new refresh-token family).
    ///
    /// # Errors
    /// [`LoginError::InvalidCredentials`] for an unknown address or a wrong password — after
    /// the same amount of hashing work in both cases; [`LoginError::Inactive`] for a right
    /// password on a deactivated account.
    pub async fn login(&self, email: &str, password: SecretString) -> Result<TokenPair, LoginError> {
        let d = &self.deps;
        let password = Password::presented(password);
        let credentials = match Email::parse(email) {
            Ok(email) => d.accounts.find_credentials(&email).await?,
            Err(_) => None,
        };
        let hash = credentials.as_ref().map(|c| &c.password_hash);
        let matches = d.hasher.verify(&password, hash).await?;
        let user = match credentials {
            Some(c) if matches => c.user,
            _ => return Err(LoginError::InvalidCredentials),
        };
        if !user.is_active {
            return Err(LoginError::Inactive);
        }
        Ok(self.start_session(&user.id).await?)
    }

    /// Starts a new session for a user whose identity was proven some other way (password,
    /// magic link): a new refresh-token family and an access token.
    ///
    /// # Errors
    /// Only when storage or signing fails.
    pub async fn start_session(&self, user: &UserId) -> anyhow::Result<TokenPair> {
        let d = &self.deps;
        let family = TokenFamilyId::generate(d.ids.as_ref());
        let (token, secret) = self.new_refresh_token(user, family);
        d.refresh_tokens.insert(&token).await?;
        let access = d.access_tokens.issue(user, &token.family_id, token.issued_at)?;
        Ok(TokenPair { access, refresh_token: secret })
    }

    /// Exchanges a refresh token for a new pair, rotating it. A token presented a second time
    /// revokes its whole family.
    ///
    /// # Errors
    /// [`RefreshError::InvalidToken`] for an unknown, expired, revoked or reused token.
    pub async fn refresh(&self, presented: &str) -> Result<TokenPair, RefreshError> {
        let d = &self.deps;
        let digest = d.secrets.digest(presented);
        let Some(current) = d.refresh_tokens.find_by_digest(&digest).await? else {
            return Err(RefreshError::InvalidToken);
        };
        let now = d.clock.now();
        let decision = match refresh::on_presented(&current, now) {
            Decision::Rotate if !self.user_is_active(&current.user_id).await? => Decision::RevokeFamily,
            Decision::Rotate => {
                let (successor, secret) = self.new_refresh_token(&current.user_id, current.family_id.clone());
                match d.refresh_tokens.rotate(&current.id, &successor, now).await? {
                    RotateOutcome::Rotated => {
                        let access = d.access_tokens.issue(&current.user_id, &current.family_id, now)?;
                        return Ok(TokenPair { access, refresh_token: secret });
                    }
                    RotateOutcome::NotActive => refresh::on_lost_rotation_race(),
                }
            }
            other => other,
        };
        if decision == Decision::RevokeFamily {
            let revoked = d.refresh_tokens.revoke_family(&current.family_id, now).await?;
            tracing::warn!(
                user_id = %current.user_id,
                family_id = %current.family_id,
                revoked,
                "refresh token presented again; its family is revoked"
            );
        }
        Err(RefreshError::InvalidToken)
    }

    /// Ends the session the refresh token belongs to by revoking its family. Idempotent: an
    /// unknown token, or one of another user, changes nothing and is not an error, so the
    /// answer reveals nothing about other sessions.
    ///
    /// # Errors
    /// Only when storage fails.
    pub async fn logout(&self, user: &UserId, presented: &str) -> Result<(), LogoutError> {
        let d = &self.deps;
        let digest = d.secrets.digest(presented);
        let token = d.refresh_tokens.find_by_digest(&digest).await?;
        if let Some(token) = token.filter(|t| &t.user_id == user) {
            d.refresh_tokens.revoke_family(&token.family_id, d.clock.now()).await?;
        }
        Ok(())
    }

    /// The user and their tenants.
    ///
    /// # Errors
    /// [`MeError::Unauthorized`] when the user is gone or deactivated.
    pub async fn me(&self, user: &UserId) -> Result<CurrentUser, MeError> {
        let d = &self.deps;
        let user = match d.accounts.find_user(user).await? {
            Some(u) if u.is_active => u,
            _ => return Err(MeError::Unauthorized),
        };
        let memberships = d.accounts.memberships(&user.id).await?;
        Ok(CurrentUser { user, memberships })
    }

    async fn user_is_active(&self, user: &UserId) -> anyhow::Result<bool> {
        Ok(self.deps.accounts.find_user(user).await?.is_some_and(|u| u.is_active))
    }

    fn new_refresh_token(&self, user: &UserId, family_id: TokenFamilyId) -> (RefreshToken, SecretString) {
        let d = &self.deps;
        let secret = d.secrets.random_token();
        let now = d.clock.now();
        let token = RefreshToken {
            id: RefreshTokenId::generate(d.ids.as_ref()),
            family_id,
            user_id: user.clone(),
            digest: d.secrets.digest(&secret),
            status: RefreshTokenStatus::Active,
            issued_at: now,
            expires_at: now + self.policy.refresh_token_ttl,
        };
        (token, SecretString::from(secret))
    }
}

fn truncate_chars(value: &str, max: usize) -> String {
    value.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use chrono::{DateTime, TimeZone, Utc};
    use mockall::predicate::eq;
    use secrecy::ExposeSecret;

    use super::*;
    use crate::identity::model::{PasswordHash, UserCredentials};
    use crate::identity::ports::{
        MockAccessTokens, MockAccountRepository, MockPasswordHasher, MockRefreshTokenRepository,
    };
    use crate::ids::MockIdGenerator;
    use crate::secrets::{MockSecrets, SecretDigest};
    use crate::time::MockClock;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
    }

    /// Mocks with sensible defaults for the ports whose behaviour a test does not care about.
    struct Mocks {
        accounts: MockAccountRepository,
        refresh_tokens: MockRefreshTokenRepository,
        hasher: MockPasswordHasher,
        access_tokens: MockAccessTokens,
        secrets: MockSecrets,
    }

    impl Mocks {
        fn new() -> Self {
            let mut secrets = MockSecrets::new();
            let n = AtomicU64::new(0);
            secrets
                .expect_random_token()
                .returning(move || format!("secret-{}", n.fetch_add(1, Ordering::SeqCst)));
            secrets.expect_digest().returning(|s| SecretDigest::from_string(format!("digest({s})")));
            let mut access_tokens = MockAccessTokens::new();
            access_tokens.expect_issue().returning(|user, session, _| {
                Ok(IssuedAccessToken { token: format!("jwt-for-{user}-in-{session}"), expires_in: 3600 })
            });
            Self {
                accounts: MockAccountRepository::new(),
                refresh_tokens: MockRefreshTokenRepository::new(),
                hasher: MockPasswordHasher::new(),
                access_tokens,
                secrets,
            }
        }

        fn service(self) -> AccountService {
            let mut ids = MockIdGenerator::new();
            let n = AtomicU64::new(0);
            ids.expect_generate().returning(move |p| format!("{p}_{}", n.fetch_add(1, Ordering::SeqCst)));
            let mut clock = MockClock::new();
            clock.expect_now().returning(t0);
            AccountService::new(
                AccountServiceDeps {
                    accounts: Arc::new(self.accounts),
                    refresh_tokens: Arc::new(self.refresh_tokens),
                    hasher: Arc::new(self.hasher),
                    access_tokens: Arc::new(self.access_tokens),
                    secrets: Arc::new(self.secrets),
                    ids: Arc::new(ids),
                    clock: Arc::new(clock),
                },
                AccountPolicy { welcome_credits: 250, refresh_token_ttl: Duration::days(30) },
            )
        }
    }

    fn user(active: bool) -> User {
        User {
            id: UserId::from_string("usr_ada"),
            email: Email::parse("ada@example.com").unwrap(),
            full_name: FullName::new("Ada").unwrap(),
            is_active: active,
            created_at: t0(),
        }
    }

    fn credentials(active: bool) -> UserCredentials {
        UserCredentials { user: user(active), password_hash: PasswordHash::from_phc("$argon2id$ada") }
    }

    fn command(company: Option<&str>) -> RegisterCommand {
        RegisterCommand::new(
            Some("Ada@Example.com".into()),
            Some(SecretString::from("correct horse battery")),
            Some("Ada Lovelace".into()),
            company.map(str::to_owned),
        )
        .unwrap()
    }

    fn stored_token(status: RefreshTokenStatus, expires_in_days: i64) -> RefreshToken {
        RefreshToken {
            id: RefreshTokenId::from_string("rtk_old"),
            family_id: TokenFamilyId::from_string("rtf_fam"),
            user_id: UserId::from_string("usr_ada"),
            digest: SecretDigest::from_string("digest(old)"),
            status,
            issued_at: t0() - Duration::days(1),
            expires_at: t0() + Duration::days(expires_in_days),
        }
    }

    #[test]
    fn register_command_reports_every_bad_field() {
        let err = RegisterCommand::new(None, Some(SecretString::from("short")), Some("  ".into()), None)
            .unwrap_err();
        let fields: Vec<_> = err.0.iter().map(|e| (e.field.as_str(), e.kind.code())).collect();
        assert_eq!(
            fields,
            [("email", "missing_required_field"), ("password", "too_short"), ("full_name", "too_short")]
        );
    }

    #[tokio::test]
    async fn register_creates_user_tenant_owner_membership_and_welcome_grant() {
        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(None));
        m.hasher.expect_hash().returning(|_| Ok(PasswordHash::from_phc("$argon2id$new")));
        m.accounts
            .expect_create_account()
            .withf(|a| {
                a.user.email.as_str() == "ada@example.com"
                    && a.tenant.name.as_str() == "Analytical Engines"
                    && a.tenant.plan == Plan::Starter
                    && a.membership.role == Role::Owner
                    && a.membership.user_id == a.user.id
                    && a.membership.tenant_id == a.tenant.id
                    && a.welcome_grant.delta == 250
                    && a.welcome_grant.balance_after == 250
                    && a.welcome_grant.tenant_id == a.tenant.id
                    && a.password_hash.as_str() == "$argon2id$new"
            })
            .times(1)
            .returning(|_| Ok(()));
        let reg = m.service().register(command(Some("Analytical Engines"))).await.unwrap();
        assert_eq!(reg.credits, 250);
        assert!(reg.user.id.as_str().starts_with("usr_"));
        assert!(reg.tenant.id.as_str().starts_with("ten_"));
    }

    #[tokio::test]
    async fn register_without_company_names_the_tenant_after_the_user() {
        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(None));
        m.hasher.expect_hash().returning(|_| Ok(PasswordHash::from_phc("h")));
        m.accounts.expect_create_account().returning(|_| Ok(()));
        let reg = m.service().register(command(None)).await.unwrap();
        assert_eq!(reg.tenant.name.as_str(), "Ada Lovelace's workspace");
    }

    #[tokio::test]
    async fn register_refuses_a_known_address_before_hashing() {
        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(Some(credentials(true))));
        m.hasher.expect_hash().never();
        m.accounts.expect_create_account().never();
        let err = m.service().register(command(None)).await.unwrap_err();
        assert!(matches!(err, RegisterError::EmailTaken));
    }

    #[tokio::test]
    async fn register_reports_a_concurrent_duplicate_from_storage() {
        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(None));
        m.hasher.expect_hash().returning(|_| Ok(PasswordHash::from_phc("h")));
        m.accounts.expect_create_account().returning(|_| Err(RegisterError::EmailTaken));
        let err = m.service().register(command(None)).await.unwrap_err();
        assert!(matches!(err, RegisterError::EmailTaken));
    }

    #[tokio::test]
    async fn login_with_the_right_password_starts_a_session() {
        let mut m = Mocks::new();
        m.accounts
            .expect_find_credentials()
            .withf(|e| e.as_str() == "ada@example.com")
            .returning(|_| Ok(Some(credentials(true))));
        m.hasher
            .expect_verify()
            .withf(|p, h| p.expose() == "pw" && h.map(PasswordHash::as_str) == Some("$argon2id$ada"))
            .returning(|_, _| Ok(true));
        m.refresh_tokens
            .expect_insert()
            .withf(|t| {
                t.status == RefreshTokenStatus::Active
                    && t.digest.as_str() == "digest(secret-0)"
                    && t.expires_at == t0() + Duration::days(30)
                    && t.user_id.as_str() == "usr_ada"
            })
            .times(1)
            .returning(|_| Ok(()));
        let pair = m.service().login(" ADA@example.com", SecretString::from("pw")).await.unwrap();
        assert_eq!(pair.access.token, "jwt-for-usr_ada-in-rtf_0", "the access token names its session");
        assert_eq!(pair.refresh_token.expose_secret(), "secret-0");
    }

    #[tokio::test]
    async fn unknown_address_and_wrong_password_fail_alike_after_a_verification() {
        // Unknown address: the hasher still runs, against no hash.
        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(None));
        m.hasher.expect_verify().withf(|_, h| h.is_none()).times(1).returning(|_, _| Ok(false));
        let unknown = m.service().login("who@example.com", SecretString::from("pw")).await.unwrap_err();

        // Malformed address: same path, no lookup at all.
        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().never();
        m.hasher.expect_verify().withf(|_, h| h.is_none()).times(1).returning(|_, _| Ok(false));
        let malformed = m.service().login("not an address", SecretString::from("pw")).await.unwrap_err();

        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(Some(credentials(true))));
        m.hasher.expect_verify().withf(|_, h| h.is_some()).times(1).returning(|_, _| Ok(false));
        m.refresh_tokens.expect_insert().never();
        let wrong = m.service().login("ada@example.com", SecretString::from("nope")).await.unwrap_err();

        for err in [unknown, malformed, wrong] {
            assert!(matches!(err, LoginError::InvalidCredentials), "{err:?}");
        }
    }

    #[tokio::test]
    async fn an_inactive_user_with_the_right_password_is_refused() {
        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(Some(credentials(false))));
        m.hasher.expect_verify().returning(|_, _| Ok(true));
        m.refresh_tokens.expect_insert().never();
        let err = m.service().login("ada@example.com", SecretString::from("pw")).await.unwrap_err();
        assert!(matches!(err, LoginError::Inactive));
    }

    #[tokio::test]
    async fn refresh_rotates_an_active_token_within_its_family() {
        let mut m = Mocks::new();
        m.accounts.expect_find_user().returning(|_| Ok(Some(user(true))));
        m.refresh_tokens
            .expect_find_by_digest()
            .with(eq(SecretDigest::from_string("digest(old)")))
            .returning(|_| Ok(Some(stored_token(RefreshTokenStatus::Active, 10))));
        m.refresh_tokens
            .expect_rotate()
            .withf(|current, next, now| {
                current.as_str() == "rtk_old"
                    && next.family_id.as_str() == "rtf_fam"
                    && next.status == RefreshTokenStatus::Active
                    && next.digest.as_str() == "digest(secret-0)"
                    && *now == t0()
            })
            .times(1)
            .returning(|_, _, _| Ok(RotateOutcome::Rotated));
        m.refresh_tokens.expect_revoke_family().never();
        let pair = m.service().refresh("old").await.unwrap();
        assert_eq!(pair.refresh_token.expose_secret(), "secret-0");
        assert_eq!(pair.access.expires_in, 3600);
    }

    #[tokio::test]
    async fn refresh_with_a_rotated_token_revokes_the_family() {
        let mut m = Mocks::new();
        m.refresh_tokens
            .expect_find_by_digest()
            .returning(|_| Ok(Some(stored_token(RefreshTokenStatus::Rotated, 10))));
        m.refresh_tokens.expect_rotate().never();
        m.refresh_tokens
            .expect_revoke_family()
            .withf(|f, _| f.as_str() == "rtf_fam")
            .times(1)
            .returning(|_, _| Ok(2));
        let err = m.service().refresh("old").await.unwrap_err();
        assert!(matches!(err, RefreshError::InvalidToken));
    }

    #[tokio::test]
    async fn refresh_that_loses_a_race_revokes_the_family() {
        let mut m = Mocks::new();
        m.accounts.expect_find_user().returning(|_| Ok(Some(user(true))));
        m.refresh_tokens
            .expect_find_by_digest()
            .returning(|_| Ok(Some(stored_token(RefreshTokenStatus::Active, 10))));
        m.refresh_tokens.expect_rotate().returning(|_, _, _| Ok(RotateOutcome::NotActive));
        m.refresh_tokens.expect_revoke_family().times(1).returning(|_, _| Ok(1));
        let err = m.service().refresh("old").await.unwrap_err();
        assert!(matches!(err, RefreshError::InvalidToken));
    }

    #[tokio::test]
    async fn refresh_for_a_deactivated_user_revokes_the_family() {
        let mut m = Mocks::new();
        m.refresh_tokens
            .expect_find_by_digest()
            .returning(|_| Ok(Some(stored_token(RefreshTokenStatus::Active, 10))));
        m.accounts.expect_find_user().returning(|_| Ok(Some(user(false))));
        m.refresh_tokens.expect_rotate().never();
        m.refresh_tokens.expect_revoke_family().times(1).returning(|_, _| Ok(1));
        let err = m.service().refresh("old").await.unwrap_err();
        assert!(matches!(err, RefreshError::InvalidToken));
    }

    #[tokio::test]
    async fn refresh_refuses_expired_revoked_and_unknown_tokens_without_revoking() {
        for found in [
            Some(stored_token(RefreshTokenStatus::Active, -1)),
            Some(stored_token(RefreshTokenStatus::Revoked, 10)),
            None,
        ] {
            let mut m = Mocks::new();
            m.refresh_tokens.expect_find_by_digest().return_once(move |_| Ok(found));
            m.refresh_tokens.expect_rotate().never();
            m.refresh_tokens.expect_revoke_family().never();
            let err = m.service().refresh("old").await.unwrap_err();
            assert!(matches!(err, RefreshError::InvalidToken));
        }
    }

    #[tokio::test]
    async fn logout_revokes_only_the_callers_own_family() {
        let mut m = Mocks::new();
        m.refresh_tokens
            .expect_find_by_digest()
            .returning(|_| Ok(Some(stored_token(RefreshTokenStatus::Active, 10))));
        m.refresh_tokens.expect_revoke_family().times(1).returning(|_, _| Ok(1));
        let service = m.service();
        service.logout(&UserId::from_string("usr_ada"), "old").await.unwrap();

        let mut m = Mocks::new();
        m.refresh_tokens
            .expect_find_by_digest()
            .returning(|_| Ok(Some(stored_token(RefreshTokenStatus::Active, 10))));
        m.refresh_tokens.expect_revoke_family().never();
        m.service().logout(&UserId::from_string("usr_eve"), "old").await.unwrap();
    }

    #[tokio::test]
    async fn me_lists_memberships_and_refuses_inactive_users() {
        let mut m = Mocks::new();
        m.accounts.expect_find_user().returning(|_| Ok(Some(user(true))));
        m.accounts.expect_memberships().returning(|u| {
            Ok(vec![Membership {
                tenant_id: TenantId::from_string("ten_1"),
                tenant_name: "Acme".into(),
                tenant_plan: Plan::Starter,
                user_id: u.clone(),
                role: Role::Owner,
                created_at: t0(),
            }])
        });
        let me = m.service().me(&UserId::from_string("usr_ada")).await.unwrap();
        assert_eq!(me.memberships[0].role, Role::Owner);

        let mut m = Mocks::new();
        m.accounts.expect_find_user().returning(|_| Ok(Some(user(false))));
        let err = m.service().me(&UserId::from_string("usr_ada")).await.unwrap_err();
        assert!(matches!(err, MeError::Unauthorized));
    }
}

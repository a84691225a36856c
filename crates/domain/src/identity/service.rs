//! The account service: registration, login, the current user, refresh and logout.

use std::sync::Arc;

use chrono::Duration;
use secrecy::SecretString;

use super::model::{Company, Email, FullName, Password, RegisterError, User};
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

    /// The family a presented refresh token belongs to (whatever its state), or `None` for a
    /// token the service never issued: what a refresh's rate limit is counted by.
    ///
    /// # Errors
    /// Only when storage fails.
    pub async fn refresh_family(&self, presented: &str) -> anyhow::Result<Option<TokenFamilyId>> {
        let digest = self.deps.secrets.digest(presented);
        Ok(self.deps.refresh_tokens.find_by_digest(&digest).await?.map(|t| t.family_id))
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
mod tests;

//! Password reset and magic-link sign-in by e-mail.
//!
//! Both send a single-use, 256-bit token that is stored only as a digest. A request does the
//! same work for every address — it stores a mail request as a [job](crate::jobs) and answers —
//! so neither its answer nor its time tells whether an account exists. The job resolves the
//! address, applies a per-address budget (the service must not flood an inbox), issues the
//! token and sends the e-mail, retried with backoff until the mail server takes it.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::Duration;
use serde::{Deserialize, Serialize};

use super::model::{Email, OneTimeToken, Password, TokenPurpose};
use super::ports::{AccountRepository, OneTimeTokenRepository, PasswordHasher};
use super::service::{AccountService, TokenPair};
use crate::ids::{IdGenerator, OneTimeTokenId};
use crate::jobs::{BackgroundJob, JobError, JobHandler, JobKind, JobQueue, NewJob};
use crate::mail::{EmailMessage, Mailer, escape_html};
use crate::secrets::Secrets;
use crate::time::Clock;

/// Settings of the recovery flows.
#[derive(Debug, Clone)]
pub struct RecoveryPolicy {
    /// Base of links in e-mails (`https://agentry.example.com`).
    pub public_url: String,
    /// Lifetime of a password-reset token.
    pub reset_ttl: Duration,
    /// Lifetime of a magic-link token.
    pub magic_link_ttl: Duration,
    /// Most e-mails of one kind sent to one address per hour.
    pub max_emails_per_hour: u64,
}

impl Default for RecoveryPolicy {
    fn default() -> Self {
        Self {
            public_url: "http://127.0.0.1:8080".into(),
            reset_ttl: Duration::minutes(60),
            magic_link_ttl: Duration::minutes(15),
            max_emails_per_hour: 3,
        }
    }
}

/// A token that is invalid, used or expired.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// Invalid, used or expired token.
    #[error("the token is invalid, used or expired")]
    InvalidToken,
    /// Storage, hashing or signing failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// The ports the recovery service uses.
#[derive(Clone)]
pub struct RecoveryServiceDeps {
    /// Users.
    pub accounts: Arc<dyn AccountRepository>,
    /// One-time tokens.
    pub tokens: Arc<dyn OneTimeTokenRepository>,
    /// Hashing of the new password.
    pub hasher: Arc<dyn PasswordHasher>,
    /// Delivery.
    pub mailer: Arc<dyn Mailer>,
    /// Where mail requests wait for the worker.
    pub jobs: Arc<dyn JobQueue>,
    /// Sessions for magic-link sign-in.
    pub sessions: AccountService,
    /// Tokens and digests.
    pub secrets: Arc<dyn Secrets>,
    /// Identifiers.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for RecoveryServiceDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecoveryServiceDeps { .. }")
    }
}

/// Password reset and magic links.
#[derive(Clone, Debug)]
pub struct RecoveryService {
    deps: RecoveryServiceDeps,
    policy: RecoveryPolicy,
}

impl RecoveryService {
    /// A service over `deps` with `policy`.
    pub fn new(deps: RecoveryServiceDeps, policy: RecoveryPolicy) -> Self {
        Self { deps, policy }
    }

    /// Asks for a password-reset e-mail to `email`: stores the request and returns. The e-mail
    /// goes out (from [`Self::deliver`]) only if the address has an active account whose hourly
    /// budget is not spent; nothing here says which.
    ///
    /// # Errors
    /// Only when storage fails.
    pub async fn request_password_reset(&self, email: &Email) -> anyhow::Result<()> {
        self.enqueue(email, TokenPurpose::PasswordReset).await
    }

    /// Asks for a magic-link e-mail, as [`Self::request_password_reset`] does.
    ///
    /// # Errors
    /// Only when storage fails.
    pub async fn request_magic_link(&self, email: &Email) -> anyhow::Result<()> {
        self.enqueue(email, TokenPurpose::MagicLink).await
    }

    async fn enqueue(&self, email: &Email, purpose: TokenPurpose) -> anyhow::Result<()> {
        let d = &self.deps;
        let now = d.clock.now();
        let job =
            NewJob::new(d.ids.as_ref(), &MailRequest { purpose, email: email.as_str().to_owned() }, now)?;
        d.jobs.enqueue(&job).await
    }

    /// Sets a new password with a reset token, and ends every session of the user.
    ///
    /// # Errors
    /// [`RecoveryError::InvalidToken`] when the token is unknown, used (also by a concurrent
    /// request) or expired.
    pub async fn reset_password(&self, token: &str, new_password: &Password) -> Result<(), RecoveryError> {
        let d = &self.deps;
        let digest = d.secrets.digest(token);
        // Checked before hashing so a bad token costs no hash; the atomic consume below is what
        // decides between concurrent requests.
        if d.tokens.find_usable(&digest, TokenPurpose::PasswordReset, d.clock.now()).await?.is_none() {
            return Err(RecoveryError::InvalidToken);
        }
        let hash = d.hasher.hash(new_password).await?;
        match d.tokens.reset_password(&digest, &hash, d.clock.now()).await? {
            Some(_) => Ok(()),
            None => Err(RecoveryError::InvalidToken),
        }
    }

    /// Exchanges a magic-link token for a new session.
    ///
    /// # Errors
    /// [`RecoveryError::InvalidToken`] when the token is unknown, used or expired, or the
    /// account was deactivated since.
    pub async fn exchange_magic_link(&self, token: &str) -> Result<TokenPair, RecoveryError> {
        let d = &self.deps;
        let digest = d.secrets.digest(token);
        let user = d
            .tokens
            .consume(&digest, TokenPurpose::MagicLink, d.clock.now())
            .await?
            .ok_or(RecoveryError::InvalidToken)?;
        match d.accounts.find_user(&user).await? {
            Some(u) if u.is_active => Ok(d.sessions.start_session(&u.id).await?),
            _ => Err(RecoveryError::InvalidToken),
        }
    }

    /// Carries out a mail request: resolves the address, applies its hourly budget, issues
    /// the token and sends the e-mail. Unknown and inactive addresses, and spent budgets, end
    /// here quietly. A token whose e-mail was refused is deleted, so a retry sends a new one.
    ///
    /// # Errors
    /// [`JobError::Transient`] when storage or delivery fails.
    pub async fn deliver(&self, request: &MailRequest) -> Result<(), JobError> {
        let d = &self.deps;
        let transient = JobError::Transient;
        let Ok(email) = Email::parse(&request.email) else {
            return Err(JobError::Permanent(anyhow::anyhow!("the mail request names no valid address")));
        };
        let purpose = request.purpose;
        let Some(credentials) = d.accounts.find_credentials(&email).await.map_err(transient)? else {
            return Ok(());
        };
        let user = credentials.user;
        if !user.is_active {
            return Ok(());
        }
        let now = d.clock.now();
        let secret = d.secrets.random_token();
        let ttl = match purpose {
            TokenPurpose::PasswordReset => self.policy.reset_ttl,
            TokenPurpose::MagicLink => self.policy.magic_link_ttl,
        };
        let token = OneTimeToken {
            id: OneTimeTokenId::generate(d.ids.as_ref()),
            user_id: user.id.clone(),
            purpose,
            digest: d.secrets.digest(&secret),
            created_at: now,
            expires_at: now + ttl,
        };
        // The budget is counted and the token stored in one decision, so that requests for one
        // address on several instances at once never send more than the budget between them.
        let within_budget = d
            .tokens
            .insert_within_budget(&token, now - Duration::hours(1), self.policy.max_emails_per_hour)
            .await
            .map_err(transient)?;
        if !within_budget {
            tracing::info!(user_id = %user.id, purpose = purpose.as_str(), "e-mail budget spent; not sending");
            return Ok(());
        }
        let message = self.compose(&user.email, user.full_name.as_str(), purpose, &secret, ttl);
        if let Err(e) = d.mailer.send(&message).await {
            if let Err(cleanup) = d.tokens.delete(&token.id).await {
                tracing::warn!(error = ?cleanup, "deleting the token of an unsent e-mail failed");
            }
            return Err(transient(e));
        }
        Ok(())
    }

    fn compose(
        &self,
        to: &Email,
        name: &str,
        purpose: TokenPurpose,
        secret: &str,
        ttl: Duration,
    ) -> EmailMessage {
        let base = self.policy.public_url.trim_end_matches('/');
        let minutes = ttl.num_minutes();
        let (subject, link, intro, action, fallback) = match purpose {
            TokenPurpose::PasswordReset => (
                "Reset your Agentry password".to_owned(),
                format!("{base}/reset-password?token={secret}"),
                "Someone asked to reset the password of your Agentry account.",
                "Choose a new password",
                format!(
                    "Or send the token to the API: POST {base}/api/v1/auth/reset-password \
                     with {{\"token\": \"{secret}\", \"new_password\": \"…\"}}"
                ),
            ),
            TokenPurpose::MagicLink => (
                "Your Agentry sign-in link".to_owned(),
                format!("{base}/magic-link?token={secret}"),
                "Use this link to sign in to Agentry without a password.",
                "Sign in",
                format!(
                    "Or exchange the token through the API: GET {base}/api/v1/auth/magic-link/{secret} \
                     answers an access token."
                ),
            ),
        };
        let footer = format!(
            "The link works once and expires in {minutes} minutes. If you did not ask for it, \
             ignore this e-mail: nothing changes."
        );
        let text = format!("Hello {name},\n\n{intro}\n\n{action}: {link}\n\n{fallback}\n\n{footer}\n");
        let html = format!(
            "<!doctype html><html><body style=\"font-family: sans-serif\"><p>Hello {name},</p><p>{intro}</p>\
             <p><a href=\"{link}\">{action}</a></p><p>{fallback}</p><p style=\"color: #666\">{footer}</p></body></html>",
            name = escape_html(name),
            intro = escape_html(intro),
            link = escape_html(&link),
            action = escape_html(action),
            fallback = escape_html(&fallback),
            footer = escape_html(&footer),
        );
        EmailMessage { to: to.clone(), subject, text, html }
    }
}

/// A request for an e-mail with a link, as stored in the job queue. It holds the address as
/// typed (normalised), never a token: tokens are made when the e-mail is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailRequest {
    /// Reset or magic link.
    pub purpose: TokenPurpose,
    /// The normalised address.
    pub email: String,
}

impl BackgroundJob for MailRequest {
    const KIND: JobKind = JobKind::Mail;
}

#[async_trait]
impl JobHandler<MailRequest> for RecoveryService {
    async fn run(&self, request: MailRequest) -> Result<(), JobError> {
        self.deliver(&request).await
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeZone, Utc};

    use super::*;
    use crate::identity::model::{FullName, PasswordHash, User, UserCredentials};
    use crate::identity::ports::{
        IssuedAccessToken, MockAccessTokens, MockAccountRepository, MockOneTimeTokenRepository,
        MockPasswordHasher, MockRefreshTokenRepository,
    };
    use crate::identity::service::{AccountPolicy, AccountServiceDeps};
    use crate::ids::{MockIdGenerator, UserId};
    use crate::jobs::MockJobQueue;
    use crate::mail::MockMailer;
    use crate::secrets::{MockSecrets, SecretDigest};
    use crate::time::MockClock;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
    }

    fn ada(active: bool) -> UserCredentials {
        UserCredentials {
            user: User {
                id: UserId::from_string("usr_ada"),
                email: Email::parse("ada@example.com").unwrap(),
                full_name: FullName::new("Ada <Lovelace>").unwrap(),
                is_active: active,
                created_at: t0(),
            },
            password_hash: PasswordHash::from_phc("h"),
        }
    }

    struct Mocks {
        accounts: MockAccountRepository,
        tokens: MockOneTimeTokenRepository,
        hasher: MockPasswordHasher,
        mailer: MockMailer,
        jobs: MockJobQueue,
        refresh_tokens: MockRefreshTokenRepository,
    }

    impl Mocks {
        fn new() -> Self {
            Self {
                accounts: MockAccountRepository::new(),
                tokens: MockOneTimeTokenRepository::new(),
                hasher: MockPasswordHasher::new(),
                mailer: MockMailer::new(),
                jobs: MockJobQueue::new(),
                refresh_tokens: MockRefreshTokenRepository::new(),
            }
        }

        fn service(self) -> RecoveryService {
            let secrets = || {
                let mut s = MockSecrets::new();
                s.expect_random_token().returning(|| "tok".into());
                s.expect_digest().returning(|t| SecretDigest::from_string(format!("digest({t})")));
                Arc::new(s)
            };
            let ids = || {
                let mut i = MockIdGenerator::new();
                i.expect_generate().returning(|p| format!("{p}_1"));
                Arc::new(i)
            };
            let clock = || {
                let mut c = MockClock::new();
                c.expect_now().returning(t0);
                Arc::new(c)
            };
            let accounts = Arc::new(self.accounts);
            let mut access_tokens = MockAccessTokens::new();
            access_tokens
                .expect_issue()
                .returning(|_, _, _| Ok(IssuedAccessToken { token: "jwt".into(), expires_in: 3600 }));
            let sessions = AccountService::new(
                AccountServiceDeps {
                    accounts: accounts.clone(),
                    refresh_tokens: Arc::new(self.refresh_tokens),
                    hasher: Arc::new(MockPasswordHasher::new()),
                    access_tokens: Arc::new(access_tokens),
                    secrets: secrets(),
                    ids: ids(),
                    clock: clock(),
                },
                AccountPolicy::default(),
            );
            RecoveryService::new(
                RecoveryServiceDeps {
                    accounts,
                    tokens: Arc::new(self.tokens),
                    hasher: Arc::new(self.hasher),
                    mailer: Arc::new(self.mailer),
                    jobs: Arc::new(self.jobs),
                    sessions,
                    secrets: secrets(),
                    ids: ids(),
                    clock: clock(),
                },
                RecoveryPolicy { public_url: "https://agentry.test/".into(), ..RecoveryPolicy::default() },
            )
        }
    }

    fn email() -> Email {
        Email::parse("ada@example.com").unwrap()
    }

    fn request(purpose: TokenPurpose) -> MailRequest {
        MailRequest { purpose, email: "ada@example.com".into() }
    }

    #[tokio::test]
    async fn a_request_only_stores_a_mail_job_whatever_the_address() {
        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().never();
        m.tokens.expect_insert().never();
        m.mailer.expect_send().never();
        m.jobs
            .expect_enqueue()
            .withf(|job| {
                job.kind == JobKind::Mail
                    && job.run_at == t0()
                    && job.payload
                        == serde_json::json!({"purpose": "password_reset", "email": "ada@example.com"})
            })
            .times(1)
            .returning(|_| Ok(()));
        m.service().request_password_reset(&email()).await.unwrap();
    }

    #[tokio::test]
    async fn a_known_address_gets_a_reset_link_with_a_stored_digest() {
        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(Some(ada(true))));
        m.tokens
            .expect_insert_within_budget()
            .withf(|t, since, max| {
                t.digest.as_str() == "digest(tok)"
                    && t.purpose == TokenPurpose::PasswordReset
                    && t.expires_at == t0() + Duration::minutes(60)
                    && *since == t0() - Duration::hours(1)
                    && *max == 3
            })
            .times(1)
            .returning(|_, _, _| Ok(true));
        m.mailer
            .expect_send()
            .withf(|msg| {
                msg.to.as_str() == "ada@example.com"
                    && msg.subject.contains("Reset")
                    && msg.text.contains("https://agentry.test/reset-password?token=tok")
                    && msg.html.contains("href=\"https://agentry.test/reset-password?token=tok\"")
                    && msg.html.contains("Ada &lt;Lovelace&gt;")
                    && msg.text.contains("60 minutes")
            })
            .times(1)
            .returning(|_| Ok(()));
        m.service().deliver(&request(TokenPurpose::PasswordReset)).await.unwrap();
    }

    #[tokio::test]
    async fn a_refused_e_mail_deletes_its_token_and_asks_for_a_retry() {
        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(Some(ada(true))));
        m.tokens.expect_insert_within_budget().times(1).returning(|_, _, _| Ok(true));
        m.mailer.expect_send().returning(|_| Err(anyhow::anyhow!("connection refused")));
        m.tokens.expect_delete().withf(|id| id.as_str() == "ott_1").times(1).returning(|_| Ok(()));
        let err = m.service().deliver(&request(TokenPurpose::MagicLink)).await.unwrap_err();
        assert!(matches!(err, JobError::Transient(_)));
    }

    #[tokio::test]
    async fn a_magic_link_points_at_its_page_and_lives_15_minutes() {
        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(Some(ada(true))));
        m.tokens
            .expect_insert_within_budget()
            .withf(|t, _, _| {
                t.purpose == TokenPurpose::MagicLink && t.expires_at == t0() + Duration::minutes(15)
            })
            .returning(|_, _, _| Ok(true));
        m.mailer
            .expect_send()
            .withf(|msg| {
                msg.text.contains("https://agentry.test/magic-link?token=tok")
                    && msg.text.contains("https://agentry.test/api/v1/auth/magic-link/tok")
            })
            .times(1)
            .returning(|_| Ok(()));
        m.service().deliver(&request(TokenPurpose::MagicLink)).await.unwrap();
    }

    #[tokio::test]
    async fn unknown_inactive_and_over_budget_addresses_get_nothing() {
        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(None));
        m.tokens.expect_insert_within_budget().never();
        m.mailer.expect_send().never();
        m.service().deliver(&request(TokenPurpose::PasswordReset)).await.unwrap();

        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(Some(ada(false))));
        m.mailer.expect_send().never();
        m.service().deliver(&request(TokenPurpose::MagicLink)).await.unwrap();

        let mut m = Mocks::new();
        m.accounts.expect_find_credentials().returning(|_| Ok(Some(ada(true))));
        m.tokens.expect_insert_within_budget().times(1).returning(|_, _, _| Ok(false));
        m.mailer.expect_send().never();
        m.service().deliver(&request(TokenPurpose::PasswordReset)).await.unwrap();

        // A stored request this version cannot read is no mail job (the job core fails such a
        // job for good: `jobs::tests::an_unreadable_job_fails_for_good`).
        assert!(serde_json::from_value::<MailRequest>(serde_json::json!({"purpose": "telegram"})).is_err());
    }

    #[tokio::test]
    async fn a_valid_reset_token_sets_the_hash_atomically() {
        let mut m = Mocks::new();
        m.tokens.expect_find_usable().returning(|_, _, _| Ok(Some(token())));
        m.hasher
            .expect_hash()
            .withf(|p| p.expose() == "new password")
            .returning(|_| Ok(PasswordHash::from_phc("new")));
        m.tokens
            .expect_reset_password()
            .withf(|d, h, _| d.as_str() == "digest(tok)" && h.as_str() == "new")
            .times(1)
            .returning(|_, _, _| Ok(Some(UserId::from_string("usr_ada"))));
        let pw = Password::new("new password".into()).unwrap();
        m.service().reset_password("tok", &pw).await.unwrap();
    }

    fn token() -> OneTimeToken {
        OneTimeToken {
            id: OneTimeTokenId::from_string("ott_1"),
            user_id: UserId::from_string("usr_ada"),
            purpose: TokenPurpose::PasswordReset,
            digest: SecretDigest::from_string("digest(tok)"),
            created_at: t0(),
            expires_at: t0() + Duration::hours(1),
        }
    }

    #[tokio::test]
    async fn an_unusable_reset_token_is_refused_without_hashing_and_a_lost_race_is_refused_too() {
        let mut m = Mocks::new();
        m.tokens.expect_find_usable().returning(|_, _, _| Ok(None));
        m.hasher.expect_hash().never();
        let pw = Password::new("new password".into()).unwrap();
        assert!(matches!(m.service().reset_password("tok", &pw).await, Err(RecoveryError::InvalidToken)));

        let mut m = Mocks::new();
        m.tokens.expect_find_usable().returning(|_, _, _| Ok(Some(token())));
        m.hasher.expect_hash().returning(|_| Ok(PasswordHash::from_phc("new")));
        m.tokens.expect_reset_password().returning(|_, _, _| Ok(None));
        assert!(matches!(m.service().reset_password("tok", &pw).await, Err(RecoveryError::InvalidToken)));
    }

    #[tokio::test]
    async fn a_magic_link_exchanges_once_for_a_session() {
        let mut m = Mocks::new();
        m.tokens.expect_consume().returning(|_, _, _| Ok(Some(UserId::from_string("usr_ada"))));
        m.accounts.expect_find_user().returning(|_| Ok(Some(ada(true).user)));
        m.refresh_tokens.expect_insert().times(1).returning(|_| Ok(()));
        let pair = m.service().exchange_magic_link("tok").await.unwrap();
        assert_eq!(pair.access.token, "jwt");

        let mut m = Mocks::new();
        m.tokens.expect_consume().returning(|_, _, _| Ok(None));
        assert!(matches!(m.service().exchange_magic_link("tok").await, Err(RecoveryError::InvalidToken)));
    }
}

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
    let err =
        RegisterCommand::new(None, Some(SecretString::from("short")), Some("  ".into()), None).unwrap_err();
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

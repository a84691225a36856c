use chrono::{Duration, TimeZone};

use super::*;
use crate::identity::model::ApiKeyGrant;
use crate::identity::ports::{
    AccessClaims, AccessTokenError, MockAccessTokens, MockAccountRepository, MockApiKeyRepository,
};
use crate::ids::{MockIdGenerator, TokenFamilyId, UserId};
use crate::secrets::{MockSecrets, SecretDigest};
use crate::tenancy::{Permission, Plan, Role};
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
        chain: Default::default(),
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
    assert_eq!((p.tenant_id.as_str(), p.role, p.credential), ("ten_a", Role::Owner, Credential::AccessToken));
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
    assert!(matches!(d.service().authenticate("agk_x", Some(&other)).await, Err(AccessError::Forbidden(_))));
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
    let expired = NewApiKey::new(Some("ci".into()), Some(vec!["agents:read".into()]), Some(t0())).unwrap();
    let err = s.create_key(&via_key, expired.clone()).await.unwrap_err();
    assert!(matches!(err, ApiKeyError::Forbidden(_)));
    let owner = principal(Role::Owner, Credential::AccessToken);
    let err = s.create_key(&owner, expired).await.unwrap_err();
    assert!(matches!(err, ApiKeyError::Invalid(_)), "an expiry that is not in the future");
    let err =
        s.revoke_key(&principal(Role::Owner, Credential::AccessToken), &ApiKeyId::from_string("key_x")).await;
    assert!(matches!(err, Err(ApiKeyError::NotFound)));
}

use chrono::TimeZone;
use secrecy::SecretString;

use super::*;
use crate::identity::PasswordHash;
use crate::identity::{
    AccountPolicy, AccountServiceDeps, IssuedAccessToken, MockAccessTokens, MockAccountRepository,
    MockPasswordHasher, MockRefreshTokenRepository, UserCredentials,
};
use crate::ids::{ApiKeyId, MockIdGenerator};
use crate::mail::MockMailer;
use crate::secrets::MockSecrets;
use crate::secrets::SecretDigest;
use crate::tenancy::{Credential, Plan, Scope};
use crate::time::MockClock;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 2, 12, 0, 0).unwrap()
}

fn caller(role: Role) -> Principal {
    Principal {
        user_id: UserId::from_string("usr_me"),
        tenant_id: TenantId::from_string("ten_1"),
        plan: Plan::Starter,
        role,
        credential: Credential::AccessToken,
        chain: Default::default(),
    }
}

fn key_caller(role: Role, scopes: &[&str]) -> Principal {
    Principal {
        credential: Credential::ApiKey {
            key_id: ApiKeyId::from_string("key_1"),
            scopes: scopes.iter().map(|s| s.parse::<Scope>().unwrap()).collect(),
        },
        ..caller(role)
    }
}

fn member(id: &str, role: Role) -> Member {
    Member {
        user_id: UserId::from_string(id),
        email: Email::parse(&format!("{id}@example.com")).unwrap(),
        full_name: "Someone".into(),
        role,
        joined_at: t0(),
    }
}

fn invitation(role: Role) -> InvitationView {
    InvitationView {
        invitation: Invitation {
            id: InvitationId::from_string("inv_1"),
            tenant_id: TenantId::from_string("ten_1"),
            email: Email::parse("grace@example.com").unwrap(),
            role,
            invited_by: UserId::from_string("usr_me"),
            created_at: t0(),
            expires_at: t0() + Duration::days(7),
            accepted_at: None,
            revoked_at: None,
        },
        tenant_name: "Acme".into(),
        inviter_name: "Ada <Lovelace>".into(),
    }
}

struct Mocks {
    team: MockTeamRepository,
    accounts: MockAccountRepository,
    hasher: MockPasswordHasher,
    mailer: MockMailer,
    refresh_tokens: MockRefreshTokenRepository,
    now: DateTime<Utc>,
}

impl Mocks {
    fn new() -> Self {
        Self {
            team: MockTeamRepository::new(),
            accounts: MockAccountRepository::new(),
            hasher: MockPasswordHasher::new(),
            mailer: MockMailer::new(),
            refresh_tokens: MockRefreshTokenRepository::new(),
            now: t0(),
        }
    }

    fn service(self) -> TeamService {
        let now = self.now;
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
        let clock = move || {
            let mut c = MockClock::new();
            c.expect_now().returning(move || now);
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
        TeamService::new(
            TeamServiceDeps {
                team: Arc::new(self.team),
                accounts,
                hasher: Arc::new(self.hasher),
                sessions,
                mailer: Arc::new(self.mailer),
                secrets: secrets(),
                ids: ids(),
                clock: clock(),
            },
            TeamPolicy { public_url: "https://agentry.test/".into(), ..TeamPolicy::default() },
        )
    }
}

#[test]
fn nobody_grants_changes_or_removes_above_their_own_role() {
    use Role::*;
    // Inviting: owners and admins only, never above themselves.
    assert!(check_invite(&caller(Owner), Owner).is_ok());
    assert!(check_invite(&caller(Admin), Admin).is_ok());
    assert!(check_invite(&caller(Admin), Viewer).is_ok());
    assert!(check_invite(&caller(Admin), Owner).is_err());
    assert!(check_invite(&caller(Member), Viewer).is_err());
    assert!(check_invite(&caller(Viewer), Viewer).is_err());
    // Changing: not someone above, not to something above.
    assert!(check_role_change(&caller(Admin), Member, Admin).is_ok());
    assert!(check_role_change(&caller(Admin), Admin, Viewer).is_ok());
    assert!(check_role_change(&caller(Admin), Owner, Admin).is_err());
    assert!(check_role_change(&caller(Admin), Member, Owner).is_err());
    assert!(check_role_change(&caller(Owner), Owner, Viewer).is_ok());
    assert!(check_role_change(&caller(Member), Viewer, Viewer).is_err());
    // Removing: anyone may leave; others only at or below one's own role.
    let me = UserId::from_string("usr_me");
    let other = UserId::from_string("usr_other");
    assert!(check_removal(&caller(Viewer), &me, Viewer).is_ok());
    assert!(check_removal(&caller(Viewer), &other, Viewer).is_err());
    assert!(check_removal(&caller(Admin), &other, Admin).is_ok());
    assert!(check_removal(&caller(Admin), &other, Owner).is_err());
    // A key leaves for its user only with members:write.
    assert!(check_removal(&key_caller(Admin, &["agents:read"]), &me, Admin).is_err());
    assert!(check_removal(&key_caller(Admin, &["members:write"]), &me, Admin).is_ok());
    // A key's scopes bound its user's role.
    assert!(check_invite(&key_caller(Owner, &["members:read"]), Viewer).is_err());
    assert!(check_invite(&key_caller(Owner, &["members:write"]), Viewer).is_ok());
}

#[test]
fn the_last_owner_stays() {
    use Role::*;
    assert!(leaves_no_owner(1, Owner, None));
    assert!(leaves_no_owner(1, Owner, Some(Admin)));
    assert!(!leaves_no_owner(1, Owner, Some(Owner)));
    assert!(!leaves_no_owner(2, Owner, None));
    assert!(!leaves_no_owner(1, Admin, None));
    assert!(!leaves_no_owner(0, Member, Some(Viewer)));
}

#[test]
fn an_invitation_is_pending_until_accepted_revoked_or_expired() {
    let i = invitation(Role::Member).invitation;
    assert!(i.is_pending(t0()));
    assert!(i.is_pending(t0() + Duration::days(7) - Duration::seconds(1)));
    assert!(!i.is_pending(t0() + Duration::days(7)));
    assert!(!Invitation { accepted_at: Some(t0()), ..i.clone() }.is_pending(t0()));
    assert!(!Invitation { revoked_at: Some(t0()), ..i }.is_pending(t0()));
}

#[test]
fn an_invitation_request_names_each_bad_field() {
    let err = NewInvitation::new(Some("nope".into()), Some("root".into())).unwrap_err();
    let fields: Vec<&str> = err.0.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["email", "role"]);
    let ok = NewInvitation::new(Some(" Grace@Example.com ".into()), Some("viewer".into())).unwrap();
    assert_eq!((ok.email.as_str(), ok.role), ("grace@example.com", Role::Viewer));
}

#[tokio::test]
async fn an_invitation_is_stored_with_its_mail_job_and_expires_in_seven_days() {
    let mut m = Mocks::new();
    m.accounts.expect_find_credentials().returning(|_| Ok(None));
    m.team
        .expect_create_invitation()
        .withf(|i, job| {
            i.expires_at == t0() + Duration::days(7)
                && i.role == Role::Admin
                && i.invited_by.as_str() == "usr_me"
                && job.kind == JobKind::Invitation
                && job.payload == serde_json::json!({"invitation_id": "inv_1"})
        })
        .times(1)
        .returning(|_, _| Ok(()));
    let request = NewInvitation::new(Some("grace@example.com".into()), Some("admin".into())).unwrap();
    let made = m.service().invite(&caller(Role::Admin), request).await.unwrap();
    assert_eq!(made.tenant_id.as_str(), "ten_1");
}

#[tokio::test]
async fn inviting_above_ones_role_or_a_member_is_refused() {
    let mut m = Mocks::new();
    m.team.expect_create_invitation().never();
    let request = NewInvitation::new(Some("grace@example.com".into()), Some("owner".into())).unwrap();
    let err = m.service().invite(&caller(Role::Admin), request).await.unwrap_err();
    assert!(matches!(err, TeamError::Forbidden(_)), "{err:?}");

    let mut m = Mocks::new();
    m.accounts.expect_find_credentials().returning(|_| {
        Ok(Some(UserCredentials {
            user: User {
                id: UserId::from_string("usr_grace"),
                email: Email::parse("grace@example.com").unwrap(),
                full_name: FullName::new("Grace").unwrap(),
                is_active: true,
                created_at: t0(),
            },
            password_hash: PasswordHash::from_phc("h"),
        }))
    });
    m.team.expect_member().returning(|_, _| Ok(Some(member("usr_grace", Role::Viewer))));
    m.team.expect_create_invitation().never();
    let request = NewInvitation::new(Some("grace@example.com".into()), Some("member".into())).unwrap();
    let err = m.service().invite(&caller(Role::Owner), request).await.unwrap_err();
    assert!(matches!(err, TeamError::Conflict(_)), "{err:?}");
}

#[tokio::test]
async fn demoting_or_removing_the_last_owner_is_a_conflict() {
    let mut m = Mocks::new();
    m.team.expect_member().returning(|_, _| Ok(Some(member("usr_me", Role::Owner))));
    m.team
        .expect_change_role()
        .withf(|_, _, from, to, e| {
            *from == Role::Owner
                && *to == Role::Admin
                && e.payload
                    == EventPayload::TenantMemberRoleChanged {
                        user_id: UserId::from_string("usr_me"),
                        from: "owner".into(),
                        to: "admin".into(),
                        changed_by: UserId::from_string("usr_me"),
                        paused: Vec::new(),
                    }
        })
        .returning(|_, _, _, _, _| Ok(MemberChange::LastOwner));
    let me = UserId::from_string("usr_me");
    let err = m.service().change_role(&caller(Role::Owner), &me, Role::Admin).await.unwrap_err();
    assert!(matches!(err, TeamError::LastOwner));

    let mut m = Mocks::new();
    m.team.expect_member().returning(|_, _| Ok(Some(member("usr_me", Role::Owner))));
    m.team.expect_remove_member().returning(|_, _, _, _, _| Ok(MemberChange::LastOwner));
    let err = m.service().remove(&caller(Role::Owner), &me).await.unwrap_err();
    assert!(matches!(err, TeamError::LastOwner));
}

#[tokio::test]
async fn a_viewer_may_leave_but_not_remove_others() {
    let mut m = Mocks::new();
    m.team.expect_member().returning(|_, u| Ok(Some(member(u.as_str(), Role::Viewer))));
    m.team
        .expect_remove_member()
        .withf(|_, u, from, e, _| {
            u.as_str() == "usr_me"
                && *from == Role::Viewer
                && e.payload
                    == EventPayload::TenantMemberRemoved {
                        user_id: UserId::from_string("usr_me"),
                        removed_by: UserId::from_string("usr_me"),
                        paused: Vec::new(),
                    }
        })
        .times(1)
        .returning(|_, _, _, _, _| Ok(MemberChange::Done(Vec::new())));
    let service = m.service();
    service.remove(&caller(Role::Viewer), &UserId::from_string("usr_me")).await.unwrap();
    let err = service.remove(&caller(Role::Viewer), &UserId::from_string("usr_other")).await.unwrap_err();
    assert!(matches!(err, TeamError::Forbidden(_)));
}

#[tokio::test]
async fn an_expired_used_or_revoked_link_is_refused() {
    let request = || AcceptInvitation {
        token: SecretString::from("tok"),
        password: Some(SecretString::from("correct horse battery")),
        full_name: Some("Grace".into()),
    };
    // Expired: the clock is at the expiry.
    let mut m = Mocks::new();
    m.now = t0() + Duration::days(7);
    m.team.expect_invitation_by_digest().returning(|_| Ok(Some(invitation(Role::Member))));
    m.team.expect_accept().never();
    assert!(matches!(m.service().accept(request()).await, Err(TeamError::InvalidToken)));
    // Used and revoked.
    for spent in [
        |mut v: InvitationView| {
            v.invitation.accepted_at = Some(t0());
            v
        },
        |mut v: InvitationView| {
            v.invitation.revoked_at = Some(t0());
            v
        },
    ] {
        let mut m = Mocks::new();
        m.team.expect_invitation_by_digest().returning(move |_| Ok(Some(spent(invitation(Role::Member)))));
        m.team.expect_accept().never();
        assert!(matches!(m.service().accept(request()).await, Err(TeamError::InvalidToken)));
    }
    // Unknown.
    let mut m = Mocks::new();
    m.team.expect_invitation_by_digest().returning(|_| Ok(None));
    assert!(matches!(m.service().accept(request()).await, Err(TeamError::InvalidToken)));
}

#[tokio::test]
async fn a_new_address_registers_and_joins_once() {
    let mut m = Mocks::new();
    m.team
        .expect_invitation_by_digest()
        .withf(|d| d.as_str() == "digest(tok)")
        .returning(|_| Ok(Some(invitation(Role::Member))));
    m.accounts.expect_find_credentials().returning(|_| Ok(None));
    m.hasher.expect_hash().returning(|_| Ok(PasswordHash::from_phc("new")));
    m.team
        .expect_accept()
        .withf(|a| {
            a.digest.as_str() == "digest(tok)"
                && a.role == Role::Member
                && a.new_user.as_ref().is_some_and(|(u, h)| {
                    u.email.as_str() == "grace@example.com" && u.full_name.as_str() == "Grace" && h.as_str() == "new"
                })
                && matches!(&a.event.payload, EventPayload::TenantMemberAdded { role, .. } if role == "member")
        })
        .times(1)
        .returning(|_| Ok(AcceptOutcome::Accepted));
    m.refresh_tokens.expect_insert().times(1).returning(|_| Ok(()));
    let joined = m
        .service()
        .accept(AcceptInvitation {
            token: SecretString::from("tok"),
            password: Some(SecretString::from("correct horse battery")),
            full_name: Some("Grace".into()),
        })
        .await
        .unwrap();
    assert_eq!((joined.tenant_id.as_str(), joined.role, joined.registered), ("ten_1", Role::Member, true));
    assert_eq!(joined.tokens.access.token, "jwt");

    // A second acceptance of the same link loses: the repository saw it spent.
    let mut m = Mocks::new();
    m.team.expect_invitation_by_digest().returning(|_| Ok(Some(invitation(Role::Member))));
    m.accounts.expect_find_credentials().returning(|_| Ok(None));
    m.hasher.expect_hash().returning(|_| Ok(PasswordHash::from_phc("new")));
    m.team.expect_accept().returning(|_| Ok(AcceptOutcome::NotUsable));
    m.refresh_tokens.expect_insert().never();
    let again = m
        .service()
        .accept(AcceptInvitation {
            token: SecretString::from("tok"),
            password: Some(SecretString::from("correct horse battery")),
            full_name: Some("Grace".into()),
        })
        .await;
    assert!(matches!(again, Err(TeamError::InvalidToken)));
}

#[tokio::test]
async fn a_new_address_must_name_itself_and_an_account_must_prove_its_password() {
    let mut m = Mocks::new();
    m.team.expect_invitation_by_digest().returning(|_| Ok(Some(invitation(Role::Member))));
    m.accounts.expect_find_credentials().returning(|_| Ok(None));
    m.team.expect_accept().never();
    let err = m
        .service()
        .accept(AcceptInvitation { token: SecretString::from("tok"), password: None, full_name: None })
        .await
        .unwrap_err();
    let TeamError::Invalid(errors) = err else { panic!("{err:?}") };
    let fields: Vec<&str> = errors.0.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["full_name", "password"]);

    let mut m = Mocks::new();
    m.team.expect_invitation_by_digest().returning(|_| Ok(Some(invitation(Role::Member))));
    m.accounts.expect_find_credentials().returning(|_| {
        Ok(Some(UserCredentials {
            user: User {
                id: UserId::from_string("usr_grace"),
                email: Email::parse("grace@example.com").unwrap(),
                full_name: FullName::new("Grace").unwrap(),
                is_active: true,
                created_at: t0(),
            },
            password_hash: PasswordHash::from_phc("h"),
        }))
    });
    m.hasher.expect_verify().returning(|_, _| Ok(false));
    m.team.expect_accept().never();
    let err = m
        .service()
        .accept(AcceptInvitation {
            token: SecretString::from("tok"),
            password: Some(SecretString::from("wrong")),
            full_name: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, TeamError::InvalidCredentials));
}

#[tokio::test]
async fn the_mail_job_gives_the_invitation_a_fresh_token_and_sends_the_link() {
    let mut m = Mocks::new();
    m.team.expect_invitation().returning(|_| Ok(Some(invitation(Role::Admin))));
    m.team
        .expect_set_token()
        .withf(|id, d, _| id.as_str() == "inv_1" && d.as_str() == "digest(tok)")
        .times(1)
        .returning(|_, _, _| Ok(true));
    m.mailer
        .expect_send()
        .withf(|msg| {
            msg.to.as_str() == "grace@example.com"
                && msg.subject == "You are invited to Acme on Agentry"
                && msg.text.contains("https://agentry.test/invitation?token=tok")
                && msg.text.contains("as admin")
                && msg.text.contains("7 days")
                && msg.html.contains("Ada &lt;Lovelace&gt;")
        })
        .times(1)
        .returning(|_| Ok(()));
    m.service().deliver(&InvitationMail { invitation_id: InvitationId::from_string("inv_1") }).await.unwrap();

    // A revoked invitation gets no mail.
    let mut m = Mocks::new();
    m.team.expect_invitation().returning(|_| {
        let mut v = invitation(Role::Admin);
        v.invitation.revoked_at = Some(t0());
        Ok(Some(v))
    });
    m.team.expect_set_token().never();
    m.mailer.expect_send().never();
    m.service().deliver(&InvitationMail { invitation_id: InvitationId::from_string("inv_1") }).await.unwrap();
}

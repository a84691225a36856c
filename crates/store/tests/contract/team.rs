use agentry_domain::events::{Event, EventLog, EventPayload, EventType};
use agentry_domain::identity::{AccountRepository, Email, FullName, PasswordHash, User};
use agentry_domain::ids::{EventId, InvitationId, JobId, TenantId, UserId};
use agentry_domain::jobs::{JobKind, NewJob};
use agentry_domain::secrets::SecretDigest;
use agentry_domain::team::{AcceptOutcome, Acceptance, Invitation, MemberChange, TeamRepository};
use agentry_domain::tenancy::Role;
use agentry_store::{AccountStore, Database, EventStore, JobStore, TeamStore};
use chrono::{DateTime, Duration, TimeZone, Utc};

crate::contract!(
    an_invitation_is_stored_with_its_mail_job_and_replaces_a_pending_one,
    an_invitation_is_accepted_once_by_a_new_or_an_existing_user,
    a_spent_revoked_or_expired_invitation_cannot_be_accepted,
    the_last_owner_can_be_neither_demoted_nor_removed,
    removal_revokes_the_members_keys_and_ends_their_membership,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 2, 10, 0, 0).unwrap()
}

fn invitation(id: &str, email: &str, role: Role) -> Invitation {
    Invitation {
        id: InvitationId::from_string(id),
        tenant_id: TenantId::from_string("ten_1"),
        email: Email::parse(email).unwrap(),
        role,
        invited_by: UserId::from_string("usr_1"),
        created_at: t0(),
        expires_at: t0() + Duration::days(7),
        accepted_at: None,
        revoked_at: None,
    }
}

fn job(id: &str, invitation: &str) -> NewJob {
    NewJob {
        id: JobId::from_string(id),
        kind: JobKind::Invitation,
        payload: serde_json::json!({"invitation_id": invitation}),
        run_at: t0(),
        created_at: t0(),
    }
}

fn added(id: &str, user: &str) -> Event {
    Event {
        id: EventId::from_string(id),
        tenant_id: TenantId::from_string("ten_1"),
        payload: EventPayload::TenantMemberAdded {
            user_id: UserId::from_string(user),
            email: format!("{user}@example.com"),
            role: "member".into(),
            invited_by: UserId::from_string("usr_1"),
        },
        created_at: t0(),
    }
}

fn removed(id: &str, user: &str) -> Event {
    Event {
        id: EventId::from_string(id),
        tenant_id: TenantId::from_string("ten_1"),
        payload: EventPayload::TenantMemberRemoved {
            user_id: UserId::from_string(user),
            removed_by: UserId::from_string("usr_1"),
            paused: Vec::new(),
        },
        created_at: t0(),
    }
}

fn changed(id: &str, user: &str, from: Role, to: Role) -> Event {
    Event {
        id: EventId::from_string(id),
        tenant_id: TenantId::from_string("ten_1"),
        payload: EventPayload::TenantMemberRoleChanged {
            user_id: UserId::from_string(user),
            from: from.as_str().into(),
            to: to.as_str().into(),
            changed_by: UserId::from_string("usr_1"),
            paused: Vec::new(),
        },
        created_at: t0(),
    }
}

fn new_user(n: &str, email: &str) -> (User, PasswordHash) {
    (
        User {
            id: UserId::from_string(format!("usr_{n}")),
            email: Email::parse(email).unwrap(),
            full_name: FullName::new("Grace Hopper").unwrap(),
            is_active: true,
            created_at: t0(),
        },
        PasswordHash::from_phc("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA"),
    )
}

fn acceptance(
    invitation: &Invitation,
    digest: &str,
    user: &str,
    new: Option<(User, PasswordHash)>,
) -> Acceptance {
    Acceptance {
        invitation_id: invitation.id.clone(),
        digest: SecretDigest::from_string(digest),
        new_user: new,
        user_id: UserId::from_string(user),
        tenant_id: invitation.tenant_id.clone(),
        role: invitation.role,
        event: added(&format!("evt_{user}"), user),
        now: t0() + Duration::hours(1),
    }
}

/// The owner's account (`usr_1` in `ten_1`) and a second account (`usr_2` in its own `ten_2`).
async fn setup(db: &Database) -> TeamStore {
    let accounts = AccountStore::new(db.clone());
    accounts.create_account(&super::accounts::account("1", "ada@example.com")).await.unwrap();
    accounts.create_account(&super::accounts::account("2", "grace@example.com")).await.unwrap();
    TeamStore::new(db.clone())
}

/// Invites `email` as `role` and accepts as `user` (created when `new`).
async fn join(repo: &TeamStore, n: &str, email: &str, role: Role, new: bool) {
    let i = invitation(&format!("inv_{n}"), email, role);
    repo.create_invitation(&i, &job(&format!("job_{n}"), &format!("inv_{n}"))).await.unwrap();
    let digest = format!("digest-{n}");
    assert!(repo.set_token(&i.id, &SecretDigest::from_string(&digest), t0()).await.unwrap());
    let user = format!("usr_{n}");
    let account = new.then(|| new_user(n, email));
    assert_eq!(repo.accept(&acceptance(&i, &digest, &user, account)).await.unwrap(), AcceptOutcome::Accepted);
}

async fn an_invitation_is_stored_with_its_mail_job_and_replaces_a_pending_one(db: Database) {
    let repo = setup(&db).await;
    let first = invitation("inv_a", "new@example.com", Role::Member);
    repo.create_invitation(&first, &job("job_a", "inv_a")).await.unwrap();
    assert_eq!(JobStore::new(db.clone()).pending().await.unwrap(), 1, "the mail job is stored with it");
    let view = repo.invitation(&first.id).await.unwrap().unwrap();
    assert_eq!(view.invitation, first);
    assert_eq!(
        (view.tenant_name.as_str(), view.inviter_name.as_str()),
        ("Analytical Engines", "Ada Lovelace")
    );
    let tenant = TenantId::from_string("ten_1");
    assert_eq!(repo.pending_invitations(&tenant, t0()).await.unwrap(), std::slice::from_ref(&first));

    let second = invitation("inv_b", "new@example.com", Role::Viewer);
    repo.create_invitation(&second, &job("job_b", "inv_b")).await.unwrap();
    assert_eq!(
        repo.pending_invitations(&tenant, t0()).await.unwrap(),
        std::slice::from_ref(&second),
        "the newer one replaces"
    );
    assert!(repo.invitation(&first.id).await.unwrap().unwrap().invitation.revoked_at.is_some());
    assert!(!repo.set_token(&first.id, &SecretDigest::from_string("d"), t0()).await.unwrap());

    // Another tenant sees none of it and cannot revoke it.
    let other = TenantId::from_string("ten_2");
    assert!(repo.pending_invitations(&other, t0()).await.unwrap().is_empty());
    assert!(!repo.revoke_invitation(&other, &second.id, t0()).await.unwrap());
    assert!(repo.revoke_invitation(&tenant, &second.id, t0()).await.unwrap());
    assert!(repo.pending_invitations(&tenant, t0()).await.unwrap().is_empty());
    assert!(!repo.revoke_invitation(&tenant, &second.id, t0()).await.unwrap(), "once");
}

async fn an_invitation_is_accepted_once_by_a_new_or_an_existing_user(db: Database) {
    let repo = setup(&db).await;
    let tenant = TenantId::from_string("ten_1");
    // A new address: the account, the membership and the event come together.
    join(&repo, "3", "new@example.com", Role::Member, true).await;
    let accounts = AccountStore::new(db.clone());
    let memberships = accounts.memberships(&UserId::from_string("usr_3")).await.unwrap();
    assert_eq!(memberships.len(), 1);
    assert_eq!((memberships[0].tenant_id.as_str(), memberships[0].role), ("ten_1", Role::Member));
    // An existing user (usr_2, owner of ten_2) joins as a viewer.
    join(&repo, "2", "grace@example.com", Role::Viewer, false).await;
    let members = repo.members(&tenant).await.unwrap();
    let roles: Vec<(&str, Role)> = members.iter().map(|m| (m.user_id.as_str(), m.role)).collect();
    // In the order they joined (the two at the same instant by id).
    assert_eq!(roles, [("usr_1", Role::Owner), ("usr_2", Role::Viewer), ("usr_3", Role::Member)]);
    assert_eq!(members[1].email.as_str(), "grace@example.com");
    let events = EventStore::new(db.clone()).recent(&tenant, 10).await.unwrap();
    assert_eq!(events.iter().filter(|e| e.event_type() == EventType::TenantMemberAdded).count(), 2);

    // A member already: nothing changes, the invitation stays pending.
    let again = invitation("inv_x", "grace@example.com", Role::Admin);
    repo.create_invitation(&again, &job("job_x", "inv_x")).await.unwrap();
    repo.set_token(&again.id, &SecretDigest::from_string("digest-x"), t0()).await.unwrap();
    let outcome = repo.accept(&acceptance(&again, "digest-x", "usr_2", None)).await.unwrap();
    assert_eq!(outcome, AcceptOutcome::AlreadyMember);
    assert_eq!(
        repo.member(&tenant, &UserId::from_string("usr_2")).await.unwrap().unwrap().role,
        Role::Viewer
    );
    // An address registered meanwhile.
    let taken = invitation("inv_y", "ada@example.com", Role::Admin);
    repo.create_invitation(&taken, &job("job_y", "inv_y")).await.unwrap();
    repo.set_token(&taken.id, &SecretDigest::from_string("digest-y"), t0()).await.unwrap();
    let outcome = repo
        .accept(&acceptance(&taken, "digest-y", "usr_9", Some(new_user("9", "ada@example.com"))))
        .await
        .unwrap();
    assert_eq!(outcome, AcceptOutcome::EmailTaken);
}

async fn a_spent_revoked_or_expired_invitation_cannot_be_accepted(db: Database) {
    let repo = setup(&db).await;
    let i = invitation("inv_a", "new@example.com", Role::Member);
    repo.create_invitation(&i, &job("job_a", "inv_a")).await.unwrap();
    assert!(repo.set_token(&i.id, &SecretDigest::from_string("old"), t0()).await.unwrap());
    assert!(repo.set_token(&i.id, &SecretDigest::from_string("new"), t0()).await.unwrap());
    assert!(
        repo.invitation_by_digest(&SecretDigest::from_string("old")).await.unwrap().is_none(),
        "replaced"
    );
    let found = repo.invitation_by_digest(&SecretDigest::from_string("new")).await.unwrap().unwrap();
    assert_eq!(found.invitation.id, i.id);
    let stale = acceptance(&i, "old", "usr_3", Some(new_user("3", "new@example.com")));
    assert_eq!(repo.accept(&stale).await.unwrap(), AcceptOutcome::NotUsable);
    // Expired: accepted after its expiry.
    let mut late = acceptance(&i, "new", "usr_3", Some(new_user("3", "new@example.com")));
    late.now = i.expires_at;
    assert_eq!(repo.accept(&late).await.unwrap(), AcceptOutcome::NotUsable);
    assert!(!repo.set_token(&i.id, &SecretDigest::from_string("x"), i.expires_at).await.unwrap());
    // Concurrent acceptances: exactly one wins.
    let tries = (0..4).map(|k| {
        let repo = repo.clone();
        let a = acceptance(
            &i,
            "new",
            &format!("usr_c{k}"),
            Some(new_user(&format!("c{k}"), &format!("c{k}@example.com"))),
        );
        tokio::spawn(async move { repo.accept(&a).await.unwrap() })
    });
    let outcomes: Vec<AcceptOutcome> =
        futures_util::future::join_all(tries).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(outcomes.iter().filter(|o| **o == AcceptOutcome::Accepted).count(), 1, "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|o| **o == AcceptOutcome::NotUsable).count(), 3);
    // Revoked.
    let r = invitation("inv_r", "other@example.com", Role::Member);
    repo.create_invitation(&r, &job("job_r", "inv_r")).await.unwrap();
    repo.set_token(&r.id, &SecretDigest::from_string("r"), t0()).await.unwrap();
    assert!(repo.revoke_invitation(&r.tenant_id, &r.id, t0()).await.unwrap());
    let a = acceptance(&r, "r", "usr_r", Some(new_user("r", "other@example.com")));
    assert_eq!(repo.accept(&a).await.unwrap(), AcceptOutcome::NotUsable);
}

async fn the_last_owner_can_be_neither_demoted_nor_removed(db: Database) {
    let repo = setup(&db).await;
    let tenant = TenantId::from_string("ten_1");
    let owner = UserId::from_string("usr_1");
    let e = changed("evt_d", "usr_1", Role::Owner, Role::Admin);
    assert_eq!(
        repo.change_role(&tenant, &owner, Role::Owner, Role::Admin, &e).await.unwrap(),
        MemberChange::LastOwner
    );
    let e = removed("evt_r", "usr_1");
    assert_eq!(
        repo.remove_member(&tenant, &owner, Role::Owner, &e, t0()).await.unwrap(),
        MemberChange::LastOwner
    );
    assert_eq!(repo.member(&tenant, &owner).await.unwrap().unwrap().role, Role::Owner, "nothing changed");
    assert!(EventStore::new(db.clone()).recent(&tenant, 10).await.unwrap().is_empty(), "no event");

    // With a second owner, one of them may step down; then the other is the last again.
    join(&repo, "3", "new@example.com", Role::Owner, true).await;
    let second = UserId::from_string("usr_3");
    let e = changed("evt_1", "usr_1", Role::Owner, Role::Admin);
    assert_eq!(
        repo.change_role(&tenant, &owner, Role::Owner, Role::Admin, &e).await.unwrap(),
        MemberChange::Done(Vec::new())
    );
    let e = changed("evt_2", "usr_3", Role::Owner, Role::Viewer);
    assert_eq!(
        repo.change_role(&tenant, &second, Role::Owner, Role::Viewer, &e).await.unwrap(),
        MemberChange::LastOwner
    );
    // A change checked against a role the member no longer has.
    let e = changed("evt_3", "usr_1", Role::Owner, Role::Viewer);
    assert_eq!(
        repo.change_role(&tenant, &owner, Role::Owner, Role::Viewer, &e).await.unwrap(),
        MemberChange::Gone
    );
    let events = EventStore::new(db.clone()).recent(&tenant, 10).await.unwrap();
    assert_eq!(events.iter().filter(|e| e.event_type() == EventType::TenantMemberRoleChanged).count(), 1);

    // Two owners demoting each other at once: one stays an owner.
    let e = changed("evt_4", "usr_1", Role::Admin, Role::Owner);
    assert_eq!(
        repo.change_role(&tenant, &owner, Role::Admin, Role::Owner, &e).await.unwrap(),
        MemberChange::Done(Vec::new())
    );
    let a = {
        let repo = repo.clone();
        let (t, u) = (tenant.clone(), owner.clone());
        tokio::spawn(async move {
            repo.change_role(
                &t,
                &u,
                Role::Owner,
                Role::Admin,
                &changed("evt_5", "usr_1", Role::Owner, Role::Admin),
            )
            .await
            .unwrap()
        })
    };
    let b = {
        let repo = repo.clone();
        let (t, u) = (tenant.clone(), second.clone());
        tokio::spawn(async move {
            repo.remove_member(&t, &u, Role::Owner, &removed("evt_6", "usr_3"), t0()).await.unwrap()
        })
    };
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    let mut outcomes = [a, b];
    outcomes.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(outcomes, [MemberChange::Done(Vec::new()), MemberChange::LastOwner]);
    let owners = repo.members(&tenant).await.unwrap().into_iter().filter(|m| m.role == Role::Owner).count();
    assert_eq!(owners, 1);
}

async fn removal_revokes_the_members_keys_and_ends_their_membership(db: Database) {
    use agentry_domain::identity::{ApiKey, ApiKeyName, ApiKeyRepository};
    use agentry_domain::ids::ApiKeyId;
    let repo = setup(&db).await;
    let tenant = TenantId::from_string("ten_1");
    join(&repo, "2", "grace@example.com", Role::Member, false).await;
    let keys = agentry_store::ApiKeyStore::new(db.clone());
    let key = |id: &str, tenant: &str| ApiKey {
        id: ApiKeyId::from_string(id),
        user_id: UserId::from_string("usr_2"),
        tenant_id: TenantId::from_string(tenant),
        name: ApiKeyName::new("k").unwrap(),
        key_prefix: "agk_".into(),
        digest: SecretDigest::from_string(format!("key-{id}")),
        scopes: vec!["agents:read".parse().unwrap()],
        created_at: t0(),
        expires_at: None,
        last_used_at: None,
    };
    keys.insert(&key("key_here", "ten_1")).await.unwrap();
    keys.insert(&key("key_home", "ten_2")).await.unwrap();
    assert!(keys.find_grant(&SecretDigest::from_string("key-key_here")).await.unwrap().is_some());

    let grace = UserId::from_string("usr_2");
    let e = removed("evt_r", "usr_2");
    assert_eq!(
        repo.remove_member(&tenant, &grace, Role::Member, &e, t0()).await.unwrap(),
        MemberChange::Done(Vec::new())
    );
    assert!(repo.member(&tenant, &grace).await.unwrap().is_none());
    assert!(keys.find_grant(&SecretDigest::from_string("key-key_here")).await.unwrap().is_none());
    assert!(keys.list(&grace, &tenant).await.unwrap().is_empty(), "revoked, not only unreachable");
    assert!(
        keys.find_grant(&SecretDigest::from_string("key-key_home")).await.unwrap().is_some(),
        "other tenants' keys stay"
    );
    let memberships = AccountStore::new(db.clone()).memberships(&grace).await.unwrap();
    assert_eq!(memberships.iter().map(|m| m.tenant_id.as_str()).collect::<Vec<_>>(), ["ten_2"]);
    let events = EventStore::new(db.clone()).recent(&tenant, 10).await.unwrap();
    assert_eq!(events.iter().filter(|e| e.event_type() == EventType::TenantMemberRemoved).count(), 1);
    // Removing again: gone.
    let e = removed("evt_r2", "usr_2");
    assert_eq!(
        repo.remove_member(&tenant, &grace, Role::Member, &e, t0()).await.unwrap(),
        MemberChange::Gone
    );
}

use agentry_domain::identity::{
    AccountRepository, RefreshToken, RefreshTokenRepository, RefreshTokenStatus, RotateOutcome,
};
use agentry_domain::ids::{RefreshTokenId, TokenFamilyId, UserId};
use agentry_domain::secrets::SecretDigest;
use agentry_store::{AccountStore, Database, RefreshTokenStore};
use chrono::{DateTime, Duration, TimeZone, Utc};

crate::contract!(
    a_token_reads_back_by_digest,
    rotation_spends_the_token_once_and_stores_its_successor,
    concurrent_rotations_of_one_token_let_exactly_one_through,
    revoking_a_family_leaves_other_families_alone,
    revoking_a_user_revokes_all_their_families,
    memberships_are_read_only_while_the_session_lives,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 8, 0, 0).unwrap() + Duration::milliseconds(7)
}

fn token(id: &str, family: &str, user: &str) -> RefreshToken {
    RefreshToken {
        id: RefreshTokenId::from_string(id),
        family_id: TokenFamilyId::from_string(family),
        user_id: UserId::from_string(user),
        digest: SecretDigest::from_string(format!("digest-{id}")),
        status: RefreshTokenStatus::Active,
        issued_at: t0(),
        expires_at: t0() + Duration::days(30),
    }
}

async fn setup(db: &Database) -> RefreshTokenStore {
    // Tokens reference users; create the two the tests use.
    let accounts = AccountStore::new(db.clone());
    accounts.create_account(&super::accounts::account("1", "one@example.com")).await.unwrap();
    accounts.create_account(&super::accounts::account("2", "two@example.com")).await.unwrap();
    RefreshTokenStore::new(db.clone())
}

async fn status_of(repo: &RefreshTokenStore, id: &str) -> RefreshTokenStatus {
    let digest = SecretDigest::from_string(format!("digest-{id}"));
    repo.find_by_digest(&digest).await.unwrap().unwrap().status
}

async fn a_token_reads_back_by_digest(db: Database) {
    let repo = setup(&db).await;
    let t = token("rtk_a", "rtf_1", "usr_1");
    repo.insert(&t).await.unwrap();
    assert_eq!(repo.find_by_digest(&t.digest).await.unwrap(), Some(t));
    assert_eq!(repo.find_by_digest(&SecretDigest::from_string("nope")).await.unwrap(), None);
}

async fn rotation_spends_the_token_once_and_stores_its_successor(db: Database) {
    let repo = setup(&db).await;
    repo.insert(&token("rtk_a", "rtf_1", "usr_1")).await.unwrap();
    let next = token("rtk_b", "rtf_1", "usr_1");
    let outcome = repo.rotate(&RefreshTokenId::from_string("rtk_a"), &next, t0()).await.unwrap();
    assert_eq!(outcome, RotateOutcome::Rotated);
    assert_eq!(status_of(&repo, "rtk_a").await, RefreshTokenStatus::Rotated);
    assert_eq!(status_of(&repo, "rtk_b").await, RefreshTokenStatus::Active);

    let again = token("rtk_c", "rtf_1", "usr_1");
    let outcome = repo.rotate(&RefreshTokenId::from_string("rtk_a"), &again, t0()).await.unwrap();
    assert_eq!(outcome, RotateOutcome::NotActive);
    assert_eq!(repo.find_by_digest(&again.digest).await.unwrap(), None, "nothing stored on a lost rotation");
}

async fn concurrent_rotations_of_one_token_let_exactly_one_through(db: Database) {
    let repo = setup(&db).await;
    repo.insert(&token("rtk_a", "rtf_1", "usr_1")).await.unwrap();
    let tasks = (0..8).map(|i| {
        let repo = repo.clone();
        tokio::spawn(async move {
            let next = token(&format!("rtk_n{i}"), "rtf_1", "usr_1");
            repo.rotate(&RefreshTokenId::from_string("rtk_a"), &next, t0()).await.unwrap()
        })
    });
    let outcomes: Vec<_> =
        futures_util::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(outcomes.iter().filter(|o| **o == RotateOutcome::Rotated).count(), 1, "{outcomes:?}");
    assert_eq!(db.count_rows("refresh_tokens").await.unwrap(), 2);
}

async fn revoking_a_family_leaves_other_families_alone(db: Database) {
    let repo = setup(&db).await;
    repo.insert(&token("rtk_a", "rtf_1", "usr_1")).await.unwrap();
    repo.rotate(&RefreshTokenId::from_string("rtk_a"), &token("rtk_b", "rtf_1", "usr_1"), t0())
        .await
        .unwrap();
    repo.insert(&token("rtk_c", "rtf_2", "usr_1")).await.unwrap();

    let n = repo.revoke_family(&TokenFamilyId::from_string("rtf_1"), t0()).await.unwrap();
    assert_eq!(n, 2);
    assert_eq!(status_of(&repo, "rtk_a").await, RefreshTokenStatus::Revoked);
    assert_eq!(status_of(&repo, "rtk_b").await, RefreshTokenStatus::Revoked);
    assert_eq!(status_of(&repo, "rtk_c").await, RefreshTokenStatus::Active);
    assert_eq!(
        repo.revoke_family(&TokenFamilyId::from_string("rtf_1"), t0()).await.unwrap(),
        0,
        "idempotent"
    );
}

async fn revoking_a_user_revokes_all_their_families(db: Database) {
    let repo = setup(&db).await;
    repo.insert(&token("rtk_a", "rtf_1", "usr_1")).await.unwrap();
    repo.insert(&token("rtk_b", "rtf_2", "usr_1")).await.unwrap();
    repo.insert(&token("rtk_c", "rtf_3", "usr_2")).await.unwrap();
    assert_eq!(repo.revoke_all_for_user(&UserId::from_string("usr_1"), t0()).await.unwrap(), 2);
    assert_eq!(status_of(&repo, "rtk_c").await, RefreshTokenStatus::Active);
}

async fn memberships_are_read_only_while_the_session_lives(db: Database) {
    let repo = setup(&db).await;
    let accounts = AccountStore::new(db.clone());
    let user = UserId::from_string("usr_1");
    let session = TokenFamilyId::from_string("rtf_1");
    assert_eq!(accounts.session_memberships(&user, &session).await.unwrap(), None, "no such session");
    repo.insert(&token("rtk_a", "rtf_1", "usr_1")).await.unwrap();
    let live = accounts.session_memberships(&user, &session).await.unwrap().expect("a live session");
    assert_eq!(live, accounts.memberships(&user).await.unwrap());
    // Rotation keeps the session; the other user's family is not theirs.
    let next = token("rtk_b", "rtf_1", "usr_1");
    repo.rotate(&RefreshTokenId::from_string("rtk_a"), &next, t0()).await.unwrap();
    assert!(accounts.session_memberships(&user, &session).await.unwrap().is_some());
    assert_eq!(accounts.session_memberships(&UserId::from_string("usr_2"), &session).await.unwrap(), None);
    repo.revoke_family(&session, t0()).await.unwrap();
    assert_eq!(accounts.session_memberships(&user, &session).await.unwrap(), None, "logged out");
}

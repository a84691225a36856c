use agentry_domain::identity::{
    AccountRepository, Email, OneTimeToken, OneTimeTokenRepository, PasswordHash, RefreshToken,
    RefreshTokenRepository, RefreshTokenStatus, TokenPurpose,
};
use agentry_domain::ids::{OneTimeTokenId, RefreshTokenId, TokenFamilyId, UserId};
use agentry_domain::secrets::SecretDigest;
use agentry_store::{AccountStore, Database, OneTimeTokenStore, RefreshTokenStore};
use chrono::{DateTime, Duration, TimeZone, Utc};

crate::contract!(
    a_token_is_usable_until_consumed_or_expired,
    concurrent_consumers_of_one_token_let_exactly_one_through,
    a_reset_sets_the_password_and_revokes_every_refresh_token,
    issued_tokens_are_counted_per_user_purpose_and_time,
    concurrent_requests_never_exceed_the_budget,
    an_unsent_token_can_be_deleted,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 2, 10, 0, 0).unwrap()
}

fn token(id: &str, purpose: TokenPurpose, created_at: DateTime<Utc>) -> OneTimeToken {
    OneTimeToken {
        id: OneTimeTokenId::from_string(id),
        user_id: UserId::from_string("usr_1"),
        purpose,
        digest: SecretDigest::from_string(format!("digest-{id}")),
        created_at,
        expires_at: created_at + Duration::minutes(15),
    }
}

async fn setup(db: &Database) -> OneTimeTokenStore {
    let accounts = AccountStore::new(db.clone());
    accounts.create_account(&super::accounts::account("1", "one@example.com")).await.unwrap();
    OneTimeTokenStore::new(db.clone())
}

async fn a_token_is_usable_until_consumed_or_expired(db: Database) {
    let repo = setup(&db).await;
    let t = token("ott_a", TokenPurpose::MagicLink, t0());
    repo.insert(&t).await.unwrap();
    assert_eq!(repo.find_usable(&t.digest, TokenPurpose::MagicLink, t0()).await.unwrap(), Some(t.clone()));
    assert!(
        repo.find_usable(&t.digest, TokenPurpose::PasswordReset, t0()).await.unwrap().is_none(),
        "purpose matters"
    );
    let late = t.expires_at + Duration::seconds(1);
    assert!(repo.find_usable(&t.digest, TokenPurpose::MagicLink, late).await.unwrap().is_none());
    assert!(repo.consume(&t.digest, TokenPurpose::MagicLink, late).await.unwrap().is_none(), "expired");

    assert_eq!(
        repo.consume(&t.digest, TokenPurpose::MagicLink, t0()).await.unwrap(),
        Some(t.user_id.clone())
    );
    assert!(repo.consume(&t.digest, TokenPurpose::MagicLink, t0()).await.unwrap().is_none(), "single use");
    assert!(repo.find_usable(&t.digest, TokenPurpose::MagicLink, t0()).await.unwrap().is_none());
}

async fn concurrent_consumers_of_one_token_let_exactly_one_through(db: Database) {
    let repo = setup(&db).await;
    let t = token("ott_a", TokenPurpose::PasswordReset, t0());
    repo.insert(&t).await.unwrap();
    let tasks = (0..8).map(|i| {
        let repo = repo.clone();
        let digest = t.digest.clone();
        tokio::spawn(async move {
            let hash = PasswordHash::from_phc(format!("hash-{i}"));
            repo.reset_password(&digest, &hash, t0()).await.unwrap()
        })
    });
    let winners = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .filter(|r| r.as_ref().unwrap().is_some())
        .count();
    assert_eq!(winners, 1);
}

async fn a_reset_sets_the_password_and_revokes_every_refresh_token(db: Database) {
    let repo = setup(&db).await;
    let refresh = RefreshTokenStore::new(db.clone());
    for (id, family) in [("rtk_1", "rtf_1"), ("rtk_2", "rtf_2")] {
        refresh
            .insert(&RefreshToken {
                id: RefreshTokenId::from_string(id),
                family_id: TokenFamilyId::from_string(family),
                user_id: UserId::from_string("usr_1"),
                digest: SecretDigest::from_string(format!("digest-{id}")),
                status: RefreshTokenStatus::Active,
                issued_at: t0(),
                expires_at: t0() + Duration::days(30),
            })
            .await
            .unwrap();
    }
    let t = token("ott_a", TokenPurpose::PasswordReset, t0());
    repo.insert(&t).await.unwrap();
    // Links mailed before the reset: another reset and a magic link.
    let other_reset = token("ott_b", TokenPurpose::PasswordReset, t0());
    let magic = token("ott_c", TokenPurpose::MagicLink, t0());
    repo.insert(&other_reset).await.unwrap();
    repo.insert(&magic).await.unwrap();
    let user = repo.reset_password(&t.digest, &PasswordHash::from_phc("new-hash"), t0()).await.unwrap();
    assert_eq!(user, Some(UserId::from_string("usr_1")));

    let creds = AccountStore::new(db.clone())
        .find_credentials(&Email::parse("one@example.com").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(creds.password_hash.as_str(), "new-hash");
    for id in ["rtk_1", "rtk_2"] {
        let stored = refresh
            .find_by_digest(&SecretDigest::from_string(format!("digest-{id}")))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.status, RefreshTokenStatus::Revoked);
    }
    // Spent: a second reset with the same token changes nothing, and the other links are dead.
    assert!(repo.reset_password(&t.digest, &PasswordHash::from_phc("other"), t0()).await.unwrap().is_none());
    assert!(
        repo.reset_password(&other_reset.digest, &PasswordHash::from_phc("other"), t0())
            .await
            .unwrap()
            .is_none()
    );
    assert!(repo.consume(&magic.digest, TokenPurpose::MagicLink, t0()).await.unwrap().is_none());
}

async fn an_unsent_token_can_be_deleted(db: Database) {
    let repo = setup(&db).await;
    let t = token("ott_a", TokenPurpose::MagicLink, t0());
    repo.insert(&t).await.unwrap();
    repo.delete(&t.id).await.unwrap();
    assert!(repo.find_usable(&t.digest, TokenPurpose::MagicLink, t0()).await.unwrap().is_none());
    // Deleted, it no longer counts against the budget.
    let again = token("ott_b", TokenPurpose::MagicLink, t0());
    assert!(repo.insert_within_budget(&again, t0(), 1).await.unwrap());
}

async fn issued_tokens_are_counted_per_user_purpose_and_time(db: Database) {
    let repo = setup(&db).await;
    let since = t0() - Duration::hours(1);
    // With a budget of two: the one older than the hour does not count, the one within it does.
    repo.insert(&token("ott_a", TokenPurpose::PasswordReset, t0() - Duration::minutes(90))).await.unwrap();
    repo.insert(&token("ott_b", TokenPurpose::PasswordReset, t0() - Duration::minutes(30))).await.unwrap();
    assert!(
        repo.insert_within_budget(&token("ott_c", TokenPurpose::PasswordReset, t0()), since, 2)
            .await
            .unwrap()
    );
    let over = token("ott_d", TokenPurpose::PasswordReset, t0());
    assert!(!repo.insert_within_budget(&over, since, 2).await.unwrap(), "two within the hour");
    assert!(repo.find_usable(&over.digest, TokenPurpose::PasswordReset, t0()).await.unwrap().is_none());
    // Another purpose has its own budget.
    assert!(
        repo.insert_within_budget(&token("ott_e", TokenPurpose::MagicLink, t0()), since, 2).await.unwrap()
    );
}

/// The budget holds under concurrency: 12 requests for one address at once store 3 tokens.
async fn concurrent_requests_never_exceed_the_budget(db: Database) {
    let repo = setup(&db).await;
    let since = t0() - Duration::hours(1);
    let attempts = (0..12).map(|i| {
        let repo = repo.clone();
        tokio::spawn(async move {
            let t = token(&format!("ott_{i}"), TokenPurpose::PasswordReset, t0());
            repo.insert_within_budget(&t, since, 3).await.unwrap()
        })
    });
    let stored =
        futures_util::future::join_all(attempts).await.into_iter().filter(|r| *r.as_ref().unwrap()).count();
    assert_eq!(stored, 3);
}

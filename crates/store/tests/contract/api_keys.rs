use agentry_domain::identity::{AccountRepository, ApiKey, ApiKeyName, ApiKeyRepository};
use agentry_domain::ids::{ApiKeyId, TenantId, UserId};
use agentry_domain::secrets::SecretDigest;
use agentry_domain::tenancy::{Plan, Role};
use agentry_store::{AccountStore, ApiKeyStore, Database};
use chrono::{DateTime, Duration, TimeZone, Utc};

crate::contract!(
    a_key_is_found_by_digest_with_its_users_role,
    revoked_keys_are_neither_found_nor_listed,
    a_user_lists_and_revokes_only_their_own_keys,
    touching_records_the_last_use,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 2, 9, 0, 0).unwrap()
}

fn key(id: &str, user: &str, tenant: &str) -> ApiKey {
    ApiKey {
        id: ApiKeyId::from_string(id),
        user_id: UserId::from_string(user),
        tenant_id: TenantId::from_string(tenant),
        name: ApiKeyName::new("ci").unwrap(),
        key_prefix: "agk_12345678".into(),
        digest: SecretDigest::from_string(format!("digest-{id}")),
        scopes: vec!["agents:read".parse().unwrap(), "workflows:execute".parse().unwrap()],
        created_at: t0(),
        expires_at: Some(t0() + Duration::days(7)),
        last_used_at: None,
    }
}

async fn setup(db: &Database) -> ApiKeyStore {
    let accounts = AccountStore::new(db.clone());
    accounts.create_account(&super::accounts::account("1", "one@example.com")).await.unwrap();
    accounts.create_account(&super::accounts::account("2", "two@example.com")).await.unwrap();
    ApiKeyStore::new(db.clone())
}

async fn a_key_is_found_by_digest_with_its_users_role(db: Database) {
    let repo = setup(&db).await;
    let k = key("key_a", "usr_1", "ten_1");
    repo.insert(&k).await.unwrap();
    let grant = repo.find_grant(&k.digest).await.unwrap().unwrap();
    assert_eq!(grant.key, k);
    assert_eq!(grant.role, Role::Owner);
    assert_eq!(grant.plan, Plan::Starter);
    assert!(repo.find_grant(&SecretDigest::from_string("other")).await.unwrap().is_none());
}

async fn revoked_keys_are_neither_found_nor_listed(db: Database) {
    let repo = setup(&db).await;
    let k = key("key_a", "usr_1", "ten_1");
    repo.insert(&k).await.unwrap();
    assert!(repo.revoke(&k.user_id, &k.tenant_id, &k.id, t0()).await.unwrap());
    assert!(
        !repo.revoke(&k.user_id, &k.tenant_id, &k.id, t0()).await.unwrap(),
        "revoking twice changes nothing"
    );
    assert!(repo.find_grant(&k.digest).await.unwrap().is_none());
    assert!(repo.list(&k.user_id, &k.tenant_id).await.unwrap().is_empty());
}

async fn a_user_lists_and_revokes_only_their_own_keys(db: Database) {
    let repo = setup(&db).await;
    repo.insert(&key("key_a", "usr_1", "ten_1")).await.unwrap();
    repo.insert(&key("key_b", "usr_1", "ten_1")).await.unwrap();
    repo.insert(&key("key_c", "usr_2", "ten_2")).await.unwrap();
    let listed: Vec<String> = repo
        .list(&UserId::from_string("usr_1"), &TenantId::from_string("ten_1"))
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.id.into_string())
        .collect();
    assert_eq!(listed, ["key_b", "key_a"], "newest first");
    let stranger = UserId::from_string("usr_2");
    let ten_1 = TenantId::from_string("ten_1");
    assert!(!repo.revoke(&stranger, &ten_1, &ApiKeyId::from_string("key_a"), t0()).await.unwrap());
    let elsewhere = TenantId::from_string("ten_2");
    let owner = UserId::from_string("usr_1");
    assert!(
        !repo.revoke(&owner, &elsewhere, &ApiKeyId::from_string("key_a"), t0()).await.unwrap(),
        "scoped by tenant"
    );
    assert!(repo.find_grant(&SecretDigest::from_string("digest-key_a")).await.unwrap().is_some());
}

async fn touching_records_the_last_use(db: Database) {
    let repo = setup(&db).await;
    let k = key("key_a", "usr_1", "ten_1");
    repo.insert(&k).await.unwrap();
    let used = t0() + Duration::minutes(5);
    repo.touch(&k.id, used).await.unwrap();
    assert_eq!(repo.find_grant(&k.digest).await.unwrap().unwrap().key.last_used_at, Some(used));
}

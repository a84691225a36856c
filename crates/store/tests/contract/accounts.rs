use agentry_domain::billing::{LedgerEntry, LedgerReason};
use agentry_domain::identity::{
    AccountRepository, Email, FullName, NewAccount, PasswordHash, RegisterError, User,
};
use agentry_domain::ids::{LedgerEntryId, TenantId, UserId};
use agentry_domain::tenancy::{Membership, Plan, Role, Tenant, TenantName};
use agentry_store::{AccountStore, Database};
use chrono::{DateTime, TimeZone, Utc};

crate::contract!(
    a_registered_account_reads_back_whole,
    a_second_account_with_the_same_email_is_email_taken,
    concurrent_registrations_of_one_email_store_exactly_one,
    unknown_users_are_absent,
    a_deactivated_user_is_a_member_of_nothing,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 12, 30, 15).unwrap() + chrono::Duration::milliseconds(123)
}

pub fn account(n: &str, email: &str) -> NewAccount {
    let user_id = UserId::from_string(format!("usr_{n}"));
    let tenant_id = TenantId::from_string(format!("ten_{n}"));
    NewAccount {
        user: User {
            id: user_id.clone(),
            email: Email::parse(email).unwrap(),
            full_name: FullName::new("Ada Lovelace").unwrap(),
            is_active: true,
            created_at: t0(),
        },
        password_hash: PasswordHash::from_phc("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA"),
        tenant: Tenant {
            id: tenant_id.clone(),
            name: TenantName::new("Analytical Engines").unwrap(),
            plan: Plan::Starter,
            created_at: t0(),
        },
        membership: Membership {
            tenant_id: tenant_id.clone(),
            tenant_name: "Analytical Engines".into(),
            tenant_plan: Plan::Starter,
            user_id,
            role: Role::Owner,
            created_at: t0(),
        },
        welcome_grant: LedgerEntry {
            id: LedgerEntryId::from_string(format!("led_{n}")),
            tenant_id,
            delta: 1000,
            balance_after: 1000,
            reason: LedgerReason::WelcomeGrant,
            reference: None,
            created_at: t0(),
        },
    }
}

async fn a_registered_account_reads_back_whole(db: Database) {
    let repo = AccountStore::new(db.clone());
    let new = account("1", "ada@example.com");
    repo.create_account(&new).await.unwrap();

    let creds = repo.find_credentials(&Email::parse("ada@example.com").unwrap()).await.unwrap().unwrap();
    assert_eq!(creds.user, new.user, "timestamps and fields survive the round trip");
    assert_eq!(creds.password_hash, new.password_hash);
    assert_eq!(repo.find_user(&new.user.id).await.unwrap(), Some(new.user.clone()));

    let memberships = repo.memberships(&new.user.id).await.unwrap();
    assert_eq!(memberships, vec![new.membership.clone()]);
    assert_eq!(db.count_rows("credit_ledger").await.unwrap(), 1);
}

async fn a_second_account_with_the_same_email_is_email_taken(db: Database) {
    let repo = AccountStore::new(db.clone());
    repo.create_account(&account("1", "ada@example.com")).await.unwrap();
    let err = repo.create_account(&account("2", "ada@example.com")).await.unwrap_err();
    assert!(matches!(err, RegisterError::EmailTaken), "{err:?}");
    // Nothing of the refused registration is left behind.
    for table in ["users", "tenants", "memberships", "credit_ledger"] {
        assert_eq!(db.count_rows(table).await.unwrap(), 1, "{table}");
    }
}

async fn concurrent_registrations_of_one_email_store_exactly_one(db: Database) {
    let repo = AccountStore::new(db.clone());
    let attempts = (0..8).map(|i| {
        let repo = repo.clone();
        tokio::spawn(async move { repo.create_account(&account(&i.to_string(), "race@example.com")).await })
    });
    let results = futures_util::future::join_all(attempts).await;
    let mut ok = 0;
    for r in results {
        match r.unwrap() {
            Ok(()) => ok += 1,
            Err(RegisterError::EmailTaken) => {}
            Err(e) => panic!("unexpected error: {e:?}"),
        }
    }
    assert_eq!(ok, 1);
    assert_eq!(db.count_rows("users").await.unwrap(), 1);
    assert_eq!(db.count_rows("tenants").await.unwrap(), 1);
}

async fn unknown_users_are_absent(db: Database) {
    let repo = AccountStore::new(db);
    assert!(repo.find_user(&UserId::from_string("usr_nobody")).await.unwrap().is_none());
    assert!(repo.find_credentials(&Email::parse("no@example.com").unwrap()).await.unwrap().is_none());
    assert!(repo.memberships(&UserId::from_string("usr_nobody")).await.unwrap().is_empty());
}

async fn a_deactivated_user_is_a_member_of_nothing(db: Database) {
    let repo = AccountStore::new(db);
    let mut inactive = account("1", "gone@example.com");
    inactive.user.is_active = false;
    repo.create_account(&inactive).await.unwrap();
    assert!(repo.memberships(&inactive.user.id).await.unwrap().is_empty(), "no tenant access");
    assert!(repo.find_user(&inactive.user.id).await.unwrap().is_some(), "the account itself remains");
}

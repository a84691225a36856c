//! [`AccountRepository`]: users, tenants, memberships and the registration transaction.

use agentry_domain::identity::{
    AccountRepository, Email, FullName, NewAccount, PasswordHash, RefreshTokenStatus, RegisterError, User,
    UserCredentials,
};
use agentry_domain::ids::{TenantId, TokenFamilyId, UserId};
use agentry_domain::tenancy::Membership;
use anyhow::Context as _;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::Database;
use crate::schema::{memberships, refresh_tokens, tenants, users};
use crate::types::{DbTime, parse_stored};

/// Users, tenants and memberships in the database.
#[derive(Debug, Clone)]
pub struct AccountStore {
    db: Database,
}

impl AccountStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = users, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct UserRow {
    id: String,
    email: String,
    full_name: String,
    password_hash: String,
    is_active: bool,
    created_at: DbTime,
    updated_at: DbTime,
}

impl UserRow {
    fn into_credentials(self) -> anyhow::Result<UserCredentials> {
        Ok(UserCredentials {
            user: User {
                id: UserId::from_string(self.id),
                email: Email::parse(&self.email).context("stored e-mail is invalid")?,
                full_name: FullName::new(&self.full_name).context("stored name is invalid")?,
                is_active: self.is_active,
                created_at: self.created_at.0,
            },
            password_hash: PasswordHash::from_phc(self.password_hash),
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = tenants)]
struct NewTenantRow {
    id: String,
    name: String,
    plan: &'static str,
    credits: i64,
    created_at: DbTime,
    updated_at: DbTime,
    ledger_seq: i64,
}

#[derive(Insertable)]
#[diesel(table_name = memberships)]
struct NewMembershipRow {
    tenant_id: String,
    user_id: String,
    role: &'static str,
    created_at: DbTime,
}

#[async_trait]
impl AccountRepository for AccountStore {
    async fn create_account(&self, account: &NewAccount) -> Result<(), RegisterError> {
        let user = &account.user;
        let tenant = &account.tenant;
        let grant = account.welcome_grant.clone();
        let user_row = UserRow {
            id: user.id.to_string(),
            email: user.email.as_str().to_owned(),
            full_name: user.full_name.as_str().to_owned(),
            password_hash: account.password_hash.as_str().to_owned(),
            is_active: user.is_active,
            created_at: user.created_at.into(),
            updated_at: user.created_at.into(),
        };
        let tenant_row = NewTenantRow {
            id: tenant.id.to_string(),
            name: tenant.name.as_str().to_owned(),
            plan: tenant.plan.as_str(),
            // The welcome grant below brings the balance in, as entry 1.
            credits: 0,
            created_at: tenant.created_at.into(),
            updated_at: tenant.created_at.into(),
            ledger_seq: 0,
        };
        let membership_row = NewMembershipRow {
            tenant_id: account.membership.tenant_id.to_string(),
            user_id: account.membership.user_id.to_string(),
            role: account.membership.role.as_str(),
            created_at: account.membership.created_at.into(),
        };
        let result = transaction!(self.db, conn => {
            diesel::insert_into(users::table).values(&user_row).execute(conn).await?;
            diesel::insert_into(tenants::table).values(&tenant_row).execute(conn).await?;
            diesel::insert_into(memberships::table).values(&membership_row).execute(conn).await?;
            append_ledger!(conn, &grant, credits: grant.delta, held: 0_i64)?;
            Ok(())
        });
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.is_unique_violation("users_email_unique", "users.email") => {
                Err(RegisterError::EmailTaken)
            }
            Err(e) => Err(RegisterError::Unexpected(e.into())),
        }
    }

    async fn find_credentials(&self, email: &Email) -> anyhow::Result<Option<UserCredentials>> {
        let row: Option<UserRow> = with_conn!(self.db, conn => users::table
            .filter(users::email.eq(email.as_str()))
            .select(UserRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(UserRow::into_credentials).transpose()
    }

    async fn find_user(&self, id: &UserId) -> anyhow::Result<Option<User>> {
        let row: Option<UserRow> = with_conn!(self.db, conn => users::table
            .find(id.as_str())
            .select(UserRow::as_select())
            .first(conn)
            .await
            .optional())?;
        Ok(row.map(UserRow::into_credentials).transpose()?.map(|c| c.user))
    }

    async fn memberships(&self, user: &UserId) -> anyhow::Result<Vec<Membership>> {
        // A deactivated user is a member of nothing: every credential of theirs stops working.
        let rows: Vec<MembershipRow> = with_conn!(self.db, conn => memberships::table
            .inner_join(tenants::table)
            .inner_join(users::table)
            .filter(memberships::user_id.eq(user.as_str()))
            .filter(users::is_active.eq(true))
            .order((memberships::created_at.asc(), memberships::tenant_id.asc()))
            .select((memberships::tenant_id, tenants::name, tenants::plan, memberships::role, memberships::created_at))
            .load(conn)
            .await)?;
        membership_rows(user, rows)
    }

    async fn session_memberships(
        &self,
        user: &UserId,
        session: &TokenFamilyId,
    ) -> anyhow::Result<Option<Vec<Membership>>> {
        // One query on every request with an access token: the memberships, only while a token
        // of the session's family is unrevoked (logout, reuse detection and password reset
        // revoke them all).
        let live = refresh_tokens::table
            .filter(refresh_tokens::family_id.eq(session.as_str()))
            .filter(refresh_tokens::user_id.eq(user.as_str()))
            .filter(refresh_tokens::status.ne(RefreshTokenStatus::Revoked.as_str()));
        let rows: Vec<MembershipRow> = with_conn!(self.db, conn => memberships::table
            .inner_join(tenants::table)
            .inner_join(users::table)
            .filter(memberships::user_id.eq(user.as_str()))
            .filter(users::is_active.eq(true))
            .filter(diesel::dsl::exists(live))
            .order((memberships::created_at.asc(), memberships::tenant_id.asc()))
            .select((memberships::tenant_id, tenants::name, tenants::plan, memberships::role, memberships::created_at))
            .load(conn)
            .await)?;
        // Every user has at least the tenant made at registration: no rows means the session
        // or the user is gone.
        if rows.is_empty() { Ok(None) } else { membership_rows(user, rows).map(Some) }
    }
}

type MembershipRow = (String, String, String, String, DbTime);

fn membership_rows(user: &UserId, rows: Vec<MembershipRow>) -> anyhow::Result<Vec<Membership>> {
    rows.into_iter()
        .map(|(tenant_id, tenant_name, plan, role, created_at)| {
            Ok(Membership {
                tenant_id: TenantId::from_string(tenant_id),
                tenant_name,
                tenant_plan: parse_stored(&plan, "plan")?,
                user_id: user.clone(),
                role: role.parse().map_err(|e| anyhow::anyhow!("stored role is invalid: {e}"))?,
                created_at: created_at.0,
            })
        })
        .collect()
}

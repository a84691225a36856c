//! [`ApiKeyRepository`]: API keys by digest, with their user's role in the key's tenant.

use agentry_domain::identity::{ApiKey, ApiKeyGrant, ApiKeyName, ApiKeyRepository};
use agentry_domain::ids::{ApiKeyId, TenantId, UserId};
use agentry_domain::secrets::SecretDigest;
use agentry_domain::tenancy::Scope;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::Database;
use crate::schema::{api_keys, memberships, tenants, users};
use crate::types::parse_stored;
use crate::types::{DbJsonAs, DbTime};

/// API keys in the database.
#[derive(Debug, Clone)]
pub struct ApiKeyStore {
    db: Database,
}

impl ApiKeyStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = api_keys, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct ApiKeyRow {
    id: String,
    user_id: String,
    tenant_id: String,
    name: String,
    key_prefix: String,
    key_digest: String,
    scopes: DbJsonAs<Vec<String>>,
    created_at: DbTime,
    expires_at: Option<DbTime>,
    last_used_at: Option<DbTime>,
}

impl ApiKeyRow {
    fn from_domain(k: &ApiKey) -> Self {
        Self {
            id: k.id.to_string(),
            user_id: k.user_id.to_string(),
            tenant_id: k.tenant_id.to_string(),
            name: k.name.as_str().to_owned(),
            key_prefix: k.key_prefix.clone(),
            key_digest: k.digest.as_str().to_owned(),
            scopes: DbJsonAs(k.scopes.iter().map(|s| s.as_str().to_owned()).collect()),
            created_at: k.created_at.into(),
            expires_at: k.expires_at.map(DbTime),
            last_used_at: k.last_used_at.map(DbTime),
        }
    }

    fn into_domain(self) -> anyhow::Result<ApiKey> {
        Ok(ApiKey {
            id: ApiKeyId::from_string(self.id),
            user_id: UserId::from_string(self.user_id),
            tenant_id: TenantId::from_string(self.tenant_id),
            name: ApiKeyName::new(&self.name)?,
            key_prefix: self.key_prefix,
            digest: SecretDigest::from_string(self.key_digest),
            scopes: self
                .scopes
                .0
                .iter()
                .map(|s| parse_stored::<Scope>(s, "scope"))
                .collect::<anyhow::Result<_>>()?,
            created_at: self.created_at.0,
            expires_at: self.expires_at.map(|t| t.0),
            last_used_at: self.last_used_at.map(|t| t.0),
        })
    }
}

#[async_trait]
impl ApiKeyRepository for ApiKeyStore {
    async fn insert(&self, key: &ApiKey) -> anyhow::Result<()> {
        let row = ApiKeyRow::from_domain(key);
        transaction!(self.db, conn => Ok(diesel::insert_into(api_keys::table).values(&row).execute(conn).await?))?;
        Ok(())
    }

    async fn find_grant(&self, digest: &SecretDigest) -> anyhow::Result<Option<ApiKeyGrant>> {
        // The join with memberships makes a key die with its user's membership.
        let row: Option<(ApiKeyRow, String, String)> = with_conn!(self.db, conn => api_keys::table
            .inner_join(
                memberships::table.on(memberships::tenant_id
                    .eq(api_keys::tenant_id)
                    .and(memberships::user_id.eq(api_keys::user_id))),
            )
            .inner_join(tenants::table.on(tenants::id.eq(api_keys::tenant_id)))
            .inner_join(users::table.on(users::id.eq(api_keys::user_id)))
            .filter(api_keys::key_digest.eq(digest.as_str()))
            .filter(users::is_active.eq(true))
            .filter(api_keys::revoked_at.is_null())
            .select((ApiKeyRow::as_select(), memberships::role, tenants::plan))
            .first(conn)
            .await
            .optional())?;
        row.map(|(key, role, plan)| {
            Ok(ApiKeyGrant {
                key: key.into_domain()?,
                role: parse_stored(&role, "role")?,
                plan: parse_stored(&plan, "plan")?,
            })
        })
        .transpose()
    }

    async fn list(&self, user: &UserId, tenant: &TenantId) -> anyhow::Result<Vec<ApiKey>> {
        let rows: Vec<ApiKeyRow> = with_conn!(self.db, conn => api_keys::table
            .filter(api_keys::user_id.eq(user.as_str()))
            .filter(api_keys::tenant_id.eq(tenant.as_str()))
            .filter(api_keys::revoked_at.is_null())
            .order(api_keys::id.desc())
            .select(ApiKeyRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().map(ApiKeyRow::into_domain).collect()
    }

    async fn revoke(
        &self,
        user: &UserId,
        tenant: &TenantId,
        key: &ApiKeyId,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let (key, user, tenant) = (key.clone(), user.clone(), tenant.clone());
        let n = transaction!(self.db, conn => Ok(diesel::update(
                api_keys::table
                    .filter(api_keys::id.eq(key.as_str()))
                    .filter(api_keys::user_id.eq(user.as_str()))
                    .filter(api_keys::tenant_id.eq(tenant.as_str()))
                    .filter(api_keys::revoked_at.is_null()),
            )
            .set(api_keys::revoked_at.eq(DbTime(now)))
            .execute(conn)
            .await?))?;
        Ok(n == 1)
    }

    async fn touch(&self, key: &ApiKeyId, now: DateTime<Utc>) -> anyhow::Result<()> {
        let key = key.clone();
        transaction!(self.db, conn => Ok(diesel::update(api_keys::table.filter(api_keys::id.eq(key.as_str())))
            .set(api_keys::last_used_at.eq(DbTime(now)))
            .execute(conn)
            .await?))?;
        Ok(())
    }
}

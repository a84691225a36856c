//! [`RefreshTokenRepository`]: refresh tokens by digest, rotation guarded by status.

use agentry_domain::identity::{RefreshToken, RefreshTokenRepository, RotateOutcome};
use agentry_domain::ids::{RefreshTokenId, TokenFamilyId, UserId};
use agentry_domain::secrets::SecretDigest;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::{Database, StoreError};
use crate::schema::{refresh_tokens, users};
use crate::types::{DbTime, parse_named};

/// A no-op update of the user's row: on PostgreSQL it takes the row's lock until the
/// transaction ends, which orders a rotation and a revocation of the same user's tokens (under
/// READ COMMITTED a revocation would otherwise miss a successor inserted concurrently). SQLite
/// write transactions are serialised anyway.
macro_rules! lock_user {
    ($conn:expr, $user:expr) => {
        diesel::update(users::table.filter(users::id.eq($user)))
            .set(users::updated_at.eq(users::updated_at))
            .execute($conn)
            .await
    };
}

/// Refresh tokens in the database.
#[derive(Debug, Clone)]
pub struct RefreshTokenStore {
    db: Database,
}

impl RefreshTokenStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = refresh_tokens, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct RefreshTokenRow {
    id: String,
    family_id: String,
    user_id: String,
    token_digest: String,
    status: String,
    issued_at: DbTime,
    expires_at: DbTime,
    updated_at: DbTime,
}

impl RefreshTokenRow {
    fn from_domain(t: &RefreshToken) -> Self {
        Self {
            id: t.id.to_string(),
            family_id: t.family_id.to_string(),
            user_id: t.user_id.to_string(),
            token_digest: t.digest.as_str().to_owned(),
            status: t.status.as_str().to_owned(),
            issued_at: t.issued_at.into(),
            expires_at: t.expires_at.into(),
            updated_at: t.issued_at.into(),
        }
    }

    fn into_domain(self) -> anyhow::Result<RefreshToken> {
        Ok(RefreshToken {
            id: RefreshTokenId::from_string(self.id),
            family_id: TokenFamilyId::from_string(self.family_id),
            user_id: UserId::from_string(self.user_id),
            digest: SecretDigest::from_string(self.token_digest),
            status: parse_named(&self.status, "refresh token status")?,
            issued_at: self.issued_at.0,
            expires_at: self.expires_at.0,
        })
    }
}

const ACTIVE: &str = "active";
const ROTATED: &str = "rotated";
const REVOKED: &str = "revoked";

#[async_trait]
impl RefreshTokenRepository for RefreshTokenStore {
    async fn insert(&self, token: &RefreshToken) -> anyhow::Result<()> {
        let row = RefreshTokenRow::from_domain(token);
        transaction!(self.db, conn => Ok(diesel::insert_into(refresh_tokens::table).values(&row).execute(conn).await?))?;
        Ok(())
    }

    async fn find_by_digest(&self, digest: &SecretDigest) -> anyhow::Result<Option<RefreshToken>> {
        let row: Option<RefreshTokenRow> = with_conn!(self.db, conn => refresh_tokens::table
            .filter(refresh_tokens::token_digest.eq(digest.as_str()))
            .select(RefreshTokenRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(RefreshTokenRow::into_domain).transpose()
    }

    async fn rotate(
        &self,
        current: &RefreshTokenId,
        successor: &RefreshToken,
        now: DateTime<Utc>,
    ) -> anyhow::Result<RotateOutcome> {
        let row = RefreshTokenRow::from_domain(successor);
        let now = DbTime(now);
        let user = successor.user_id.clone();
        let current = current.clone();
        let outcome = transaction!(self.db, conn => {
            lock_user!(conn, user.as_str())?;
            // The status guard makes this the single point where concurrent refreshes of one
            // token are told apart: exactly one of them sees a changed row.
            let changed = diesel::update(
                refresh_tokens::table
                    .filter(refresh_tokens::id.eq(current.as_str()))
                    .filter(refresh_tokens::status.eq(ACTIVE)),
            )
            .set((refresh_tokens::status.eq(ROTATED), refresh_tokens::updated_at.eq(now)))
            .execute(conn)
            .await?;
            if changed == 0 {
                return Ok::<_, StoreError>(RotateOutcome::NotActive);
            }
            diesel::insert_into(refresh_tokens::table).values(&row).execute(conn).await?;
            Ok(RotateOutcome::Rotated)
        })?;
        Ok(outcome)
    }

    async fn revoke_family(&self, family: &TokenFamilyId, now: DateTime<Utc>) -> anyhow::Result<u64> {
        let now = DbTime(now);
        let family = family.clone();
        let n = transaction!(self.db, conn => {
            let owner: Option<String> = refresh_tokens::table
                .filter(refresh_tokens::family_id.eq(family.as_str()))
                .select(refresh_tokens::user_id)
                .first(conn)
                .await
                .optional()?;
            let Some(owner) = owner else {
                return Ok::<_, StoreError>(0);
            };
            // Waits for a rotation of the same user in flight, so its successor is revoked too.
            lock_user!(conn, &owner)?;
            let n = diesel::update(
                refresh_tokens::table
                    .filter(refresh_tokens::family_id.eq(family.as_str()))
                    .filter(refresh_tokens::status.ne(REVOKED)),
            )
            .set((refresh_tokens::status.eq(REVOKED), refresh_tokens::updated_at.eq(now)))
            .execute(conn)
            .await?;
            Ok(n)
        })?;
        Ok(n as u64)
    }

    async fn revoke_all_for_user(&self, user: &UserId, now: DateTime<Utc>) -> anyhow::Result<u64> {
        let now = DbTime(now);
        let user = user.clone();
        let n = transaction!(self.db, conn => {
            lock_user!(conn, user.as_str())?;
            let n = diesel::update(
                refresh_tokens::table
                    .filter(refresh_tokens::user_id.eq(user.as_str()))
                    .filter(refresh_tokens::status.ne(REVOKED)),
            )
            .set((refresh_tokens::status.eq(REVOKED), refresh_tokens::updated_at.eq(now)))
            .execute(conn)
            .await?;
            Ok::<_, StoreError>(n)
        })?;
        Ok(n as u64)
    }
}

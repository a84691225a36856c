//! [`OneTimeTokenRepository`]: password-reset and magic-link tokens, single use under races.

use agentry_domain::identity::{OneTimeToken, OneTimeTokenRepository, PasswordHash, TokenPurpose};
use agentry_domain::ids::{OneTimeTokenId, UserId};
use agentry_domain::secrets::SecretDigest;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::{Database, StoreError};
use crate::schema::{one_time_tokens, refresh_tokens, users};
use crate::types::DbTime;

/// One-time tokens in the database.
#[derive(Debug, Clone)]
pub struct OneTimeTokenStore {
    db: Database,
}

impl OneTimeTokenStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = one_time_tokens, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct OneTimeTokenRow {
    id: String,
    user_id: String,
    purpose: String,
    token_digest: String,
    created_at: DbTime,
    expires_at: DbTime,
}

impl From<&OneTimeToken> for OneTimeTokenRow {
    fn from(token: &OneTimeToken) -> Self {
        Self {
            id: token.id.to_string(),
            user_id: token.user_id.to_string(),
            purpose: token.purpose.as_str().to_owned(),
            token_digest: token.digest.as_str().to_owned(),
            created_at: token.created_at.into(),
            expires_at: token.expires_at.into(),
        }
    }
}

fn purpose_of(value: &str) -> anyhow::Result<TokenPurpose> {
    match value {
        "password_reset" => Ok(TokenPurpose::PasswordReset),
        "magic_link" => Ok(TokenPurpose::MagicLink),
        other => anyhow::bail!("stored token purpose {other:?} is invalid"),
    }
}

#[async_trait]
impl OneTimeTokenRepository for OneTimeTokenStore {
    async fn insert(&self, token: &OneTimeToken) -> anyhow::Result<()> {
        let row = OneTimeTokenRow::from(token);
        transaction!(self.db, conn => Ok(diesel::insert_into(one_time_tokens::table).values(&row).execute(conn).await?))?;
        Ok(())
    }

    async fn insert_within_budget(
        &self,
        token: &OneTimeToken,
        since: DateTime<Utc>,
        max: u64,
    ) -> anyhow::Result<bool> {
        let row = OneTimeTokenRow::from(token);
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        let stored = transaction!(self.db, conn => {
            // A write to the user's row (changing nothing) holds its lock until the end of the
            // transaction, so concurrent requests for one address, from any instance, count
            // one after the other, each seeing the tokens the one before stored. (SQLite's one
            // writer runs them one at a time already.)
            let locked = diesel::update(users::table.filter(users::id.eq(&row.user_id)))
                .set(users::updated_at.eq(users::updated_at))
                .execute(conn)
                .await?;
            if locked == 0 {
                return Ok(false);
            }
            let issued: i64 = one_time_tokens::table
                .filter(one_time_tokens::user_id.eq(&row.user_id))
                .filter(one_time_tokens::purpose.eq(&row.purpose))
                .filter(one_time_tokens::created_at.ge(DbTime(since)))
                .count()
                .get_result(conn)
                .await?;
            if issued >= max {
                return Ok(false);
            }
            diesel::insert_into(one_time_tokens::table).values(&row).execute(conn).await?;
            Ok(true)
        })?;
        Ok(stored)
    }

    async fn find_usable(
        &self,
        digest: &SecretDigest,
        purpose: TokenPurpose,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<OneTimeToken>> {
        let row: Option<OneTimeTokenRow> = with_conn!(self.db, conn => one_time_tokens::table
            .filter(one_time_tokens::token_digest.eq(digest.as_str()))
            .filter(one_time_tokens::purpose.eq(purpose.as_str()))
            .filter(one_time_tokens::used_at.is_null())
            .filter(one_time_tokens::expires_at.gt(DbTime(now)))
            .select(OneTimeTokenRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(|r| {
            Ok(OneTimeToken {
                id: OneTimeTokenId::from_string(r.id),
                user_id: UserId::from_string(r.user_id),
                purpose: purpose_of(&r.purpose)?,
                digest: SecretDigest::from_string(r.token_digest),
                created_at: r.created_at.0,
                expires_at: r.expires_at.0,
            })
        })
        .transpose()
    }

    async fn consume(
        &self,
        digest: &SecretDigest,
        purpose: TokenPurpose,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<UserId>> {
        let now = DbTime(now);
        let digest = digest.clone();
        // One conditional UPDATE: of concurrent consumers exactly one sees the row unused.
        let user: Option<String> = transaction!(self.db, conn => Ok(diesel::update(
                one_time_tokens::table
                    .filter(one_time_tokens::token_digest.eq(digest.as_str()))
                    .filter(one_time_tokens::purpose.eq(purpose.as_str()))
                    .filter(one_time_tokens::used_at.is_null())
                    .filter(one_time_tokens::expires_at.gt(now)),
            )
            .set(one_time_tokens::used_at.eq(now))
            .returning(one_time_tokens::user_id)
            .get_result(conn)
            .await
            .optional()?))?;
        Ok(user.map(UserId::from_string))
    }

    async fn delete(&self, id: &OneTimeTokenId) -> anyhow::Result<()> {
        let id = id.clone();
        transaction!(self.db, conn => Ok(diesel::delete(one_time_tokens::table.filter(one_time_tokens::id.eq(id.as_str())))
            .execute(conn)
            .await?))?;
        Ok(())
    }

    async fn reset_password(
        &self,
        digest: &SecretDigest,
        new_hash: &PasswordHash,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<UserId>> {
        let now = DbTime(now);
        let (digest, new_hash) = (digest.clone(), new_hash.clone());
        let user = transaction!(self.db, conn => {
            let user: Option<String> = diesel::update(
                one_time_tokens::table
                    .filter(one_time_tokens::token_digest.eq(digest.as_str()))
                    .filter(one_time_tokens::purpose.eq(TokenPurpose::PasswordReset.as_str()))
                    .filter(one_time_tokens::used_at.is_null())
                    .filter(one_time_tokens::expires_at.gt(now)),
            )
            .set(one_time_tokens::used_at.eq(now))
            .returning(one_time_tokens::user_id)
            .get_result(conn)
            .await
            .optional()?;
            let Some(user) = user else {
                return Ok::<_, StoreError>(None);
            };
            diesel::update(users::table.filter(users::id.eq(&user)))
                .set((users::password_hash.eq(new_hash.as_str()), users::updated_at.eq(now)))
                .execute(conn)
                .await?;
            // Every session ends (its access tokens with it, at their next request).
            diesel::update(
                refresh_tokens::table
                    .filter(refresh_tokens::user_id.eq(&user))
                    .filter(refresh_tokens::status.ne("revoked")),
            )
            .set((refresh_tokens::status.eq("revoked"), refresh_tokens::updated_at.eq(now)))
            .execute(conn)
            .await?;
            // Links mailed before the reset (another reset, a magic link) stop working.
            diesel::update(
                one_time_tokens::table
                    .filter(one_time_tokens::user_id.eq(&user))
                    .filter(one_time_tokens::used_at.is_null()),
            )
            .set(one_time_tokens::used_at.eq(now))
            .execute(conn)
            .await?;
            Ok(Some(user))
        })?;
        Ok(user.map(UserId::from_string))
    }
}

//! [`RateCounter`] in the database, so every instance of the service counts against one limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentry_domain::ratelimit::RateCounter;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel::upsert::excluded;
use diesel_async::RunQueryDsl;

use crate::database::Database;
use crate::schema::rate_limit_counters;

/// Fixed-window counters in the `rate_limit_counters` table.
#[derive(Debug, Clone)]
pub struct DbRateCounter {
    db: Database,
    hits: Arc<AtomicU64>,
}

impl DbRateCounter {
    /// A counter over `db`.
    pub fn new(db: Database) -> Self {
        Self { db, hits: Arc::new(AtomicU64::new(0)) }
    }

    /// Deletes windows that ended before `now` (Unix seconds); returns how many.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn purge_expired(&self, now: i64) -> anyhow::Result<usize> {
        let n = transaction!(self.db, conn => Ok(diesel::delete(
                rate_limit_counters::table.filter(rate_limit_counters::expires_at.lt(now)),
            )
            .execute(conn)
            .await?))?;
        Ok(n)
    }
}

/// Every this many hits, one of them also sweeps ended windows, so the table stays small
/// without a separate job.
const PURGE_EVERY: u64 = 1024;

#[async_trait]
impl RateCounter for DbRateCounter {
    async fn hit(&self, bucket: &str, window_start: i64, window_secs: i64) -> anyhow::Result<u64> {
        let expires_at = window_start + window_secs;
        // INSERT … ON CONFLICT DO UPDATE … RETURNING: one atomic statement on both backends.
        let bucket = bucket.to_owned();
        let hits: i64 = transaction!(self.db, conn => Ok(diesel::insert_into(rate_limit_counters::table)
            .values((
                rate_limit_counters::bucket.eq(bucket),
                rate_limit_counters::window_start.eq(window_start),
                rate_limit_counters::hits.eq(1_i64),
                rate_limit_counters::expires_at.eq(expires_at),
            ))
            .on_conflict((rate_limit_counters::bucket, rate_limit_counters::window_start))
            .do_update()
            .set(rate_limit_counters::hits.eq(rate_limit_counters::hits + excluded(rate_limit_counters::hits)))
            .returning(rate_limit_counters::hits)
            .get_result(conn)
            .await?))?;
        let sweep = self.hits.fetch_add(1, Ordering::Relaxed) % PURGE_EVERY == PURGE_EVERY - 1;
        if sweep && let Err(e) = self.purge_expired(window_start).await {
            tracing::warn!(error = %e, "purging ended rate-limit windows failed");
        }
        Ok(u64::try_from(hits).unwrap_or(0))
    }
}

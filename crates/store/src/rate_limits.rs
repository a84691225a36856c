//! [`RateCounter`] in the database, so every instance of the service counts against one limit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use agentry_domain::ratelimit::{RateCounter, Window};
use async_trait::async_trait;
use diesel::prelude::*;
use diesel::upsert::excluded;
use diesel_async::RunQueryDsl;

use diesel::sql_types::{BigInt, Text};

use crate::database::{Backend, Database};
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

/// The PostgreSQL statement that counts a hit in `windows` windows (built once per count): one
/// upsert per window, chained as data-modifying CTEs, each inserting only when the window
/// before it is still within its limit (`FROM w{i-1} WHERE hits <= limit`). One statement is
/// one round trip and atomic by itself, with no transaction around it.
fn postgres_hit_sql(windows: usize) -> String {
    let mut ctes = Vec::with_capacity(windows);
    let mut selects = Vec::with_capacity(windows);
    for i in 0..windows {
        // Binds per window: bucket, window start, expiry, then the limit that gates the next
        // window (the last window's limit gates nothing and is not bound).
        let (bucket, start, expires) = (4 * i + 1, 4 * i + 2, 4 * i + 3);
        let source = if i == 0 {
            format!("VALUES (${bucket}, ${start}, 1, ${expires})")
        } else {
            let (before, its_limit) = (i - 1, 4 * i);
            format!(
                "SELECT ${bucket}, ${start}, 1, ${expires} FROM w{before} WHERE w{before}.hits <= ${its_limit}"
            )
        };
        ctes.push(format!(
            "w{i} AS (INSERT INTO rate_limit_counters (bucket, window_start, hits, expires_at) {source} \
             ON CONFLICT (bucket, window_start) DO UPDATE SET hits = rate_limit_counters.hits + 1 \
             RETURNING hits)"
        ));
        selects.push(format!("SELECT {i} AS position, hits FROM w{i}"));
    }
    format!(
        "WITH {} SELECT hits FROM ({}) AS counted ORDER BY position",
        ctes.join(", "),
        selects.join(" UNION ALL ")
    )
}

/// A window's count; the statement answers them in the windows' order.
#[derive(QueryableByName)]
struct CountedRow {
    #[diesel(sql_type = BigInt)]
    hits: i64,
}

#[async_trait]
impl RateCounter for DbRateCounter {
    async fn hit(&self, subject: &str, windows: &[Window]) -> anyhow::Result<Vec<u64>> {
        let Some(first) = windows.first() else { return Ok(Vec::new()) };
        let bucket = |w: &Window| format!("{subject}:{}", w.name);
        let limit = |w: &Window| i64::try_from(w.limit).unwrap_or(i64::MAX);
        // Counted in the order given: the statements below bind the windows' fields in turn.
        let hits: Vec<i64> = match (self.db.backend(), windows) {
            // The minute, or the minute and the day: one statement, one round trip. A client
            // that goes away mid-statement loses nothing but this count.
            (Backend::Postgres, [w]) => {
                let rows: Vec<CountedRow> = with_conn!(self.db, conn => diesel::sql_query(&*ONE_WINDOW)
                    .bind::<Text, _>(bucket(w))
                    .bind::<BigInt, _>(w.start)
                    .bind::<BigInt, _>(w.start + w.secs)
                    .load(conn)
                    .await)?;
                rows.into_iter().map(|r| r.hits).collect()
            }
            (Backend::Postgres, [m, d]) => {
                let rows: Vec<CountedRow> = with_conn!(self.db, conn => diesel::sql_query(&*TWO_WINDOWS)
                    .bind::<Text, _>(bucket(m))
                    .bind::<BigInt, _>(m.start)
                    .bind::<BigInt, _>(m.start + m.secs)
                    .bind::<BigInt, _>(limit(m))
                    .bind::<Text, _>(bucket(d))
                    .bind::<BigInt, _>(d.start)
                    .bind::<BigInt, _>(d.start + d.secs)
                    .load(conn)
                    .await)?;
                rows.into_iter().map(|r| r.hits).collect()
            }
            // SQLite (whose single writer runs the unit alone, so its upserts are atomic
            // together; it has no data-modifying CTEs to make them one statement), or more
            // windows than the statements above take: one upsert per window in one unit.
            _ => {
                let windows: Vec<(String, Window)> = windows.iter().map(|w| (bucket(w), *w)).collect();
                transaction!(self.db, conn => {
                    let mut counts = Vec::with_capacity(windows.len());
                    for (bucket, w) in windows {
                        let hits: i64 = diesel::insert_into(rate_limit_counters::table)
                            .values((
                                rate_limit_counters::bucket.eq(bucket),
                                rate_limit_counters::window_start.eq(w.start),
                                rate_limit_counters::hits.eq(1_i64),
                                rate_limit_counters::expires_at.eq(w.start + w.secs),
                            ))
                            .on_conflict((rate_limit_counters::bucket, rate_limit_counters::window_start))
                            .do_update()
                            .set(rate_limit_counters::hits.eq(rate_limit_counters::hits + excluded(rate_limit_counters::hits)))
                            .returning(rate_limit_counters::hits)
                            .get_result(conn)
                            .await?;
                        counts.push(hits);
                        if u64::try_from(hits).unwrap_or(0) > w.limit {
                            break;
                        }
                    }
                    Ok(counts)
                })?
            }
        };
        let sweep = self.hits.fetch_add(1, Ordering::Relaxed) % PURGE_EVERY == PURGE_EVERY - 1;
        if sweep && let Err(e) = self.purge_expired(first.start).await {
            tracing::warn!(error = %e, "purging ended rate-limit windows failed");
        }
        Ok(hits.into_iter().map(|h| u64::try_from(h).unwrap_or(0)).collect())
    }
}

static ONE_WINDOW: LazyLock<String> = LazyLock::new(|| postgres_hit_sql(1));
static TWO_WINDOWS: LazyLock<String> = LazyLock::new(|| postgres_hit_sql(2));

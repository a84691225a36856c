//! Fixed-window rate limiting: per-minute and per-day budgets counted in a shared store.
//!
//! The store only counts ([`RateCounter`]); the decisions — which window, what remains, when
//! it resets, how long to wait — are made here, the same for every store.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::tenancy::Plan;
use crate::time::Clock;

/// Budgets for one subject (a tenant, a client address). `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Requests per minute.
    pub per_minute: Option<u64>,
    /// Requests per day (UTC).
    pub per_day: Option<u64>,
}

impl Quota {
    /// No limit at all.
    pub const UNLIMITED: Self = Self { per_minute: None, per_day: None };

    /// Only a per-minute budget.
    pub fn per_minute(limit: u64) -> Self {
        Self { per_minute: Some(limit), per_day: None }
    }
}

/// Which published table of plan limits applies (`AGENTRY_PLAN_TABLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlanTable {
    /// Starter 60/min and 1,000/day; Pro 600/min and 50,000/day; Enterprise unlimited.
    #[default]
    One,
    /// Starter 60/min and 10,000/day; Pro 300/min and 100,000/day; Enterprise unlimited.
    Two,
}

impl PlanTable {
    /// The quota of `plan` under this table.
    pub fn quota(self, plan: Plan) -> Quota {
        let (per_minute, per_day) = match (self, plan) {
            (_, Plan::Enterprise) => return Quota::UNLIMITED,
            (Self::One, Plan::Starter) => (60, 1_000),
            (Self::One, Plan::Pro) => (600, 50_000),
            (Self::Two, Plan::Starter) => (60, 10_000),
            (Self::Two, Plan::Pro) => (300, 100_000),
        };
        Quota { per_minute: Some(per_minute), per_day: Some(per_day) }
    }
}

/// Counts hits per bucket and window. Implementations shared by several service instances must
/// count in a shared store, so that the instances enforce one limit together.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait RateCounter: Send + Sync {
    /// Adds one hit to `bucket` in the window starting at `window_start` (Unix seconds) and
    /// returns the window's count including it. `window_secs` lets a store expire old windows.
    async fn hit(&self, bucket: &str, window_start: i64, window_secs: i64) -> anyhow::Result<u64>;
}

/// The outcome of one rate-limited request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateStatus {
    /// The limit of the window that decided (`X-RateLimit-Limit`): the per-minute limit, or
    /// the per-day one when the day's budget refused the request; `None` when there is none.
    pub limit: Option<u64>,
    /// Requests left in that window (`X-RateLimit-Remaining`).
    pub remaining: u64,
    /// When that window ends, Unix seconds (`X-RateLimit-Reset`).
    pub reset_at: i64,
    /// When refused: seconds until a retry can succeed (`Retry-After`).
    pub retry_after: Option<u64>,
}

impl RateStatus {
    /// Whether the request may go on.
    pub fn allowed(&self) -> bool {
        self.retry_after.is_none()
    }
}

const MINUTE: i64 = 60;
const DAY: i64 = 86_400;

/// Applies quotas with a [`RateCounter`].
#[derive(Clone)]
pub struct RateLimiter {
    counter: Arc<dyn RateCounter>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RateLimiter { .. }")
    }
}

fn window_start(now: i64, len: i64) -> i64 {
    now - now.rem_euclid(len)
}

impl RateLimiter {
    /// A limiter counting with `counter`.
    pub fn new(counter: Arc<dyn RateCounter>, clock: Arc<dyn Clock>) -> Self {
        Self { counter, clock }
    }

    /// Counts one request of `subject` against `quota`. The minute window is checked first;
    /// a request refused by it does not use up the day's budget.
    ///
    /// # Errors
    /// When the counter's store fails.
    pub async fn check(&self, subject: &str, quota: Quota) -> anyhow::Result<RateStatus> {
        let now: DateTime<Utc> = self.clock.now();
        let now = now.timestamp();
        let minute = window_start(now, MINUTE);
        let mut status = RateStatus {
            limit: quota.per_minute,
            remaining: 0,
            reset_at: minute + MINUTE,
            retry_after: None,
        };
        if let Some(limit) = quota.per_minute {
            let count = self.counter.hit(&format!("{subject}:m"), minute, MINUTE).await?;
            status.remaining = limit.saturating_sub(count);
            if count > limit {
                status.retry_after = Some(u64::try_from(minute + MINUTE - now).unwrap_or(1).max(1));
                return Ok(status);
            }
        }
        if let Some(limit) = quota.per_day {
            let day = window_start(now, DAY);
            let count = self.counter.hit(&format!("{subject}:d"), day, DAY).await?;
            if count > limit {
                // The day window refused: the headers describe it, not the minute.
                status.limit = Some(limit);
                status.remaining = 0;
                status.reset_at = day + DAY;
                status.retry_after = Some(u64::try_from(day + DAY - now).unwrap_or(1).max(1));
            } else if quota.per_minute.is_none() {
                status.remaining = limit - count;
            }
        }
        Ok(status)
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use mockall::predicate::eq;

    use super::*;
    use crate::time::MockClock;

    fn limiter(counter: MockRateCounter, at: DateTime<Utc>) -> RateLimiter {
        let mut clock = MockClock::new();
        clock.expect_now().returning(move || at);
        RateLimiter::new(Arc::new(counter), Arc::new(clock))
    }

    fn at_secs(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(s, 0).unwrap()
    }

    #[tokio::test]
    async fn within_the_minute_budget_requests_pass_and_count_down() {
        let mut counter = MockRateCounter::new();
        counter.expect_hit().with(eq("ten_1:m"), eq(1_000_020), eq(60)).returning(|_, _, _| Ok(59));
        counter.expect_hit().with(eq("ten_1:d"), eq(950_400), eq(86_400)).returning(|_, _, _| Ok(500));
        let status = limiter(counter, at_secs(1_000_045))
            .check("ten_1", Quota { per_minute: Some(60), per_day: Some(1000) })
            .await
            .unwrap();
        assert!(status.allowed());
        assert_eq!((status.limit, status.remaining, status.reset_at), (Some(60), 1, 1_000_080));
    }

    #[tokio::test]
    async fn past_the_minute_budget_the_wait_is_until_the_window_ends_and_the_day_is_spared() {
        let mut counter = MockRateCounter::new();
        counter.expect_hit().with(eq("ten_1:m"), eq(1_000_020), eq(60)).returning(|_, _, _| Ok(61));
        counter
            .expect_hit()
            .with(eq("ten_1:d"), mockall::predicate::always(), mockall::predicate::always())
            .never();
        let status = limiter(counter, at_secs(1_000_045))
            .check("ten_1", Quota { per_minute: Some(60), per_day: Some(1000) })
            .await
            .unwrap();
        assert_eq!(status.retry_after, Some(35));
        assert_eq!(status.remaining, 0);
    }

    #[tokio::test]
    async fn past_the_day_budget_the_wait_is_until_midnight() {
        let mut counter = MockRateCounter::new();
        counter
            .expect_hit()
            .with(eq("ip:1:m"), mockall::predicate::always(), eq(60))
            .returning(|_, _, _| Ok(1));
        counter
            .expect_hit()
            .with(eq("ip:1:d"), mockall::predicate::always(), eq(86_400))
            .returning(|_, _, _| Ok(1001));
        let status = limiter(counter, at_secs(86_400 * 3 - 100))
            .check("ip:1", Quota { per_minute: Some(60), per_day: Some(1000) })
            .await
            .unwrap();
        assert_eq!(status.retry_after, Some(100));
        assert_eq!(status.remaining, 0);
        assert_eq!((status.limit, status.reset_at), (Some(1000), 86_400 * 3), "the headers describe the day");
    }

    #[test]
    fn plan_tables_match_the_published_limits() {
        let q = |t: PlanTable, p| {
            let q = t.quota(p);
            (q.per_minute, q.per_day)
        };
        assert_eq!(q(PlanTable::One, Plan::Starter), (Some(60), Some(1_000)));
        assert_eq!(q(PlanTable::One, Plan::Pro), (Some(600), Some(50_000)));
        assert_eq!(q(PlanTable::One, Plan::Enterprise), (None, None));
        assert_eq!(q(PlanTable::Two, Plan::Starter), (Some(60), Some(10_000)));
        assert_eq!(q(PlanTable::Two, Plan::Pro), (Some(300), Some(100_000)));
        assert_eq!(q(PlanTable::Two, Plan::Enterprise), (None, None));
    }

    #[tokio::test]
    async fn unlimited_quotas_touch_no_counter() {
        let mut counter = MockRateCounter::new();
        counter.expect_hit().never();
        let status = limiter(counter, at_secs(0)).check("x", Quota::UNLIMITED).await.unwrap();
        assert!(status.allowed());
        assert_eq!(status.limit, None);
    }
}

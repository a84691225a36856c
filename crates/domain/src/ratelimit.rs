//! Fixed-window rate limiting: per-minute and per-day budgets counted in a shared store.
//!
//! The store only counts ([`RateCounter`]); the decisions — which window, what remains, when
//! it resets, how long to wait, what happens when the store fails — are made here, the same for
//! every store (process memory, the database, Redis).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

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

/// One window a request is counted in: the minute or the day of a subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Which window of the subject: `"m"` (minute) or `"d"` (day). The store keeps the count
    /// under the subject and this name.
    pub name: &'static str,
    /// When the window began, Unix seconds.
    pub start: i64,
    /// Its length in seconds; a store may forget the window once it has ended.
    pub secs: i64,
    /// Its budget: a hit that takes the count past it ends the counting (see [`RateCounter`]).
    pub limit: u64,
}

/// Counts hits per subject and window. Implementations shared by several service instances
/// must count in a shared store, so that the instances enforce one limit together.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait RateCounter: Send + Sync {
    /// Adds one hit to each of `windows` in order, **atomically**, and returns each counted
    /// window's count including the hit. Counting stops after the first window whose count
    /// then exceeds its limit: the windows after it are neither counted nor returned, so a
    /// request the minute refuses does not use up the day. One call is one round trip to the
    /// store (a script, a statement), whatever the number of windows.
    async fn hit(&self, subject: &str, windows: &[Window]) -> anyhow::Result<Vec<u64>>;
}

/// What a request gets when the counter's store fails (`AGENTRY_RATE_LIMIT_FAILURE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Let the request through, uncounted and without rate-limit headers: an outage of the
    /// limiter's store does not become an outage of the service.
    #[default]
    Open,
    /// Refuse it with [`LimiterUnavailable`] (answered 503 with `Retry-After`): no request
    /// goes uncounted.
    Closed,
}

/// The counter's store failed and the policy is [`FailurePolicy::Closed`]. Travels inside an
/// `anyhow::Error` through the services, so that the HTTP layer can answer it 503 wherever it
/// surfaces.
#[derive(Debug, thiserror::Error)]
#[error("the rate-limit store is unavailable: {0}")]
pub struct LimiterUnavailable(String);

/// The outcome of one rate-limited request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateStatus {
    /// The limit of the window that decided (`X-RateLimit-Limit`): the per-minute limit, or
    /// the per-day one when the day's budget refused the request; `None` when there is none
    /// (or when the request went uncounted because the store failed open).
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
    policy: FailurePolicy,
    /// The second of the last logged store failure: during an outage every request fails, and
    /// one line a second says so as well as thousands would.
    last_failure_logged: Arc<AtomicI64>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter").field("policy", &self.policy).finish_non_exhaustive()
    }
}

/// Whether `counts` keeps the [`RateCounter`] contract for `windows`: one count per window,
/// or fewer when the last one given refused. Anything else would let a request through that a
/// window it skipped should have counted.
fn answers_every_window(windows: &[Window], counts: &[u64]) -> bool {
    match counts.len() {
        n if n == windows.len() => true,
        0 => false,
        n if n < windows.len() => counts[n - 1] > windows[n - 1].limit,
        _ => false,
    }
}

fn window_start(now: i64, len: i64) -> i64 {
    now - now.rem_euclid(len)
}

impl RateLimiter {
    /// A limiter counting with `counter`; it fails open (see [`FailurePolicy`]).
    pub fn new(counter: Arc<dyn RateCounter>, clock: Arc<dyn Clock>) -> Self {
        Self { counter, clock, policy: FailurePolicy::Open, last_failure_logged: Arc::new(AtomicI64::new(0)) }
    }

    /// The same limiter with `policy` for store failures.
    #[must_use]
    pub fn with_failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Counts one request of `subject` against `quota`, the minute window first; a request
    /// refused by it does not use up the day's budget.
    ///
    /// # Errors
    /// [`LimiterUnavailable`] when the counter's store fails and the policy is
    /// [`FailurePolicy::Closed`].
    pub async fn check(&self, subject: &str, quota: Quota) -> anyhow::Result<RateStatus> {
        let now: DateTime<Utc> = self.clock.now();
        let now = now.timestamp();
        let minute = window_start(now, MINUTE);
        let day = window_start(now, DAY);
        let mut status = RateStatus {
            limit: quota.per_minute,
            remaining: 0,
            reset_at: minute + MINUTE,
            retry_after: None,
        };
        let windows: Vec<Window> = [
            quota.per_minute.map(|limit| Window { name: "m", start: minute, secs: MINUTE, limit }),
            quota.per_day.map(|limit| Window { name: "d", start: day, secs: DAY, limit }),
        ]
        .into_iter()
        .flatten()
        .collect();
        if windows.is_empty() {
            return Ok(status);
        }
        let counts = match self.counter.hit(subject, &windows).await {
            Ok(counts) if answers_every_window(&windows, &counts) => counts,
            Ok(counts) => {
                let e = anyhow::anyhow!("the store counted {} of {} windows", counts.len(), windows.len());
                return self.store_failed(&e, now, status);
            }
            Err(e) => return self.store_failed(&e, now, status),
        };
        for (window, &count) in windows.iter().zip(&counts) {
            let refused = count > window.limit;
            let minute_decides = window.name == "m" || quota.per_minute.is_none();
            if refused {
                // The window that refused is the one the headers describe.
                status.limit = Some(window.limit);
                status.remaining = 0;
                status.reset_at = window.start + window.secs;
                status.retry_after =
                    Some(u64::try_from(window.start + window.secs - now).unwrap_or(1).max(1));
                return Ok(status);
            }
            if minute_decides {
                status.limit = Some(window.limit);
                status.remaining = window.limit - count;
                status.reset_at = window.start + window.secs;
            }
        }
        Ok(status)
    }

    /// The store failed: counted in `/metrics`, logged (once a second at most), then the
    /// policy decides.
    fn store_failed(&self, e: &anyhow::Error, now: i64, status: RateStatus) -> anyhow::Result<RateStatus> {
        let policy = match self.policy {
            FailurePolicy::Open => "open",
            FailurePolicy::Closed => "closed",
        };
        metrics::counter!(crate::metrics::RATE_LIMIT_STORE_ERRORS, "policy" => policy).increment(1);
        if self.last_failure_logged.swap(now, Ordering::Relaxed) != now {
            tracing::warn!(error = format!("{e:#}"), policy, "the rate-limit store failed");
        }
        match self.policy {
            FailurePolicy::Open => Ok(RateStatus { limit: None, retry_after: None, ..status }),
            FailurePolicy::Closed => Err(LimiterUnavailable(format!("{e:#}")).into()),
        }
    }
}

/// The contract every [`RateCounter`] keeps, as checks an adapter's tests run against it: the
/// same checks for process memory, the database on both backends, and Redis. They panic on a
/// breach. `tag` makes the subjects unique, so that runs sharing one store never meet.
#[cfg(any(test, feature = "testkit"))]
pub mod contract {
    use super::{RateCounter, Window};

    /// The windows counted are tomorrow's (UTC): current enough for a store that expires
    /// ended windows, and forgotten by it within two days.
    fn start() -> i64 {
        (chrono::Utc::now().timestamp() / 86_400 + 1) * 86_400
    }

    fn minute(start: i64, limit: u64) -> Window {
        Window { name: "m", start, secs: 60, limit }
    }

    fn day(start: i64, limit: u64) -> Window {
        Window { name: "d", start, secs: 86_400, limit }
    }

    /// Every check below.
    pub async fn run_all(counter: &dyn RateCounter, tag: &str) {
        counts_each_subject_and_window_apart(counter, tag).await;
        stops_at_the_window_that_refuses(counter, tag).await;
        concurrent_hits_are_each_counted_once(counter, tag).await;
    }

    /// Counts grow by one per hit, per subject and per window; a new window starts at one.
    pub async fn counts_each_subject_and_window_apart(counter: &dyn RateCounter, tag: &str) {
        let (a, b) = (format!("{tag}:apart:a"), format!("{tag}:apart:b"));
        let start = start();
        let hit = |subject: String, windows: Vec<Window>| async move {
            counter.hit(&subject, &windows).await.expect("the store counts")
        };
        assert_eq!(hit(a.clone(), vec![minute(start, 10), day(start, 100)]).await, [1, 1]);
        assert_eq!(hit(a.clone(), vec![minute(start, 10), day(start, 100)]).await, [2, 2]);
        assert_eq!(hit(b.clone(), vec![minute(start, 10), day(start, 100)]).await, [1, 1], "another subject");
        assert_eq!(
            hit(a.clone(), vec![minute(start + 60, 10), day(start, 100)]).await,
            [1, 3],
            "the next minute"
        );
        assert_eq!(hit(a, vec![day(start, 100)]).await, [4], "a window alone");
    }

    /// A hit that takes a window past its limit is counted there, and not in the windows
    /// after it: the minute's refusals spare the day.
    pub async fn stops_at_the_window_that_refuses(counter: &dyn RateCounter, tag: &str) {
        let subject = format!("{tag}:stops");
        let start = start();
        let windows = [minute(start, 2), day(start, 100)];
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(counter.hit(&subject, &windows).await.expect("the store counts"));
        }
        assert_eq!(seen, [vec![1, 1], vec![2, 2], vec![3], vec![4]]);
        let next =
            counter.hit(&subject, &[minute(start + 60, 2), day(start, 100)]).await.expect("the store counts");
        assert_eq!(next, [1, 3], "the day counted only the two requests the minute let through");
    }

    /// 64 hits at once on one window get the counts 1 to 64, each once: the store counts
    /// atomically.
    pub async fn concurrent_hits_are_each_counted_once(counter: &dyn RateCounter, tag: &str) {
        let subject = format!("{tag}:concurrent");
        let start = start();
        let windows = [minute(start, 1_000), day(start, 1_000)];
        let hits = (0..64).map(|_| counter.hit(&subject, &windows));
        let mut minutes: Vec<u64> = futures_util::future::join_all(hits)
            .await
            .into_iter()
            .map(|counts| counts.expect("the store counts")[0])
            .collect();
        minutes.sort_unstable();
        assert_eq!(minutes, (1..=64).collect::<Vec<u64>>());
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

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

    fn minute(start: i64, limit: u64) -> Window {
        Window { name: "m", start, secs: 60, limit }
    }

    fn day(start: i64, limit: u64) -> Window {
        Window { name: "d", start, secs: 86_400, limit }
    }

    #[tokio::test]
    async fn within_the_minute_budget_requests_pass_and_count_down() {
        let mut counter = MockRateCounter::new();
        counter
            .expect_hit()
            .withf(|subject, windows| {
                subject == "ten_1" && windows == [minute(1_000_020, 60), day(950_400, 1000)]
            })
            .returning(|_, _| Ok(vec![59, 500]));
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
        // The store stops at the minute that refused: no count for the day comes back.
        counter.expect_hit().returning(|_, _| Ok(vec![61]));
        let status = limiter(counter, at_secs(1_000_045))
            .check("ten_1", Quota { per_minute: Some(60), per_day: Some(1000) })
            .await
            .unwrap();
        assert_eq!(status.retry_after, Some(35));
        assert_eq!(status.remaining, 0);
        assert_eq!((status.limit, status.reset_at), (Some(60), 1_000_080));
    }

    #[tokio::test]
    async fn past_the_day_budget_the_wait_is_until_midnight() {
        let mut counter = MockRateCounter::new();
        counter
            .expect_hit()
            .withf(|subject, windows| subject == "ip:1" && windows.len() == 2)
            .returning(|_, _| Ok(vec![1, 1001]));
        let status = limiter(counter, at_secs(86_400 * 3 - 100))
            .check("ip:1", Quota { per_minute: Some(60), per_day: Some(1000) })
            .await
            .unwrap();
        assert_eq!(status.retry_after, Some(100));
        assert_eq!(status.remaining, 0);
        assert_eq!((status.limit, status.reset_at), (Some(1000), 86_400 * 3), "the headers describe the day");
    }

    #[tokio::test]
    async fn a_day_only_quota_is_described_by_its_day() {
        let mut counter = MockRateCounter::new();
        counter.expect_hit().withf(|_, windows| windows == [day(86_400, 10)]).returning(|_, _| Ok(vec![4]));
        let status = limiter(counter, at_secs(86_400 + 5))
            .check("x", Quota { per_minute: None, per_day: Some(10) })
            .await
            .unwrap();
        assert_eq!((status.limit, status.remaining, status.reset_at), (Some(10), 6, 86_400 * 2));
    }

    #[tokio::test]
    async fn a_failing_store_lets_requests_through_uncounted_when_open() {
        let mut counter = MockRateCounter::new();
        counter.expect_hit().returning(|_, _| Err(anyhow::anyhow!("connection refused")));
        let status =
            limiter(counter, at_secs(1_000_045)).check("ten_1", Quota::per_minute(60)).await.unwrap();
        assert!(status.allowed());
        assert_eq!(status.limit, None, "no rate-limit headers for an uncounted request");
    }

    #[tokio::test]
    async fn a_store_that_skips_a_window_it_should_count_has_failed() {
        let mut counter = MockRateCounter::new();
        // The minute is within its limit, so the day had to be counted too.
        counter.expect_hit().returning(|_, _| Ok(vec![5]));
        let e = limiter(counter, at_secs(1_000_045))
            .with_failure_policy(FailurePolicy::Closed)
            .check("ten_1", Quota { per_minute: Some(60), per_day: Some(1000) })
            .await
            .unwrap_err();
        assert!(e.to_string().contains("counted 1 of 2 windows"), "{e}");
    }

    #[tokio::test]
    async fn a_failing_store_refuses_requests_when_closed() {
        let mut counter = MockRateCounter::new();
        counter.expect_hit().returning(|_, _| Err(anyhow::anyhow!("connection refused")));
        let e = limiter(counter, at_secs(1_000_045))
            .with_failure_policy(FailurePolicy::Closed)
            .check("ten_1", Quota::per_minute(60))
            .await
            .unwrap_err();
        let unavailable =
            e.downcast_ref::<LimiterUnavailable>().expect("a typed error the HTTP layer answers 503");
        assert!(unavailable.to_string().contains("connection refused"));
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

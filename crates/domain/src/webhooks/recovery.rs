//! Missed events recovered, and a subscription's recent health.
//!
//! While a subscription is `failed` or `disabled`, the fan-out keeps the events it selects as
//! `skipped` deliveries. A recovery queues its skipped and failed deliveries since a time again
//! and sets it `active`, in one transaction; a bulk retry queues them without changing the
//! subscription (which must then be active). Either way each delivery keeps its id and its event
//! (`webhook-id`), so a receiver that deduplicates by it never processes an event twice.
//!
//! [`DeliveryStats`] is what `GET /webhooks/{id}/stats` shows: deliveries per status and the
//! receiver's response times over a window; [`HourlyDeliveries`] are the same counts hour by
//! hour, for the console's chart.

use chrono::{DateTime, Duration, DurationRound as _, Utc};

use super::model::DeliveryStatus;

/// Which deliveries of one subscription to queue again, and whether to set it active.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requeue {
    /// The statuses taken: only [`DeliveryStatus::Skipped`] and [`DeliveryStatus::Failed`] are
    /// ever queued again (a pending one already is, a delivered one is done).
    pub statuses: Vec<DeliveryStatus>,
    /// Only deliveries created at or after this time; `None`: all of them.
    pub since: Option<DateTime<Utc>>,
    /// Set the subscription `active` in the same transaction (a recovery).
    pub reactivate: bool,
}

impl Requeue {
    /// The statuses a delivery may be queued again from.
    pub const REQUEUABLE: [DeliveryStatus; 2] = [DeliveryStatus::Skipped, DeliveryStatus::Failed];

    /// A recovery: every skipped or failed delivery since `since`, and the subscription active.
    pub fn recovery(since: DateTime<Utc>) -> Self {
        Self { statuses: Self::REQUEUABLE.to_vec(), since: Some(since), reactivate: true }
    }

    /// A bulk retry of the deliveries in `status` (both requeuable ones when `None`) since
    /// `since`, leaving the subscription as it is.
    pub fn retry(status: Option<DeliveryStatus>, since: Option<DateTime<Utc>>) -> Self {
        let statuses = status.map_or_else(|| Self::REQUEUABLE.to_vec(), |s| vec![s]);
        Self { statuses, since, reactivate: false }
    }
}

/// Deliveries of a subscription per status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeliveryCounts {
    /// Waiting for an attempt (or in one).
    pub pending: u64,
    /// Accepted by the receiver.
    pub delivered: u64,
    /// Every attempt failed.
    pub failed: u64,
    /// Kept while the subscription was not active.
    pub skipped: u64,
}

impl DeliveryCounts {
    /// Adds `n` deliveries in `status`.
    pub fn add(&mut self, status: DeliveryStatus, n: u64) {
        let slot = match status {
            DeliveryStatus::Pending => &mut self.pending,
            DeliveryStatus::Delivered => &mut self.delivered,
            DeliveryStatus::Failed => &mut self.failed,
            DeliveryStatus::Skipped => &mut self.skipped,
        };
        *slot += n;
    }

    /// All of them.
    pub fn total(&self) -> u64 {
        self.pending + self.delivered + self.failed + self.skipped
    }
}

/// A subscription's deliveries and attempts over a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryStats {
    /// The window's start; it ends now.
    pub since: DateTime<Utc>,
    /// Deliveries created in the window, per status.
    pub counts: DeliveryCounts,
    /// Attempts started in the window.
    pub attempts: u64,
    /// Of those, the ones the receiver answered (whatever its status): the response times are
    /// theirs (a timeout or a refused connection has no response time).
    pub answered: u64,
    /// The median response time, in milliseconds; `None` without an answer.
    pub p50_ms: Option<u64>,
    /// The 99th percentile, in milliseconds; `None` without an answer.
    pub p99_ms: Option<u64>,
}

/// The deliveries created in one UTC hour, per status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HourlyDeliveries {
    /// The hour's start.
    pub hour: DateTime<Utc>,
    /// Deliveries created in it, per (current) status.
    pub counts: DeliveryCounts,
}

/// One row of the store's count per hour: deliveries created in the hour starting at `hour`
/// that are now in `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HourCount {
    /// The hour's start (UTC).
    pub hour: DateTime<Utc>,
    /// Their status.
    pub status: DeliveryStatus,
    /// How many.
    pub count: u64,
}

/// The start of the UTC hour `at` is in.
pub fn hour_of(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(Duration::hours(1)).unwrap_or(at)
}

/// `hours` consecutive hours from `first` (an hour's start), each with the counts `rows` give
/// it: every hour is there, with zeros when nothing happened; a row outside them is dropped.
pub fn hourly(first: DateTime<Utc>, hours: u32, rows: &[HourCount]) -> Vec<HourlyDeliveries> {
    let mut buckets: Vec<HourlyDeliveries> = (0..i64::from(hours))
        .map(|i| HourlyDeliveries { hour: first + Duration::hours(i), counts: DeliveryCounts::default() })
        .collect();
    for row in rows {
        let offset = (row.hour - first).num_hours();
        let slot = usize::try_from(offset).ok().and_then(|i| buckets.get_mut(i));
        if let Some(bucket) = slot.filter(|b| b.hour == row.hour) {
            bucket.counts.add(row.status, row.count);
        }
    }
    buckets
}

/// The position, from 0 in ascending order, of the `percent`-th percentile of `n` values by the
/// nearest-rank method (the smallest value at or below which `percent` % of them lie); `None`
/// for no values. The stores read the value at this offset, so no database needs a percentile
/// function of its own.
pub fn nearest_rank_offset(percent: u32, n: u64) -> Option<u64> {
    if n == 0 {
        return None;
    }
    let percent = u64::from(percent.clamp(1, 100));
    // ceil(percent / 100 × n), from 1; as an offset, one less.
    Some((percent * n).div_ceil(100) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The percentile of `values` as the stores compute it: sort, read at the offset.
    fn percentile(percent: u32, values: &[u64]) -> Option<u64> {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        nearest_rank_offset(percent, sorted.len() as u64).map(|i| sorted[usize::try_from(i).unwrap_or(0)])
    }

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(nearest_rank_offset(50, 0), None);
        assert_eq!(percentile(50, &[7]), Some(7));
        assert_eq!(percentile(99, &[7]), Some(7));
        // 1..=100: the median is 50, the 99th percentile 99.
        let hundred: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(percentile(50, &hundred), Some(50));
        assert_eq!(percentile(99, &hundred), Some(99));
        assert_eq!(percentile(100, &hundred), Some(100));
        // Four values: the median is the second, the 99th percentile the largest.
        assert_eq!(percentile(50, &[40, 10, 30, 20]), Some(20));
        assert_eq!(percentile(99, &[40, 10, 30, 20]), Some(40));
        // One slow answer in 200 is above the 99th percentile; one in 50 is not.
        let mut mostly_fast = vec![10; 199];
        mostly_fast.push(5_000);
        assert_eq!(percentile(99, &mostly_fast), Some(10));
        let mut some_slow = vec![10; 48];
        some_slow.extend([5_000, 5_000]);
        assert_eq!(percentile(99, &some_slow), Some(5_000));
    }

    #[test]
    fn a_recovery_takes_skipped_and_failed_since_a_time_and_reactivates() {
        let since = DateTime::<Utc>::UNIX_EPOCH;
        let r = Requeue::recovery(since);
        assert_eq!(r.statuses, [DeliveryStatus::Skipped, DeliveryStatus::Failed]);
        assert_eq!((r.since, r.reactivate), (Some(since), true));
        let all = Requeue::retry(None, None);
        assert_eq!((all.statuses.len(), all.since, all.reactivate), (2, None, false));
        assert_eq!(Requeue::retry(Some(DeliveryStatus::Failed), None).statuses, [DeliveryStatus::Failed]);
    }

    #[test]
    fn every_hour_of_the_window_is_there_with_its_counts() {
        use chrono::TimeZone as _;
        let first = Utc.with_ymd_and_hms(2026, 11, 25, 9, 0, 0).unwrap();
        assert_eq!(hour_of(first + Duration::minutes(59) + Duration::seconds(59)), first);
        let row = |h: i64, status, count| HourCount { hour: first + Duration::hours(h), status, count };
        let rows = [
            row(0, DeliveryStatus::Delivered, 3),
            row(0, DeliveryStatus::Failed, 1),
            row(2, DeliveryStatus::Pending, 2),
            // Outside the window, before and after: dropped.
            row(-1, DeliveryStatus::Delivered, 7),
            row(3, DeliveryStatus::Delivered, 7),
        ];
        let hours = hourly(first, 3, &rows);
        assert_eq!(hours.len(), 3);
        assert_eq!(
            hours.iter().map(|h| h.hour).collect::<Vec<_>>(),
            [0, 1, 2].map(|h| first + Duration::hours(h))
        );
        assert_eq!((hours[0].counts.delivered, hours[0].counts.failed, hours[0].counts.total()), (3, 1, 4));
        assert_eq!(hours[1].counts.total(), 0);
        assert_eq!((hours[2].counts.pending, hours[2].counts.total()), (2, 2));
        // A row that is not at an hour's start is no hour of the window.
        let odd =
            [HourCount { hour: first + Duration::minutes(30), status: DeliveryStatus::Failed, count: 1 }];
        assert!(hourly(first, 3, &odd).iter().all(|h| h.counts.total() == 0));
    }

    #[test]
    fn counts_add_up_per_status() {
        let mut c = DeliveryCounts::default();
        c.add(DeliveryStatus::Delivered, 3);
        c.add(DeliveryStatus::Skipped, 2);
        c.add(DeliveryStatus::Failed, 1);
        c.add(DeliveryStatus::Delivered, 1);
        assert_eq!((c.pending, c.delivered, c.failed, c.skipped, c.total()), (0, 4, 1, 2, 7));
    }
}

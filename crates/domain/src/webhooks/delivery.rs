//! Deliveries and their state machine. A delivery is `pending` until an attempt ends it:
//!
//! - the receiver accepts (2xx): `delivered`;
//! - a scheduled attempt fails with attempts left: `pending` again, due at the next time of the
//!   schedule;
//! - the last scheduled attempt fails: `failed`, and its subscription `failed`;
//! - the receiver answers `410 Gone`: `failed`, and its subscription `disabled`;
//! - a test send or a manual retry fails: `failed`, and nothing else (the caller's last word);
//! - a delivery claimed past its schedule (its earlier attempts never recorded an outcome):
//!   `failed` without being sent, and its subscription `failed`.
//!
//! A manual retry takes a delivery of any status back to `pending` for one attempt (the claim
//! of [`WebhookRepository::claim_one`](super::WebhookRepository::claim_one)). Each outcome is a
//! [`Settlement`], which only these transitions make.
//!
//! A delivery made while its subscription is `failed` or `disabled` is stored `skipped` and
//! never sent by itself. A recovery (or a bulk retry) queues `skipped` and `failed` deliveries
//! again ([`WebhookRepository::requeue`](super::WebhookRepository::requeue)): `pending`, due at
//! once, with a fresh retry schedule; their attempts keep counting in the log.

use chrono::{DateTime, Utc};

use super::model::{Attempt, AttemptErrorKind, DeliveryStatus, InvalidStoredState};
use super::subscription::{Subscription, SubscriptionStop};
use crate::ids::{DeliveryId, EventId, TenantId, WebhookId};
use crate::work::Claimed;

/// A delivery as a claim hands it over, with what sending it needs. Held, it is a
/// [`ClaimedDelivery`]: its claims count its attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct DueDelivery {
    /// The delivery.
    pub id: DeliveryId,
    /// The event (`webhook-id`).
    pub event_id: EventId,
    /// The body to send.
    pub payload: String,
    /// A test delivery, or a manual attempt: a last word, never followed by scheduled ones.
    pub test: bool,
    /// Attempts made before it was last queued again by a recovery or a bulk retry: the
    /// retry schedule starts over (its claims count from 1 again) while the attempts' numbers
    /// go on from these.
    pub earlier_attempts: u32,
    /// The subscription it goes to (URL, secrets).
    pub subscription: Subscription,
}

/// A delivery a worker (or a request) holds under a lease; its claims are its attempts (this
/// one included).
pub type ClaimedDelivery = Claimed<DueDelivery>;

/// Whether an attempt may be followed by others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptMode {
    /// The worker's attempt on the retry schedule: a failure schedules the next attempt or,
    /// after the last, fails the delivery and its subscription.
    Scheduled,
    /// A test send or a manual retry: the caller's last word, never followed by scheduled
    /// attempts and never changing the subscription (but for `410 Gone` of a scheduled one).
    Manual,
}

impl ClaimedDelivery {
    /// How its attempt ends: a test delivery's is [`AttemptMode::Manual`].
    pub fn mode(&self) -> AttemptMode {
        if self.test { AttemptMode::Manual } else { AttemptMode::Scheduled }
    }

    /// The number of this attempt in the delivery's log, from 1: after the earlier attempts.
    pub fn attempt_number(&self) -> u32 {
        self.earlier_attempts.saturating_add(self.claims)
    }

    /// The same claim, attempted by hand (a manual retry): its outcome is a last word.
    #[must_use]
    pub fn by_hand(mut self) -> Self {
        self.test = true;
        self
    }
}

/// Where an attempt leaves its delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Delivered,
    RetryAt(DateTime<Utc>),
    Failed(Option<SubscriptionStop>),
}

/// What an attempt changes: the attempt for the log, the delivery's new state, and perhaps
/// its subscription's. Made only by the transitions [`Settlement::after_attempt`] and
/// [`Settlement::given_up`].
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    attempt: Attempt,
    outcome: Outcome,
}

impl Settlement {
    /// The end of an attempt made in `mode`. `next_attempt` is asked, only for a failed
    /// scheduled attempt, when the next one is due: `None` after the last of the schedule.
    pub fn after_attempt(
        attempt: Attempt,
        mode: AttemptMode,
        next_attempt: impl FnOnce() -> Option<DateTime<Utc>>,
    ) -> Self {
        let outcome = if attempt.succeeded {
            Outcome::Delivered
        } else if attempt.response_status == Some(410) {
            // The receiver says the endpoint is gone for good.
            Outcome::Failed((mode == AttemptMode::Scheduled).then_some(SubscriptionStop::Gone))
        } else if mode == AttemptMode::Manual {
            Outcome::Failed(None)
        } else {
            match next_attempt() {
                Some(at) => Outcome::RetryAt(at),
                None => Outcome::Failed(Some(SubscriptionStop::Failed)),
            }
        };
        Self { attempt, outcome }
    }

    /// The end of a delivery claimed for attempt `number`, one more than its schedule allows,
    /// without sending it: the attempts before were made but never recorded their outcome
    /// (their worker crashed or stalled), so nothing is sent more often than the schedule says.
    /// `reason` says so, as the durable-work core gives it.
    pub fn given_up(number: u32, reason: &str, now: DateTime<Utc>) -> Self {
        let attempt = Attempt {
            number,
            started_at: now,
            response_status: None,
            response_time_ms: 0,
            succeeded: false,
            error_kind: Some(AttemptErrorKind::Other),
            error: Some(format!("not sent: {reason}")),
            response_body: None,
        };
        Self { attempt, outcome: Outcome::Failed(Some(SubscriptionStop::Failed)) }
    }

    /// The attempt, as the log keeps it.
    pub fn attempt(&self) -> &Attempt {
        &self.attempt
    }

    /// The attempt, owned.
    pub fn into_attempt(self) -> Attempt {
        self.attempt
    }

    /// The delivery's status after it.
    pub fn status(&self) -> DeliveryStatus {
        match self.outcome {
            Outcome::Delivered => DeliveryStatus::Delivered,
            Outcome::RetryAt(_) => DeliveryStatus::Pending,
            Outcome::Failed(_) => DeliveryStatus::Failed,
        }
    }

    /// When the next attempt is due (a delivery still pending).
    pub fn next_attempt_at(&self) -> Option<DateTime<Utc>> {
        match self.outcome {
            Outcome::RetryAt(at) => Some(at),
            Outcome::Delivered | Outcome::Failed(_) => None,
        }
    }

    /// How it stops the subscription, if it does (only an active one: see
    /// [`SubscriptionStop::FROM`]).
    pub fn subscription_stop(&self) -> Option<SubscriptionStop> {
        match self.outcome {
            Outcome::Failed(stop) => stop,
            Outcome::Delivered | Outcome::RetryAt(_) => None,
        }
    }
}

/// A delivery as a row stores it, for [`Delivery::restore`].
#[derive(Debug, Clone, PartialEq)]
pub struct StoredDelivery {
    /// Its id.
    pub id: DeliveryId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The subscription.
    pub subscription_id: WebhookId,
    /// The event.
    pub event_id: EventId,
    /// The event's type.
    pub event_type: String,
    /// The stored status name.
    pub status: String,
    /// Attempts started.
    pub attempts: u32,
    /// When the next attempt is due, as stored.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The receiver's status at the last attempt that got an answer.
    pub response_status: Option<u16>,
    /// How long the last attempt took.
    pub response_time_ms: Option<u64>,
    /// Why the last attempt failed.
    pub error: Option<String>,
    /// When the receiver accepted it.
    pub delivered_at: Option<DateTime<Utc>>,
    /// A test delivery.
    pub test: bool,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// One event on its way to one subscription, as the delivery log shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    stored: StoredDelivery,
    status: DeliveryStatus,
}

impl Delivery {
    /// A delivery read back from its row. Only a pending delivery has a next attempt.
    ///
    /// # Errors
    /// An unknown status.
    pub fn restore(mut stored: StoredDelivery) -> Result<Self, InvalidStoredState> {
        let status =
            InvalidStoredState::status("delivery", &stored.id, &stored.status, DeliveryStatus::parse)?;
        if status != DeliveryStatus::Pending {
            stored.next_attempt_at = None;
        }
        Ok(Self { stored, status })
    }

    /// Its id.
    pub fn id(&self) -> &DeliveryId {
        &self.stored.id
    }

    /// Its tenant.
    pub fn tenant_id(&self) -> &TenantId {
        &self.stored.tenant_id
    }

    /// The subscription.
    pub fn subscription_id(&self) -> &WebhookId {
        &self.stored.subscription_id
    }

    /// The event (the `webhook-id` of every attempt).
    pub fn event_id(&self) -> &EventId {
        &self.stored.event_id
    }

    /// The event's type (for a test delivery, the type asked for).
    pub fn event_type(&self) -> &str {
        &self.stored.event_type
    }

    /// Where it stands.
    pub fn status(&self) -> DeliveryStatus {
        self.status
    }

    /// Attempts started.
    pub fn attempts(&self) -> u32 {
        self.stored.attempts
    }

    /// When the next attempt is due (pending deliveries).
    pub fn next_attempt_at(&self) -> Option<DateTime<Utc>> {
        self.stored.next_attempt_at
    }

    /// The receiver's status at the last attempt that got an answer.
    pub fn response_status(&self) -> Option<u16> {
        self.stored.response_status
    }

    /// How long the last attempt took.
    pub fn response_time_ms(&self) -> Option<u64> {
        self.stored.response_time_ms
    }

    /// Why the last attempt failed.
    pub fn error(&self) -> Option<&str> {
        self.stored.error.as_deref()
    }

    /// When the receiver accepted it.
    pub fn delivered_at(&self) -> Option<DateTime<Utc>> {
        self.stored.delivered_at
    }

    /// Whether it was made by `POST /webhooks/{id}/test`.
    pub fn is_test(&self) -> bool {
        self.stored.test
    }

    /// Creation time.
    pub fn created_at(&self) -> DateTime<Utc> {
        self.stored.created_at
    }
}

/// `dlv_1` of `whk_1` (tenant `ten_1`) as a row stores it, in `status`, for tests.
#[cfg(test)]
pub(crate) fn sample_row(status: &str) -> StoredDelivery {
    use chrono::TimeZone;
    #[allow(clippy::unwrap_used)]
    let t0 = Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap();
    StoredDelivery {
        id: DeliveryId::from_string("dlv_1"),
        tenant_id: TenantId::from_string("ten_1"),
        subscription_id: WebhookId::from_string("whk_1"),
        event_id: EventId::from_string("evt_1"),
        event_type: "agent.created".into(),
        status: status.into(),
        attempts: 1,
        next_attempt_at: Some(t0),
        response_status: Some(500),
        response_time_ms: Some(12),
        error: Some("the receiver answered 500".into()),
        delivered_at: None,
        test: false,
        created_at: t0,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use chrono::{Duration, TimeZone};

    use super::*;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
    }

    fn attempt(status: Option<u16>) -> Attempt {
        let succeeded = status.is_some_and(|s| (200..300).contains(&s));
        Attempt {
            number: 2,
            started_at: t0(),
            response_status: status,
            response_time_ms: 12,
            succeeded,
            error_kind: (!succeeded).then_some(AttemptErrorKind::HttpStatus),
            error: None,
            response_body: None,
        }
    }

    /// `(status, next attempt, subscription stop, whether the schedule was asked)`.
    fn end(
        status: Option<u16>,
        mode: AttemptMode,
        next: Option<DateTime<Utc>>,
    ) -> (DeliveryStatus, Option<DateTime<Utc>>, Option<SubscriptionStop>, bool) {
        let mut asked = false;
        let s = Settlement::after_attempt(attempt(status), mode, || {
            asked = true;
            next
        });
        assert_eq!(s.attempt(), &attempt(status), "the attempt is kept as made");
        (s.status(), s.next_attempt_at(), s.subscription_stop(), asked)
    }

    #[test]
    fn an_accepted_attempt_delivers_whatever_the_mode() {
        for mode in [AttemptMode::Scheduled, AttemptMode::Manual] {
            for status in [200, 204, 299] {
                assert_eq!(
                    end(Some(status), mode, Some(t0())),
                    (DeliveryStatus::Delivered, None, None, false)
                );
            }
        }
    }

    #[test]
    fn a_failed_scheduled_attempt_waits_for_the_next_or_fails_the_delivery_and_subscription() {
        let next = t0() + Duration::minutes(5);
        for failure in [Some(500), Some(302), Some(404), None] {
            assert_eq!(
                end(failure, AttemptMode::Scheduled, Some(next)),
                (DeliveryStatus::Pending, Some(next), None, true)
            );
            assert_eq!(
                end(failure, AttemptMode::Scheduled, None),
                (DeliveryStatus::Failed, None, Some(SubscriptionStop::Failed), true)
            );
        }
    }

    #[test]
    fn gone_fails_at_once_and_disables_the_subscription_of_a_scheduled_attempt_only() {
        assert_eq!(
            end(Some(410), AttemptMode::Scheduled, Some(t0())),
            (DeliveryStatus::Failed, None, Some(SubscriptionStop::Gone), false)
        );
        assert_eq!(
            end(Some(410), AttemptMode::Manual, Some(t0())),
            (DeliveryStatus::Failed, None, None, false)
        );
    }

    #[test]
    fn a_manual_attempt_is_a_last_word() {
        for failure in [Some(500), None] {
            assert_eq!(
                end(failure, AttemptMode::Manual, Some(t0())),
                (DeliveryStatus::Failed, None, None, false)
            );
        }
    }

    #[test]
    fn a_delivery_claimed_past_its_schedule_fails_unsent() {
        let s = Settlement::given_up(6, "given up after 5 claims", t0());
        assert_eq!(
            (s.status(), s.next_attempt_at(), s.subscription_stop()),
            (DeliveryStatus::Failed, None, Some(SubscriptionStop::Failed))
        );
        let a = s.into_attempt();
        assert_eq!(
            (a.number, a.succeeded, a.response_status, a.error_kind),
            (6, false, None, Some(AttemptErrorKind::Other))
        );
        assert_eq!(a.error.as_deref(), Some("not sent: given up after 5 claims"));
    }

    #[test]
    fn a_stored_delivery_is_restored_with_a_known_status_and_a_next_attempt_only_when_pending() {
        let pending = Delivery::restore(sample_row("pending")).unwrap();
        assert_eq!((pending.status(), pending.next_attempt_at()), (DeliveryStatus::Pending, Some(t0())));
        for status in [DeliveryStatus::Delivered, DeliveryStatus::Failed, DeliveryStatus::Skipped] {
            let d = Delivery::restore(sample_row(status.as_str())).unwrap();
            assert_eq!((d.status(), d.next_attempt_at()), (status, None));
        }
        let err = Delivery::restore(sample_row("lost")).unwrap_err();
        assert_eq!((err.entity, err.id.as_str()), ("delivery", "dlv_1"));
    }
}

//! Delivering: the outbox's fan-out into deliveries, and the deliveries' attempts as work of
//! the one durable-work core (claimed under a lease, signed, sent, settled with the retry
//! schedule's next time or a final status).

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};

use super::super::delivery::{ClaimedDelivery, DueDelivery, Settlement};
use super::super::fanout::fan_out;
use super::super::model::{Attempt, AttemptErrorKind, DeliveryStatus, RESPONSE_BODY_BYTES};
use super::super::ports::{Dispatched, OutboundFailure, OutboundPost};
use super::super::signing::sign;
use super::{DELIVERY_QUEUE, WebhookService};
use crate::events::consumers::EventConsumer;
use crate::events::{Event, EventType};
use crate::storable;
use crate::work::{Lease, LeaseQueue, Outcome, Ran, WorkKind};

impl WebhookService {
    /// Fans `events` out into deliveries: the store applies [`fan_out`]'s decision.
    ///
    /// # Errors
    /// When storage fails.
    pub async fn dispatch(&self, events: &[Event]) -> anyhow::Result<Dispatched> {
        let first_delay = self.settings.schedule.first_delay();
        self.deps.webhooks.dispatch(events, self.deps.clock.now(), first_delay, fan_out).await
    }

    pub(super) fn new_lease(&self, now: DateTime<Utc>) -> Lease {
        Lease::new(self.deps.ids.as_ref(), now, self.settings.lease)
    }

    /// Records an attempt under its lease; what it came to, as metrics count it.
    async fn settle(&self, claimed: &ClaimedDelivery, settlement: &Settlement) -> anyhow::Result<Ran> {
        let held =
            self.deps.webhooks.settle(&claimed.id, &claimed.lease, settlement, self.deps.clock.now()).await?;
        if !held {
            tracing::warn!(delivery_id = %claimed.id, "delivery was taken over by another worker; outcome dropped");
            return Ok(Ran::ended(Outcome::LostLease));
        }
        Ok(match settlement.status() {
            DeliveryStatus::Delivered => Ran::ended(Outcome::Delivered),
            DeliveryStatus::Pending => {
                Ran { outcome: Outcome::Retry, due_again: settlement.next_attempt_at() }
            }
            // An attempt never leaves a delivery skipped; were it to, it ended all the same.
            DeliveryStatus::Failed | DeliveryStatus::Skipped => Ran::ended(Outcome::Failed),
        })
    }

    /// Records a request's own attempt (a test event, a manual retry), counted as a worker's
    /// would be.
    pub(super) async fn settle_now(
        &self,
        claimed: &ClaimedDelivery,
        settlement: &Settlement,
    ) -> anyhow::Result<()> {
        let ran = self.settle(claimed, settlement).await?;
        crate::metrics::queue_outcome(DELIVERY_QUEUE, ran.outcome.as_str());
        Ok(())
    }

    /// Signs and sends one attempt, and decides what it changes.
    pub(super) async fn attempt(&self, claimed: &ClaimedDelivery) -> Settlement {
        let started_at = self.deps.clock.now();
        let result = match self.signatures(claimed, started_at) {
            Ok(headers) => {
                let mut headers = headers;
                headers.push(("Content-Type".into(), "application/json".into()));
                let post = OutboundPost {
                    url: claimed.subscription.url().to_owned(),
                    headers,
                    body: claimed.payload.as_bytes().to_vec(),
                };
                self.deps.sender.post(post).await
            }
            Err(failure) => Err(failure),
        };
        let attempt = match result {
            Ok(answer) => {
                let succeeded = (200..300).contains(&answer.status);
                let body = &answer.body[..answer.body.len().min(RESPONSE_BODY_BYTES)];
                Attempt {
                    number: claimed.attempt_number(),
                    started_at,
                    response_status: Some(answer.status),
                    response_time_ms: answer.elapsed_ms,
                    succeeded,
                    error_kind: (!succeeded).then_some(AttemptErrorKind::HttpStatus),
                    error: (!succeeded).then(|| status_error(answer.status)),
                    response_body: Some(storable::text(String::from_utf8_lossy(body).into_owned())),
                }
            }
            Err(failure) => Attempt {
                number: claimed.attempt_number(),
                started_at,
                response_status: None,
                response_time_ms: failure.elapsed_ms,
                succeeded: false,
                error_kind: Some(failure.kind),
                error: Some(storable::text(failure.message)),
                response_body: None,
            },
        };
        if !attempt.succeeded {
            tracing::info!(
                delivery_id = %claimed.id, webhook_id = %claimed.subscription.id(), attempt = claimed.attempt_number(),
                error = attempt.error.as_deref().unwrap_or(""), "webhook delivery attempt failed"
            );
        }
        self.decide(claimed, attempt)
    }

    /// The end of a delivery claimed once more than its schedule allows, without sending it.
    fn given_up(&self, claimed: &ClaimedDelivery, reason: &str) -> Settlement {
        Settlement::given_up(claimed.attempt_number(), reason, self.deps.clock.now())
    }

    /// What an attempt's result changes; the retry schedule (and its jitter) is consulted only
    /// when a scheduled attempt failed.
    fn decide(&self, claimed: &ClaimedDelivery, attempt: Attempt) -> Settlement {
        Settlement::after_attempt(attempt, claimed.mode(), || {
            let jitter =
                f64::from(u16::from_le_bytes(self.deps.secrets.random_bytes(2).try_into().unwrap_or([0, 0])))
                    / 65536.0;
            self.settings.schedule.next_after_failure(claimed.claims, self.deps.clock.now(), jitter)
        })
    }

    /// The signature headers of an attempt at `now`: with the current secret, and with the
    /// previous one while it still signs.
    fn signatures(
        &self,
        claimed: &ClaimedDelivery,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, String)>, OutboundFailure> {
        let s = &claimed.subscription;
        let open = |sealed| {
            self.deps.cipher.open(s.id().as_str(), sealed).map_err(|e| OutboundFailure {
                kind: AttemptErrorKind::Secret,
                message: format!(
                    "the signing secret could not be opened (was AGENTRY_SECRET_KEY changed?): {e}"
                ),
                elapsed_ms: 0,
            })
        };
        let mut secrets = vec![open(s.secret())?];
        if let Some(previous) = s.previous_secret_at(now) {
            secrets.push(open(&previous.secret)?);
        }
        let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
        let headers = sign(
            self.deps.hmac.as_ref(),
            &refs,
            claimed.event_id.as_str(),
            now.timestamp(),
            claimed.payload.as_bytes(),
        );
        Ok(headers.into_pairs())
    }
}

/// Deliveries as a kind of work: the worker claims due ones and attempts them; each claim is an
/// attempt, so nothing is sent more often than the schedule allows.
#[async_trait]
impl WorkKind for WebhookService {
    type Item = DueDelivery;

    fn name(&self) -> &'static str {
        DELIVERY_QUEUE
    }

    fn queue(&self) -> &dyn LeaseQueue<DueDelivery> {
        self.deps.due.as_ref()
    }

    fn lease(&self) -> Duration {
        self.settings.lease
    }

    fn concurrency(&self) -> u32 {
        self.settings.concurrency
    }

    fn max_claims(&self) -> u32 {
        self.settings.schedule.max_attempts()
    }

    async fn run(
        &self,
        claimed: ClaimedDelivery,
        _keep_going: &(dyn Fn() -> bool + Send + Sync),
    ) -> anyhow::Result<Ran> {
        let settlement = self.attempt(&claimed).await;
        self.settle(&claimed, &settlement).await
    }

    async fn give_up(&self, claimed: ClaimedDelivery, reason: String) -> anyhow::Result<Ran> {
        let settlement = self.given_up(&claimed, &reason);
        self.settle(&claimed, &settlement).await
    }
}

fn status_error(status: u16) -> String {
    match status {
        300..=399 => format!("the receiver answered {status} (a redirect; redirects are not followed)"),
        _ => format!("the receiver answered {status}"),
    }
}

/// The fan-out is the outbox's first consumer: every event, in batches of
/// [`WebhookSettings::dispatch_batch`](super::WebhookSettings), each batch one transaction.
/// Deliveries are keyed by (event, subscription), so a batch handed over again makes none twice.
#[async_trait]
impl EventConsumer for WebhookService {
    fn name(&self) -> &'static str {
        "webhook_fanout"
    }

    fn wants(&self, _event_type: EventType) -> bool {
        true
    }

    fn batch(&self) -> u32 {
        self.settings.dispatch_batch
    }

    async fn handle(&self, event: &Event) -> anyhow::Result<()> {
        self.dispatch(std::slice::from_ref(event)).await.map(|_| ())
    }

    async fn handle_batch(&self, events: &[Event]) -> Vec<anyhow::Result<()>> {
        match self.dispatch(events).await {
            Ok(_) => events.iter().map(|_| Ok(())).collect(),
            Err(e) => {
                let e = format!("{e:#}");
                events.iter().map(|_| Err(anyhow::anyhow!("fanning out its batch failed: {e}"))).collect()
            }
        }
    }
}

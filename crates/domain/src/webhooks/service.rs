//! The webhook service: subscriptions and their operations (test, retry, rotation, the
//! delivery log) for requests, and the two steps the background workers repeat — fan-out of
//! outbox events into deliveries, and attempts of due deliveries.

use std::sync::Arc;

use async_trait::async_trait;

use chrono::{DateTime, Duration, Utc};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value, json};

use super::delivery::{ClaimedDelivery, Delivery, DueDelivery, Settlement};
use super::fanout::fan_out;
use super::model::{
    Attempt, AttemptErrorKind, DeliveryStatus, EventSelectors, NewDelivery, RESPONSE_BODY_BYTES,
    SubscriptionStatus,
};
use super::ports::{
    Dispatched, Hmac, OutboundFailure, OutboundPost, SecretCipher, WebhookRepository, WebhookSender,
};
use super::recovery::{DeliveryStats, HourlyDeliveries, Requeue, hour_of, hourly};
use super::schedule::RetrySchedule;
use super::signing::{new_secret, sign};
use super::subscription::{DetailsChange, Subscription, SubscriptionDetails};
use crate::events::EventType;
use crate::ids::{DeliveryId, EventId, IdGenerator, WebhookId};
use crate::patch::Patch;
use crate::secrets::Secrets;
use crate::storable;
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors};
use crate::work::{Claimed, Lease, LeaseQueue, Outcome, Ran, WorkKind};

/// Why a webhook operation failed.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The caller lacks the right.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// Invalid input.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No such subscription in the caller's tenant.
    #[error("no such webhook")]
    NotFound,
    /// No such delivery of that subscription.
    #[error("no such delivery")]
    DeliveryNotFound,
    /// Another attempt of the delivery is in progress.
    #[error("an attempt of this delivery is in progress; try again when it has finished")]
    AttemptInProgress,
    /// A bulk retry of a subscription that is not active (its deliveries would wait).
    #[error(
        "the subscription is {0}: POST /webhooks/{{id}}/recover queues its deliveries and makes it active"
    )]
    NotActive(SubscriptionStatus),
    /// Storage or the cipher failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// A validated new subscription.
#[derive(Debug, Clone)]
pub struct NewSubscription {
    /// Where to send.
    pub url: String,
    /// Event names (checked).
    pub events: EventSelectors,
    /// A secret of the user's; absent: one is generated.
    pub secret: Option<SecretString>,
    /// What it is for.
    pub description: Option<String>,
    /// Free-form object.
    pub metadata: Map<String, Value>,
}

/// A validated change of a subscription.
#[derive(Debug, Clone, Default)]
pub struct SubscriptionPatch {
    /// A new URL.
    pub url: Option<String>,
    /// New event names (checked).
    pub events: Option<EventSelectors>,
    /// A new description, or none.
    pub description: Patch<String>,
    /// New metadata.
    pub metadata: Option<Map<String, Value>>,
    /// `active` (to resume a failed or disabled subscription) or `disabled` (to pause it).
    pub status: Option<SubscriptionStatus>,
}

/// What `POST /webhooks/{id}/test` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestReport {
    /// The delivery made for it.
    pub delivery_id: DeliveryId,
    /// Whether the receiver accepted it.
    pub success: bool,
    /// The receiver's status (0 when it did not answer).
    pub response_status: u16,
    /// How long it took.
    pub response_time_ms: u64,
    /// Why it failed.
    pub error: Option<String>,
}

/// Settings of webhooks.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Whether `http://` URLs are accepted.
    pub allow_insecure: bool,
    /// Delays before each attempt; their number is the attempt limit.
    pub schedule: RetrySchedule,
    /// How long a claim holds a delivery (longer than the send timeout).
    pub lease: Duration,
    /// Most deliveries one instance sends at once.
    pub concurrency: u32,
    /// Most outbox events fanned out per pass.
    pub dispatch_batch: u32,
    /// How long a rotated-out secret keeps signing.
    pub rotation_overlap: Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            allow_insecure: false,
            schedule: RetrySchedule::default(),
            lease: Duration::seconds(60),
            concurrency: 32,
            dispatch_batch: 200,
            rotation_overlap: Duration::hours(24),
        }
    }
}

/// The ports webhooks use.
#[derive(Clone)]
pub struct WebhookServiceDeps {
    /// Subscriptions and deliveries.
    pub webhooks: Arc<dyn WebhookRepository>,
    /// Due deliveries, as the worker claims them.
    pub due: Arc<dyn LeaseQueue<DueDelivery>>,
    /// Secrets at rest.
    pub cipher: Arc<dyn SecretCipher>,
    /// The guarded HTTP client.
    pub sender: Arc<dyn WebhookSender>,
    /// Signatures.
    pub hmac: Arc<dyn Hmac>,
    /// Randomness (generated secrets, jitter).
    pub secrets: Arc<dyn Secrets>,
    /// Identifiers.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for WebhookServiceDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookServiceDeps { .. }")
    }
}

/// The webhook service.
#[derive(Clone, Debug)]
pub struct WebhookService {
    deps: WebhookServiceDeps,
    settings: WebhookSettings,
}

/// The window of [`WebhookService::stats`], in hours.
pub const STATS_WINDOW_HOURS: i64 = 24;

/// The hours of [`WebhookService::deliveries_per_hour`]: the current one and those before it.
pub const HISTORY_HOURS: u32 = 24;

/// The queue name of deliveries in metrics.
pub const DELIVERY_QUEUE: &str = "webhook_deliveries";

impl WebhookService {
    /// A service over `deps`.
    pub fn new(deps: WebhookServiceDeps, settings: WebhookSettings) -> Self {
        Self { deps, settings }
    }

    /// Its settings.
    pub fn settings(&self) -> &WebhookSettings {
        &self.settings
    }

    /// Checks a URL for a subscription: its form, then whether the sender may contact it.
    ///
    /// # Errors
    /// A validation error naming `url`.
    pub fn check_url(&self, raw: &str) -> Result<String, FieldError> {
        let url = super::model::check_url(raw, self.settings.allow_insecure)?;
        self.deps
            .sender
            .check_url(url.as_str())
            .map_err(|reason| FieldError::new("url", FieldErrorKind::InvalidValue, reason))?;
        Ok(raw.to_owned())
    }

    /// Subscribes; returns the subscription and its signing secret in clear (shown here, and
    /// afterwards only by [`WebhookService::secret`]).
    ///
    /// # Errors
    /// [`WebhookError::Forbidden`], [`WebhookError::Invalid`] (the URL's target refused).
    pub async fn create(
        &self,
        caller: &Principal,
        new: NewSubscription,
    ) -> Result<(Subscription, String), WebhookError> {
        caller.require(Permission::WebhooksWrite)?;
        let url = self.check_url(&new.url).map_err(ValidationErrors::one)?;
        let now = self.deps.clock.now();
        let id = WebhookId::generate(self.deps.ids.as_ref());
        let secret = match new.secret {
            Some(given) => given.expose_secret().to_owned(),
            None => new_secret(self.deps.secrets.as_ref()),
        };
        let sealed = self.deps.cipher.seal(id.as_str(), &secret)?;
        let details = SubscriptionDetails {
            url,
            events: new.events,
            description: new.description,
            metadata: new.metadata,
        };
        let subscription = Subscription::new(id, caller.tenant_id.clone(), details, sealed, now)
            .made_by(caller.user_id.clone());
        self.deps.webhooks.insert(&subscription).await?;
        Ok((subscription, secret))
    }

    /// The caller's tenant's subscriptions.
    ///
    /// # Errors
    /// [`WebhookError::Forbidden`].
    pub async fn list(&self, caller: &Principal) -> Result<Vec<Subscription>, WebhookError> {
        caller.require(Permission::WebhooksRead)?;
        Ok(self.deps.webhooks.list(&caller.tenant_id).await?)
    }

    /// One subscription of the caller's tenant.
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::Forbidden`].
    pub async fn get(&self, caller: &Principal, id: &WebhookId) -> Result<Subscription, WebhookError> {
        caller.require(Permission::WebhooksRead)?;
        self.find(caller, id).await
    }

    /// A subscription with its signing secret in clear. Only a caller who may change the
    /// subscription may read it: whoever holds the secret can sign deliveries, so a reader must
    /// not (PRODUCT.md §8).
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::Forbidden`]; unexpected when the secret does
    /// not open (the secret key changed).
    pub async fn secret(
        &self,
        caller: &Principal,
        id: &WebhookId,
    ) -> Result<(Subscription, String), WebhookError> {
        caller.require(Permission::WebhooksWrite)?;
        let subscription = self.find(caller, id).await?;
        let secret = self.deps.cipher.open(subscription.id().as_str(), subscription.secret())?;
        Ok((subscription, secret))
    }

    async fn find(&self, caller: &Principal, id: &WebhookId) -> Result<Subscription, WebhookError> {
        self.deps.webhooks.get(&caller.tenant_id, id).await?.ok_or(WebhookError::NotFound)
    }

    /// Changes a subscription. Setting `status` to `active` resumes one that `failed` or was
    /// `disabled`: deliveries waiting for it are sent again, and new events create deliveries.
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::Forbidden`], [`WebhookError::Invalid`].
    pub async fn update(
        &self,
        caller: &Principal,
        id: &WebhookId,
        patch: SubscriptionPatch,
    ) -> Result<Subscription, WebhookError> {
        caller.require(Permission::WebhooksWrite)?;
        let url =
            patch.url.as_deref().map(|u| self.check_url(u)).transpose().map_err(ValidationErrors::one)?;
        let mut s = self.find(caller, id).await?;
        let now = self.deps.clock.now();
        let change = DetailsChange {
            url,
            events: patch.events,
            description: patch.description,
            metadata: patch.metadata,
        };
        s.change_details(change, now);
        if let Some(status) = patch.status {
            s.set_status(status, now).map_err(|refused| {
                ValidationErrors::one(FieldError::new(
                    "status",
                    FieldErrorKind::InvalidValue,
                    refused.to_string(),
                ))
            })?;
        }
        if !self.deps.webhooks.update(&s).await? {
            return Err(WebhookError::NotFound);
        }
        Ok(s)
    }

    /// Deletes a subscription and its delivery log.
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::Forbidden`].
    pub async fn delete(&self, caller: &Principal, id: &WebhookId) -> Result<(), WebhookError> {
        caller.require(Permission::WebhooksWrite)?;
        if self.deps.webhooks.delete(&caller.tenant_id, id).await? {
            Ok(())
        } else {
            Err(WebhookError::NotFound)
        }
    }

    /// Gives a subscription a new generated secret; the old one keeps signing alongside for
    /// [`WebhookSettings::rotation_overlap`]. Returns the subscription and the new secret.
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::Forbidden`].
    pub async fn rotate_secret(
        &self,
        caller: &Principal,
        id: &WebhookId,
    ) -> Result<(Subscription, String), WebhookError> {
        caller.require(Permission::WebhooksWrite)?;
        let mut s = self.find(caller, id).await?;
        let now = self.deps.clock.now();
        let secret = new_secret(self.deps.secrets.as_ref());
        let sealed = self.deps.cipher.seal(s.id().as_str(), &secret)?;
        s.rotate_secret(sealed, self.settings.rotation_overlap, now);
        if !self.deps.webhooks.update(&s).await? {
            return Err(WebhookError::NotFound);
        }
        Ok((s, secret))
    }

    /// Sends one signed test event of `event_type` now and reports the receiver's answer. The
    /// test is a delivery of its own in the log; it is not retried and never changes the
    /// subscription's status.
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::Forbidden`].
    pub async fn test(
        &self,
        caller: &Principal,
        id: &WebhookId,
        event_type: EventType,
    ) -> Result<TestReport, WebhookError> {
        caller.require(Permission::WebhooksWrite)?;
        let subscription = self.find(caller, id).await?;
        let now = self.deps.clock.now();
        let event_id = EventId::generate(self.deps.ids.as_ref());
        let data = json!({"test": true, "message": format!("A test {event_type} event from Agentry.")});
        let envelope = crate::events::envelope(&event_id, event_type, now, data, &caller.tenant_id);
        let delivery = NewDelivery {
            id: DeliveryId::generate(self.deps.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            subscription_id: subscription.id().clone(),
            event_id: event_id.clone(),
            event_type: event_type.as_str().to_owned(),
            payload: envelope.to_string(),
            test: true,
            skipped: false,
            created_at: now,
            due_at: now,
        };
        let lease = self.new_lease(now);
        self.deps.webhooks.insert_claimed(&delivery, &lease).await?;
        let claimed = Claimed {
            item: DueDelivery {
                id: delivery.id.clone(),
                event_id,
                payload: delivery.payload,
                test: true,
                earlier_attempts: 0,
                subscription,
            },
            claims: 1,
            lease,
        };
        let settlement = self.attempt(&claimed).await;
        self.settle_now(&claimed, &settlement).await?;
        let a = settlement.into_attempt();
        Ok(TestReport {
            delivery_id: delivery.id,
            success: a.succeeded,
            response_status: a.response_status.unwrap_or(0),
            response_time_ms: a.response_time_ms,
            error: a.error,
        })
    }

    /// The subscription's deliveries, newest first.
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::Forbidden`].
    pub async fn deliveries(
        &self,
        caller: &Principal,
        id: &WebhookId,
        limit: u32,
    ) -> Result<Vec<Delivery>, WebhookError> {
        caller.require(Permission::WebhooksRead)?;
        let subscription = self.find(caller, id).await?;
        Ok(self.deps.webhooks.deliveries(&caller.tenant_id, subscription.id(), limit).await?)
    }

    /// One delivery's attempts.
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::DeliveryNotFound`], [`WebhookError::Forbidden`].
    pub async fn attempts(
        &self,
        caller: &Principal,
        id: &WebhookId,
        delivery: &DeliveryId,
    ) -> Result<(Delivery, Vec<Attempt>), WebhookError> {
        caller.require(Permission::WebhooksRead)?;
        let subscription = self.find(caller, id).await?;
        let d = self
            .deps
            .webhooks
            .delivery(&caller.tenant_id, subscription.id(), delivery)
            .await?
            .ok_or(WebhookError::DeliveryNotFound)?;
        let attempts = self.deps.webhooks.attempts(&caller.tenant_id, d.id()).await?;
        Ok((d, attempts))
    }

    /// Makes a new attempt of a delivery now, whatever its status (a `failed` one too, and to a
    /// subscription that is not active: the caller asks for it), and returns the delivery after
    /// it. A failed manual attempt schedules nothing further.
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::DeliveryNotFound`],
    /// [`WebhookError::AttemptInProgress`], [`WebhookError::Forbidden`].
    pub async fn retry(
        &self,
        caller: &Principal,
        id: &WebhookId,
        delivery: &DeliveryId,
    ) -> Result<Delivery, WebhookError> {
        caller.require(Permission::WebhooksWrite)?;
        let subscription = self.find(caller, id).await?;
        let now = self.deps.clock.now();
        let lease = self.new_lease(now);
        let Some(claimed) =
            self.deps.webhooks.claim_one(&caller.tenant_id, subscription.id(), delivery, &lease, now).await?
        else {
            return match self.deps.webhooks.delivery(&caller.tenant_id, subscription.id(), delivery).await? {
                Some(_) => Err(WebhookError::AttemptInProgress),
                None => Err(WebhookError::DeliveryNotFound),
            };
        };
        let claimed = claimed.by_hand();
        let settlement = self.attempt(&claimed).await;
        self.settle_now(&claimed, &settlement).await?;
        self.deps
            .webhooks
            .delivery(&caller.tenant_id, subscription.id(), delivery)
            .await?
            .ok_or(WebhookError::DeliveryNotFound)
    }

    /// Recovers a subscription: queues again every skipped or failed delivery created since
    /// `since` (each with its event id and a fresh retry schedule) and sets it `active`, in one
    /// transaction. How many deliveries were queued.
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::Forbidden`].
    pub async fn recover(
        &self,
        caller: &Principal,
        id: &WebhookId,
        since: DateTime<Utc>,
    ) -> Result<u64, WebhookError> {
        caller.require(Permission::WebhooksWrite)?;
        self.requeue(caller, id, &Requeue::recovery(since)).await
    }

    /// Retries in bulk: queues again the active subscription's deliveries in `status` (skipped
    /// and failed ones when `None`) created since `since` (all when `None`). How many were
    /// queued.
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::Forbidden`], [`WebhookError::Invalid`] for a
    /// status that cannot be retried, [`WebhookError::NotActive`] for a subscription that is not
    /// active (a recovery is what it needs).
    pub async fn retry_all(
        &self,
        caller: &Principal,
        id: &WebhookId,
        status: Option<DeliveryStatus>,
        since: Option<DateTime<Utc>>,
    ) -> Result<u64, WebhookError> {
        caller.require(Permission::WebhooksWrite)?;
        if let Some(s) = status.filter(|s| !Requeue::REQUEUABLE.contains(s)) {
            return Err(ValidationErrors::one(FieldError::new(
                "status",
                FieldErrorKind::InvalidValue,
                format!("{s} deliveries cannot be retried; status may be failed or skipped"),
            ))
            .into());
        }
        let subscription = self.find(caller, id).await?;
        if subscription.status() != SubscriptionStatus::Active {
            return Err(WebhookError::NotActive(subscription.status()));
        }
        self.requeue(caller, id, &Requeue::retry(status, since)).await
    }

    async fn requeue(
        &self,
        caller: &Principal,
        id: &WebhookId,
        requeue: &Requeue,
    ) -> Result<u64, WebhookError> {
        let now = self.deps.clock.now();
        let queued = self.deps.webhooks.requeue(&caller.tenant_id, id, requeue, now).await?;
        let queued = queued.ok_or(WebhookError::NotFound)?;
        tracing::info!(
            tenant_id = %caller.tenant_id, webhook_id = %id, queued, reactivate = requeue.reactivate,
            "webhook deliveries queued again"
        );
        Ok(queued)
    }

    /// The subscription's deliveries per status and its receiver's response times over the
    /// last [`STATS_WINDOW_HOURS`] hours.
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::Forbidden`].
    pub async fn stats(&self, caller: &Principal, id: &WebhookId) -> Result<DeliveryStats, WebhookError> {
        caller.require(Permission::WebhooksRead)?;
        let subscription = self.find(caller, id).await?;
        let since = self.deps.clock.now() - Duration::hours(STATS_WINDOW_HOURS);
        Ok(self.deps.webhooks.stats(&caller.tenant_id, subscription.id(), since).await?)
    }

    /// The subscription's deliveries per UTC hour of their creation and per status, over the
    /// last [`HISTORY_HOURS`] hours (the current hour last, so far), every hour present.
    ///
    /// # Errors
    /// [`WebhookError::NotFound`], [`WebhookError::Forbidden`].
    pub async fn deliveries_per_hour(
        &self,
        caller: &Principal,
        id: &WebhookId,
    ) -> Result<Vec<HourlyDeliveries>, WebhookError> {
        caller.require(Permission::WebhooksRead)?;
        let subscription = self.find(caller, id).await?;
        let first = hour_of(self.deps.clock.now()) - Duration::hours(i64::from(HISTORY_HOURS) - 1);
        let rows = self.deps.webhooks.per_hour(&caller.tenant_id, subscription.id(), first).await?;
        Ok(hourly(first, HISTORY_HOURS, &rows))
    }

    /// One fan-out pass over the outbox: the store applies [`fan_out`]'s decision.
    ///
    /// # Errors
    /// When storage fails.
    pub async fn dispatch(&self) -> anyhow::Result<Dispatched> {
        let first_delay = self.settings.schedule.first_delay();
        self.deps
            .webhooks
            .dispatch(self.deps.clock.now(), self.settings.dispatch_batch, first_delay, fan_out)
            .await
    }

    fn new_lease(&self, now: DateTime<Utc>) -> Lease {
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
    async fn settle_now(&self, claimed: &ClaimedDelivery, settlement: &Settlement) -> anyhow::Result<()> {
        let ran = self.settle(claimed, settlement).await?;
        crate::metrics::queue_outcome(DELIVERY_QUEUE, ran.outcome.as_str());
        Ok(())
    }

    /// Signs and sends one attempt, and decides what it changes.
    async fn attempt(&self, claimed: &ClaimedDelivery) -> Settlement {
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

#[cfg(test)]
mod tests;

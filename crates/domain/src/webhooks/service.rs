//! The webhook service: subscriptions and their operations (test, retry, rotation, the
//! delivery log) for requests, and the two steps the background workers repeat — fan-out of
//! outbox events into deliveries, and attempts of due deliveries.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value, json};

use super::delivery::{Delivery, DueDelivery};
use super::model::{Attempt, DeliveryStatus, EventSelectors, NewDelivery, SubscriptionStatus};
use super::ports::{Hmac, SecretCipher, WebhookRepository, WebhookSender};
use super::recovery::{DeliveryStats, HourlyDeliveries, Requeue, hour_of, hourly};
use super::schedule::RetrySchedule;
use super::signing::new_secret;
use super::subscription::{DetailsChange, Subscription, SubscriptionDetails};
use crate::events::EventType;
use crate::ids::{DeliveryId, EventId, IdGenerator, WebhookId};
use crate::patch::Patch;
use crate::secrets::Secrets;
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors};
use crate::work::{Claimed, LeaseQueue};

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
}

mod delivering;

#[cfg(test)]
mod tests;

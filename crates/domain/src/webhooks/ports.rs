//! What webhooks need from outside: storage, a cipher for secrets at rest, an HTTP sender, and
//! HMAC for signatures.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::delivery::{ClaimedDelivery, Delivery, Settlement};
use super::fanout::FanOut;
use super::model::{Attempt, AttemptErrorKind, NewDelivery, SealedSecret};
use super::recovery::{DeliveryStats, HourCount, Requeue};
use super::subscription::Subscription;
use crate::events::Event;
use crate::ids::{DeliveryId, TenantId, WebhookId};
use crate::work::Lease;

/// What one fan-out pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dispatched {
    /// Outbox events marked dispatched.
    pub events: usize,
    /// Delivery rows created.
    pub deliveries: usize,
}

/// Subscriptions, deliveries and the delivery log, always within a tenant (except the fan-out,
/// which spans tenants). The workers claim due deliveries through the store's
/// [`crate::work::LeaseQueue`] of [`DueDelivery`](super::DueDelivery)s: pending deliveries of `active`
/// subscriptions whose next attempt is due, each claim counting an attempt.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait WebhookRepository: Send + Sync {
    /// Stores a new subscription.
    async fn insert(&self, subscription: &Subscription) -> anyhow::Result<()>;

    /// The tenant's subscription with this id.
    async fn get(&self, tenant: &TenantId, id: &WebhookId) -> anyhow::Result<Option<Subscription>>;

    /// The tenant's subscriptions, oldest first.
    async fn list(&self, tenant: &TenantId) -> anyhow::Result<Vec<Subscription>>;

    /// Replaces a subscription's changeable fields (URL, events, description, metadata, status,
    /// secrets, `updated_at`); `false` when it no longer exists.
    async fn update(&self, subscription: &Subscription) -> anyhow::Result<bool>;

    /// Deletes a subscription with its deliveries; `false` when absent.
    async fn delete(&self, tenant: &TenantId, id: &WebhookId) -> anyhow::Result<bool>;

    /// Fan-out: in one transaction, reads the subscriptions of the tenants of `events` (every
    /// status) and stores the deliveries `fan_out` decides (made at `now`, due `first_delay`
    /// later). MUST never create two deliveries for one (event, subscription) pair, also when
    /// the same events are dispatched again (the fan-out consumer is at-least-once) or by
    /// several instances at once.
    async fn dispatch(
        &self,
        events: &[Event],
        now: DateTime<Utc>,
        first_delay: chrono::Duration,
        fan_out: FanOut,
    ) -> anyhow::Result<Dispatched>;

    /// Stores a delivery already claimed under `lease` as its first attempt (a test delivery,
    /// sent by the request that made it).
    async fn insert_claimed(&self, delivery: &NewDelivery, lease: &Lease) -> anyhow::Result<()>;

    /// Claims one delivery of the tenant's subscription for an attempt now, whatever its status,
    /// unless it is held under an unexpired lease; `None` when absent or held.
    async fn claim_one(
        &self,
        tenant: &TenantId,
        subscription: &WebhookId,
        delivery: &DeliveryId,
        lease: &Lease,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<ClaimedDelivery>>;

    /// Records an attempt's outcome, only if the delivery still carries `lease`, in one
    /// transaction: the attempt in the log, the delivery's state, and the subscription's status
    /// when the settlement stops it (only from [`SubscriptionStop::FROM`](super::SubscriptionStop::FROM)).
    /// `false` when the lease was lost.
    async fn settle(
        &self,
        delivery: &DeliveryId,
        lease: &Lease,
        settlement: &Settlement,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool>;

    /// The subscription's deliveries, newest first, at most `limit`.
    async fn deliveries(
        &self,
        tenant: &TenantId,
        subscription: &WebhookId,
        limit: u32,
    ) -> anyhow::Result<Vec<Delivery>>;

    /// One delivery of the tenant's subscription.
    async fn delivery(
        &self,
        tenant: &TenantId,
        subscription: &WebhookId,
        id: &DeliveryId,
    ) -> anyhow::Result<Option<Delivery>>;

    /// The attempts of one delivery of the tenant, first first.
    async fn attempts(&self, tenant: &TenantId, delivery: &DeliveryId) -> anyhow::Result<Vec<Attempt>>;

    /// Queues again, in one transaction, the tenant's subscription's deliveries that `requeue`
    /// selects (never test deliveries): `pending`, due at `now`, their attempts so far kept as
    /// earlier ones so that the retry schedule starts over; and sets the subscription `active`
    /// when `requeue.reactivate`. How many were queued; `None` when the subscription is absent.
    async fn requeue(
        &self,
        tenant: &TenantId,
        subscription: &WebhookId,
        requeue: &Requeue,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<u64>>;

    /// The subscription's deliveries created since `since` per status, and the response times
    /// of the attempts started since then that got an answer (p50, p99 by nearest rank).
    async fn stats(
        &self,
        tenant: &TenantId,
        subscription: &WebhookId,
        since: DateTime<Utc>,
    ) -> anyhow::Result<DeliveryStats>;

    /// The subscription's deliveries created since `since` (an hour's start), counted per UTC
    /// hour of their creation and per status, in any order; an hour and status without
    /// deliveries has no row. Counted by the database: a busy subscription makes thousands of
    /// deliveries a day, and the answer stays at most four rows an hour.
    async fn per_hour(
        &self,
        tenant: &TenantId,
        subscription: &WebhookId,
        since: DateTime<Utc>,
    ) -> anyhow::Result<Vec<HourCount>>;
}

/// Seals secrets that must be used in clear later (signing secrets) for storage: authenticated
/// encryption, bound to `context` (the owning row's id) so a sealed value moved to another row
/// does not open.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SecretCipher: Send + Sync {
    /// Seals `plaintext`.
    ///
    /// # Errors
    /// When the cipher fails (it does not with a valid key).
    fn seal(&self, context: &str, plaintext: &str) -> anyhow::Result<SealedSecret>;

    /// Opens a sealed secret.
    ///
    /// # Errors
    /// When it was sealed with another key or context, or was altered.
    fn open(&self, context: &str, sealed: &SealedSecret) -> anyhow::Result<String>;
}

/// A POST to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundPost {
    /// Where.
    pub url: String,
    /// Headers besides those the sender adds itself (`User-Agent`).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// A receiver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundAnswer {
    /// Its status (redirects are answers too: never followed).
    pub status: u16,
    /// The start of its body, at most [`RESPONSE_BODY_BYTES`](super::model::RESPONSE_BODY_BYTES).
    pub body: Vec<u8>,
    /// How long it took.
    pub elapsed_ms: u64,
}

/// A POST that got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct OutboundFailure {
    /// What failed.
    pub kind: AttemptErrorKind,
    /// Why, readably (never holding a secret).
    pub message: String,
    /// How long it took to fail.
    pub elapsed_ms: u64,
}

/// Sends webhook requests through the outbound guard.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait WebhookSender: Send + Sync {
    /// Whether `url` may be sent to, judged without resolving its host (an address literal,
    /// `localhost`); a refusal says why.
    ///
    /// # Errors
    /// The reason, for the API's error.
    fn check_url(&self, url: &str) -> Result<(), String>;

    /// Sends one POST. The guard checks every address the host resolves to.
    async fn post(&self, post: OutboundPost) -> Result<OutboundAnswer, OutboundFailure>;
}

/// HMAC-SHA256, from whichever cryptography library the service uses.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Hmac: Send + Sync {
    /// The 32-byte HMAC-SHA256 of `message` under `key`.
    fn sha256(&self, key: &[u8], message: &[u8]) -> [u8; 32];
}

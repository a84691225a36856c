//! Outbound webhooks: subscriptions, fan-out of outbox events into deliveries, signed attempts
//! with retries, and the delivery log.
//!
//! - [`model`]: event selectors (types, aliases, `*`), statuses, attempts, and the validation of
//!   what a request may set;
//! - [`subscription`]: the subscription entity and its transitions (resume, pause, stop, secret
//!   rotation);
//! - [`delivery`]: the delivery entity and the transitions of an attempt ([`Settlement`]);
//! - [`fanout`]: which subscriptions receive which events ([`fan_out`]);
//! - [`recovery`]: skipped deliveries queued again, and a subscription's delivery statistics;
//! - [`signing`]: `X-Service-Signature` and the Standard Webhooks headers, over an [`Hmac`] port;
//! - [`schedule`]: the retry schedule;
//! - [`ports`]: the [`WebhookRepository`], [`SecretCipher`], [`WebhookSender`] and [`Hmac`] ports;
//! - [`service`]: [`WebhookService`], for requests and for the workers' two steps.

pub mod delivery;
pub mod fanout;
pub mod model;
mod ports;
pub mod recovery;
pub mod schedule;
mod service;
pub mod signing;
pub mod subscription;

pub use delivery::{AttemptMode, ClaimedDelivery, Delivery, DueDelivery, Settlement, StoredDelivery};
pub use fanout::{FanOut, SubscriptionTarget, fan_out, pair_id};
pub use model::{
    Attempt, AttemptErrorKind, DeliveryStatus, EventSelector, EventSelectors, InvalidStoredState,
    NewDelivery, PreviousSecret, SealedSecret, SubscriptionStatus,
};
pub use ports::{
    Dispatched, Hmac, OutboundAnswer, OutboundFailure, OutboundPost, SecretCipher, WebhookRepository,
    WebhookSender,
};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockHmac, MockSecretCipher, MockWebhookRepository, MockWebhookSender};
pub use recovery::{
    DeliveryCounts, DeliveryStats, HourCount, HourlyDeliveries, Requeue, hour_of, hourly, nearest_rank_offset,
};
pub use schedule::RetrySchedule;
pub use service::{
    DELIVERY_QUEUE, HISTORY_HOURS, NewSubscription, STATS_WINDOW_HOURS, SubscriptionPatch, TestReport,
    WebhookError, WebhookService, WebhookServiceDeps, WebhookSettings,
};
pub use subscription::{
    DetailsChange, IllegalStatusChange, StoredSubscription, Subscription, SubscriptionDetails,
    SubscriptionStop,
};

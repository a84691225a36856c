//! Outbound webhooks: subscriptions, fan-out of outbox events into deliveries, signed attempts
//! with retries, and the delivery log.
//!
//! - [`model`]: subscriptions, event selectors (types, aliases, `*`), deliveries, attempts, and
//!   the validation of what a request may set;
//! - [`signing`]: `X-Service-Signature` and the Standard Webhooks headers, over an [`Hmac`] port;
//! - [`schedule`]: the retry schedule;
//! - [`ports`]: the [`WebhookRepository`], [`SecretCipher`] and [`WebhookSender`] ports;
//! - [`service`]: [`WebhookService`], for requests and for the workers' two steps.

pub mod model;
mod ports;
pub mod schedule;
mod service;
pub mod signing;

pub use model::{
    Attempt, AttemptErrorKind, Delivery, DeliveryStatus, EventSelector, NewDelivery, PreviousSecret,
    SealedSecret, Subscription, SubscriptionStatus, wants,
};
pub use ports::{
    ClaimedDelivery, Dispatched, DueDelivery, OutboundAnswer, OutboundFailure, OutboundPost, SecretCipher,
    Settlement, WebhookRepository, WebhookSender,
};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockSecretCipher, MockWebhookRepository, MockWebhookSender};
pub use schedule::RetrySchedule;
pub use service::{
    DELIVERY_QUEUE, NewSubscription, SubscriptionPatch, TestReport, WebhookError, WebhookService,
    WebhookServiceDeps, WebhookSettings,
};
pub use signing::Hmac;
#[cfg(any(test, feature = "mock"))]
pub use signing::MockHmac;

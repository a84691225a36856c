//! Subscriptions, deliveries and attempts, and the validation of what a request may set.

use std::fmt;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::events::EventType;
use crate::ids::{DeliveryId, EventId, TenantId, WebhookId};
use crate::validation::{FieldError, FieldErrorKind, TextKind, check_length, check_text};

/// Longest subscription URL, in characters.
pub const MAX_URL_CHARS: usize = 2048;
/// Most event names a subscription may list.
pub const MAX_EVENTS: usize = 32;
/// Longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 1000;
/// Longest user-given secret; the shortest is [`MIN_SECRET_CHARS`].
pub const MAX_SECRET_CHARS: usize = 256;
/// Shortest user-given secret: an HMAC key should not be guessable.
pub const MIN_SECRET_CHARS: usize = 16;
/// How much of a receiver's answer each attempt keeps.
pub const RESPONSE_BODY_BYTES: usize = 1024;

/// Whether a subscription receives events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionStatus {
    /// Receives events.
    Active,
    /// A delivery failed every attempt: no new deliveries until set `active` again.
    Failed,
    /// The receiver answered `410 Gone`: no new deliveries until set `active` again.
    Disabled,
}

impl SubscriptionStatus {
    /// Every status.
    pub const ALL: [Self; 3] = [Self::Active, Self::Failed, Self::Disabled];

    /// The stored and shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Failed => "failed",
            Self::Disabled => "disabled",
        }
    }

    /// Parses a name.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == value)
    }
}

impl fmt::Display for SubscriptionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One name a subscription lists: an event type, an alias of several, or `*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventSelector {
    /// Every event type.
    All,
    /// One event type.
    Exactly(EventType),
    /// `agent.message`: both `agent.message.*` types.
    AgentMessage,
}

impl EventSelector {
    /// Every name a subscription may list, for error messages and the API description.
    pub fn names() -> Vec<&'static str> {
        let mut names = vec!["*", "agent.message", "workflow.completed"];
        names.extend(EventType::ALL.iter().map(|t| t.as_str()));
        names
    }

    /// Parses a listed name (the catalogue's types, the aliases `agent.message` and
    /// `workflow.completed`, and `*`).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "*" => Some(Self::All),
            "agent.message" => Some(Self::AgentMessage),
            "workflow.completed" => Some(Self::Exactly(EventType::WorkflowExecutionCompleted)),
            other => EventType::parse(other).map(Self::Exactly),
        }
    }

    /// Whether events of type `t` are selected.
    pub fn matches(self, t: EventType) -> bool {
        match self {
            Self::All => true,
            Self::Exactly(wanted) => wanted == t,
            Self::AgentMessage => {
                matches!(t, EventType::AgentMessageCreated | EventType::AgentMessageCompleted)
            }
        }
    }
}

/// Whether a subscription listing `events` wants events of type `t`. Names that no longer
/// parse select nothing.
pub fn wants(events: &[String], t: EventType) -> bool {
    events.iter().filter_map(|n| EventSelector::parse(n)).any(|s| s.matches(t))
}

/// A signing secret sealed for storage (see [`SecretCipher`](super::SecretCipher)); opened only
/// to sign.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSecret(pub String);

impl fmt::Debug for SealedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealedSecret(..)")
    }
}

/// The secret that signed before a rotation, kept signing alongside the new one until `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviousSecret {
    /// The old secret, sealed.
    pub secret: SealedSecret,
    /// When it stops signing.
    pub until: DateTime<Utc>,
}

/// A webhook subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    /// Its id.
    pub id: WebhookId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// Where deliveries are sent.
    pub url: String,
    /// The names it listed (types, aliases, `*`), as given.
    pub events: Vec<String>,
    /// What it is for.
    pub description: Option<String>,
    /// Free-form object.
    pub metadata: Map<String, Value>,
    /// Whether it receives events.
    pub status: SubscriptionStatus,
    /// The signing secret, sealed.
    pub secret: SealedSecret,
    /// The secret before the last rotation, while it still signs.
    pub previous_secret: Option<PreviousSecret>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Waiting for its next attempt (or in one).
    Pending,
    /// The receiver accepted it.
    Delivered,
    /// Every attempt failed, or the receiver is gone.
    Failed,
}

impl DeliveryStatus {
    /// Every status.
    pub const ALL: [Self; 3] = [Self::Pending, Self::Delivered, Self::Failed];

    /// The stored and shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    /// Parses a name.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == value)
    }
}

/// One event on its way to one subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Its id.
    pub id: DeliveryId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The subscription.
    pub subscription_id: WebhookId,
    /// The event (the `webhook-id` of every attempt).
    pub event_id: EventId,
    /// The event's type (for a test delivery, the type asked for).
    pub event_type: String,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts started.
    pub attempts: u32,
    /// When the next attempt is due (pending deliveries).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The receiver's status at the last attempt that got an answer.
    pub response_status: Option<u16>,
    /// How long the last attempt took.
    pub response_time_ms: Option<u64>,
    /// Why the last attempt failed.
    pub error: Option<String>,
    /// When the receiver accepted it.
    pub delivered_at: Option<DateTime<Utc>>,
    /// Whether it was made by `POST /webhooks/{id}/test`.
    pub test: bool,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// A delivery to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDelivery {
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
    /// The body every attempt sends: the event's envelope, serialised once so that every
    /// attempt sends (and signs) the same bytes.
    pub payload: String,
    /// A test delivery (never retried; never changes the subscription's status).
    pub test: bool,
    /// Creation time, and when the first attempt is due.
    pub created_at: DateTime<Utc>,
}

/// Why an attempt failed without an HTTP answer, or what kind of answer failed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptErrorKind {
    /// The receiver answered with a status outside 2xx (redirects included: never followed).
    HttpStatus,
    /// The URL resolved only to addresses the service may not contact.
    RefusedAddress,
    /// No connection could be made (DNS, refused, reset, TLS).
    Connection,
    /// No answer within the timeout.
    Timeout,
    /// The URL is not one the service can send to.
    InvalidUrl,
    /// The secret could not be opened (a changed `AGENTRY_SECRET_KEY`).
    Secret,
    /// Anything else.
    Other,
}

impl AttemptErrorKind {
    /// Every kind.
    pub const ALL: [Self; 7] = [
        Self::HttpStatus,
        Self::RefusedAddress,
        Self::Connection,
        Self::Timeout,
        Self::InvalidUrl,
        Self::Secret,
        Self::Other,
    ];

    /// The stored and shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HttpStatus => "http_status",
            Self::RefusedAddress => "refused_address",
            Self::Connection => "connection",
            Self::Timeout => "timeout",
            Self::InvalidUrl => "invalid_url",
            Self::Secret => "secret",
            Self::Other => "other",
        }
    }

    /// Parses a name.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == value)
    }
}

/// One attempt of a delivery, as the delivery log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Which attempt, from 1.
    pub number: u32,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// The receiver's status, when it answered.
    pub response_status: Option<u16>,
    /// How long it took, in milliseconds.
    pub response_time_ms: u64,
    /// Whether the receiver accepted it.
    pub succeeded: bool,
    /// What failed it.
    pub error_kind: Option<AttemptErrorKind>,
    /// A readable reason.
    pub error: Option<String>,
    /// The first [`RESPONSE_BODY_BYTES`] of the answer (lossy UTF-8).
    pub response_body: Option<String>,
}

/// Checks a subscription URL: absolute, `https` (or `http` when `allow_insecure`), a host, no
/// credentials, at most [`MAX_URL_CHARS`]. Whether its host may be contacted is the sender's
/// check (see [`WebhookSender::check_url`](super::WebhookSender::check_url)).
///
/// # Errors
/// [`FieldErrorKind::InvalidFormat`] (or a length kind) naming `url`.
pub fn check_url(raw: &str, allow_insecure: bool) -> Result<url::Url, FieldError> {
    check_text(raw, "url", TextKind::SingleLine)?;
    check_length(raw, 1, MAX_URL_CHARS, "url")?;
    let invalid = |message: String| FieldError::new("url", FieldErrorKind::InvalidFormat, message);
    let url = url::Url::parse(raw).map_err(|e| invalid(format!("url must be an absolute URL ({e})")))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_insecure => {}
        "http" => {
            return Err(invalid(
                "url must use https (set AGENTRY_WEBHOOK_ALLOW_INSECURE=true to allow http)".into(),
            ));
        }
        other => return Err(invalid(format!("url must use https, not {other}"))),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("url must name a host".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("url must not carry a user name or password".into()));
    }
    if url.fragment().is_some() {
        return Err(invalid("url must not have a fragment".into()));
    }
    Ok(url)
}

/// Checks the listed event names: 1 to [`MAX_EVENTS`], each a catalogue type, an alias or `*`;
/// repeats removed, order kept.
///
/// # Errors
/// [`FieldErrorKind::InvalidValue`] naming the first unknown name, or a length kind.
pub fn check_events(names: &[String]) -> Result<Vec<String>, FieldError> {
    if names.is_empty() {
        return Err(FieldError::new(
            "events",
            FieldErrorKind::TooShort,
            "events must list at least one event type",
        ));
    }
    if names.len() > MAX_EVENTS {
        return Err(FieldError::new(
            "events",
            FieldErrorKind::TooLong,
            format!("events may list at most {MAX_EVENTS} event types"),
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if EventSelector::parse(name).is_none() {
            return Err(FieldError::new(
                format!("events[{i}]"),
                FieldErrorKind::InvalidValue,
                format!(
                    "unknown event type {name:?}; expected one of: {}",
                    EventSelector::names().join(", ")
                ),
            ));
        }
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    Ok(out)
}

/// Checks a description: multi-line text of at most [`MAX_DESCRIPTION_CHARS`].
///
/// # Errors
/// As [`crate::validation::check_long_text`].
pub fn check_description(value: &str) -> Result<String, FieldError> {
    crate::validation::check_long_text(value, 0, MAX_DESCRIPTION_CHARS, "description")?;
    Ok(value.to_owned())
}

/// Checks a user-given signing secret: [`MIN_SECRET_CHARS`] to [`MAX_SECRET_CHARS`] printable
/// characters.
///
/// # Errors
/// A length kind or [`FieldErrorKind::InvalidFormat`] naming `secret`.
pub fn check_secret(value: &str) -> Result<String, FieldError> {
    check_text(value, "secret", TextKind::SingleLine)?;
    check_length(value, MIN_SECRET_CHARS, MAX_SECRET_CHARS, "secret")?;
    if value.chars().any(char::is_whitespace) {
        return Err(FieldError::new(
            "secret",
            FieldErrorKind::InvalidFormat,
            "secret must not contain spaces",
        ));
    }
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_and_star_select_what_product_md_says() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(wants(&names(&["*"]), EventType::BillingCreditsLow));
        assert!(wants(&names(&["agent.message"]), EventType::AgentMessageCreated));
        assert!(wants(&names(&["agent.message"]), EventType::AgentMessageCompleted));
        assert!(!wants(&names(&["agent.message"]), EventType::AgentCreated));
        assert!(wants(&names(&["workflow.completed"]), EventType::WorkflowExecutionCompleted));
        assert!(!wants(&names(&["workflow.completed"]), EventType::WorkflowExecutionFailed));
        assert!(wants(&names(&["agent.created"]), EventType::AgentCreated));
        assert!(!wants(&names(&["agent.created"]), EventType::AgentUpdated));
        assert!(!wants(&names(&["agent.deleted"]), EventType::AgentCreated));
        for t in EventType::ALL {
            assert!(wants(&names(&[t.as_str()]), t));
        }
    }

    #[test]
    fn event_lists_are_checked_and_deduplicated() {
        let ok = check_events(&["agent.created".into(), "*".into(), "agent.created".into()]).unwrap();
        assert_eq!(ok, ["agent.created", "*"]);
        assert_eq!(check_events(&[]).unwrap_err().kind, FieldErrorKind::TooShort);
        let bad = check_events(&["agent.created".into(), "agent.deleted".into()]).unwrap_err();
        assert_eq!((bad.field.as_str(), bad.kind), ("events[1]", FieldErrorKind::InvalidValue));
        assert_eq!(check_events(&vec!["*".to_owned(); 33]).unwrap_err().kind, FieldErrorKind::TooLong);
    }

    #[test]
    fn urls_must_be_https_unless_insecure_is_allowed() {
        assert!(check_url("https://hooks.example.com/in", false).is_ok());
        assert!(check_url("http://hooks.example.com/in", false).is_err());
        assert!(check_url("http://hooks.example.com/in", true).is_ok());
        for bad in [
            "ftp://hooks.example.com/",
            "hooks.example.com/in",
            "https://user:pw@hooks.example.com/",
            "https://hooks.example.com/#x",
            "https://",
            "",
            "https://hooks.example.com/\u{0}",
        ] {
            assert!(check_url(bad, true).is_err(), "{bad:?} was accepted");
        }
        let long = format!("https://hooks.example.com/{}", "a".repeat(MAX_URL_CHARS));
        assert_eq!(check_url(&long, false).unwrap_err().kind, FieldErrorKind::TooLong);
    }

    #[test]
    fn secrets_are_long_enough_and_printable() {
        assert!(check_secret("a-secret-of-16-c").is_ok());
        assert_eq!(check_secret("short").unwrap_err().kind, FieldErrorKind::TooShort);
        assert!(check_secret("with a space inside it").is_err());
        assert!(check_secret("tab\there-and-long-enough").is_err());
    }
}

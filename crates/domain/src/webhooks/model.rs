//! Subscriptions, deliveries and attempts, and the validation of what a request may set.

use std::fmt;

use chrono::{DateTime, Utc};

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

crate::string_enum! {
    /// Whether a subscription receives events.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SubscriptionStatus {
        /// Receives events.
        Active => "active",
        /// A delivery failed every attempt: no new deliveries until set `active` again.
        Failed => "failed",
        /// The receiver answered `410 Gone`: no new deliveries until set `active` again.
        Disabled => "disabled",
    }
}

/// One name a subscription lists: an event type, an alias of several, or `*`. Parsed once,
/// when a request or a stored row is read; [`EventSelector::as_str`] gives back the very name
/// that was listed, so the stored and shown form stays what the caller wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventSelector {
    /// `*`: every event type.
    All,
    /// `agent.message`: both `agent.message.*` types.
    AgentMessage,
    /// `workflow.completed`: `workflow.execution.completed`.
    WorkflowCompleted,
    /// One event type, by its own name.
    Exactly(EventType),
}

impl EventSelector {
    /// The selectors that are not one event type, in the order the API lists them.
    const ALIASES: [Self; 3] = [Self::All, Self::AgentMessage, Self::WorkflowCompleted];

    /// Every name a subscription may list, for error messages and the API description.
    pub fn names() -> Vec<&'static str> {
        Self::ALIASES.into_iter().chain(EventType::ALL.map(Self::Exactly)).map(Self::as_str).collect()
    }

    /// The listed name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::All => "*",
            Self::AgentMessage => "agent.message",
            Self::WorkflowCompleted => "workflow.completed",
            Self::Exactly(t) => t.as_str(),
        }
    }

    /// Parses a listed name (the catalogue's types, the aliases `agent.message` and
    /// `workflow.completed`, and `*`).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALIASES
            .into_iter()
            .find(|a| a.as_str() == name)
            .or_else(|| EventType::parse(name).map(Self::Exactly))
    }

    /// The event type a test send of this name sends a sample of: the type itself, the last of
    /// an alias's types (`agent.message` → `agent.message.completed`), `agent.created` for `*`.
    pub fn sample(self) -> EventType {
        match self {
            Self::All => EventType::AgentCreated,
            Self::AgentMessage => EventType::AgentMessageCompleted,
            Self::WorkflowCompleted => EventType::WorkflowExecutionCompleted,
            Self::Exactly(t) => t,
        }
    }

    /// Whether events of type `t` are selected.
    pub fn matches(self, t: EventType) -> bool {
        match self {
            Self::All => true,
            Self::AgentMessage => {
                matches!(t, EventType::AgentMessageCreated | EventType::AgentMessageCompleted)
            }
            Self::WorkflowCompleted => t == EventType::WorkflowExecutionCompleted,
            Self::Exactly(wanted) => wanted == t,
        }
    }
}

impl fmt::Display for EventSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The names a subscription lists, parsed: what it selects is decided without reading strings
/// again. Made by [`check_events`] from a request (1 to [`MAX_EVENTS`] known names) or by
/// [`EventSelectors::from_stored`] from a stored row.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventSelectors(Vec<EventSelector>);

impl EventSelectors {
    /// The selectors of stored names. A name this version does not know (written by a newer
    /// one, then rolled back) selects nothing and is left out, rather than making the
    /// subscription, or every fan-out pass that reads it, fail.
    pub fn from_stored<S: AsRef<str>>(names: &[S]) -> Self {
        Self(names.iter().filter_map(|n| EventSelector::parse(n.as_ref())).collect())
    }

    /// Whether events of type `t` are selected by any of them.
    pub fn matches(&self, t: EventType) -> bool {
        self.0.iter().any(|s| s.matches(t))
    }

    /// The selectors, in the order they were listed.
    pub fn as_slice(&self) -> &[EventSelector] {
        &self.0
    }

    /// The listed names, in order: the stored and shown form.
    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(|s| s.as_str().to_owned()).collect()
    }
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

/// A stored row no constructor accepts: a state this version does not know, or fields that
/// contradict each other. The store reports it rather than guessing what the row meant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stored {entity} {id}: {problem}")]
pub struct InvalidStoredState {
    /// What kind of row (`subscription`, `delivery`).
    pub entity: &'static str,
    /// Its id.
    pub id: String,
    /// What is wrong with it.
    pub problem: String,
}

impl InvalidStoredState {
    /// The status stored as `value` in the row `id` of `entity`, read with `parse`.
    ///
    /// # Errors
    /// When `parse` does not know it.
    pub fn status<T>(
        entity: &'static str,
        id: &impl fmt::Display,
        value: &str,
        parse: fn(&str) -> Option<T>,
    ) -> Result<T, Self> {
        parse(value).ok_or_else(|| Self {
            entity,
            id: id.to_string(),
            problem: format!("unknown status {value:?}"),
        })
    }
}

crate::string_enum! {
    /// Where a delivery stands.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum DeliveryStatus {
        /// Waiting for its next attempt (or in one).
        Pending => "pending",
        /// The receiver accepted it.
        Delivered => "delivered",
        /// Every attempt failed, or the receiver is gone.
        Failed => "failed",
        /// Recorded while its subscription was `failed` or `disabled`: never sent, until a
        /// recovery or a retry queues it.
        Skipped => "skipped",
    }
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
    /// Recorded for a subscription that is not active: stored `skipped`, not due.
    pub skipped: bool,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// When the first attempt is due: creation time plus the retry schedule's first delay.
    pub due_at: DateTime<Utc>,
}

crate::string_enum! {
    /// Why an attempt failed without an HTTP answer, or what kind of answer failed it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum AttemptErrorKind {
        /// The receiver answered with a status outside 2xx (redirects included: never followed).
        HttpStatus => "http_status",
        /// The URL resolved only to addresses the service may not contact.
        RefusedAddress => "refused_address",
        /// No connection could be made (DNS, refused, reset, TLS).
        Connection => "connection",
        /// No answer within the timeout.
        Timeout => "timeout",
        /// The URL is not one the service can send to.
        InvalidUrl => "invalid_url",
        /// The secret could not be opened (a changed `AGENTRY_SECRET_KEY`).
        Secret => "secret",
        /// Anything else.
        Other => "other",
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
pub fn check_events(names: &[String]) -> Result<EventSelectors, FieldError> {
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
    let mut out: Vec<EventSelector> = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let Some(selector) = EventSelector::parse(name) else {
            return Err(FieldError::new(
                format!("events[{i}]"),
                FieldErrorKind::InvalidValue,
                format!(
                    "unknown event type {name:?}; expected one of: {}",
                    EventSelector::names().join(", ")
                ),
            ));
        };
        if !out.contains(&selector) {
            out.push(selector);
        }
    }
    Ok(EventSelectors(out))
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
    fn every_listed_name_has_a_sample_it_selects() {
        for name in EventSelector::names() {
            let selector = EventSelector::parse(name).unwrap();
            assert!(selector.matches(selector.sample()), "{name}");
        }
        assert_eq!(EventSelector::parse("agent.message").unwrap().sample(), EventType::AgentMessageCompleted);
    }

    #[test]
    fn aliases_and_star_select_what_product_md_says() {
        let wants = |names: &[&str], t| EventSelectors::from_stored(names).matches(t);
        assert!(wants(&["*"], EventType::BillingCreditsLow));
        assert!(wants(&["agent.message"], EventType::AgentMessageCreated));
        assert!(wants(&["agent.message"], EventType::AgentMessageCompleted));
        assert!(!wants(&["agent.message"], EventType::AgentCreated));
        assert!(wants(&["workflow.completed"], EventType::WorkflowExecutionCompleted));
        assert!(!wants(&["workflow.completed"], EventType::WorkflowExecutionFailed));
        assert!(wants(&["agent.created"], EventType::AgentCreated));
        assert!(!wants(&["agent.created"], EventType::AgentUpdated));
        assert!(!wants(&["agent.deleted"], EventType::AgentCreated));
        for t in EventType::ALL {
            assert!(wants(&[t.as_str()], t));
        }
    }

    #[test]
    fn every_selector_gives_back_the_name_it_was_parsed_from() {
        for name in EventSelector::names() {
            assert_eq!(EventSelector::parse(name).map(EventSelector::as_str), Some(name));
        }
        assert_eq!(EventSelector::names()[..3], ["*", "agent.message", "workflow.completed"]);
        assert_eq!(EventSelector::names().len(), 3 + EventType::ALL.len());
        let listed = ["workflow.completed", "workflow.execution.completed", "agent.message"];
        assert_eq!(EventSelectors::from_stored(&listed).names(), listed, "aliases are kept as listed");
        assert_eq!(
            EventSelectors::from_stored(&["agent.deleted", "*"]).names(),
            ["*"],
            "unknown names drop out"
        );
    }

    #[test]
    fn event_lists_are_checked_and_deduplicated() {
        let ok = check_events(&["agent.created".into(), "*".into(), "agent.created".into()]).unwrap();
        assert_eq!(ok.names(), ["agent.created", "*"]);
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

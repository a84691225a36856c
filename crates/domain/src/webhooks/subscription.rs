//! The subscription entity and its state machine. Its state changes only through its
//! transitions:
//!
//! - its owner resumes it ([`SubscriptionStatus::Active`], from any status) or pauses it
//!   ([`SubscriptionStatus::Disabled`], from any status); only deliveries fail it;
//! - a delivery's end stops an `active` one ([`SubscriptionStop`]): `failed` when every attempt
//!   failed, `disabled` when the receiver answered `410 Gone`; one already stopped or paused
//!   stays as it is;
//! - a rotation replaces its signing secret and keeps the old one signing for an overlap.

use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value};

use super::model::{EventSelectors, InvalidStoredState, PreviousSecret, SealedSecret, SubscriptionStatus};
use crate::ids::{TenantId, UserId, WebhookId};
use crate::patch::Patch;

/// What a subscription's owner chooses: where it sends, what it selects, what it is for.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionDetails {
    /// Where deliveries are sent (checked by the service before it gets here).
    pub url: String,
    /// The event names it listed, parsed.
    pub events: EventSelectors,
    /// What it is for.
    pub description: Option<String>,
    /// Free-form object.
    pub metadata: Map<String, Value>,
}

/// A change of a subscription's details: each field absent keeps its value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DetailsChange {
    /// A new URL (checked).
    pub url: Option<String>,
    /// New event names.
    pub events: Option<EventSelectors>,
    /// A new description, or none.
    pub description: Patch<String>,
    /// New metadata.
    pub metadata: Option<Map<String, Value>>,
}

/// A subscription as a row stores it, for [`Subscription::restore`].
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSubscription {
    /// Its id.
    pub id: WebhookId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// Where deliveries are sent.
    pub url: String,
    /// The listed names, as stored.
    pub events: Vec<String>,
    /// What it is for.
    pub description: Option<String>,
    /// Free-form object.
    pub metadata: Map<String, Value>,
    /// The stored status name.
    pub status: String,
    /// The signing secret, sealed.
    pub secret: SealedSecret,
    /// The secret before the last rotation, sealed.
    pub previous_secret: Option<SealedSecret>,
    /// Until when that secret signs.
    pub previous_secret_until: Option<DateTime<Utc>>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Who made it (`None`: made before makers were recorded; owned by the tenant).
    pub created_by: Option<UserId>,
}

/// A status change a subscription does not make: its owner may resume or pause it, never fail
/// it (only its deliveries do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a subscription's status may be set to active or disabled, not to {to}")]
pub struct IllegalStatusChange {
    /// The status asked for.
    pub to: SubscriptionStatus,
}

/// How the end of a delivery stops its subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionStop {
    /// A delivery failed every attempt of its schedule: `failed`.
    Failed,
    /// The receiver answered `410 Gone`: `disabled`.
    Gone,
}

impl SubscriptionStop {
    /// The only status a delivery's end stops: a subscription already stopped, or paused by its
    /// owner, keeps its status.
    pub const FROM: SubscriptionStatus = SubscriptionStatus::Active;

    /// The status it moves an [`Self::FROM`] subscription to.
    pub fn status(self) -> SubscriptionStatus {
        match self {
            Self::Failed => SubscriptionStatus::Failed,
            Self::Gone => SubscriptionStatus::Disabled,
        }
    }
}

/// A webhook subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    id: WebhookId,
    tenant_id: TenantId,
    details: SubscriptionDetails,
    status: SubscriptionStatus,
    secret: SealedSecret,
    previous_secret: Option<PreviousSecret>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    created_by: Option<UserId>,
}

impl Subscription {
    /// A new subscription, `active`, signing with `secret`.
    pub fn new(
        id: WebhookId,
        tenant_id: TenantId,
        details: SubscriptionDetails,
        secret: SealedSecret,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            id,
            tenant_id,
            details,
            status: SubscriptionStatus::Active,
            secret,
            previous_secret: None,
            created_at: now,
            updated_at: now,
            created_by: None,
        }
    }

    /// The subscription, made by `user`: it follows their membership (see
    /// [`crate::tenancy::Automation`]).
    #[must_use]
    pub fn made_by(mut self, user: UserId) -> Self {
        self.created_by = Some(user);
        self
    }

    /// Who made it; `None` for a subscription owned by the tenant.
    pub fn created_by(&self) -> Option<&UserId> {
        self.created_by.as_ref()
    }

    /// A subscription read back from its row. Stored names this version does not know select
    /// nothing (see [`EventSelectors::from_stored`]).
    ///
    /// # Errors
    /// An unknown status, or a previous secret without its end (or an end without the secret).
    pub fn restore(stored: StoredSubscription) -> Result<Self, InvalidStoredState> {
        let status = InvalidStoredState::status(
            "subscription",
            &stored.id,
            &stored.status,
            SubscriptionStatus::parse,
        )?;
        let previous_secret = match (stored.previous_secret, stored.previous_secret_until) {
            (Some(secret), Some(until)) => Some(PreviousSecret { secret, until }),
            (None, None) => None,
            _ => {
                return Err(InvalidStoredState {
                    entity: "subscription",
                    id: stored.id.to_string(),
                    problem: "a previous secret and its end must be stored together".into(),
                });
            }
        };
        Ok(Self {
            details: SubscriptionDetails {
                url: stored.url,
                events: EventSelectors::from_stored(&stored.events),
                description: stored.description,
                metadata: stored.metadata,
            },
            id: stored.id,
            tenant_id: stored.tenant_id,
            status,
            secret: stored.secret,
            previous_secret,
            created_at: stored.created_at,
            updated_at: stored.updated_at,
            created_by: stored.created_by,
        })
    }

    /// Its id.
    pub fn id(&self) -> &WebhookId {
        &self.id
    }

    /// Its tenant.
    pub fn tenant_id(&self) -> &TenantId {
        &self.tenant_id
    }

    /// What its owner chose.
    pub fn details(&self) -> &SubscriptionDetails {
        &self.details
    }

    /// Where deliveries are sent.
    pub fn url(&self) -> &str {
        &self.details.url
    }

    /// What it selects.
    pub fn events(&self) -> &EventSelectors {
        &self.details.events
    }

    /// Whether it receives events.
    pub fn status(&self) -> SubscriptionStatus {
        self.status
    }

    /// The signing secret, sealed.
    pub fn secret(&self) -> &SealedSecret {
        &self.secret
    }

    /// The secret before the last rotation, as stored (also once it stopped signing).
    pub fn previous_secret(&self) -> Option<&PreviousSecret> {
        self.previous_secret.as_ref()
    }

    /// The secret before the last rotation, while it still signs at `now`.
    pub fn previous_secret_at(&self, now: DateTime<Utc>) -> Option<&PreviousSecret> {
        self.previous_secret.as_ref().filter(|p| p.until > now)
    }

    /// Creation time: it receives the events that happen from then on.
    pub fn created_at(&self) -> DateTime<Utc> {
        self.created_at
    }

    /// Last change.
    pub fn updated_at(&self) -> DateTime<Utc> {
        self.updated_at
    }

    /// Changes what its owner chose.
    pub fn change_details(&mut self, change: DetailsChange, now: DateTime<Utc>) {
        let d = &mut self.details;
        if let Some(url) = change.url {
            d.url = url;
        }
        if let Some(events) = change.events {
            d.events = events;
        }
        d.description = change.description.apply_to(d.description.take());
        if let Some(metadata) = change.metadata {
            d.metadata = metadata;
        }
        self.updated_at = now;
    }

    /// Its owner sets its status: `active` resumes it (a `failed` or `disabled` one too: the
    /// deliveries waiting for it go out again), `disabled` pauses it.
    ///
    /// # Errors
    /// [`IllegalStatusChange`] for `failed`, which only its deliveries decide.
    pub fn set_status(
        &mut self,
        to: SubscriptionStatus,
        now: DateTime<Utc>,
    ) -> Result<(), IllegalStatusChange> {
        match to {
            SubscriptionStatus::Active | SubscriptionStatus::Disabled => {
                self.status = to;
                self.updated_at = now;
                Ok(())
            }
            SubscriptionStatus::Failed => Err(IllegalStatusChange { to }),
        }
    }

    /// The end of one of its deliveries stops it, if it is [`SubscriptionStop::FROM`]; `false`
    /// when it keeps its status. (The store applies the same rule to the stored row with one
    /// conditional update when it records the delivery's end.)
    pub fn stop(&mut self, stop: SubscriptionStop, now: DateTime<Utc>) -> bool {
        if self.status != SubscriptionStop::FROM {
            return false;
        }
        self.status = stop.status();
        self.updated_at = now;
        true
    }

    /// Replaces the signing secret with `secret`; the current one keeps signing alongside until
    /// `now + overlap` (a secret rotated out earlier stops at once).
    pub fn rotate_secret(&mut self, secret: SealedSecret, overlap: Duration, now: DateTime<Utc>) {
        let old = std::mem::replace(&mut self.secret, secret);
        self.previous_secret = Some(PreviousSecret { secret: old, until: now + overlap });
        self.updated_at = now;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use chrono::TimeZone;

    use super::*;
    use crate::webhooks::model::check_events;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
    }

    fn details() -> SubscriptionDetails {
        SubscriptionDetails {
            url: "https://hooks.example.com/in".into(),
            events: check_events(&["agent.created".into()]).unwrap(),
            description: Some("ops".into()),
            metadata: Map::new(),
        }
    }

    fn subscription() -> Subscription {
        Subscription::new(
            WebhookId::from_string("whk_1"),
            TenantId::from_string("ten_1"),
            details(),
            SealedSecret("sealed-1".into()),
            t0(),
        )
    }

    fn stored(status: &str) -> StoredSubscription {
        StoredSubscription {
            id: WebhookId::from_string("whk_1"),
            tenant_id: TenantId::from_string("ten_1"),
            url: "https://hooks.example.com/in".into(),
            events: vec!["agent.created".into()],
            description: Some("ops".into()),
            metadata: Map::new(),
            status: status.into(),
            secret: SealedSecret("sealed-1".into()),
            previous_secret: None,
            previous_secret_until: None,
            created_at: t0(),
            updated_at: t0(),
            created_by: None,
        }
    }

    #[test]
    fn a_new_subscription_is_active_and_signs_with_one_secret() {
        let s = subscription();
        assert_eq!(s.status(), SubscriptionStatus::Active);
        assert_eq!((s.created_at(), s.updated_at()), (t0(), t0()));
        assert!(s.previous_secret().is_none());
    }

    #[test]
    fn its_owner_resumes_or_pauses_it_from_any_status_but_never_fails_it() {
        let later = t0() + Duration::minutes(1);
        for from in SubscriptionStatus::ALL {
            for to in [SubscriptionStatus::Active, SubscriptionStatus::Disabled] {
                let mut s = Subscription::restore(stored(from.as_str())).unwrap();
                s.set_status(to, later).unwrap();
                assert_eq!((s.status(), s.updated_at()), (to, later), "{from} -> {to}");
            }
            let mut s = Subscription::restore(stored(from.as_str())).unwrap();
            let refused = s.set_status(SubscriptionStatus::Failed, later).unwrap_err();
            assert_eq!(refused.to, SubscriptionStatus::Failed);
            assert_eq!((s.status(), s.updated_at()), (from, t0()), "unchanged after a refusal");
        }
    }

    #[test]
    fn a_delivery_stops_only_an_active_subscription() {
        let later = t0() + Duration::minutes(1);
        for (stop, to) in [
            (SubscriptionStop::Failed, SubscriptionStatus::Failed),
            (SubscriptionStop::Gone, SubscriptionStatus::Disabled),
        ] {
            let mut s = subscription();
            assert!(s.stop(stop, later));
            assert_eq!((s.status(), s.updated_at()), (to, later));
            for kept in [SubscriptionStatus::Failed, SubscriptionStatus::Disabled] {
                let mut s = Subscription::restore(stored(kept.as_str())).unwrap();
                assert!(!s.stop(stop, later), "{kept} stays {kept}");
                assert_eq!((s.status(), s.updated_at()), (kept, t0()));
            }
        }
    }

    #[test]
    fn a_rotation_keeps_the_old_secret_signing_for_the_overlap_only() {
        let mut s = subscription();
        s.rotate_secret(SealedSecret("sealed-2".into()), Duration::hours(24), t0());
        assert_eq!(s.secret().0, "sealed-2");
        let previous = s.previous_secret_at(t0() + Duration::hours(23)).unwrap();
        assert_eq!((previous.secret.0.as_str(), previous.until), ("sealed-1", t0() + Duration::hours(24)));
        assert!(s.previous_secret_at(t0() + Duration::hours(24)).is_none(), "its time is up");
        s.rotate_secret(SealedSecret("sealed-3".into()), Duration::hours(24), t0() + Duration::hours(1));
        assert_eq!(
            s.previous_secret().unwrap().secret.0,
            "sealed-2",
            "only the last one before keeps signing"
        );
    }

    #[test]
    fn details_change_only_where_asked() {
        let mut s = subscription();
        let later = t0() + Duration::minutes(1);
        s.change_details(DetailsChange { description: Patch::Null, ..DetailsChange::default() }, later);
        let d = s.details();
        assert_eq!(
            (d.url.as_str(), d.description.as_deref(), s.updated_at()),
            ("https://hooks.example.com/in", None, later)
        );
        assert_eq!(d.events.names(), ["agent.created"]);
        let events = check_events(&["*".into()]).unwrap();
        s.change_details(DetailsChange { events: Some(events.clone()), ..DetailsChange::default() }, later);
        assert_eq!(s.events(), &events);
        assert_eq!(s.status(), SubscriptionStatus::Active, "details are not the status");
    }

    #[test]
    fn a_stored_row_is_restored_only_when_its_state_is_known_and_whole() {
        let mut row = stored("disabled");
        row.previous_secret = Some(SealedSecret("old".into()));
        row.previous_secret_until = Some(t0());
        row.events.push("agent.deleted".into());
        let s = Subscription::restore(row.clone()).unwrap();
        assert_eq!(s.status(), SubscriptionStatus::Disabled);
        assert_eq!(
            s.events().names(),
            ["agent.created"],
            "a name this version does not know selects nothing"
        );
        assert_eq!(s.previous_secret().map(|p| p.until), Some(t0()));
        let err = Subscription::restore(stored("paused")).unwrap_err();
        assert_eq!((err.entity, err.id.as_str()), ("subscription", "whk_1"));
        assert!(err.problem.contains("paused"));
        row.previous_secret_until = None;
        assert!(Subscription::restore(row).is_err(), "a previous secret without its end");
    }
}

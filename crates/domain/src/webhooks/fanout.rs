//! The fan-out: which subscriptions receive which outbox events. A pure function of the events
//! and the subscriptions read with them ([`fan_out`]); the store reads both and writes what it
//! decides, in one transaction ([`WebhookRepository::dispatch`](super::WebhookRepository::dispatch)).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Duration, Utc};

use super::model::{EventSelectors, InvalidStoredState, NewDelivery, SubscriptionStatus};
use crate::events::Event;
use crate::ids::{DeliveryId, EventId, TenantId, WebhookId};
use crate::tenancy::{AutomationKind, Role};

/// A subscription as the fan-out sees it: whose it is, what it selects, whether it receives,
/// and since when.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionTarget {
    /// Its id.
    pub id: WebhookId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// What it selects.
    pub events: EventSelectors,
    /// Whether it receives events.
    pub status: SubscriptionStatus,
    /// Its creation: it receives the events that happen from then on.
    pub created_at: DateTime<Utc>,
    /// Whether its maker may still keep it (a member whose role allows `webhooks:write`), or it
    /// is the tenant's own; see [`crate::tenancy::Automation`].
    pub maker_entitled: bool,
}

impl SubscriptionTarget {
    /// A target read back from a subscription's row (names this version does not know select
    /// nothing, as in [`Subscription::restore`](super::Subscription::restore)).
    ///
    /// # Errors
    /// An unknown status.
    pub fn restore(
        id: WebhookId,
        tenant_id: TenantId,
        events: &[String],
        status: &str,
        created_at: DateTime<Utc>,
    ) -> Result<Self, InvalidStoredState> {
        let status = InvalidStoredState::status("subscription", &id, status, SubscriptionStatus::parse)?;
        Ok(Self {
            id,
            tenant_id,
            events: EventSelectors::from_stored(events),
            status,
            created_at,
            maker_entitled: true,
        })
    }

    /// The target of a subscription made by a member whose role is now `role` (`None`: no
    /// longer a member): it receives only while that role allows it.
    #[must_use]
    pub fn made_by_member(mut self, role: Option<Role>) -> Self {
        self.maker_entitled = AutomationKind::WebhookSubscription.acts_for(role);
        self
    }

    /// Whether `event` is for it: an event of its own tenant, of a type it selects, that
    /// happened since it was created (not one that was still waiting for fan-out when it was).
    /// Whatever its status: a failed or disabled subscription keeps its events as skipped
    /// deliveries ([`Self::receives`] says which).
    pub fn selects(&self, event: &Event) -> bool {
        self.tenant_id == event.tenant_id
            && self.created_at <= event.created_at
            && self.events.matches(event.event_type())
    }

    /// Whether it receives events now: only while active and while its maker may keep it (a
    /// failed or disabled one, or one whose maker was removed or demoted, keeps them as skipped
    /// deliveries, sent after a recovery).
    pub fn receives(&self) -> bool {
        self.status == SubscriptionStatus::Active && self.maker_entitled
    }
}

/// The fan-out decision the store applies: [`fan_out`], or a stand-in in tests.
pub type FanOut =
    fn(&[Event], &[SubscriptionTarget], DateTime<Utc>, Duration) -> anyhow::Result<Vec<NewDelivery>>;

/// The deliveries `events` make to `subscriptions`: one per (event, subscription) pair where
/// the subscription [selects](SubscriptionTarget::selects) the event, however many of its
/// selectors match, with the id [`pair_id`], the event's envelope as the body (serialised once
/// per event); made at `now` and due `first_delay` later (the retry schedule's first delay) for
/// an active subscription, `skipped` for one that is not.
///
/// # Errors
/// When an event's envelope does not serialise (typed payloads always do).
pub fn fan_out(
    events: &[Event],
    subscriptions: &[SubscriptionTarget],
    now: DateTime<Utc>,
    first_delay: Duration,
) -> anyhow::Result<Vec<NewDelivery>> {
    let mut of_tenant: HashMap<&TenantId, Vec<&SubscriptionTarget>> = HashMap::new();
    for s in subscriptions {
        of_tenant.entry(&s.tenant_id).or_default().push(s);
    }
    let mut made = HashSet::new();
    let mut deliveries = Vec::new();
    for event in events {
        let mut targets =
            of_tenant.get(&event.tenant_id).into_iter().flatten().filter(|s| s.selects(event)).peekable();
        if targets.peek().is_none() {
            continue;
        }
        let payload = event.envelope()?.to_string();
        for s in targets {
            let id = pair_id(&event.id, &s.id);
            if !made.insert(id.clone()) {
                continue;
            }
            deliveries.push(NewDelivery {
                id,
                tenant_id: event.tenant_id.clone(),
                subscription_id: s.id.clone(),
                event_id: event.id.clone(),
                event_type: event.event_type().as_str().to_owned(),
                payload: payload.clone(),
                test: false,
                skipped: !s.receives(),
                created_at: now,
                due_at: now + first_delay,
            });
        }
    }
    Ok(deliveries)
}

/// The id of the delivery of an event to a subscription: made of both, so that the pair's
/// uniqueness and the key's are one and the same (a conflict on either is the same pair), and
/// a second fan-out of the same pair, by another instance, cannot make a second delivery.
pub fn pair_id(event: &EventId, subscription: &WebhookId) -> DeliveryId {
    let event = event.as_str();
    let subscription = subscription.as_str();
    let event = event.strip_prefix("evt_").unwrap_or(event);
    let subscription = subscription.strip_prefix("whk_").unwrap_or(subscription);
    DeliveryId::from_string(format!("{}_{event}.{subscription}", DeliveryId::PREFIX))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use chrono::{Duration, TimeZone};

    use super::*;
    use crate::events::{EventPayload, EventType};

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 3, 12, 0, 0).unwrap()
    }

    fn event(id: &str, tenant: &str, payload: EventPayload) -> Event {
        Event {
            id: EventId::from_string(id),
            tenant_id: TenantId::from_string(tenant),
            payload,
            created_at: t0(),
        }
    }

    fn low(id: &str, tenant: &str) -> Event {
        event(id, tenant, EventPayload::BillingCreditsLow { credits: 9, threshold: 10 })
    }

    fn purchase(id: &str, tenant: &str) -> Event {
        event(
            id,
            tenant,
            EventPayload::BillingPurchaseCompleted {
                purchase_id: crate::ids::PurchaseId::from_string("pur_1"),
                credits: 100,
                provider: "test".into(),
            },
        )
    }

    fn target(id: &str, tenant: &str, events: &[&str]) -> SubscriptionTarget {
        let events: Vec<String> = events.iter().map(|e| (*e).to_owned()).collect();
        SubscriptionTarget::restore(
            WebhookId::from_string(id),
            TenantId::from_string(tenant),
            &events,
            "active",
            t0() - Duration::days(1),
        )
        .unwrap()
    }

    /// The (event, subscription) pairs of a fan-out.
    fn pairs(events: &[Event], targets: &[SubscriptionTarget]) -> Vec<(String, String)> {
        fan_out(events, targets, t0(), Duration::zero())
            .unwrap()
            .into_iter()
            .map(|d| (d.event_id.into_string(), d.subscription_id.into_string()))
            .collect()
    }

    fn pair(event: &str, subscription: &str) -> (String, String) {
        (event.to_owned(), subscription.to_owned())
    }

    #[test]
    fn a_tenants_events_go_only_to_its_own_subscriptions() {
        let events = [low("evt_1", "ten_1"), low("evt_2", "ten_2")];
        let targets = [
            target("whk_a", "ten_1", &["*"]),
            target("whk_b", "ten_2", &["*"]),
            target("whk_c", "ten_3", &["*"]),
        ];
        assert_eq!(pairs(&events, &targets), [pair("evt_1", "whk_a"), pair("evt_2", "whk_b")]);
    }

    #[test]
    fn a_subscription_receives_the_types_its_selectors_match() {
        let events = [low("evt_1", "ten_1"), purchase("evt_2", "ten_1")];
        let targets = [
            target("whk_low", "ten_1", &["billing.credits.low"]),
            target("whk_agents", "ten_1", &["agent.message", "agent.created"]),
            target("whk_all", "ten_1", &["*"]),
        ];
        assert_eq!(
            pairs(&events, &targets),
            [pair("evt_1", "whk_low"), pair("evt_1", "whk_all"), pair("evt_2", "whk_all")]
        );
    }

    #[test]
    fn a_subscription_created_after_the_event_does_not_receive_it() {
        let events = [low("evt_1", "ten_1")];
        let mut at_the_event = target("whk_same", "ten_1", &["*"]);
        at_the_event.created_at = t0();
        let mut late = target("whk_late", "ten_1", &["*"]);
        late.created_at = t0() + Duration::milliseconds(1);
        assert_eq!(pairs(&events, &[at_the_event, late]), [pair("evt_1", "whk_same")]);
    }

    #[test]
    fn inactive_subscriptions_keep_their_events_as_skipped_deliveries() {
        let events = [low("evt_1", "ten_1")];
        for status in [SubscriptionStatus::Failed, SubscriptionStatus::Disabled] {
            let mut stopped = target("whk_1", "ten_1", &["*"]);
            stopped.status = status;
            let made = fan_out(&events, &[stopped], t0(), Duration::zero()).unwrap();
            assert_eq!(made.len(), 1, "{status}");
            assert!(made[0].skipped, "{status}");
        }
        let active = fan_out(&events, &[target("whk_1", "ten_1", &["*"])], t0(), Duration::zero()).unwrap();
        assert!(!active[0].skipped);
    }

    #[test]
    fn one_delivery_per_pair_however_many_selectors_match() {
        let events = [low("evt_1", "ten_1"), low("evt_1", "ten_1")];
        let targets =
            [target("whk_1", "ten_1", &["*", "billing.credits.low"]), target("whk_1", "ten_1", &["*"])];
        let deliveries = fan_out(&events, &targets, t0(), Duration::zero()).unwrap();
        assert_eq!(deliveries.len(), 1);
        let d = &deliveries[0];
        assert_eq!(d.id, pair_id(&EventId::from_string("evt_1"), &WebhookId::from_string("whk_1")));
        assert_eq!(d.id.as_str(), "dlv_1.1");
        assert_eq!((d.event_type.as_str(), d.test, d.created_at), ("billing.credits.low", false, t0()));
        let body: serde_json::Value = serde_json::from_str(&d.payload).unwrap();
        assert_eq!(body, events[0].envelope().unwrap(), "the body is the event's envelope");
    }

    #[test]
    fn pair_ids_differ_for_different_pairs() {
        let id = |e: &str, s: &str| pair_id(&EventId::from_string(e), &WebhookId::from_string(s));
        assert_eq!(id("evt_01ab", "whk_02cd").as_str(), "dlv_01ab.02cd");
        assert_ne!(id("evt_1", "whk_2"), id("evt_2", "whk_1"));
        assert_eq!(EventType::BillingCreditsLow.as_str(), "billing.credits.low");
    }
}

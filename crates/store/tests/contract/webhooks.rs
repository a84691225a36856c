use agentry_domain::agents::AgentRepository;
use agentry_domain::events::{Event, EventType};
use agentry_domain::ids::{DeliveryId, EventId, TenantId, WebhookId};
use agentry_domain::webhooks::{
    Attempt, AttemptErrorKind, AttemptMode, DeliveryStatus, DetailsChange, HourCount, NewDelivery, Requeue,
    SealedSecret, Settlement, StoredSubscription, Subscription, SubscriptionStatus, SubscriptionTarget,
    WebhookRepository, fan_out, pair_id,
};
use agentry_domain::work::{Lease, LeaseQueue as _};
use agentry_store::{Database, WebhookStore};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::Map;

use crate::harness::event;

crate::contract!(
    fan_out_makes_one_delivery_per_matching_active_subscription,
    the_first_attempt_waits_for_the_schedules_first_delay,
    dispatch_stores_what_the_fan_out_decides_once_per_pair,
    concurrent_dispatchers_never_make_a_pair_twice,
    a_claimed_delivery_is_settled_only_under_its_lease,
    the_last_failure_fails_the_subscription_and_its_deliveries_wait,
    a_manual_claim_takes_any_delivery_not_in_flight,
    another_tenants_subscriptions_and_deliveries_are_invisible,
    a_subscription_that_cannot_be_read_fails_its_deliveries_and_stops_no_one,
    a_recovery_requeues_skipped_and_failed_since_a_time_with_a_fresh_schedule,
    a_bulk_retry_takes_the_status_asked_and_leaves_the_subscription,
    stats_count_deliveries_per_status_and_percentiles_of_answered_attempts,
    deliveries_are_counted_per_hour_of_creation_and_status_in_their_tenant,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 25, 9, 0, 0).unwrap()
}

fn stored(id: &str, tenant: &str, events: &[&str]) -> StoredSubscription {
    StoredSubscription {
        id: WebhookId::from_string(id),
        tenant_id: TenantId::from_string(tenant),
        url: "https://hooks.example.com/in".into(),
        events: events.iter().map(|e| (*e).to_owned()).collect(),
        description: Some("ops".into()),
        metadata: Map::new(),
        status: "active".into(),
        secret: SealedSecret(format!("v1.sealed-{id}")),
        previous_secret: None,
        previous_secret_until: None,
        // Before the sample events (2026-11-03): a subscription receives events from its
        // creation on.
        created_at: Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap(),
        updated_at: t0(),
        created_by: None,
    }
}

fn subscription(id: &str, tenant: &str, events: &[&str]) -> Subscription {
    Subscription::restore(stored(id, tenant, events)).unwrap()
}

/// The end of an attempt the worker made on the schedule, `next` the schedule's answer.
fn settled(attempt: Attempt, next: Option<DateTime<Utc>>) -> Settlement {
    Settlement::after_attempt(attempt, AttemptMode::Scheduled, || next)
}

fn lease(token: &str, until: DateTime<Utc>) -> Lease {
    Lease { token: token.into(), until }
}

fn attempt(number: u32, status: Option<u16>) -> Attempt {
    let succeeded = status.is_some_and(|s| (200..300).contains(&s));
    Attempt {
        number,
        started_at: t0(),
        response_status: status,
        response_time_ms: 12,
        succeeded,
        error_kind: (!succeeded).then_some(AttemptErrorKind::HttpStatus),
        error: (!succeeded).then(|| "the receiver answered 500".into()),
        response_body: Some("ok".into()),
    }
}

/// Two tenants with accounts, and an agent-created event for each in the outbox (written as
/// the agent store writes them: with their change).
async fn setup(db: &Database) -> WebhookStore {
    let agents = super::agents::setup(db).await;
    agents
        .create(&super::agents::agent("agt_1", "ten_1"), &event("evt_1", "ten_1", EventType::AgentCreated))
        .await
        .unwrap();
    agents
        .create(&super::agents::agent("agt_2", "ten_2"), &event("evt_2", "ten_2", EventType::AgentCreated))
        .await
        .unwrap();
    WebhookStore::new(db.clone())
}

/// [`setup`], then `whk_1` of `ten_1` listening to everything, and one event of `ten_1`
/// dispatched to it.
async fn subscribed_with_one_delivery(db: &Database) -> (WebhookStore, agentry_store::AgentStore) {
    let store = setup(db).await;
    store.dispatch_pending(t0(), 100, Duration::zero(), fan_out).await.unwrap();
    store.insert(&subscription("whk_1", "ten_1", &["*"])).await.unwrap();
    let agents = agentry_store::AgentStore::new(db.clone());
    agents
        .create(&super::agents::agent("agt_3", "ten_1"), &event("evt_3", "ten_1", EventType::AgentCreated))
        .await
        .unwrap();
    assert_eq!(store.dispatch_pending(t0(), 100, Duration::zero(), fan_out).await.unwrap().deliveries, 1);
    (store, agents)
}

async fn the_first_attempt_waits_for_the_schedules_first_delay(db: Database) {
    let store = setup(&db).await;
    store.dispatch_pending(t0(), 100, Duration::zero(), fan_out).await.unwrap();
    store.insert(&subscription("whk_1", "ten_1", &["*"])).await.unwrap();
    agentry_store::AgentStore::new(db.clone())
        .create(&super::agents::agent("agt_3", "ten_1"), &event("evt_3", "ten_1", EventType::AgentCreated))
        .await
        .unwrap();
    assert_eq!(store.dispatch_pending(t0(), 100, Duration::seconds(5), fan_out).await.unwrap().deliveries, 1);
    let tenant = TenantId::from_string("ten_1");
    let made = store.deliveries(&tenant, &WebhookId::from_string("whk_1"), 10).await.unwrap();
    assert_eq!(made[0].next_attempt_at(), Some(t0() + Duration::seconds(5)));
    let almost = t0() + Duration::milliseconds(4_999);
    assert!(store.claim(&lease("l1", almost + Duration::seconds(60)), almost, 10).await.unwrap().is_empty());
    let due = t0() + Duration::seconds(5);
    assert_eq!(store.claim(&lease("l2", due + Duration::seconds(60)), due, 10).await.unwrap().len(), 1);
}

async fn fan_out_makes_one_delivery_per_matching_active_subscription(db: Database) {
    let store = setup(&db).await;
    // Events written before the first subscription existed were dispatched to nobody.
    store.dispatch_pending(t0(), 100, Duration::zero(), fan_out).await.unwrap();
    store.insert(&subscription("whk_all", "ten_1", &["*"])).await.unwrap();
    store.insert(&subscription("whk_created", "ten_1", &["agent.created"])).await.unwrap();
    store.insert(&subscription("whk_updated", "ten_1", &["agent.updated"])).await.unwrap();
    let mut late = stored("whk_late", "ten_1", &["*"]);
    late.created_at = t0();
    store.insert(&Subscription::restore(late).unwrap()).await.unwrap();
    let mut paused = subscription("whk_paused", "ten_1", &["*"]);
    paused.set_status(SubscriptionStatus::Disabled, t0()).unwrap();
    store.insert(&paused).await.unwrap();
    let agents = agentry_store::AgentStore::new(db.clone());
    agents
        .create(&super::agents::agent("agt_3", "ten_1"), &event("evt_3", "ten_1", EventType::AgentCreated))
        .await
        .unwrap();
    agents
        .create(&super::agents::agent("agt_4", "ten_2"), &event("evt_4", "ten_2", EventType::AgentCreated))
        .await
        .unwrap();
    let report = store.dispatch_pending(t0(), 100, Duration::zero(), fan_out).await.unwrap();
    assert_eq!(
        (report.events, report.deliveries),
        (2, 3),
        "ten_1's event to `*` and `agent.created`, and kept for the paused one"
    );
    assert_eq!(
        store.dispatch_pending(t0(), 100, Duration::zero(), fan_out).await.unwrap().events,
        0,
        "dispatched once"
    );
    let tenant = TenantId::from_string("ten_1");
    let kept = store.deliveries(&tenant, &WebhookId::from_string("whk_paused"), 10).await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!((kept[0].status(), kept[0].next_attempt_at()), (DeliveryStatus::Skipped, None));
    for (id, expected) in [("whk_all", 1), ("whk_created", 1), ("whk_updated", 0), ("whk_late", 0)] {
        let deliveries = store.deliveries(&tenant, &WebhookId::from_string(id), 10).await.unwrap();
        assert_eq!(deliveries.len(), expected, "{id}");
        if let Some(d) = deliveries.first() {
            assert_eq!(
                (d.event_id().as_str(), d.event_type(), d.status()),
                ("evt_3", "agent.created", DeliveryStatus::Pending)
            );
            assert_eq!(d.next_attempt_at(), Some(t0()));
        }
    }
    // The body is the event's envelope, the same bytes for every attempt.
    let claimed = store.claim(&lease("l1", t0() + Duration::seconds(60)), t0(), 10).await.unwrap();
    assert_eq!(claimed.len(), 2);
    let body: serde_json::Value = serde_json::from_str(&claimed[0].payload).unwrap();
    assert_eq!(
        (body["id"].as_str(), body["type"].as_str(), body["tenant_id"].as_str()),
        (Some("evt_3"), Some("agent.created"), Some("ten_1"))
    );
    assert_eq!(claimed[0].claims, 1);
    assert_eq!(claimed[0].subscription.secret().0, format!("v1.sealed-{}", claimed[0].subscription.id()));
}

/// A stand-in decision that ignores every rule but the tenant: each event to every
/// subscription of its tenant that the store read, twice.
fn to_every_subscription_twice(
    events: &[Event],
    subscriptions: &[SubscriptionTarget],
    now: DateTime<Utc>,
    first_delay: Duration,
) -> anyhow::Result<Vec<NewDelivery>> {
    let mut deliveries = Vec::new();
    for e in events {
        for s in subscriptions.iter().filter(|s| s.tenant_id == e.tenant_id) {
            let d = NewDelivery {
                id: pair_id(&e.id, &s.id),
                tenant_id: e.tenant_id.clone(),
                subscription_id: s.id.clone(),
                event_id: e.id.clone(),
                event_type: e.event_type().as_str().to_owned(),
                payload: "{}".into(),
                test: false,
                skipped: false,
                created_at: now,
                due_at: now + first_delay,
            };
            deliveries.extend([d.clone(), d]);
        }
    }
    Ok(deliveries)
}

async fn dispatch_stores_what_the_fan_out_decides_once_per_pair(db: Database) {
    let store = setup(&db).await;
    // Neither would receive `evt_1` by the domain's rules: it selects another type, and it is
    // disabled. The store reads both and writes what it is told.
    let mut paused = subscription("whk_paused", "ten_1", &["agent.updated"]);
    paused.set_status(SubscriptionStatus::Disabled, t0()).unwrap();
    store.insert(&paused).await.unwrap();
    let report =
        store.dispatch_pending(t0(), 100, Duration::zero(), to_every_subscription_twice).await.unwrap();
    assert_eq!((report.events, report.deliveries), (2, 1), "both events marked; one row for the one pair");
    let d = store.deliveries(&TenantId::from_string("ten_1"), paused.id(), 10).await.unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].event_id().as_str(), d[0].status()), ("evt_1", DeliveryStatus::Pending));
    assert_eq!(store.delivery_pairs().await.unwrap(), [("evt_1".to_owned(), "whk_paused".to_owned())]);
}

async fn concurrent_dispatchers_never_make_a_pair_twice(db: Database) {
    let store = setup(&db).await;
    store.dispatch_pending(t0(), 100, Duration::zero(), fan_out).await.unwrap();
    store.insert(&subscription("whk_all", "ten_1", &["*"])).await.unwrap();
    let agents = agentry_store::AgentStore::new(db.clone());
    for i in 0..60 {
        let id = format!("agt_x{i:02}");
        agents
            .create(
                &super::agents::agent(&id, "ten_1"),
                &event(&format!("evt_x{i:02}"), "ten_1", EventType::AgentCreated),
            )
            .await
            .unwrap();
    }
    // Four dispatchers at once, in small batches, as several instances would run them.
    let runs = (0..4).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut made = 0;
            loop {
                let report = store.dispatch_pending(t0(), 7, Duration::zero(), fan_out).await.unwrap();
                made += report.deliveries;
                if report.events == 0 {
                    return made;
                }
            }
        })
    });
    let made: usize = futures_util::future::join_all(runs).await.into_iter().map(Result::unwrap).sum();
    assert_eq!(made, 60);
    let deliveries = store
        .deliveries(&TenantId::from_string("ten_1"), &WebhookId::from_string("whk_all"), 100)
        .await
        .unwrap();
    let events: std::collections::HashSet<_> = deliveries.iter().map(|d| d.event_id().clone()).collect();
    assert_eq!((deliveries.len(), events.len()), (60, 60));
}

async fn a_claimed_delivery_is_settled_only_under_its_lease(db: Database) {
    let (store, _) = subscribed_with_one_delivery(&db).await;
    let first = lease("l1", t0() + Duration::seconds(30));
    let claimed = store.claim(&first, t0(), 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(store.claim(&lease("l2", t0()), t0(), 10).await.unwrap().is_empty(), "held");
    // The lease expires; another worker takes it over (attempt 2); the first one's late
    // outcome is dropped.
    let later = t0() + Duration::seconds(31);
    let second = lease("l2", later + Duration::seconds(30));
    let again = store.claim(&second, later, 10).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].claims, 2);
    let retry = settled(attempt(1, Some(500)), Some(later + Duration::seconds(60)));
    assert_eq!(retry.status(), DeliveryStatus::Pending);
    assert!(!store.settle(&claimed[0].id, &first, &retry, later).await.unwrap(), "not its lease any more");
    let delivered = settled(attempt(2, Some(204)), None);
    assert_eq!(delivered.status(), DeliveryStatus::Delivered);
    assert!(store.settle(&again[0].id, &second, &delivered, later).await.unwrap());
    let tenant = TenantId::from_string("ten_1");
    let d = store.delivery(&tenant, &WebhookId::from_string("whk_1"), &again[0].id).await.unwrap().unwrap();
    assert_eq!(
        (d.status(), d.attempts(), d.response_status(), d.delivered_at()),
        (DeliveryStatus::Delivered, 2, Some(204), Some(later))
    );
    assert_eq!(d.next_attempt_at(), None);
    let log = store.attempts(&tenant, d.id()).await.unwrap();
    assert_eq!(log, vec![attempt(2, Some(204))], "only the attempt recorded under a held lease");
    assert!(
        store.claim(&lease("l3", later), later + Duration::hours(1), 10).await.unwrap().is_empty(),
        "delivered"
    );
}

async fn the_last_failure_fails_the_subscription_and_its_deliveries_wait(db: Database) {
    let (store, agents) = subscribed_with_one_delivery(&db).await;
    agents
        .create(&super::agents::agent("agt_4", "ten_1"), &event("evt_4", "ten_1", EventType::AgentCreated))
        .await
        .unwrap();
    store.dispatch_pending(t0(), 100, Duration::zero(), fan_out).await.unwrap();
    let l1 = lease("l1", t0() + Duration::seconds(30));
    let claimed = store.claim(&l1, t0(), 1).await.unwrap();
    assert_eq!(claimed.len(), 1, "no more than the limit");
    let failed = settled(attempt(5, Some(500)), None);
    assert_eq!(failed.subscription_stop().map(|s| s.status()), Some(SubscriptionStatus::Failed));
    assert!(store.settle(&claimed[0].id, &l1, &failed, t0()).await.unwrap());
    let tenant = TenantId::from_string("ten_1");
    let mut s = store.get(&tenant, &WebhookId::from_string("whk_1")).await.unwrap().unwrap();
    assert_eq!(s.status(), SubscriptionStatus::Failed);
    // The other delivery waits while the subscription is failed, and new events are kept as
    // skipped deliveries, not sent.
    assert!(store.claim(&lease("l2", t0() + Duration::seconds(30)), t0(), 10).await.unwrap().is_empty());
    agents
        .create(&super::agents::agent("agt_5", "ten_1"), &event("evt_5", "ten_1", EventType::AgentCreated))
        .await
        .unwrap();
    assert_eq!(store.dispatch_pending(t0(), 100, Duration::zero(), fan_out).await.unwrap().deliveries, 1);
    // Active again: the waiting delivery goes out; the skipped one waits for a recovery.
    s.set_status(SubscriptionStatus::Active, t0()).unwrap();
    assert!(store.update(&s).await.unwrap());
    let resumed = store.claim(&lease("l3", t0() + Duration::seconds(30)), t0(), 10).await.unwrap();
    assert_eq!(resumed.len(), 1);
    assert_ne!(resumed[0].id, claimed[0].id);
}

async fn a_manual_claim_takes_any_delivery_not_in_flight(db: Database) {
    let store = setup(&db).await;
    store.insert(&subscription("whk_1", "ten_1", &["*"])).await.unwrap();
    let tenant = TenantId::from_string("ten_1");
    let test = NewDelivery {
        id: DeliveryId::from_string("dlv_test"),
        tenant_id: tenant.clone(),
        subscription_id: WebhookId::from_string("whk_1"),
        event_id: EventId::from_string("evt_test"),
        event_type: "agent.created".into(),
        payload: "{}".into(),
        test: true,
        skipped: false,
        created_at: t0(),
        due_at: t0(),
    };
    let held = lease("l1", t0() + Duration::seconds(30));
    store.insert_claimed(&test, &held).await.unwrap();
    let sub = WebhookId::from_string("whk_1");
    assert!(store.claim(&lease("l2", t0()), t0(), 10).await.unwrap().is_empty(), "held by its request");
    assert!(
        store.claim_one(&tenant, &sub, &test.id, &lease("l2", t0()), t0()).await.unwrap().is_none(),
        "in flight"
    );
    let failed = Settlement::after_attempt(attempt(1, Some(500)), AttemptMode::Manual, || None);
    assert_eq!((failed.status(), failed.subscription_stop()), (DeliveryStatus::Failed, None));
    assert!(store.settle(&test.id, &held, &failed, t0()).await.unwrap());
    let d = store.delivery(&tenant, &sub, &test.id).await.unwrap().unwrap();
    assert!(d.is_test());
    assert_eq!((d.status(), d.attempts()), (DeliveryStatus::Failed, 1));
    let again = store
        .claim_one(&tenant, &sub, &test.id, &lease("l3", t0() + Duration::seconds(30)), t0())
        .await
        .unwrap();
    assert_eq!(again.map(|c| c.claims), Some(2), "a failed delivery may be retried by hand");
    let other = TenantId::from_string("ten_2");
    assert!(
        store
            .claim_one(&other, &sub, &test.id, &lease("l4", t0()), t0() + Duration::hours(1))
            .await
            .unwrap()
            .is_none()
    );
}

async fn another_tenants_subscriptions_and_deliveries_are_invisible(db: Database) {
    let (store, _) = subscribed_with_one_delivery(&db).await;
    let (mine, theirs) = (TenantId::from_string("ten_1"), TenantId::from_string("ten_2"));
    let id = WebhookId::from_string("whk_1");
    let delivery = store.deliveries(&mine, &id, 10).await.unwrap().remove(0);
    assert!(store.get(&theirs, &id).await.unwrap().is_none());
    assert!(store.list(&theirs).await.unwrap().is_empty());
    assert!(store.deliveries(&theirs, &id, 10).await.unwrap().is_empty());
    assert!(store.delivery(&theirs, &id, delivery.id()).await.unwrap().is_none());
    assert!(store.attempts(&theirs, delivery.id()).await.unwrap().is_empty());
    let mut stolen = subscription("whk_1", "ten_2", &["*"]);
    let url = Some("https://evil.example.com/".to_owned());
    stolen.change_details(DetailsChange { url, ..DetailsChange::default() }, t0());
    assert!(!store.update(&stolen).await.unwrap());
    assert!(!store.delete(&theirs, &id).await.unwrap());
    assert_eq!(store.get(&mine, &id).await.unwrap().unwrap().url(), "https://hooks.example.com/in");
    assert!(store.delete(&mine, &id).await.unwrap());
    assert!(store.deliveries(&mine, &id, 10).await.unwrap().is_empty(), "deleted with its subscription");
}

async fn a_subscription_that_cannot_be_read_fails_its_deliveries_and_stops_no_one(db: Database) {
    let (store, agents) = subscribed_with_one_delivery(&db).await;
    store.insert(&subscription("whk_2", "ten_1", &["*"])).await.unwrap();
    let execute = |sql: &'static str| agentry_store::test_support::execute(&db, sql);
    // whk_1 keeps a previous secret without its end, which no version writes; and an event of
    // a type this version does not know waits for the fan-out beside a readable one.
    execute("UPDATE webhook_subscriptions SET previous_secret_sealed = 'x', previous_secret_until = NULL WHERE id = 'whk_1'")
        .await
        .unwrap();
    execute("INSERT INTO events (id, tenant_id, event_type, data, created_at) SELECT 'evt_x', tenant_id, 'agent.teleported', data, created_at FROM events WHERE id = 'evt_3'")
        .await
        .unwrap();
    agents
        .create(&super::agents::agent("agt_4", "ten_1"), &event("evt_4", "ten_1", EventType::AgentCreated))
        .await
        .unwrap();
    let dispatched = store.dispatch_pending(t0(), 100, Duration::zero(), fan_out).await.unwrap();
    assert_eq!((dispatched.events, dispatched.deliveries), (2, 2), "the readable event, to both");
    let claimed = store.claim(&lease("l1", t0() + Duration::seconds(30)), t0(), 10).await.unwrap();
    assert_eq!(claimed.iter().map(|c| c.subscription.id().as_str()).collect::<Vec<_>>(), ["whk_2"]);
    let tenant = TenantId::from_string("ten_1");
    let failed = store.deliveries(&tenant, &WebhookId::from_string("whk_1"), 10).await.unwrap();
    assert_eq!(
        failed.iter().map(|d| d.status()).collect::<Vec<_>>(),
        [DeliveryStatus::Failed, DeliveryStatus::Failed],
        "failed in the claim, not held"
    );
    // An hour on, only whk_2's (its lease ran out) is claimed again.
    let later = t0() + Duration::hours(1);
    let again = store.claim(&lease("l2", later + Duration::seconds(30)), later, 10).await.unwrap();
    assert_eq!(again.iter().map(|c| c.subscription.id().as_str()).collect::<Vec<_>>(), ["whk_2"]);
}

/// Creates agent `agt_{n}` of `ten_1` with its event `evt_{n}` at `at`.
async fn agent_created(agents: &agentry_store::AgentStore, n: &str, at: DateTime<Utc>) {
    let mut e = event(&format!("evt_{n}"), "ten_1", EventType::AgentCreated);
    e.created_at = at;
    agents.create(&super::agents::agent(&format!("agt_{n}"), "ten_1"), &e).await.unwrap();
}

async fn a_recovery_requeues_skipped_and_failed_since_a_time_with_a_fresh_schedule(db: Database) {
    let (store, agents) = subscribed_with_one_delivery(&db).await;
    let (tenant, id) = (TenantId::from_string("ten_1"), WebhookId::from_string("whk_1"));
    // evt_3's delivery fails its fifth attempt: the subscription fails.
    let l1 = lease("l1", t0() + Duration::seconds(30));
    let claimed = store.claim(&l1, t0(), 10).await.unwrap();
    let failed = settled(attempt(1, Some(500)), None);
    assert!(store.settle(&claimed[0].id, &l1, &failed, t0()).await.unwrap());
    // Three events while it is failed, one an hour before the others.
    let later = t0() + Duration::hours(2);
    agent_created(&agents, "old", t0() + Duration::hours(1)).await;
    store.dispatch_pending(t0() + Duration::hours(1), 100, Duration::zero(), fan_out).await.unwrap();
    agent_created(&agents, "a", later).await;
    agent_created(&agents, "b", later).await;
    assert_eq!(store.dispatch_pending(later, 100, Duration::zero(), fan_out).await.unwrap().deliveries, 2);
    let statuses = |ds: &[agentry_domain::webhooks::Delivery]| {
        let mut v: Vec<(String, DeliveryStatus)> =
            ds.iter().map(|d| (d.event_id().to_string(), d.status())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let before = store.deliveries(&tenant, &id, 10).await.unwrap();
    assert_eq!(
        statuses(&before),
        [
            ("evt_3".to_owned(), DeliveryStatus::Failed),
            ("evt_a".to_owned(), DeliveryStatus::Skipped),
            ("evt_b".to_owned(), DeliveryStatus::Skipped),
            ("evt_old".to_owned(), DeliveryStatus::Skipped),
        ]
    );
    // Another tenant recovers nothing, and changes nothing.
    let other = TenantId::from_string("ten_2");
    assert_eq!(store.requeue(&other, &id, &Requeue::recovery(t0()), later).await.unwrap(), None);
    // Since the two recent ones: those two, and the subscription is active again.
    let now = later + Duration::minutes(5);
    let since = later - Duration::minutes(1);
    assert_eq!(store.requeue(&tenant, &id, &Requeue::recovery(since), now).await.unwrap(), Some(2));
    assert_eq!(store.get(&tenant, &id).await.unwrap().unwrap().status(), SubscriptionStatus::Active);
    let claimed = store.claim(&lease("l2", now + Duration::seconds(30)), now, 10).await.unwrap();
    let mut events: Vec<&str> = claimed.iter().map(|c| c.event_id.as_str()).collect();
    events.sort_unstable();
    assert_eq!(events, ["evt_a", "evt_b"], "queued again with their own event ids");
    assert!(claimed.iter().all(|c| (c.claims, c.earlier_attempts) == (1, 0)));
    // Since the start: the failed one and the older skipped one; the failed one's schedule
    // starts over and its next attempt is the second in its log.
    assert_eq!(store.requeue(&tenant, &id, &Requeue::recovery(t0()), now).await.unwrap(), Some(2));
    let again = store.claim(&lease("l3", now + Duration::seconds(30)), now, 10).await.unwrap();
    let evt_3 = again.iter().find(|c| c.event_id.as_str() == "evt_3").unwrap();
    assert_eq!((evt_3.claims, evt_3.earlier_attempts, evt_3.attempt_number()), (1, 1, 2));
    let delivered = settled(attempt(evt_3.attempt_number(), Some(200)), None);
    assert!(store.settle(&evt_3.id, &evt_3.lease, &delivered, now).await.unwrap());
    let d = store.delivery(&tenant, &id, &evt_3.id).await.unwrap().unwrap();
    assert_eq!((d.status(), d.attempts()), (DeliveryStatus::Delivered, 2));
    let log: Vec<u32> = store.attempts(&tenant, d.id()).await.unwrap().iter().map(|a| a.number).collect();
    assert_eq!(log, [1, 2], "the log keeps every attempt");
    // Nothing left to recover: delivered and pending ones are not taken.
    assert_eq!(store.requeue(&tenant, &id, &Requeue::recovery(t0()), now).await.unwrap(), Some(0));
}

async fn a_bulk_retry_takes_the_status_asked_and_leaves_the_subscription(db: Database) {
    let (store, agents) = subscribed_with_one_delivery(&db).await;
    let (tenant, id) = (TenantId::from_string("ten_1"), WebhookId::from_string("whk_1"));
    let l1 = lease("l1", t0() + Duration::seconds(30));
    let claimed = store.claim(&l1, t0(), 10).await.unwrap();
    assert!(store.settle(&claimed[0].id, &l1, &settled(attempt(1, Some(500)), None), t0()).await.unwrap());
    agent_created(&agents, "a", t0()).await;
    store.dispatch_pending(t0(), 100, Duration::zero(), fan_out).await.unwrap();
    // Only the failed one; the subscription stays failed (the service refuses a bulk retry of a
    // subscription that is not active; the store does what it is told).
    let failed_only = Requeue::retry(Some(DeliveryStatus::Failed), None);
    assert_eq!(store.requeue(&tenant, &id, &failed_only, t0()).await.unwrap(), Some(1));
    assert_eq!(store.get(&tenant, &id).await.unwrap().unwrap().status(), SubscriptionStatus::Failed);
    let skipped = store.deliveries(&tenant, &id, 10).await.unwrap();
    assert_eq!(skipped.iter().filter(|d| d.status() == DeliveryStatus::Skipped).count(), 1);
    assert_eq!(store.requeue(&tenant, &id, &Requeue::retry(None, None), t0()).await.unwrap(), Some(1));
}

async fn stats_count_deliveries_per_status_and_percentiles_of_answered_attempts(db: Database) {
    let (store, agents) = subscribed_with_one_delivery(&db).await;
    let (tenant, id) = (TenantId::from_string("ten_1"), WebhookId::from_string("whk_1"));
    for n in 0..3 {
        agent_created(&agents, &format!("s{n}"), t0()).await;
    }
    store.dispatch_pending(t0(), 100, Duration::zero(), fan_out).await.unwrap();
    // Four attempts: answered in 10, 20 and 400 ms, and one timeout (no response time).
    let l = lease("l1", t0() + Duration::seconds(30));
    let claimed = store.claim(&l, t0(), 10).await.unwrap();
    assert_eq!(claimed.len(), 4);
    for (c, (status, ms)) in
        claimed.iter().zip([(Some(200), 10), (Some(200), 400), (Some(500), 20), (None, 15_000)])
    {
        let mut a = attempt(1, status);
        a.response_time_ms = ms;
        let next = (!a.succeeded).then_some(t0() + Duration::minutes(1));
        assert!(store.settle(&c.id, &l, &settled(a, next), t0()).await.unwrap());
    }
    let s = store.stats(&tenant, &id, t0() - Duration::hours(24)).await.unwrap();
    assert_eq!((s.counts.delivered, s.counts.pending, s.counts.failed, s.counts.skipped), (2, 2, 0, 0));
    assert_eq!((s.attempts, s.answered, s.p50_ms, s.p99_ms), (4, 3, Some(20), Some(400)));
    // A window that starts after them: nothing; another tenant: nothing.
    let empty = store.stats(&tenant, &id, t0() + Duration::hours(1)).await.unwrap();
    assert_eq!((empty.counts.total(), empty.attempts, empty.p50_ms, empty.p99_ms), (0, 0, None, None));
    let theirs = store.stats(&TenantId::from_string("ten_2"), &id, t0() - Duration::hours(24)).await.unwrap();
    assert_eq!((theirs.counts.total(), theirs.attempts), (0, 0));
}

async fn deliveries_are_counted_per_hour_of_creation_and_status_in_their_tenant(db: Database) {
    // evt_3's delivery, made at 09:00, is delivered.
    let (store, agents) = subscribed_with_one_delivery(&db).await;
    let (tenant, id) = (TenantId::from_string("ten_1"), WebhookId::from_string("whk_1"));
    let l1 = lease("l1", t0() + Duration::seconds(30));
    let claimed = store.claim(&l1, t0(), 10).await.unwrap();
    assert!(store.settle(&claimed[0].id, &l1, &settled(attempt(1, Some(200)), None), t0()).await.unwrap());
    // One made in the last second of 09:00's hour, one at 10:00: the first waits for a retry,
    // the second fails for good (and fails the subscription).
    let (late, ten) = (t0() + Duration::minutes(59) + Duration::seconds(59), t0() + Duration::hours(1));
    agent_created(&agents, "a", late).await;
    store.dispatch_pending(late, 100, Duration::zero(), fan_out).await.unwrap();
    agent_created(&agents, "b", ten).await;
    store.dispatch_pending(ten, 100, Duration::zero(), fan_out).await.unwrap();
    let l2 = lease("l2", ten + Duration::seconds(30));
    let claimed = store.claim(&l2, ten, 10).await.unwrap();
    assert_eq!(claimed.len(), 2);
    for c in &claimed {
        let next = (c.event_id.as_str() == "evt_a").then_some(ten + Duration::hours(1));
        assert!(store.settle(&c.id, &l2, &settled(attempt(1, Some(500)), next), ten).await.unwrap());
    }
    // One more while it is failed, at 10:30: kept as skipped.
    let half_past = ten + Duration::minutes(30);
    agent_created(&agents, "c", half_past).await;
    store.dispatch_pending(half_past, 100, Duration::zero(), fan_out).await.unwrap();

    let sorted = |mut rows: Vec<HourCount>| {
        rows.sort_by_key(|r| (r.hour, r.status.as_str()));
        rows.into_iter().map(|r| (r.hour, r.status, r.count)).collect::<Vec<_>>()
    };
    let all = sorted(store.per_hour(&tenant, &id, t0()).await.unwrap());
    assert_eq!(
        all,
        [
            (t0(), DeliveryStatus::Delivered, 1),
            (t0(), DeliveryStatus::Pending, 1),
            (ten, DeliveryStatus::Failed, 1),
            (ten, DeliveryStatus::Skipped, 1),
        ]
    );
    // From 10:00 on, only its hour; another tenant, or another subscription, counts nothing.
    let later = sorted(store.per_hour(&tenant, &id, ten).await.unwrap());
    assert_eq!(later, [(ten, DeliveryStatus::Failed, 1), (ten, DeliveryStatus::Skipped, 1)]);
    assert!(store.per_hour(&TenantId::from_string("ten_2"), &id, t0()).await.unwrap().is_empty());
    assert!(store.per_hour(&tenant, &WebhookId::from_string("whk_9"), t0()).await.unwrap().is_empty());
}

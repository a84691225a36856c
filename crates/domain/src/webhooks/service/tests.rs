#![allow(clippy::unwrap_used)]

use std::sync::Mutex;

use chrono::TimeZone;

use super::*;
use crate::events::API_VERSION;
use crate::ids::{MockIdGenerator, TenantId, UserId};
use crate::secrets::MockSecrets;
use crate::tenancy::{Credential, Plan, Role};
use crate::time::MockClock;
use crate::webhooks::delivery::{ClaimedDelivery, Settlement};
use crate::webhooks::model::{AttemptErrorKind, RESPONSE_BODY_BYTES, SealedSecret};
use crate::webhooks::ports::{Dispatched, OutboundFailure};
use crate::webhooks::{
    DeliveryCounts, MockSecretCipher, MockWebhookRepository, MockWebhookSender, OutboundAnswer,
    SubscriptionStop,
};
use crate::work::{Lease, MockLeaseQueue, Worker};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
}

fn caller(role: Role) -> Principal {
    Principal {
        user_id: UserId::from_string("usr_1"),
        tenant_id: crate::ids::TenantId::from_string("ten_1"),
        plan: Plan::Starter,
        role,
        credential: Credential::AccessToken,
        chain: Default::default(),
    }
}

fn subscription() -> Subscription {
    Subscription::new(
        WebhookId::from_string("whk_1"),
        TenantId::from_string("ten_1"),
        SubscriptionDetails {
            url: "https://hooks.example.com/in".into(),
            events: EventSelectors::from_stored(&["*"]),
            description: None,
            metadata: Map::new(),
        },
        SealedSecret("sealed:whsec_AAEC".into()),
        t0(),
    )
}

fn claimed(attempt: u32) -> ClaimedDelivery {
    Claimed {
        item: DueDelivery {
            id: DeliveryId::from_string("dlv_1"),
            event_id: EventId::from_string("evt_1"),
            payload: r#"{"id":"evt_1"}"#.into(),
            test: false,
            earlier_attempts: 0,
            subscription: subscription(),
        },
        claims: attempt,
        lease: Lease { token: "lease_1".into(), until: t0() + Duration::seconds(60) },
    }
}

struct Mocks {
    webhooks: MockWebhookRepository,
    due: MockLeaseQueue<DueDelivery>,
    sender: MockWebhookSender,
    cipher: MockSecretCipher,
}

impl Mocks {
    fn new() -> Self {
        let mut cipher = MockSecretCipher::new();
        cipher.expect_seal().returning(|_, plain| Ok(SealedSecret(format!("sealed:{plain}"))));
        cipher.expect_open().returning(|_, sealed| Ok(sealed.0.trim_start_matches("sealed:").to_owned()));
        Self {
            webhooks: MockWebhookRepository::new(),
            due: MockLeaseQueue::new(),
            sender: MockWebhookSender::new(),
            cipher,
        }
    }

    fn service(self) -> WebhookService {
        let mut ids = MockIdGenerator::new();
        ids.expect_generate().returning(|p| format!("{p}_1"));
        let mut clock = MockClock::new();
        clock.expect_now().returning(t0);
        let mut secrets = MockSecrets::new();
        secrets.expect_random_bytes().returning(|n| vec![0; n]);
        WebhookService::new(
            WebhookServiceDeps {
                webhooks: Arc::new(self.webhooks),
                due: Arc::new(self.due),
                cipher: Arc::new(self.cipher),
                sender: Arc::new(self.sender),
                hmac: Arc::new(ZeroHmac),
                secrets: Arc::new(secrets),
                ids: Arc::new(ids),
                clock: Arc::new(clock),
            },
            WebhookSettings::default(),
        )
    }

    /// A worker of the service's deliveries.
    fn worker(self) -> Worker<WebhookService> {
        let mut ids = MockIdGenerator::new();
        ids.expect_generate().returning(|p| format!("{p}_1"));
        let mut clock = MockClock::new();
        clock.expect_now().returning(t0);
        Worker::new(Arc::new(self.service()), Arc::new(ids), Arc::new(clock))
    }
}

struct ZeroHmac;
impl Hmac for ZeroHmac {
    fn sha256(&self, _: &[u8], _: &[u8]) -> [u8; 32] {
        [0; 32]
    }
}

fn new_subscription(url: &str) -> NewSubscription {
    NewSubscription {
        url: url.into(),
        events: EventSelectors::from_stored(&["agent.created"]),
        secret: None,
        description: None,
        metadata: Map::new(),
    }
}

#[tokio::test]
async fn subscribing_generates_a_secret_and_stores_it_sealed_to_the_subscription() {
    let mut m = Mocks::new();
    m.sender.expect_check_url().returning(|_| Ok(()));
    m.webhooks
        .expect_insert()
        .withf(|s| {
            s.secret().0 == format!("sealed:whsec_{}", "A".repeat(43) + "=") && s.id().as_str() == "whk_1"
        })
        .times(1)
        .returning(|_| Ok(()));
    let (s, secret) =
        m.service().create(&caller(Role::Owner), new_subscription("https://x.example/in")).await.unwrap();
    assert!(secret.starts_with("whsec_"));
    assert_eq!(s.status(), SubscriptionStatus::Active);
}

#[tokio::test]
async fn a_url_the_sender_refuses_is_a_validation_error_and_nothing_is_stored() {
    let mut m = Mocks::new();
    m.sender.expect_check_url().returning(|_| Err("127.0.0.1 is a loopback address".into()));
    m.webhooks.expect_insert().never();
    let err =
        m.service().create(&caller(Role::Owner), new_subscription("https://127.0.0.1/in")).await.unwrap_err();
    let WebhookError::Invalid(errors) = err else { panic!("{err:?}") };
    assert_eq!(errors.0[0].field, "url");
    assert!(errors.0[0].message.contains("loopback"));
}

#[tokio::test]
async fn a_viewer_cannot_subscribe() {
    let m = Mocks::new();
    let err = m
        .service()
        .create(&caller(Role::Viewer), new_subscription("https://x.example/in"))
        .await
        .unwrap_err();
    assert!(matches!(err, WebhookError::Forbidden(_)));
}

/// A delivery pass whose one claimed delivery gets `answer`; returns what was settled.
async fn settle_after(attempt: u32, answer: Result<OutboundAnswer, OutboundFailure>) -> Settlement {
    let mut m = Mocks::new();
    m.due.expect_claim().times(1).returning(move |_, _, _| Ok(vec![claimed(attempt)]));
    let seen = Arc::new(Mutex::new(None));
    let sink = seen.clone();
    m.webhooks.expect_settle().times(1).returning(move |_, lease, s, _| {
        assert_eq!(lease.token, "lease_1");
        *sink.lock().unwrap() = Some(s.clone());
        Ok(true)
    });
    m.sender.expect_post().times(1).returning(move |post| {
        let names: Vec<&str> = post.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"X-Service-Signature") && names.contains(&"webhook-signature"));
        assert_eq!(post.body, br#"{"id":"evt_1"}"#);
        answer.clone()
    });
    assert_eq!(m.worker().run_due(32).await.unwrap(), 1);
    seen.lock().unwrap().take().unwrap()
}

fn answer(status: u16) -> Result<OutboundAnswer, OutboundFailure> {
    Ok(OutboundAnswer { status, body: vec![b'x'; 2000], elapsed_ms: 12 })
}

#[tokio::test]
async fn a_2xx_answer_delivers() {
    let s = settle_after(1, answer(204)).await;
    assert_eq!(s.status(), DeliveryStatus::Delivered);
    assert!(s.attempt().succeeded);
    assert_eq!(s.attempt().response_body.as_ref().map(String::len), Some(RESPONSE_BODY_BYTES));
    assert_eq!(s.subscription_stop(), None);
}

#[tokio::test]
async fn a_failure_before_the_last_attempt_schedules_the_next_one() {
    let s = settle_after(2, answer(500)).await;
    assert_eq!(s.status(), DeliveryStatus::Pending);
    // Attempt 3 comes 5 minutes after attempt 2 (plus jitter, 0 with these mocks).
    assert_eq!(s.next_attempt_at(), Some(t0() + Duration::seconds(300)));
    assert_eq!(s.attempt().error_kind, Some(AttemptErrorKind::HttpStatus));
    let s = settle_after(1, answer(302)).await;
    assert!(s.into_attempt().error.unwrap().contains("redirect"));
}

#[tokio::test]
async fn the_fifth_failure_fails_the_delivery_and_the_subscription() {
    let failure = Err(OutboundFailure {
        kind: AttemptErrorKind::Timeout,
        message: "no answer in 15 s".into(),
        elapsed_ms: 15_000,
    });
    let s = settle_after(5, failure).await;
    assert_eq!(s.status(), DeliveryStatus::Failed);
    assert_eq!(s.subscription_stop().map(SubscriptionStop::status), Some(SubscriptionStatus::Failed));
    assert_eq!(s.attempt().error_kind, Some(AttemptErrorKind::Timeout));
    assert_eq!(s.attempt().response_status, None);
}

#[tokio::test]
async fn gone_disables_the_subscription_at_once() {
    let s = settle_after(1, answer(410)).await;
    assert_eq!(s.status(), DeliveryStatus::Failed);
    assert_eq!(s.subscription_stop().map(SubscriptionStop::status), Some(SubscriptionStatus::Disabled));
}

#[tokio::test]
async fn a_rotated_out_secret_signs_alongside_until_its_time_is_up() {
    let mut m = Mocks::new();
    // Rotated 23 hours ago (the old secret signs for another hour), and 24 hours ago.
    let rotated = |ago: i64| {
        let mut c = claimed(1);
        let mut s = Subscription::new(
            c.subscription.id().clone(),
            c.subscription.tenant_id().clone(),
            c.subscription.details().clone(),
            SealedSecret("sealed:old-secret-0123456".into()),
            t0() - Duration::days(2),
        );
        s.rotate_secret(c.subscription.secret().clone(), Duration::hours(24), t0() - Duration::hours(ago));
        c.subscription = s;
        c
    };
    let (with_previous, expired) = (rotated(23), rotated(24));
    m.due.expect_claim().times(1).returning(move |_, _, _| Ok(vec![with_previous.clone(), expired.clone()]));
    m.webhooks.expect_settle().times(2).returning(|_, _, _, _| Ok(true));
    let counts = Arc::new(Mutex::new(Vec::new()));
    let sink = counts.clone();
    m.sender.expect_post().times(2).returning(move |post| {
        let header =
            |name: &str| post.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).unwrap();
        sink.lock().unwrap().push((
            header("X-Service-Signature").matches("v1=").count(),
            header("webhook-signature").split(' ').count(),
        ));
        answer(200)
    });
    m.worker().run_due(32).await.unwrap();
    let mut counts = counts.lock().unwrap().clone();
    counts.sort_unstable();
    assert_eq!(counts, [(1, 1), (2, 2)]);
}

#[tokio::test]
async fn a_test_event_is_sent_now_and_never_changes_the_subscription() {
    let mut m = Mocks::new();
    m.webhooks.expect_get().returning(|_, _| Ok(Some(subscription())));
    m.webhooks
        .expect_insert_claimed()
        .withf(|d, lease| d.test && d.event_type == "agent.created" && lease.token == "lease_1")
        .times(1)
        .returning(|_, _| Ok(()));
    m.sender.expect_post().times(1).returning(|post| {
        let body: Value = serde_json::from_slice(&post.body).unwrap();
        assert_eq!(body["type"], "agent.created");
        assert_eq!(body["data"]["test"], true);
        assert_eq!(body["api_version"], API_VERSION);
        answer(410)
    });
    m.webhooks
        .expect_settle()
        .withf(|_, _, s, _| s.status() == DeliveryStatus::Failed && s.subscription_stop().is_none())
        .times(1)
        .returning(|_, _, _, _| Ok(true));
    let report = m
        .service()
        .test(&caller(Role::Owner), &WebhookId::from_string("whk_1"), EventType::AgentCreated)
        .await
        .unwrap();
    assert!(!report.success);
    assert_eq!(report.response_status, 410);
}

/// `dlv_1` of `whk_1` in `status`, as the store gives it back.
fn delivery(status: &str) -> Delivery {
    Delivery::restore(crate::webhooks::delivery::sample_row(status)).unwrap()
}

#[tokio::test]
async fn retrying_a_delivery_in_flight_is_a_conflict_and_an_unknown_one_not_found() {
    for exists in [true, false] {
        let mut m = Mocks::new();
        m.webhooks.expect_get().returning(|_, _| Ok(Some(subscription())));
        m.webhooks.expect_claim_one().returning(|_, _, _, _, _| Ok(None));
        m.webhooks.expect_delivery().returning(move |_, _, _| Ok(exists.then(|| delivery("pending"))));
        let err = m
            .service()
            .retry(&caller(Role::Owner), &WebhookId::from_string("whk_1"), &DeliveryId::from_string("dlv_1"))
            .await
            .unwrap_err();
        if exists {
            assert!(matches!(err, WebhookError::AttemptInProgress), "{err:?}");
        } else {
            assert!(matches!(err, WebhookError::DeliveryNotFound), "{err:?}");
        }
    }
}

#[tokio::test]
async fn another_tenants_subscription_is_not_found() {
    let mut m = Mocks::new();
    m.webhooks.expect_get().withf(|t, _| t.as_str() == "ten_1").returning(|_, _| Ok(None));
    let err = m.service().get(&caller(Role::Owner), &WebhookId::from_string("whk_2")).await.unwrap_err();
    assert!(matches!(err, WebhookError::NotFound));
}

#[tokio::test]
async fn the_fan_out_consumer_hands_the_store_its_batch_and_the_domains_decision() {
    use crate::events::consumers::EventConsumer as _;
    let event = crate::events::Event {
        id: EventId::from_string("evt_1"),
        tenant_id: TenantId::from_string("ten_1"),
        payload: crate::events::EventPayload::BillingCreditsLow { credits: 9, threshold: 10 },
        created_at: t0(),
    };
    let mut m = Mocks::new();
    m.webhooks
        .expect_dispatch()
        .withf(|events, now, first_delay, _| events.len() == 1 && *now == t0() && first_delay.is_zero())
        .times(1)
        .returning(|events, now, first_delay, decide| {
            // What the store reads: the event's tenant's subscription listening to it.
            let target = crate::webhooks::SubscriptionTarget::restore(
                WebhookId::from_string("whk_1"),
                TenantId::from_string("ten_1"),
                &["billing.credits.low".to_owned()],
                "active",
                t0(),
            )
            .unwrap();
            let deliveries = decide(events, &[target], now, first_delay).unwrap();
            assert_eq!(deliveries.len(), 1);
            assert_eq!(
                deliveries[0].id,
                crate::webhooks::pair_id(&EventId::from_string("evt_1"), &WebhookId::from_string("whk_1"))
            );
            Ok(Dispatched { events: 1, deliveries: deliveries.len() })
        });
    let service = m.service();
    assert_eq!((service.name(), service.batch()), ("webhook_fanout", 200));
    let results = service.handle_batch(&[event]).await;
    assert!(results.iter().all(Result::is_ok));
}

/// A subscription of `ten_1` in `status`, as the store gives it back.
fn stored_subscription(status: SubscriptionStatus) -> Subscription {
    let mut s = subscription();
    match status {
        SubscriptionStatus::Active => {}
        SubscriptionStatus::Failed => assert!(s.stop(SubscriptionStop::Failed, t0())),
        SubscriptionStatus::Disabled => s.set_status(SubscriptionStatus::Disabled, t0()).unwrap(),
    }
    s
}

#[tokio::test]
async fn its_owner_resumes_a_failed_subscription_but_cannot_fail_one() {
    let later = t0();
    let mut m = Mocks::new();
    m.webhooks.expect_get().returning(|_, _| Ok(Some(stored_subscription(SubscriptionStatus::Failed))));
    m.webhooks
        .expect_update()
        .withf(move |s| s.status() == SubscriptionStatus::Active && s.updated_at() == later)
        .times(1)
        .returning(|_| Ok(true));
    let service = m.service();
    let id = WebhookId::from_string("whk_1");
    let resume =
        SubscriptionPatch { status: Some(SubscriptionStatus::Active), ..SubscriptionPatch::default() };
    let s = service.update(&caller(Role::Owner), &id, resume).await.unwrap();
    assert_eq!(s.status(), SubscriptionStatus::Active);
    let fail = SubscriptionPatch { status: Some(SubscriptionStatus::Failed), ..SubscriptionPatch::default() };
    let err = service.update(&caller(Role::Owner), &id, fail).await.unwrap_err();
    let WebhookError::Invalid(errors) = err else { panic!("{err:?}") };
    assert_eq!((errors.0[0].field.as_str(), errors.0[0].kind), ("status", FieldErrorKind::InvalidValue));
}

#[tokio::test]
async fn a_manual_retry_is_a_last_word_even_for_a_scheduled_delivery() {
    let mut m = Mocks::new();
    m.webhooks.expect_get().returning(|_, _| Ok(Some(subscription())));
    m.webhooks.expect_claim_one().times(1).returning(|_, _, _, _, _| Ok(Some(claimed(5))));
    m.sender.expect_post().times(1).returning(|_| answer(500));
    m.webhooks
        .expect_settle()
        .withf(|_, _, s, _| {
            s.status() == DeliveryStatus::Failed
                && s.next_attempt_at().is_none()
                && s.subscription_stop().is_none()
        })
        .times(1)
        .returning(|_, _, _, _| Ok(true));
    m.webhooks.expect_delivery().times(1).returning(|_, _, _| Ok(Some(delivery("failed"))));
    let d = m
        .service()
        .retry(&caller(Role::Owner), &WebhookId::from_string("whk_1"), &DeliveryId::from_string("dlv_1"))
        .await
        .unwrap();
    assert_eq!(d.status(), DeliveryStatus::Failed);
}

#[tokio::test]
async fn a_delivery_queued_again_starts_its_schedule_over_and_numbers_its_attempts_on() {
    // Five attempts failed before a recovery; this is the first of the new schedule.
    let mut m = Mocks::new();
    m.due.expect_claim().times(1).returning(|_, _, _| {
        let mut c = claimed(1);
        c.item.earlier_attempts = 5;
        Ok(vec![c])
    });
    m.sender.expect_post().times(1).returning(|_| answer(500));
    m.webhooks
        .expect_settle()
        .withf(|_, _, s, _| {
            // Attempt 6 in the log, and a second attempt due as after a first failure.
            s.attempt().number == 6
                && s.status() == DeliveryStatus::Pending
                && s.next_attempt_at() == Some(t0() + Duration::seconds(60))
        })
        .times(1)
        .returning(|_, _, _, _| Ok(true));
    assert_eq!(m.worker().run_due(32).await.unwrap(), 1);
}

#[tokio::test]
async fn a_recovery_requeues_skipped_and_failed_since_a_time_and_reactivates() {
    let since = t0() - Duration::hours(2);
    let mut m = Mocks::new();
    m.webhooks
        .expect_requeue()
        .withf(move |tenant, id, r, now| {
            tenant.as_str() == "ten_1"
                && id.as_str() == "whk_1"
                && *r == Requeue::recovery(since)
                && *now == t0()
        })
        .times(1)
        .returning(|_, _, _, _| Ok(Some(20)));
    let service = m.service();
    let id = WebhookId::from_string("whk_1");
    assert_eq!(service.recover(&caller(Role::Admin), &id, since).await.unwrap(), 20);
    let err = service.recover(&caller(Role::Viewer), &id, since).await.unwrap_err();
    assert!(matches!(err, WebhookError::Forbidden(_)), "{err:?}");
}

#[tokio::test]
async fn recovering_another_tenants_subscription_is_not_found() {
    let mut m = Mocks::new();
    m.webhooks.expect_requeue().times(1).returning(|_, _, _, _| Ok(None));
    let err =
        m.service().recover(&caller(Role::Owner), &WebhookId::from_string("whk_9"), t0()).await.unwrap_err();
    assert!(matches!(err, WebhookError::NotFound), "{err:?}");
}

#[tokio::test]
async fn a_bulk_retry_needs_an_active_subscription_and_a_status_that_can_be_retried() {
    let id = WebhookId::from_string("whk_1");
    // Failed: the retry would wait for nothing; a recovery is what it needs.
    let mut m = Mocks::new();
    m.webhooks.expect_get().returning(|_, _| Ok(Some(stored_subscription(SubscriptionStatus::Failed))));
    m.webhooks.expect_requeue().never();
    let err = m.service().retry_all(&caller(Role::Owner), &id, None, None).await.unwrap_err();
    assert!(matches!(err, WebhookError::NotActive(SubscriptionStatus::Failed)), "{err:?}");
    assert!(err.to_string().contains("/recover"), "{err}");
    // Delivered or pending ones cannot be retried in bulk.
    let mut m = Mocks::new();
    m.webhooks.expect_requeue().never();
    let err = m
        .service()
        .retry_all(&caller(Role::Owner), &id, Some(DeliveryStatus::Delivered), None)
        .await
        .unwrap_err();
    assert!(matches!(err, WebhookError::Invalid(_)), "{err:?}");
    // Active: the failed ones, leaving the subscription as it is.
    let mut m = Mocks::new();
    m.webhooks.expect_get().returning(|_, _| Ok(Some(subscription())));
    m.webhooks
        .expect_requeue()
        .withf(|_, _, r, _| *r == Requeue::retry(Some(DeliveryStatus::Failed), None) && !r.reactivate)
        .times(1)
        .returning(|_, _, _, _| Ok(Some(3)));
    let queued =
        m.service().retry_all(&caller(Role::Owner), &id, Some(DeliveryStatus::Failed), None).await.unwrap();
    assert_eq!(queued, 3);
}

#[tokio::test]
async fn stats_cover_the_last_24_hours_for_a_reader() {
    let mut m = Mocks::new();
    m.webhooks.expect_get().returning(|_, _| Ok(Some(subscription())));
    m.webhooks.expect_stats().withf(|_, _, since| *since == t0() - Duration::hours(24)).times(1).returning(
        |_, _, since| {
            Ok(DeliveryStats {
                since,
                counts: DeliveryCounts::default(),
                attempts: 0,
                answered: 0,
                p50_ms: None,
                p99_ms: None,
            })
        },
    );
    let s = m.service().stats(&caller(Role::Viewer), &WebhookId::from_string("whk_1")).await.unwrap();
    assert_eq!(s.since, t0() - Duration::hours(24));
}

#[tokio::test]
async fn deliveries_per_hour_are_the_last_24_hours_ending_with_the_current_one() {
    let mut m = Mocks::new();
    m.webhooks.expect_get().returning(|_, _| Ok(Some(subscription())));
    // t0 is at 12:00: the window starts at 13:00 the day before.
    let first = t0() - Duration::hours(23);
    m.webhooks
        .expect_per_hour()
        .withf(move |t, _, since| t.as_str() == "ten_1" && *since == first)
        .times(1)
        .returning(move |_, _, _| {
            Ok(vec![crate::webhooks::HourCount { hour: t0(), status: DeliveryStatus::Failed, count: 2 }])
        });
    let hours = m
        .service()
        .deliveries_per_hour(&caller(Role::Viewer), &WebhookId::from_string("whk_1"))
        .await
        .unwrap();
    assert_eq!(hours.len(), 24);
    assert_eq!((hours[0].hour, hours[23].hour), (first, t0()));
    assert_eq!((hours[23].counts.failed, hours[22].counts.total()), (2, 0));
}

#[tokio::test]
async fn another_tenants_subscription_has_no_hours() {
    let mut m = Mocks::new();
    m.webhooks.expect_get().returning(|_, _| Ok(None));
    m.webhooks.expect_per_hour().never();
    let r = m.service().deliveries_per_hour(&caller(Role::Owner), &WebhookId::from_string("whk_9")).await;
    assert!(matches!(r, Err(WebhookError::NotFound)));
}

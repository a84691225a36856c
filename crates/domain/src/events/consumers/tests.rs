#![allow(clippy::unwrap_used)]

use std::sync::Mutex;

use chrono::TimeZone;

use super::*;
use crate::events::EventPayload;
use crate::ids::MockIdGenerator;
use crate::time::MockClock;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
}

fn event(id: &str) -> Event {
    Event {
        id: EventId::from_string(id),
        tenant_id: TenantId::from_string("ten_1"),
        payload: EventPayload::BillingCreditsLow { credits: 9, threshold: 10 },
        created_at: t0(),
    }
}

fn at(position: i64, id: &str) -> StreamPosition {
    StreamPosition { position, event_id: id.into() }
}

fn streamed(position: i64, id: &str) -> StreamedEvent {
    StreamedEvent { at: at(position, id), event: Ok(event(id)) }
}

/// A consumer of the tests: it records what it handled and fails the events named in `fails`.
struct Recorder {
    fails: Vec<&'static str>,
    handled: Mutex<Vec<String>>,
    yields: bool,
}

#[async_trait]
impl EventConsumer for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }

    fn wants(&self, event_type: EventType) -> bool {
        event_type == EventType::BillingCreditsLow
    }

    fn yields(&self) -> bool {
        self.yields
    }

    async fn handle(&self, event: &Event) -> anyhow::Result<()> {
        self.handled.lock().unwrap().push(event.id.to_string());
        if self.fails.contains(&event.id.as_str()) {
            anyhow::bail!("cannot handle {}", event.id);
        }
        Ok(())
    }
}

fn batch(events: Vec<StreamedEvent>) -> StreamBatch {
    StreamBatch { events, unsettled: false }
}

fn runner(stream: MockEventStream) -> ConsumerRunner {
    let mut ids = MockIdGenerator::new();
    ids.expect_generate().returning(|p| format!("{p}_1"));
    let mut clock = MockClock::new();
    clock.expect_now().returning(t0);
    ConsumerRunner::new(Arc::new(stream), Vec::new(), Arc::new(ids), Arc::new(clock))
}

fn recorder(fails: Vec<&'static str>) -> Recorder {
    Recorder { fails, handled: Mutex::default(), yields: false }
}

#[test]
fn retries_back_off_and_end_parked() {
    let delays: Vec<_> = (1..=MAX_ATTEMPTS).map(|a| retry_delay(a).map(|d| d.num_seconds())).collect();
    assert_eq!(delays, [Some(2), Some(4), Some(8), Some(16), Some(32), None]);
    assert_eq!(retry_delay(3).unwrap(), Duration::seconds(8));
}

#[tokio::test]
async fn a_pass_handles_new_events_in_order_and_moves_the_cursor_past_the_last() {
    let mut stream = MockEventStream::new();
    stream
        .expect_acquire()
        .withf(|name, lease, now| name == "recorder" && lease.token == "lease_1" && *now == t0())
        .returning(|_, _, _| Ok(Some(at(4, "evt_a"))));
    stream.expect_due_failures().returning(|_, _, _| Ok(Vec::new()));
    stream
        .expect_read_after()
        .withf(|after, limit| *after == at(4, "evt_a") && *limit == 100)
        .returning(|_, _| Ok(batch(vec![streamed(5, "evt_b"), streamed(5, "evt_c"), streamed(9, "evt_d")])));
    stream
        .expect_commit()
        .withf(|name, _, progress, now| {
            *now == t0()
                && name == "recorder"
                && *progress
                    == Progress { cursor: Some(at(9, "evt_d")), failed: Vec::new(), recovered: Vec::new() }
        })
        .times(1)
        .returning(|_, _, _, _| Ok(true));
    let consumer = recorder(Vec::new());
    assert_eq!(
        runner(stream).pass(&consumer).await.unwrap(),
        Passed { handled: 3, unsettled: false, deferred_until: None }
    );
    assert_eq!(*consumer.handled.lock().unwrap(), ["evt_b", "evt_c", "evt_d"]);
}

#[tokio::test]
async fn a_failed_event_is_recorded_for_a_retry_and_does_not_hold_the_cursor() {
    let mut stream = MockEventStream::new();
    stream.expect_acquire().returning(|_, _, _| Ok(Some(StreamPosition::default())));
    stream.expect_due_failures().returning(|_, _, _| Ok(Vec::new()));
    stream.expect_read_after().returning(|_, _| Ok(batch(vec![streamed(1, "evt_a"), streamed(2, "evt_b")])));
    stream
        .expect_commit()
        .withf(|_, _, p, _| {
            p.cursor == Some(at(2, "evt_b"))
                && p.failed.len() == 1
                && p.failed[0].event_id.as_str() == "evt_a"
                && p.failed[0].attempts == 1
                && p.failed[0].next_attempt_at == Some(t0() + Duration::seconds(2))
                && p.failed[0].error == "cannot handle evt_a"
        })
        .times(1)
        .returning(|_, _, _, _| Ok(true));
    let consumer = recorder(vec!["evt_a"]);
    runner(stream).pass(&consumer).await.unwrap();
    assert_eq!(*consumer.handled.lock().unwrap(), ["evt_a", "evt_b"], "the next event is still handled");
}

#[tokio::test]
async fn due_failures_are_tried_again_recovered_or_parked_after_the_last_attempt() {
    let failure = |id: &str, attempts| FailedEvent {
        event_id: EventId::from_string(id),
        tenant_id: TenantId::from_string("ten_1"),
        attempts,
        error: "earlier".into(),
        next_attempt_at: Some(t0()),
        failed_at: t0(),
    };
    let (ok, last) = (failure("evt_ok", 2), failure("evt_bad", MAX_ATTEMPTS - 1));
    let mut stream = MockEventStream::new();
    stream.expect_acquire().returning(|_, _, _| Ok(Some(StreamPosition::default())));
    stream
        .expect_due_failures()
        .returning(move |_, _, _| Ok(vec![(ok.clone(), event("evt_ok")), (last.clone(), event("evt_bad"))]));
    stream.expect_read_after().returning(|_, _| Ok(StreamBatch { events: Vec::new(), unsettled: true }));
    stream
        .expect_commit()
        .withf(|_, _, p, _| {
            p.cursor.is_none()
                && p.recovered == [EventId::from_string("evt_ok")]
                && p.failed.len() == 1
                && p.failed[0].attempts == MAX_ATTEMPTS
                && p.failed[0].next_attempt_at.is_none()
        })
        .times(1)
        .returning(|_, _, _, _| Ok(true));
    let consumer = recorder(vec!["evt_bad"]);
    assert_eq!(
        runner(stream).pass(&consumer).await.unwrap(),
        Passed { handled: 2, unsettled: true, deferred_until: None }
    );
}

#[tokio::test]
async fn unwanted_and_unreadable_events_only_move_the_cursor() {
    let mut stream = MockEventStream::new();
    stream.expect_acquire().returning(|_, _, _| Ok(Some(StreamPosition::default())));
    stream.expect_due_failures().returning(|_, _, _| Ok(Vec::new()));
    stream.expect_read_after().returning(|_, _| {
        let mut other = event("evt_other");
        other.payload = EventPayload::BillingPurchaseCompleted {
            purchase_id: crate::ids::PurchaseId::from_string("pur_1"),
            credits: 1,
            provider: "test".into(),
        };
        Ok(batch(vec![
            StreamedEvent { at: at(1, "evt_other"), event: Ok(other) },
            StreamedEvent { at: at(2, "evt_new"), event: Err("unknown type".into()) },
        ]))
    });
    stream
        .expect_commit()
        .withf(|_, _, p, _| p.cursor == Some(at(2, "evt_new")) && p.failed.is_empty())
        .times(1)
        .returning(|_, _, _, _| Ok(true));
    let consumer = recorder(Vec::new());
    assert_eq!(runner(stream).pass(&consumer).await.unwrap().handled, 2);
    assert!(consumer.handled.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_consumer_held_elsewhere_is_left_alone() {
    let mut stream = MockEventStream::new();
    stream.expect_acquire().returning(|_, _, _| Ok(None));
    let consumer = recorder(Vec::new());
    assert_eq!(runner(stream).pass(&consumer).await.unwrap(), Passed::default());
    assert!(consumer.handled.lock().unwrap().is_empty());
}

#[tokio::test]
async fn one_consumers_failing_pass_does_not_stop_the_others() {
    let mut stream = MockEventStream::new();
    stream.expect_acquire().returning(|name, _, _| {
        if name == "broken" { anyhow::bail!("database down") } else { Ok(Some(StreamPosition::default())) }
    });
    stream.expect_due_failures().returning(|_, _, _| Ok(Vec::new()));
    stream.expect_read_after().returning(|_, _| Ok(batch(vec![streamed(1, "evt_a")])));
    stream.expect_commit().times(1).returning(|_, _, _, _| Ok(true));

    struct Broken;
    #[async_trait]
    impl EventConsumer for Broken {
        fn name(&self) -> &'static str {
            "broken"
        }
        fn wants(&self, _: EventType) -> bool {
            true
        }
        async fn handle(&self, _: &Event) -> anyhow::Result<()> {
            Ok(())
        }
    }
    let working = Arc::new(recorder(Vec::new()));
    let mut runner = runner(stream);
    runner.consumers = vec![Arc::new(Broken), working.clone()];
    assert_eq!(runner.run_all().await, Passed { handled: 1, unsettled: false, deferred_until: None });
    assert_eq!(*working.handled.lock().unwrap(), ["evt_a"]);
}

#[tokio::test]
async fn a_yielding_consumer_defers_its_passes_while_requests_queue_for_at_most_the_deferral() {
    let mut stream = MockEventStream::new();
    stream.expect_acquire().returning(|_, _, _| Ok(Some(StreamPosition::default())));
    stream.expect_due_failures().returning(|_, _, _| Ok(Vec::new()));
    stream.expect_read_after().returning(|_, _| Ok(batch(vec![streamed(1, "evt_a")])));
    stream.expect_commit().returning(|_, _, _, _| Ok(true));
    let mut ids = MockIdGenerator::new();
    ids.expect_generate().returning(|p| format!("{p}_1"));
    let now = Arc::new(Mutex::new(t0()));
    let mut clock = MockClock::new();
    clock.expect_now().returning({
        let now = now.clone();
        move || *now.lock().unwrap()
    });
    let load = Arc::new(RequestLoad::new(1));
    let (yielding, urgent) = (
        Arc::new(Recorder { yields: true, ..recorder(Vec::new()) }),
        Arc::new(Recorder { yields: false, ..recorder(Vec::new()) }),
    );
    let runner = ConsumerRunner::new(
        Arc::new(stream),
        vec![yielding.clone(), urgent.clone()],
        Arc::new(ids),
        Arc::new(clock),
    )
    .yielding_to(load.clone());
    let handled = |r: &Recorder| r.handled.lock().unwrap().len();

    // Its first pass goes ahead whatever the load: nothing says it ran lately.
    let requests = (load.enter(), load.enter());
    assert_eq!(runner.run_all().await, Passed { handled: 2, unsettled: false, deferred_until: None });
    // Requests queue: it waits, the consumer somebody waits on does not.
    *now.lock().unwrap() += Duration::milliseconds(MAX_DEFERRAL_MS - 1);
    let until = t0() + Duration::milliseconds(MAX_DEFERRAL_MS);
    assert_eq!(runner.run_all().await, Passed { handled: 1, unsettled: false, deferred_until: Some(until) });
    assert_eq!((handled(&yielding), handled(&urgent)), (1, 2));
    // The queue stays, but its pass has waited the longest it may.
    *now.lock().unwrap() += Duration::milliseconds(1);
    assert_eq!(runner.run_all().await, Passed { handled: 2, unsettled: false, deferred_until: None });
    assert_eq!((handled(&yielding), handled(&urgent)), (2, 3));
    // Once the requests are served it goes ahead at once.
    drop(requests);
    assert_eq!(runner.run_all().await, Passed { handled: 2, unsettled: false, deferred_until: None });
    assert_eq!((handled(&yielding), handled(&urgent)), (3, 4));
}

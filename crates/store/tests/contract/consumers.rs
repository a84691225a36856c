use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agentry_domain::agents::AgentRepository as _;
use agentry_domain::events::consumers::{
    ConsumerRunner, EventConsumer, EventStream, FailedEvent, MAX_ATTEMPTS, Progress, StreamPosition,
};
use agentry_domain::events::{Event, EventType};
use agentry_domain::ids::{EventId, IdGenerator, TenantId};
use agentry_domain::time::Clock;
use agentry_domain::work::Lease;
use agentry_store::{ConsumerStore, Database};
use async_trait::async_trait;
use chrono::{DateTime, Duration, TimeZone, Utc};

use crate::harness::event;

crate::contract!(
    events_are_read_in_the_order_they_were_written_after_the_cursor,
    a_consumer_is_held_by_one_pass_at_a_time,
    a_commit_under_a_lost_lease_changes_nothing,
    failures_wait_for_their_time_park_and_are_retried_on_request,
    two_consumers_on_one_stream_one_failing_the_other_unaffected,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 28, 9, 0, 0).unwrap()
}

fn lease(token: &str) -> Lease {
    Lease { token: token.into(), until: t0() + Duration::minutes(5) }
}

/// Writes `ids` as agent-created events of `ten_1`, one transaction each, in this order.
async fn write_events(db: &Database, ids: &[&str]) {
    let agents = super::agents::setup(db).await;
    for (i, id) in ids.iter().enumerate() {
        agents
            .create(
                &super::agents::agent(&format!("agt_{i}_{id}"), "ten_1"),
                &event(id, "ten_1", EventType::AgentCreated),
            )
            .await
            .unwrap();
    }
}

/// The events after `after`, once every event written so far has settled (PostgreSQL: other
/// tests' transactions run beside this one and hold events back for moments).
async fn read_settled(
    stream: &ConsumerStore,
    after: &StreamPosition,
    limit: u32,
) -> Vec<agentry_domain::events::consumers::StreamedEvent> {
    loop {
        let read = stream.read_after(after, limit).await.unwrap();
        if !read.unsettled || read.events.len() == limit as usize {
            return read.events;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

fn ids_of(read: &[agentry_domain::events::consumers::StreamedEvent]) -> Vec<String> {
    read.iter().map(|s| s.at.event_id.clone()).collect()
}

async fn events_are_read_in_the_order_they_were_written_after_the_cursor(db: Database) {
    // Ids out of write order: the stream follows the writes, not the ids.
    write_events(&db, &["evt_c", "evt_a", "evt_b"]).await;
    let stream = ConsumerStore::new(db.clone());
    let start = stream.acquire("reader", &lease("l1"), t0()).await.unwrap().unwrap();
    assert_eq!(start, StreamPosition::default(), "a new consumer starts at the beginning");
    let read = read_settled(&stream, &start, 2).await;
    assert_eq!(ids_of(&read), ["evt_c", "evt_a"]);
    assert!(read[0].at < read[1].at);
    let progress = Progress { cursor: Some(read[1].at.clone()), ..Progress::default() };
    assert!(stream.commit("reader", &lease("l1"), &progress, t0()).await.unwrap());

    let cursor = stream.acquire("reader", &lease("l2"), t0()).await.unwrap().unwrap();
    assert_eq!(cursor, read[1].at);
    let rest = read_settled(&stream, &cursor, 10).await;
    assert_eq!(ids_of(&rest), ["evt_b"]);
    assert!(rest[0].event.as_ref().unwrap().event_type() == EventType::AgentCreated);
    let status = stream.status().await.unwrap();
    let reader = status.iter().find(|s| s.name == "reader").unwrap();
    assert_eq!((reader.behind, reader.failures.len()), (1, 0));
}

async fn a_consumer_is_held_by_one_pass_at_a_time(db: Database) {
    let stream = ConsumerStore::new(db.clone());
    assert!(stream.acquire("one", &lease("first"), t0()).await.unwrap().is_some());
    assert!(stream.acquire("one", &lease("second"), t0()).await.unwrap().is_none(), "held");
    assert!(
        stream.acquire("other", &lease("second"), t0()).await.unwrap().is_some(),
        "another consumer is free"
    );
    // Once its lease ran out, another pass takes it over.
    let later = t0() + Duration::minutes(6);
    assert!(stream.acquire("one", &lease("third"), later).await.unwrap().is_some());
    // A commit gives it back at once.
    assert!(stream.commit("other", &lease("second"), &Progress::default(), t0()).await.unwrap());
    assert!(stream.acquire("other", &lease("fourth"), t0()).await.unwrap().is_some());
}

async fn a_commit_under_a_lost_lease_changes_nothing(db: Database) {
    write_events(&db, &["evt_1"]).await;
    let stream = ConsumerStore::new(db.clone());
    stream.acquire("one", &lease("stalled"), t0()).await.unwrap().unwrap();
    let later = t0() + Duration::minutes(6);
    stream.acquire("one", &lease("took_over"), later).await.unwrap().unwrap();
    let read = read_settled(&stream, &StreamPosition::default(), 10).await;
    let failed = FailedEvent {
        event_id: EventId::from_string("evt_1"),
        tenant_id: TenantId::from_string("ten_1"),
        attempts: 1,
        error: "boom".into(),
        next_attempt_at: Some(t0()),
        failed_at: t0(),
    };
    let progress = Progress { cursor: Some(read[0].at.clone()), failed: vec![failed], recovered: vec![] };
    assert!(!stream.commit("one", &lease("stalled"), &progress, t0()).await.unwrap());
    let status = stream.status().await.unwrap();
    let one = status.iter().find(|s| s.name == "one").unwrap();
    assert_eq!((one.cursor.clone(), one.failures.len()), (StreamPosition::default(), 0));
}

async fn failures_wait_for_their_time_park_and_are_retried_on_request(db: Database) {
    write_events(&db, &["evt_1", "evt_2"]).await;
    let stream = ConsumerStore::new(db.clone());
    let failure = |id: &str, attempts, next: Option<DateTime<Utc>>| FailedEvent {
        event_id: EventId::from_string(id),
        tenant_id: TenantId::from_string("ten_1"),
        attempts,
        error: format!("failed {attempts}"),
        next_attempt_at: next,
        failed_at: t0(),
    };
    stream.acquire("one", &lease("a"), t0()).await.unwrap().unwrap();
    let progress = Progress {
        cursor: None,
        failed: vec![
            failure("evt_1", 1, Some(t0() + Duration::seconds(2))),
            failure("evt_2", MAX_ATTEMPTS, None),
        ],
        recovered: vec![],
    };
    assert!(stream.commit("one", &lease("a"), &progress, t0()).await.unwrap());
    assert!(stream.due_failures("one", t0(), 10).await.unwrap().is_empty(), "not due yet");
    let due = stream.due_failures("one", t0() + Duration::seconds(2), 10).await.unwrap();
    assert_eq!(due.len(), 1, "the parked one is not due");
    assert_eq!((due[0].0.event_id.as_str(), due[0].1.id.as_str()), ("evt_1", "evt_1"));

    // Failing again counts the attempt; succeeding removes it.
    stream.acquire("one", &lease("b"), t0()).await.unwrap().unwrap();
    let again = Progress {
        failed: vec![failure("evt_1", 2, Some(t0() + Duration::seconds(4)))],
        ..Progress::default()
    };
    assert!(stream.commit("one", &lease("b"), &again, t0()).await.unwrap());
    let status = stream.status().await.unwrap();
    let one = status.iter().find(|s| s.name == "one").unwrap();
    assert_eq!(one.failures.len(), 2);
    let first = one.failures.iter().find(|f| f.event_id.as_str() == "evt_1").unwrap();
    assert_eq!((first.attempts, first.error.as_str()), (2, "failed 2"));

    assert_eq!(stream.retry_parked("one", None, t0()).await.unwrap(), 1);
    let due = stream.due_failures("one", t0(), 10).await.unwrap();
    assert_eq!(due.iter().map(|d| d.0.event_id.as_str()).collect::<Vec<_>>(), ["evt_2"]);
    stream.acquire("one", &lease("c"), t0()).await.unwrap().unwrap();
    let recovered = Progress { recovered: vec![EventId::from_string("evt_2")], ..Progress::default() };
    assert!(stream.commit("one", &lease("c"), &recovered, t0()).await.unwrap());
    let status = stream.status().await.unwrap();
    let one = status.iter().find(|s| s.name == "one").unwrap();
    assert_eq!(one.failures.iter().map(|f| f.event_id.as_str()).collect::<Vec<_>>(), ["evt_1"]);
}

/// A clock the test sets.
struct TestClock(Mutex<DateTime<Utc>>);

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

/// Ids from a counter.
#[derive(Default)]
struct Counter(AtomicU64);

impl IdGenerator for Counter {
    fn generate(&self, prefix: &'static str) -> String {
        format!("{prefix}_{}", self.0.fetch_add(1, Ordering::Relaxed))
    }
}

/// A consumer of the test: records what it handled; fails everything when `fails`.
struct Recorder {
    name: &'static str,
    fails: bool,
    handled: Mutex<Vec<String>>,
}

#[async_trait]
impl EventConsumer for Recorder {
    fn name(&self) -> &'static str {
        self.name
    }

    fn wants(&self, _: EventType) -> bool {
        true
    }

    async fn handle(&self, event: &Event) -> anyhow::Result<()> {
        self.handled.lock().unwrap().push(event.id.to_string());
        anyhow::ensure!(!self.fails, "the {} consumer cannot handle {}", self.name, event.id);
        Ok(())
    }
}

/// One pass of every consumer, once every event written so far has settled (PostgreSQL: other
/// tests' transactions run beside this one); the events handled.
async fn settled(runner: &ConsumerRunner) -> usize {
    let mut handled = 0;
    loop {
        let passed = runner.run_all().await;
        handled += passed.handled;
        if !passed.unsettled {
            return handled;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

async fn two_consumers_on_one_stream_one_failing_the_other_unaffected(db: Database) {
    write_events(&db, &["evt_1", "evt_2", "evt_3"]).await;
    let working = Arc::new(Recorder { name: "working", fails: false, handled: Mutex::default() });
    let failing = Arc::new(Recorder { name: "failing", fails: true, handled: Mutex::default() });
    let clock = Arc::new(TestClock(Mutex::new(t0())));
    let stream = Arc::new(ConsumerStore::new(db.clone()));
    let runner = ConsumerRunner::new(
        stream.clone(),
        vec![failing.clone(), working.clone()],
        Arc::new(Counter::default()),
        clock.clone(),
    );
    assert_eq!(settled(&runner).await, 6, "each consumer read the three events");
    assert_eq!(settled(&runner).await, 0, "nothing new, nothing due");
    assert_eq!(*working.handled.lock().unwrap(), ["evt_1", "evt_2", "evt_3"]);

    // The failing consumer's events come back with backoff until they are parked; the working
    // one never sees them again.
    for _ in 1..MAX_ATTEMPTS {
        *clock.0.lock().unwrap() += Duration::minutes(10);
        assert_eq!(settled(&runner).await, 3);
    }
    *clock.0.lock().unwrap() += Duration::minutes(10);
    assert_eq!(settled(&runner).await, 0, "parked");
    assert_eq!(failing.handled.lock().unwrap().len(), 3 * MAX_ATTEMPTS as usize);
    assert_eq!(working.handled.lock().unwrap().len(), 3);
    let status = stream.status().await.unwrap();
    let failed = status.iter().find(|s| s.name == "failing").unwrap();
    assert_eq!(failed.behind, 0, "the cursor moved past its failures");
    assert!(failed.failures.iter().all(|f| f.next_attempt_at.is_none() && f.attempts == MAX_ATTEMPTS));
    assert!(failed.failures[0].error.contains("the failing consumer cannot handle"));
    let worked = status.iter().find(|s| s.name == "working").unwrap();
    assert!(worked.failures.is_empty());
}

/// PostgreSQL: an event whose transaction is still open holds back every event after it, so a
/// cursor never passes an event that commits later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_still_being_written_holds_back_the_events_after_it() {
    use diesel_async::{AsyncConnection as _, AsyncPgConnection, SimpleAsyncConnection as _};
    let Some(t) = crate::harness::postgres().await else { return };
    write_events(&t.db, &["evt_0"]).await;
    let stream = ConsumerStore::new(t.db.clone());
    assert_eq!(ids_of(&read_settled(&stream, &StreamPosition::default(), 10).await), ["evt_0"]);
    let mut open = AsyncPgConnection::establish(&t.url).await.unwrap();
    open.batch_execute(
        "BEGIN; INSERT INTO events (id, tenant_id, event_type, data, created_at) \
         VALUES ('evt_slow', 'ten_1', 'billing.credits.low', '{\"credits\": 9, \"threshold\": 10}', now())",
    )
    .await
    .unwrap();
    // Written and committed after the open transaction began.
    super::agents::setup_agent(&t.db, "agt_late", "ten_1").await;
    let read = stream.read_after(&StreamPosition::default(), 10).await.unwrap();
    assert_eq!(ids_of(&read.events), ["evt_0"], "nothing after the open transaction is settled");
    assert!(read.unsettled, "and the reader knows to come back");
    open.batch_execute("COMMIT").await.unwrap();
    // Other tests' transactions run on the same server: each ends in moments.
    let mut read = stream.read_after(&StreamPosition::default(), 10).await.unwrap();
    while read.unsettled {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        read = stream.read_after(&StreamPosition::default(), 10).await.unwrap();
    }
    assert_eq!(ids_of(&read.events), ["evt_0", "evt_slow", "evt_agt_late"]);
}

use std::sync::Mutex;

use chrono::TimeZone;

use super::*;
use crate::ids::MockIdGenerator;
use crate::time::MockClock;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
}

/// A kind of work of the tests: items are numbers; it records what it ran and gave up.
struct Numbers {
    queue: MockLeaseQueue<u32>,
    ran: Mutex<Vec<u32>>,
    given_up: Mutex<Vec<(u32, String)>>,
    fail_recording: bool,
}

#[async_trait]
impl WorkKind for Numbers {
    type Item = u32;

    fn name(&self) -> &'static str {
        "numbers"
    }

    fn queue(&self) -> &dyn LeaseQueue<u32> {
        &self.queue
    }

    fn lease(&self) -> Duration {
        Duration::seconds(30)
    }

    fn concurrency(&self) -> u32 {
        4
    }

    fn max_claims(&self) -> u32 {
        3
    }

    async fn run(&self, claimed: Claimed<u32>, _: &(dyn Fn() -> bool + Send + Sync)) -> anyhow::Result<Ran> {
        if self.fail_recording {
            anyhow::bail!("database down");
        }
        self.ran.lock().unwrap().push(*claimed);
        Ok(Ran::ended(Outcome::Done))
    }

    async fn give_up(&self, claimed: Claimed<u32>, reason: String) -> anyhow::Result<Ran> {
        self.given_up.lock().unwrap().push((claimed.item, reason));
        Ok(Ran::ended(Outcome::Failed))
    }
}

fn worker(queue: MockLeaseQueue<u32>, fail_recording: bool) -> Worker<Numbers> {
    let mut ids = MockIdGenerator::new();
    ids.expect_generate().returning(|p| format!("{p}_1"));
    let mut clock = MockClock::new();
    clock.expect_now().returning(t0);
    let kind = Numbers { queue, ran: Mutex::default(), given_up: Mutex::default(), fail_recording };
    Worker::new(Arc::new(kind), Arc::new(ids), Arc::new(clock))
}

fn claimed(item: u32, claims: u32, lease: &Lease) -> Claimed<u32> {
    Claimed { item, claims, lease: lease.clone() }
}

#[tokio::test]
async fn items_are_claimed_under_one_new_lease_of_the_kinds_length() {
    let mut queue = MockLeaseQueue::new();
    queue
        .expect_claim()
        .withf(|lease, now, limit| {
            lease.token == "lease_1"
                && lease.until == t0() + Duration::seconds(30)
                && *now == t0()
                && *limit == 2
        })
        .times(1)
        .returning(|lease, _, _| Ok(vec![claimed(7, 1, lease), claimed(8, 3, lease)]));
    let worker = worker(queue, false);
    assert_eq!(worker.run_due(2).await.unwrap(), 2);
    let mut ran = worker.kind().ran.lock().unwrap().clone();
    ran.sort_unstable();
    assert_eq!(ran, [7, 8], "three claims is still within the limit");
}

#[tokio::test]
async fn an_item_claimed_past_its_limit_is_given_up_with_the_reason() {
    let mut queue = MockLeaseQueue::new();
    queue.expect_claim().returning(|lease, _, _| Ok(vec![claimed(7, 4, lease)]));
    let worker = worker(queue, false);
    assert_eq!(worker.run_due(1).await.unwrap(), 1);
    assert!(worker.kind().ran.lock().unwrap().is_empty());
    let given_up = worker.kind().given_up.lock().unwrap();
    assert_eq!(given_up.len(), 1);
    assert_eq!(given_up[0].0, 7);
    assert!(given_up[0].1.starts_with("given up after 3 claims"), "{}", given_up[0].1);
}

#[tokio::test]
async fn nothing_is_claimed_for_no_free_slot_and_a_failed_record_is_no_outcome() {
    let mut queue = MockLeaseQueue::new();
    queue.expect_claim().times(1).returning(|lease, _, _| Ok(vec![claimed(7, 1, lease)]));
    let worker = worker(queue, true);
    assert!(worker.claim(0).await.unwrap().is_empty());
    let item = worker.claim(1).await.unwrap().pop().unwrap();
    assert_eq!(*item, 7, "a claim reads as its item");
    assert_eq!(worker.process(item, &|| true).await, None);
}

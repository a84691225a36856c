use chrono::TimeZone;
use serde::Deserialize;

use super::*;
use crate::ids::MockIdGenerator;
use crate::time::MockClock;
use crate::work::{MockLeaseQueue, Outcome, Worker};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
}

#[test]
fn failures_back_off_exponentially_up_to_a_ceiling_then_give_up() {
    let policy =
        RetryPolicy { first_delay: Duration::seconds(5), max_delay: Duration::seconds(60), max_attempts: 6 };
    let transient = || JobError::Transient(anyhow::anyhow!("smtp down"));
    let delays: Vec<Option<i64>> = (1..=6)
        .map(|attempt| match policy.after_failure(attempt, &transient(), t0()) {
            JobOutcome::RetryAt { at, .. } => Some((at - t0()).num_seconds()),
            _ => None,
        })
        .collect();
    assert_eq!(delays, [Some(5), Some(10), Some(20), Some(40), Some(60), None]);
    let permanent = JobError::Permanent(anyhow::anyhow!("unreadable"));
    assert!(matches!(policy.after_failure(1, &permanent, t0()), JobOutcome::Failed { .. }));
    assert!(matches!(policy.after_failure(u32::MAX - 1, &transient(), t0()), JobOutcome::Failed { .. }));
    let long = RetryPolicy { max_attempts: u32::MAX, ..policy };
    assert!(matches!(long.after_failure(200, &transient(), t0()), JobOutcome::RetryAt { .. }));
}

/// A job type of the tests.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Greeting {
    to: String,
}

impl BackgroundJob for Greeting {
    const KIND: JobKind = JobKind::Mail;
}

/// Fails every attempt, transiently; remembers whom it was asked to greet.
struct Failing(std::sync::Mutex<Vec<String>>);

#[async_trait]
impl JobHandler<Greeting> for Failing {
    async fn run(&self, job: Greeting) -> Result<(), JobError> {
        self.0.lock().unwrap().push(job.to);
        Err(JobError::Transient(anyhow::anyhow!("down")))
    }
}

fn queued(payload: Value, claims: u32, lease: &Lease) -> Claimed<QueuedJob> {
    Claimed {
        item: QueuedJob { id: JobId::from_string("job_1"), kind: JobKind::Mail, payload },
        claims,
        lease: lease.clone(),
    }
}

/// A worker over `claims` and `queue`, with ids `lease_1`… and the clock at `t0`.
fn worker(queue: MockJobQueue, claims: MockLeaseQueue<QueuedJob>, handler: Arc<Failing>) -> Worker<Jobs> {
    let mut ids = MockIdGenerator::new();
    ids.expect_generate().returning(|p| format!("{p}_1"));
    let mut clock = MockClock::new();
    clock.expect_now().returning(t0);
    let clock: Arc<dyn Clock> = Arc::new(clock);
    let settings = JobSettings {
        retry: RetryPolicy { first_delay: Duration::seconds(5), max_attempts: 3, ..RetryPolicy::default() },
        ..JobSettings::default()
    };
    let jobs = Jobs::new(Arc::new(queue), Arc::new(claims), clock.clone(), settings)
        .with_handler::<Greeting>(handler);
    Worker::new(Arc::new(jobs), Arc::new(ids), clock)
}

#[tokio::test]
async fn a_failed_attempt_is_recorded_under_its_lease_with_the_next_time() {
    let mut claims = MockLeaseQueue::new();
    claims
        .expect_claim()
        .withf(|lease, now, limit| lease.token == "lease_1" && *now == t0() && *limit == 4)
        .returning(|lease, _, _| Ok(vec![queued(serde_json::json!({"to": "ada"}), 2, lease)]));
    let mut queue = MockJobQueue::new();
    queue
        .expect_finish()
        .withf(|id, lease, outcome, _| {
            id.as_str() == "job_1"
                && lease.token == "lease_1"
                && matches!(outcome, JobOutcome::RetryAt { at, .. } if *at == t0() + Duration::seconds(10))
        })
        .times(1)
        .returning(|_, _, _, _| Ok(true));
    let handler = Arc::new(Failing(std::sync::Mutex::new(Vec::new())));
    let worker = worker(queue, claims, handler.clone());
    assert_eq!(worker.run_due(4).await.unwrap(), 1);
    assert_eq!(*handler.0.lock().unwrap(), ["ada"], "the handler read the typed job");
}

#[tokio::test]
async fn a_job_claimed_more_often_than_its_attempts_is_failed_without_running() {
    let mut claims = MockLeaseQueue::new();
    claims
        .expect_claim()
        .returning(|lease, _, _| Ok(vec![queued(serde_json::json!({"to": "ada"}), 4, lease)]));
    let mut queue = MockJobQueue::new();
    queue
        .expect_finish()
        .withf(|_, _, outcome, _| {
            matches!(outcome, JobOutcome::Failed { error } if error.contains("given up after 3 claims"))
        })
        .times(1)
        .returning(|_, _, _, _| Ok(true));
    let handler = Arc::new(Failing(std::sync::Mutex::new(Vec::new())));
    let worker = worker(queue, claims, handler.clone());
    let claimed = worker.claim(1).await.unwrap();
    let ran = worker.process(claimed.into_iter().next().unwrap(), &|| true).await;
    assert_eq!(ran, Some(Ran::ended(Outcome::Failed)));
    assert!(handler.0.lock().unwrap().is_empty(), "never ran");
}

#[tokio::test]
async fn an_unreadable_job_fails_for_good() {
    let mut claims = MockLeaseQueue::new();
    claims.expect_claim().returning(|lease, _, _| Ok(vec![queued(serde_json::json!({"from": 1}), 1, lease)]));
    let mut queue = MockJobQueue::new();
    queue
        .expect_finish()
        .withf(|_, _, outcome, _| matches!(outcome, JobOutcome::Failed { error } if error.contains("unreadable mail job")))
        .times(1)
        .returning(|_, _, _, _| Ok(true));
    let handler = Arc::new(Failing(std::sync::Mutex::new(Vec::new())));
    assert_eq!(worker(queue, claims, handler).run_due(1).await.unwrap(), 1);
}

#[test]
fn a_new_job_carries_its_kind_and_typed_input() {
    let mut ids = MockIdGenerator::new();
    ids.expect_generate().returning(|p| format!("{p}_1"));
    let job = NewJob::new(&ids, &Greeting { to: "ada".into() }, t0()).unwrap();
    assert_eq!((job.kind, job.payload, job.run_at), (JobKind::Mail, serde_json::json!({"to": "ada"}), t0()));
}

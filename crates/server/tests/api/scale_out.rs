//! Three instances of the service on one PostgreSQL database, with the traffic spread over them
//! round-robin, behave as one service: a tenant's per-minute limit holds exactly (with the
//! database and the Redis rate-limit store), concurrent chats never overdraw the balance and
//! the ledger adds up, each webhook event is delivered once with one delivery row, each
//! workflow execution runs each of its steps once, the deliveries and executions of a
//! SIGKILLed instance are taken over by the others once their leases end, and memory written
//! through one instance is found through the others at once. Every receiver is a wiremock
//! server on 127.0.0.1.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use agentry_domain::workflows::ExecutionStatus;
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tokio::process::Child;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{model_available, model_dir, redis_url};
use crate::processes::{
    WEBHOOK_ENV, create_agents, free_port, received_ids, sign_up, start_with, unlimited_tenant, wait_for_ids,
};

/// Settings every instance of a cluster shares, before a test's own.
const CLUSTER_ENV: &[(&str, &str)] = &[
    // Every instance of one database needs the same key for the secrets it seals.
    ("AGENTRY_SECRET_KEY", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
    // Tests sign up from one address, through every instance.
    ("AGENTRY_AUTH_RATE_PER_MINUTE", "10000"),
    // Three processes per test, two tests at once, one PostgreSQL with 100 connections.
    ("AGENTRY_DATABASE_MAX_CONNECTIONS", "8"),
    // Only the memory test needs the real model; the others need not load it three times.
    ("AGENTRY_EMBEDDING_PROVIDER", "hashing"),
];

/// Three `agentry` processes on one fresh PostgreSQL schema, each with its own data directory.
struct Cluster {
    database_url: String,
    bases: Vec<String>,
    children: Vec<Child>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts the three instances with `env` on top of [`CLUSTER_ENV`], or `None` when no test
    /// database is configured (a failure instead under `AGENTRY_REQUIRE_POSTGRES=1`).
    async fn start(env: &[(&str, &str)]) -> Option<Self> {
        let Some(database_url) = agentry_store::test_support::postgres_url().await.unwrap() else {
            eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let env: Vec<(&str, &str)> = CLUSTER_ENV.iter().chain(env).copied().collect();
        let ports = [free_port(), free_port(), free_port()];
        let start = |i: usize| {
            let home = dir.path().join(format!("instance-{i}"));
            std::fs::create_dir_all(&home).unwrap();
            let (database_url, env) = (database_url.clone(), env.clone());
            async move { start_with(ports[i], &home, &database_url, &env, std::process::Stdio::inherit()).await }
        };
        // The first applies the migrations; the other two find them applied.
        let first = start(0).await;
        let (second, third) = tokio::join!(start(1), start(2));
        Some(Self {
            database_url,
            bases: ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect(),
            children: vec![first, second, third],
            _dir: dir,
        })
    }

    /// The base URL of the instance that takes request `i`: round-robin.
    fn base(&self, i: usize) -> &str {
        &self.bases[i % self.bases.len()]
    }

    /// A connection pool of the test's own onto the cluster's database, to read what the API
    /// does not show (and to poll without spending a plan's request limit).
    async fn database(&self) -> agentry_store::Database {
        let settings = agentry_store::DatabaseSettings::new(self.database_url.clone());
        agentry_store::Database::connect(&settings).await.unwrap()
    }
}

/// Sends `n` requests built by `request(i, base)` at once (at most 100 in flight), request `i`
/// to instance `i % 3`, and returns the responses in order, each as status, headers and body.
async fn spread<F>(cluster: &Cluster, n: usize, request: F) -> Vec<(u16, reqwest::header::HeaderMap, Value)>
where
    F: Fn(usize, &str) -> reqwest::RequestBuilder,
{
    let requests = (0..n).map(|i| {
        let sent = request(i, cluster.base(i)).send();
        async move {
            let r = sent.await.unwrap();
            let (status, headers) = (r.status().as_u16(), r.headers().clone());
            let body = r.json::<Value>().await.unwrap_or(Value::Null);
            (status, headers, body)
        }
    });
    futures_util::stream::iter(requests).buffered(100).collect().await
}

/// Seconds left in the current UTC minute.
fn seconds_left_in_minute() -> i64 {
    60 - chrono::Utc::now().timestamp().rem_euclid(60)
}

/// Waits until `n` requests to `route` (any, when `None`) are in flight at once at `server`,
/// each answered only `delay` after it arrived: `n` of them were first seen so recently that
/// none can have been answered yet. With each instance capped at `n / 3` at once, that means
/// every instance holds `n / 3` of them.
async fn wait_until_in_flight(server: &MockServer, route: Option<&str>, n: usize, delay: Duration) {
    // Requests are seen up to one poll after they arrive: allow for that, generously.
    let window = delay - Duration::from_millis(300);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen: Vec<Instant> = Vec::new();
    loop {
        let arrived = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter(|r| route.is_none_or(|route| r.url.path() == route))
            .count();
        seen.resize(arrived, Instant::now());
        let in_flight = seen.iter().filter(|at| at.elapsed() < window).count();
        if in_flight >= n {
            return;
        }
        assert!(Instant::now() < deadline, "never {n} requests in flight at once ({arrived} arrived)");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// 1. The per-minute limit.

/// 100 authenticated requests of a Starter tenant (60 a minute), at once over the three
/// instances: exactly 60 are served, and the counter they share counted each once.
async fn the_minute_limit_holds_exactly(env: &[(&str, &str)]) {
    let Some(cluster) = Cluster::start(env).await else { return };
    let client = reqwest::Client::new();
    // The window is the wall clock's minute: a burst that straddled its end would be counted in
    // two windows and prove nothing. Start it with room to spare, and in the unlikely case it
    // straddled all the same, once more with a tenant whose counters are fresh.
    for attempt in 0..2 {
        let token = sign_up(cluster.base(attempt), &format!("ada{attempt}@example.com")).await;
        if seconds_left_in_minute() < 15 {
            tokio::time::sleep(Duration::from_secs(u64::try_from(seconds_left_in_minute()).unwrap())).await;
        }
        let minute = chrono::Utc::now().timestamp().div_euclid(60);
        let responses =
            spread(&cluster, 100, |_, base| client.get(format!("{base}/api/v1/agents")).bearer_auth(&token))
                .await;
        if chrono::Utc::now().timestamp().div_euclid(60) != minute {
            eprintln!("the burst straddled a minute boundary; once more");
            continue;
        }
        let statuses: Vec<u16> = responses.iter().map(|(s, _, _)| *s).collect();
        let served = statuses.iter().filter(|s| **s == 200).count();
        let refused = statuses.iter().filter(|s| **s == 429).count();
        assert_eq!((served, refused), (60, 40), "only 200 and 429, 60 of them 200: {statuses:?}");
        // Each served request saw its own count: the remaining budgets are 59 down to 0, each once.
        let mut remaining: Vec<u64> = responses
            .iter()
            .filter(|(s, _, _)| *s == 200)
            .map(|(_, h, _)| h["x-ratelimit-remaining"].to_str().unwrap().parse().unwrap())
            .collect();
        remaining.sort_unstable();
        assert_eq!(remaining, (0..60).collect::<Vec<u64>>());
        for (_, headers, body) in responses.iter().filter(|(s, _, _)| *s == 429) {
            assert_eq!(body["error"], "rate_limit_exceeded", "{body}");
            assert_eq!(headers["x-ratelimit-limit"], "60");
            assert_eq!(headers["x-ratelimit-remaining"], "0");
        }
        return;
    }
    panic!("two bursts in a row straddled a minute boundary");
}

#[tokio::test]
async fn the_minute_limit_holds_exactly_across_three_instances_with_the_database_store() {
    the_minute_limit_holds_exactly(&[("AGENTRY_RATE_LIMIT_STORE", "database")]).await;
}

#[tokio::test]
async fn the_minute_limit_holds_exactly_across_three_instances_with_the_redis_store() {
    let Some(redis) = redis_url() else { return };
    // A prefix of the test's own: tests sharing one Redis never see each other's counters.
    let prefix = format!("agentry-test-{}:", ulid::Ulid::new().to_string().to_lowercase());
    the_minute_limit_holds_exactly(&[
        ("AGENTRY_RATE_LIMIT_STORE", "redis"),
        ("AGENTRY_REDIS_URL", &redis),
        ("AGENTRY_REDIS_KEY_PREFIX", &prefix),
    ])
    .await;
}

// ---------------------------------------------------------------------------------------------
// 2. Credits.

/// 60 chats at once over the three instances against 20 credits, one credit a chat (the
/// built-in responder, at most 100 tokens a reply): 20 are answered, 40 refused with 402, and
/// the balance and the ledger agree with what the answers say they charged.
#[tokio::test]
async fn sixty_concurrent_chats_over_three_instances_never_overdraw_and_the_ledger_adds_up() {
    let Some(cluster) =
        Cluster::start(&[("AGENTRY_WELCOME_CREDITS", "20"), ("AGENTRY_CHAT_MAX_TOKENS", "100")]).await
    else {
        return;
    };
    let client = reqwest::Client::new();
    // Enterprise: no request limit, so every refusal below is about credits.
    let token = unlimited_tenant(cluster.base(0), &cluster.database_url, "ada@example.com").await;
    let billing = |base: &str| client.get(format!("{base}/api/v1/billing")).bearer_auth(&token);
    let start: Value = billing(cluster.base(1)).send().await.unwrap().json().await.unwrap();
    let start = start["credits"].as_i64().unwrap();
    assert_eq!(start, 20);
    let agent: Value = client
        .post(format!("{}/api/v1/agents", cluster.base(2)))
        .bearer_auth(&token)
        .json(&json!({"name": "Helper"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let agent = agent["id"].as_str().unwrap();

    let responses = spread(&cluster, 60, |i, base| {
        client
            .post(format!("{base}/api/v1/agents/{agent}/chat"))
            .bearer_auth(&token)
            .json(&json!({"message": format!("message {i}")}))
    })
    .await;
    let statuses: Vec<u16> = responses.iter().map(|(s, _, _)| *s).collect();
    let answered: Vec<&Value> = responses.iter().filter(|(s, _, _)| *s == 200).map(|(_, _, b)| b).collect();
    let refused: Vec<&Value> = responses.iter().filter(|(s, _, _)| *s == 402).map(|(_, _, b)| b).collect();
    assert_eq!(answered.len() + refused.len(), 60, "only 200 and 402: {statuses:?}");
    assert!(refused.iter().all(|b| b["error"] == "insufficient_credits"), "{refused:?}");
    let charged: i64 = answered.iter().map(|b| b["credits"]["charged"].as_i64().unwrap()).sum();
    assert!(answered.iter().all(|b| b["credits"]["remaining"].as_i64().unwrap() >= 0));

    let end: Value = billing(cluster.base(0)).send().await.unwrap().json().await.unwrap();
    let end = end["credits"].as_i64().unwrap();
    assert!(end >= 0, "overdrawn: {end}");
    assert_eq!(charged + end, start, "what the answers charged is what the balance lost");
    assert_eq!(answered.len(), 20, "one credit a chat: the 402s began only when the credits ran out");
    assert_eq!(end, 0);

    let ledger: Value = client
        .get(format!("{}/api/v1/billing/ledger?per_page=100", cluster.base(1)))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let entries = ledger["entries"].as_array().unwrap();
    assert_eq!(ledger["total"].as_u64(), Some(u64::try_from(entries.len()).unwrap()), "one page holds it");
    assert_eq!(entries.len(), 21, "the welcome grant and one entry per answered chat");
    assert_eq!(entries.iter().map(|e| e["delta"].as_i64().unwrap()).sum::<i64>(), end, "the ledger adds up");
    // Oldest first, each entry's balance is the running sum, and never below zero.
    let mut running = 0;
    for e in entries.iter().rev() {
        running += e["delta"].as_i64().unwrap();
        assert_eq!(e["balance_after"].as_i64().unwrap(), running, "{e}");
        assert!(running >= 0, "{e}");
    }
    let charged_ids: HashSet<&str> = answered.iter().map(|b| b["id"].as_str().unwrap()).collect();
    let referenced: HashSet<&str> = entries
        .iter()
        .filter(|e| e["reason"] == "chat_usage")
        .map(|e| e["reference"].as_str().unwrap())
        .collect();
    assert_eq!(referenced, charged_ids, "each answer charged once, in its own entry");
    let db = cluster.database().await;
    assert_eq!(db.count_rows("credit_holds").await.unwrap(), 0, "every hold was settled or released");
}

// ---------------------------------------------------------------------------------------------
// 3. Webhooks.

/// An unlimited tenant (signed up through the first instance) subscribed to `events` at
/// `server`'s `/hook` (through the second); its access token.
async fn subscribed_tenant(cluster: &Cluster, server: &MockServer, events: &str) -> String {
    let token = unlimited_tenant(cluster.base(0), &cluster.database_url, "ada@example.com").await;
    let r = reqwest::Client::new()
        .post(format!("{}/api/v1/webhooks", cluster.base(1)))
        .bearer_auth(&token)
        .json(&json!({"url": format!("{}/hook", server.uri()), "events": [events]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    token
}

#[tokio::test]
async fn three_instances_deliver_each_of_500_events_once() {
    let Some(cluster) = Cluster::start(WEBHOOK_ENV).await else { return };
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(204)).mount(&server).await;
    let token = subscribed_tenant(&cluster, &server, "*").await;
    create_agents(&cluster.bases, &token, 500).await;
    let (ids, total) = wait_for_ids(&server, 500).await;
    assert_eq!((ids.len(), total), (500, 500), "each event delivered once");
    // Every delivery is recorded as delivered (each a moment after its receiver answered), and no
    // (event, subscription) pair has two delivery rows.
    use agentry_domain::webhooks::DeliveryStatus;
    let store = agentry_store::WebhookStore::new(cluster.database().await);
    for _ in 0..200 {
        if store.count_deliveries(DeliveryStatus::Delivered).await.unwrap() == 500 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(store.count_deliveries(DeliveryStatus::Delivered).await.unwrap(), 500);
    assert_eq!(store.count_deliveries(DeliveryStatus::Pending).await.unwrap(), 0);
    let pairs = store.delivery_pairs().await.unwrap();
    let distinct: HashSet<&(String, String)> = pairs.iter().collect();
    assert_eq!((pairs.len(), distinct.len()), (500, 500), "one delivery row per (event, subscription)");
}

/// 40 events to a receiver that takes 2 s to answer, on instances that attempt four
/// deliveries at once each: when twelve attempts are in flight, each instance holds four. One
/// instance is killed outright; the other two take its four over once its heartbeat is stale
/// (10 s), well before the 60 s leases end. Every
/// event arrives, and the only ones sent twice are the four the kill interrupted (at-least-once,
/// the same `webhook-id` both times).
#[tokio::test]
async fn a_killed_instances_deliveries_are_taken_over_within_seconds() {
    const EVENTS: usize = 40;
    let mut env = WEBHOOK_ENV.to_vec();
    env.extend([
        ("AGENTRY_WEBHOOK_CONCURRENCY", "4"),
        ("AGENTRY_WEBHOOK_TIMEOUT_SECS", "4"),
        ("AGENTRY_JOB_LEASE_SECS", "60"),
    ]);
    let Some(mut cluster) = Cluster::start(&env).await else { return };
    let slow = Duration::from_secs(2);
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(204).set_delay(slow)).mount(&server).await;
    let token = subscribed_tenant(&cluster, &server, "agent.created").await;
    create_agents(&cluster.bases, &token, EVENTS).await;
    // Twelve attempts in flight at once: four on each instance.
    wait_until_in_flight(&server, None, 12, slow).await;
    let killed = Instant::now();
    cluster.children[2].kill().await.expect("SIGKILL");

    let deadline = killed + Duration::from_secs(15);
    let (ids, total) = loop {
        let (ids, total) = received_ids(&server).await;
        if ids.len() == EVENTS && total >= EVENTS + 4 {
            break (ids, total);
        }
        assert!(Instant::now() < deadline, "{} of {EVENTS} events ({total} requests) within 15 s", ids.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("every event arrived {:?} after the kill", killed.elapsed());
    assert_eq!(
        (ids.len(), total),
        (EVENTS, EVENTS + 4),
        "the four interrupted attempts were sent again, and only they"
    );
    use agentry_domain::webhooks::DeliveryStatus;
    let store = agentry_store::WebhookStore::new(cluster.database().await);
    for _ in 0..100 {
        if store.count_deliveries(DeliveryStatus::Delivered).await.unwrap() == i64::try_from(EVENTS).unwrap()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        store.count_deliveries(DeliveryStatus::Delivered).await.unwrap(),
        i64::try_from(EVENTS).unwrap()
    );
    assert_eq!(store.delivery_pairs().await.unwrap().len(), EVENTS, "one delivery row per event");
}

// ---------------------------------------------------------------------------------------------
// 4 and 5. Workflow executions.

/// `http_request` steps may call loopback receivers over http; instances look for each other's
/// executions often; a lease ends only when its holder is gone, not because two busy cores ran
/// a step late.
const WORKFLOW_ENV: &[(&str, &str)] = &[
    ("AGENTRY_WEBHOOK_ALLOW_INSECURE", "true"),
    ("AGENTRY_WEBHOOK_ALLOW_PRIVATE", "true"),
    ("AGENTRY_WORKFLOW_POLL_INTERVAL_MS", "100"),
    ("AGENTRY_JOB_LEASE_SECS", "30"),
];

/// A receiver answering `POST` on each of `routes` after its delay.
async fn receiver(routes: &[(&str, Duration)]) -> MockServer {
    let server = MockServer::start().await;
    for (route, delay) in routes {
        Mock::given(method("POST"))
            .and(path(*route))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"route": route})).set_delay(*delay))
            .mount(&server)
            .await;
    }
    server
}

/// A workflow of one `http_request` step per route, each posting the execution's `input.run`,
/// so the receiver can tell which execution sent what.
async fn workflow(
    cluster: &Cluster,
    token: &str,
    server: &MockServer,
    routes: &[&str],
    timeout_secs: u64,
) -> String {
    let steps: Vec<Value> = routes
        .iter()
        .map(|route| {
            json!({"id": route.trim_start_matches('/'), "type": "http_request", "method": "POST",
                   "url": format!("{}{route}", server.uri()), "body": "{{ input.run }}", "timeout_seconds": timeout_secs})
        })
        .collect();
    let created: Value = reqwest::Client::new()
        .post(format!("{}/api/v1/workflows", cluster.base(0)))
        .bearer_auth(token)
        .json(&json!({"name": "Scale out", "steps": steps}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    created["id"].as_str().unwrap().to_owned()
}

/// Starts `n` executions of `workflow` at once over the three instances, execution `i` with
/// input `{"run": "run-i"}`; returns their ids.
async fn execute(cluster: &Cluster, token: &str, workflow: &str, n: usize) -> Vec<String> {
    let client = reqwest::Client::new();
    let responses = spread(cluster, n, |i, base| {
        client
            .post(format!("{base}/api/v1/workflows/{workflow}/execute"))
            .bearer_auth(token)
            .json(&json!({"input": {"run": format!("run-{i}")}}))
    })
    .await;
    responses
        .into_iter()
        .map(|(status, _, body)| {
            assert_eq!(status, 202, "{body}");
            body["execution_id"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// Waits until `n` executions have completed, at most `limit`; fails at once on a failed one.
async fn completed(store: &agentry_store::ExecutionStore, n: i64, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        assert_eq!(store.count(ExecutionStatus::Failed).await.unwrap(), 0, "an execution failed");
        let done = store.count(ExecutionStatus::Completed).await.unwrap();
        if done == n {
            return;
        }
        assert!(Instant::now() < deadline, "{done} of {n} executions completed within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many requests the receiver got per (route, run).
async fn requests_per_run(server: &MockServer) -> HashMap<(String, String), usize> {
    let mut counts = HashMap::new();
    for r in server.received_requests().await.unwrap() {
        let run = String::from_utf8(r.body.clone()).unwrap();
        *counts.entry((r.url.path().to_owned(), run)).or_insert(0) += 1;
    }
    counts
}

#[tokio::test]
async fn three_instances_complete_100_executions_running_each_step_once() {
    let Some(cluster) = Cluster::start(WORKFLOW_ENV).await else { return };
    let server = receiver(&[("/first", Duration::ZERO), ("/second", Duration::ZERO)]).await;
    let token = unlimited_tenant(cluster.base(0), &cluster.database_url, "ada@example.com").await;
    let workflow = workflow(&cluster, &token, &server, &["/first", "/second"], 10).await;
    let ids = execute(&cluster, &token, &workflow, 100).await;
    let store = agentry_store::ExecutionStore::new(cluster.database().await);
    completed(&store, 100, Duration::from_secs(60)).await;

    let counts = requests_per_run(&server).await;
    for route in ["/first", "/second"] {
        for i in 0..100 {
            let n = counts.get(&(route.to_owned(), format!("run-{i}"))).copied().unwrap_or(0);
            assert_eq!(n, 1, "{route} of run-{i} was requested {n} times");
        }
    }
    assert_eq!(counts.len(), 200, "nothing else was requested: {counts:?}");
    // Every instance shows every execution as completed, each step once.
    let client = reqwest::Client::new();
    let shown = spread(&cluster, ids.len(), |i, base| {
        client.get(format!("{base}/api/v1/executions/{}", ids[i])).bearer_auth(&token)
    })
    .await;
    for (status, _, body) in shown {
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["status"], "completed", "{body}");
        let steps = body["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 2, "{body}");
        assert!(steps.iter().all(|s| s["status"] == "completed"), "{body}");
    }
}

/// Six executions of a workflow whose middle step takes 2 s, on instances that run two at once
/// each: when six middle steps are in flight, each instance holds two. One instance is killed
/// outright; the other two take its executions over once its heartbeat is stale (10 s), long
/// before their leases end (a step's lease is its timeout and the 60 s job lease), and all six
/// complete within 15 s of the kill. A step finished before the kill never runs again; the interrupted ones run again
/// (at-least-once), and only those.
#[tokio::test]
async fn a_killed_instances_executions_are_taken_over_within_seconds() {
    const LEASE_SECS: u64 = 60;
    // A step's lease is its timeout and the job lease: a live step is never taken over.
    const STEP_TIMEOUT_SECS: u64 = 3;
    let lease = LEASE_SECS.to_string();
    let mut env = WORKFLOW_ENV.to_vec();
    env.extend([("AGENTRY_JOB_LEASE_SECS", lease.as_str()), ("AGENTRY_WORKFLOW_CONCURRENCY", "2")]);
    let Some(mut cluster) = Cluster::start(&env).await else { return };
    let slow = Duration::from_secs(2);
    let server = receiver(&[("/before", Duration::ZERO), ("/slow", slow), ("/after", Duration::ZERO)]).await;
    let token = unlimited_tenant(cluster.base(0), &cluster.database_url, "ada@example.com").await;
    let workflow =
        workflow(&cluster, &token, &server, &["/before", "/slow", "/after"], STEP_TIMEOUT_SECS).await;
    execute(&cluster, &token, &workflow, 6).await;

    // Six slow steps in flight at once: two on each instance.
    wait_until_in_flight(&server, Some("/slow"), 6, slow).await;
    let killed = Instant::now();
    cluster.children[2].kill().await.expect("SIGKILL");

    let store = agentry_store::ExecutionStore::new(cluster.database().await);
    completed(&store, 6, Duration::from_secs(15)).await;
    eprintln!("all six completed {:?} after the kill", killed.elapsed());

    let counts = requests_per_run(&server).await;
    let mut again = 0;
    for i in 0..6 {
        let of = |route: &str| counts.get(&(route.to_owned(), format!("run-{i}"))).copied().unwrap_or(0);
        assert_eq!((of("/before"), of("/after")), (1, 1), "run-{i}: {counts:?}");
        assert!((1..=2).contains(&of("/slow")), "run-{i}: {counts:?}");
        again += usize::from(of("/slow") == 2);
    }
    assert_eq!(again, 2, "the killed instance's two interrupted steps ran again, and only they: {counts:?}");
}

// ---------------------------------------------------------------------------------------------
// 6. Memory.

#[tokio::test]
async fn memory_written_through_one_instance_is_found_through_the_others_at_once() {
    if !model_available() {
        return;
    }
    let model = model_dir().display().to_string();
    let Some(cluster) =
        Cluster::start(&[("AGENTRY_EMBEDDING_PROVIDER", "minilm"), ("AGENTRY_EMBEDDING_MODEL_DIR", &model)])
            .await
    else {
        return;
    };
    let client = reqwest::Client::new();
    let token = sign_up(cluster.base(0), "ada@example.com").await;
    let agent: Value = client
        .post(format!("{}/api/v1/agents", cluster.base(0)))
        .bearer_auth(&token)
        .json(&json!({"name": "Helper", "memory_types": ["semantic"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let agent = agent["id"].as_str().unwrap();
    // Each fact with a question that shares none of its content words.
    let facts = [
        ("The customer's favourite colour is teal.", "which shade does the client prefer?"),
        ("Invoices are sent on the first business day of each month.", "when do we bill people?"),
        ("Maria's flight to Lisbon departs on 14 March at 09:40.", "what time does her plane leave?"),
    ];
    for (i, (fact, question)) in facts.iter().enumerate() {
        let r = client
            .post(format!("{}/api/v1/memory", cluster.base(i)))
            .bearer_auth(&token)
            .json(&json!({"agent_id": agent, "content": fact}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        // No sleep: the write is the database's the moment it was answered.
        for other in [i + 1, i + 2] {
            let found: Value = client
                .post(format!("{}/api/v1/memory/search", cluster.base(other)))
                .bearer_auth(&token)
                .json(&json!({"agent_id": agent, "query": question, "top_k": 1}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(found["results"][0]["content"], *fact, "through instance {}: {found}", other % 3);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 7. Schedules.

/// A schedule of every minute on three instances of one database, for three ticks, one
/// instance SIGKILLed after the first: each tick starts exactly one execution, and none is lost
/// or missed. Ticks are wall-clock minutes, so this takes up to three minutes.
#[tokio::test]
async fn three_ticks_on_three_instances_start_three_executions_though_one_is_killed() {
    let Some(mut cluster) = Cluster::start(&[("AGENTRY_SCHEDULE_POLL_INTERVAL_MS", "200")]).await else {
        return;
    };
    let client = reqwest::Client::new();
    let token = unlimited_tenant(cluster.base(0), &cluster.database_url, "ada@example.com").await;
    let workflow: Value = client
        .post(format!("{}/api/v1/workflows", cluster.base(0)))
        .bearer_auth(&token)
        .json(&json!({"name": "Tick", "steps": [{"id": "t", "type": "transform", "output": "{{ trigger.tick }}"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let workflow = workflow["id"].as_str().unwrap();
    let r = client
        .post(format!("{}/api/v1/workflows/{workflow}/schedules", cluster.base(1)))
        .bearer_auth(&token)
        .json(&json!({"cron": "* * * * *"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let listing = format!("{}/api/v1/workflows/{workflow}/executions?per_page=100", cluster.base(1));
    let executions = || async {
        let page: Value =
            client.get(&listing).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
        page["executions"].as_array().unwrap().clone()
    };
    let started = Instant::now();
    let mut killed = false;
    let ran = loop {
        let ran = executions().await;
        if !killed && !ran.is_empty() {
            cluster.children[0].kill().await.expect("SIGKILL");
            killed = true;
        }
        if ran.len() >= 3 {
            break ran;
        }
        assert!(started.elapsed() < Duration::from_secs(200), "three ticks did not run in time: {ran:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(ran.iter().all(|e| e["origin"] == "schedule"), "{ran:?}");
    let schedule: Value = client
        .get(format!("{}/api/v1/workflows/{workflow}/schedules", cluster.base(2)))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let schedule = &schedule["items"][0];
    assert_eq!(schedule["missed_count"], 0, "no tick lost to the kill: {schedule}");
    // The three executions are three ticks, each once.
    let ticks: std::collections::BTreeSet<String> =
        ran.iter().map(|e| e["trigger"]["tick"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ticks.len(), ran.len(), "one execution per tick: {ran:?}");
    assert_eq!(ran.len(), 3, "{ran:?}");
}

//! Background work is durable: the service is killed (SIGKILL) while a mail waits for its
//! server, while webhook deliveries are in flight, while an execution's step runs or while it
//! waits, and everything goes out after a restart.
//! Several instances on one database: `scale_out.rs`.

use std::time::Duration;

use agentry_mailer::test_support::SmtpSink;
use serde_json::json;
use tokio::process::Child;

use crate::processes::{
    WEBHOOK_ENV, create_agents, free_port, received_ids, start_with, unlimited_tenant, wait_for_ids,
};

/// The `agentry` binary serving on `port`, with `smtp_url` for mail.
async fn start(port: u16, dir: &std::path::Path, database_url: &str, smtp_url: &str) -> Child {
    start_with(port, dir, database_url, &[("AGENTRY_SMTP_URL", smtp_url)], std::process::Stdio::inherit())
        .await
}

/// Waits until the mail job has been attempted (at most 20 s).
async fn attempted_once(database_url: &str) {
    let db =
        agentry_store::Database::connect(&agentry_store::DatabaseSettings::new(database_url)).await.unwrap();
    let jobs = agentry_store::JobStore::new(db);
    for _ in 0..400 {
        if jobs.attempts().await.unwrap() >= 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the mail job was never attempted");
}

async fn a_mail_request_survives_a_kill(database_url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // Nothing listens here: every attempt fails and is retried.
    let no_mail_server = format!("smtp://127.0.0.1:{}", free_port());
    let mut first = start(port, dir.path(), database_url, &no_mail_server).await;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{base}/api/v1/auth/register"))
        .json(&json!({"email": "ada@example.com", "password": "correct horse battery", "full_name": "Ada"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = client
        .post(format!("{base}/api/v1/auth/forgot-password"))
        .json(&json!({"email": "ada@example.com"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    // Let it fail at least once against the missing mail server, then kill it outright.
    attempted_once(database_url).await;
    first.kill().await.expect("SIGKILL");
    first.wait().await.unwrap();

    let sink = SmtpSink::start().await;
    let _second = start(port, dir.path(), database_url, &sink.url()).await;
    let mails = sink.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(mails.len(), 1, "the e-mail went out after the restart");
    assert_eq!(mails[0].to, ["ada@example.com"]);
    assert!(mails[0].data.contains("reset-password?token="));
}

#[tokio::test]
async fn a_mail_request_survives_a_sigkill_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("agentry.db").display());
    a_mail_request_survives_a_kill(&url).await;
}

#[tokio::test]
async fn a_mail_request_survives_a_sigkill_on_postgresql() {
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    a_mail_request_survives_a_kill(&url).await;
}

async fn deliveries_survive_a_kill(database_url: &str) {
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let log = dir.path().join("first.log");
    let mut env = WEBHOOK_ENV.to_vec();
    // Leases as long as in production: only the heartbeats can make the take-over quick.
    env.push(("AGENTRY_JOB_LEASE_SECS", "60"));
    let restart_env = env.clone();
    env.push(("AGENTRY_LOG", "info,agentry=debug"));
    let mut first =
        start_with(port, dir.path(), database_url, &env, std::fs::File::create(&log).unwrap()).await;
    // A slow receiver, so that the kill finds attempts in flight.
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_millis(150)))
        .mount(&server)
        .await;
    let token = unlimited_tenant(&base, database_url, "ada@example.com").await;
    let client = reqwest::Client::new();
    let hook: serde_json::Value = client
        .post(format!("{base}/api/v1/webhooks"))
        .bearer_auth(&token)
        .json(&json!({"url": format!("{}/hook", server.uri()), "events": ["agent.created"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let secret = hook["signing_secret"].as_str().unwrap().to_owned();
    create_agents(std::slice::from_ref(&base), &token, 200).await;
    // Kill it outright while deliveries are going out.
    wait_for_ids(&server, 20).await;
    first.kill().await.expect("SIGKILL");
    first.wait().await.unwrap();
    let (before, _) = received_ids(&server).await;
    assert!(before.len() < 200, "the kill came too late to prove anything");

    let _second =
        start_with(port, dir.path(), database_url, &restart_env, std::process::Stdio::inherit()).await;
    let restarted = std::time::Instant::now();
    let (ids, total) = wait_for_ids(&server, 200).await;
    assert_eq!(ids.len(), 200, "every event arrived");
    // SQLite frees every lease at start; on PostgreSQL the killed instance's heartbeat goes
    // stale after AGENTRY_INSTANCE_TIMEOUT_SECS (10 s). Either way, not the 60 s of a lease.
    eprintln!("resumed: all done {:?} after the restart", restarted.elapsed());
    assert!(restarted.elapsed() < Duration::from_secs(15), "resumed after {:?}", restarted.elapsed());
    // Duplicates are the attempts the kill interrupted (at most one batch), each with the event
    // id of the first.
    assert!(total - ids.len() <= 32, "{} duplicates", total - ids.len());
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("listening"), "the log was captured");
    assert!(!logged.contains(&secret), "the signing secret must never be logged");
}

#[tokio::test]
async fn webhook_deliveries_survive_a_sigkill_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("agentry.db").display());
    deliveries_survive_a_kill(&url).await;
}

#[tokio::test]
async fn webhook_deliveries_survive_a_sigkill_on_postgresql() {
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    deliveries_survive_a_kill(&url).await;
}

/// A four-step workflow (HTTP to `/first`, a slow HTTP step, a transform, HTTP to `/last`) is
/// executed, the service killed while the slow step runs, and started again: the execution
/// completes, and the steps that had finished never run again.
async fn an_execution_survives_a_kill(database_url: &str) {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    const ENV: &[(&str, &str)] = &[
        ("AGENTRY_WEBHOOK_ALLOW_INSECURE", "true"),
        ("AGENTRY_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("AGENTRY_WORKFLOW_POLL_INTERVAL_MS", "100"),
        // Leases as long as in production: only the heartbeats can make the take-over quick.
        ("AGENTRY_JOB_LEASE_SECS", "60"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut first = start_with(port, dir.path(), database_url, ENV, std::process::Stdio::inherit()).await;
    let server = MockServer::start().await;
    for (route, delay) in [("/first", 0), ("/slow", 1500), ("/last", 0)] {
        Mock::given(method("POST"))
            .and(path(route))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"route": route}))
                    .set_delay(Duration::from_millis(delay)),
            )
            .mount(&server)
            .await;
    }
    let token = unlimited_tenant(&base, database_url, "ada@example.com").await;
    let client = reqwest::Client::new();
    let url = |p: &str| format!("{}{p}", server.uri());
    let workflow: serde_json::Value = client
        .post(format!("{base}/api/v1/workflows"))
        .bearer_auth(&token)
        .json(&json!({"name": "Survives", "steps": [
            {"id": "first", "type": "http_request", "method": "POST", "url": url("/first"), "body": "{{ input.run }}"},
            {"id": "slow", "type": "http_request", "method": "POST", "url": url("/slow"), "body": "x", "timeout_seconds": 5},
            {"id": "shape", "type": "transform", "output": {"first": "{{ steps.first.output.body.route }}", "slow": "{{ steps.slow.output.body.route }}"}},
            {"id": "last", "type": "http_request", "method": "POST", "url": url("/last"), "body": "{{ steps.shape.output }}"}
        ]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let started: serde_json::Value = client
        .post(format!("{base}/api/v1/workflows/{}/execute", workflow["id"].as_str().unwrap()))
        .bearer_auth(&token)
        .json(&json!({"input": {"run": "one"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = started["execution_id"].as_str().unwrap().to_owned();
    let hits = |requests: &[wiremock::Request], route: &str| {
        requests.iter().filter(|r| r.url.path() == route).count()
    };
    // Kill it outright while the slow step is in flight.
    for _ in 0..200 {
        if hits(&server.received_requests().await.unwrap(), "/slow") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill().await.expect("SIGKILL");
    first.wait().await.unwrap();
    let before = server.received_requests().await.unwrap();
    assert_eq!((hits(&before, "/first"), hits(&before, "/slow"), hits(&before, "/last")), (1, 1, 0));

    let _second = start_with(port, dir.path(), database_url, ENV, std::process::Stdio::inherit()).await;
    let restarted = std::time::Instant::now();
    let mut shown = serde_json::Value::Null;
    for _ in 0..300 {
        shown = client
            .get(format!("{base}/api/v1/executions/{id}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if shown["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(shown["status"], "completed", "{shown}");
    // Taken over within seconds of the restart, not when the 65 s lease of the slow step ends.
    eprintln!("resumed: all done {:?} after the restart", restarted.elapsed());
    assert!(restarted.elapsed() < Duration::from_secs(15), "resumed after {:?}", restarted.elapsed());
    assert!(shown["steps"].as_array().unwrap().iter().all(|s| s["status"] == "completed"), "{shown}");
    assert_eq!(shown["steps"][2]["output"], json!({"first": "/first", "slow": "/slow"}));
    let after = server.received_requests().await.unwrap();
    assert_eq!(hits(&after, "/first"), 1, "a finished step never runs again");
    assert_eq!(hits(&after, "/last"), 1);
    // The step the kill interrupted ran again (at least once); nothing else did.
    assert_eq!(hits(&after, "/slow"), 2);
    let body: serde_json::Value =
        serde_json::from_slice(&after.iter().find(|r| r.url.path() == "/last").unwrap().body).unwrap();
    assert_eq!(body, json!({"first": "/first", "slow": "/slow"}));
}

#[tokio::test]
async fn an_execution_survives_a_sigkill_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("agentry.db").display());
    an_execution_survives_a_kill(&url).await;
}

#[tokio::test]
async fn an_execution_survives_a_sigkill_on_postgresql() {
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    an_execution_survives_a_kill(&url).await;
}

/// A workflow that waits 2 s and then calls `/after` is executed; while it waits (holding no
/// lease) the service is killed, and started again: the wait ends on time and the call is made
/// once.
async fn a_wait_survives_a_kill(database_url: &str) {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    const ENV: &[(&str, &str)] = &[
        ("AGENTRY_WEBHOOK_ALLOW_INSECURE", "true"),
        ("AGENTRY_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("AGENTRY_WORKFLOW_POLL_INTERVAL_MS", "100"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut first = start_with(port, dir.path(), database_url, ENV, std::process::Stdio::inherit()).await;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/after"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let token = unlimited_tenant(&base, database_url, "ada@example.com").await;
    let client = reqwest::Client::new();
    let workflow: serde_json::Value = client
        .post(format!("{base}/api/v1/workflows"))
        .bearer_auth(&token)
        .json(&json!({"name": "Waits", "steps": [
            {"id": "pause", "type": "wait", "seconds": 2},
            {"id": "after", "type": "http_request", "method": "POST", "url": format!("{}/after", server.uri()), "body": "x"}
        ]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let started: serde_json::Value = client
        .post(format!("{base}/api/v1/workflows/{}/execute", workflow["id"].as_str().unwrap()))
        .bearer_auth(&token)
        .json(&json!({"input": {}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = started["execution_id"].as_str().unwrap().to_owned();
    let show = || async {
        client
            .get(format!("{base}/api/v1/executions/{id}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .unwrap()
    };
    let mut shown = serde_json::Value::Null;
    for _ in 0..200 {
        shown = show().await;
        if shown["status"] == "waiting" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(shown["status"], "waiting", "{shown}");
    let db =
        agentry_store::Database::connect(&agentry_store::DatabaseSettings::new(database_url)).await.unwrap();
    assert_eq!(
        agentry_store::test_support::execution_lease(&db, &id).await.unwrap(),
        None,
        "a wait holds no lease"
    );
    let until =
        chrono::DateTime::parse_from_rfc3339(shown["steps"][0]["next_run_at"].as_str().unwrap()).unwrap();
    first.kill().await.expect("SIGKILL");
    first.wait().await.unwrap();

    let _second = start_with(port, dir.path(), database_url, ENV, std::process::Stdio::inherit()).await;
    for _ in 0..300 {
        shown = show().await;
        if shown["status"] != "waiting" && shown["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(shown["status"], "completed", "{shown}");
    let ended =
        chrono::DateTime::parse_from_rfc3339(shown["steps"][0]["finished_at"].as_str().unwrap()).unwrap();
    assert!(ended >= until, "the wait ended at {ended}, not before {until}");
    eprintln!("the wait ended {} ms after its time", (ended - until).num_milliseconds());
    assert_eq!(server.received_requests().await.unwrap().len(), 1, "the step after the wait ran once");
}

#[tokio::test]
async fn a_wait_survives_a_sigkill_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("agentry.db").display());
    a_wait_survives_a_kill(&url).await;
}

#[tokio::test]
async fn a_wait_survives_a_sigkill_on_postgresql() {
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    a_wait_survives_a_kill(&url).await;
}

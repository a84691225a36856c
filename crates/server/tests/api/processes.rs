//! The `agentry` binary as a child process, for tests that kill it or run several of it on one
//! database, and the small HTTP chores such tests share.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::json;
use tokio::process::{Child, Command};

use crate::helpers::JWT_SECRET;

/// A port nothing listens on yet, below the range the system hands out for port 0 (from
/// 32768 on Linux): a listener another test opens on port 0 cannot take it between this check
/// and the child's own bind, as it could take a port the system handed out here.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const PORTS: u32 = 12_000;
    // Each test process starts at a place of its own; each call in it takes the next port.
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id() % PORTS;
    loop {
        let port = FIRST + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % PORTS;
        let port = u16::try_from(port).unwrap_or(u16::MAX);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// The `agentry` binary serving on `port`, with `env` on top of the test settings and its log
/// (standard output) on `log`. Killed when dropped, so no process outlives a failed test.
pub async fn start_with(
    port: u16,
    dir: &std::path::Path,
    database_url: &str,
    env: &[(&str, &str)],
    log: impl Into<std::process::Stdio>,
) -> Child {
    start_command(Command::new(env!("CARGO_BIN_EXE_agentry")), port, dir, database_url, env, log).await
}

/// [`start_with`] under an address-space limit of `kib` KiB (`ulimit -v`): an allocation past it
/// fails, and the process with it, as on a machine out of memory.
pub async fn start_limited(
    kib: u64,
    port: u16,
    dir: &std::path::Path,
    database_url: &str,
    env: &[(&str, &str)],
    log: impl Into<std::process::Stdio>,
) -> Child {
    let mut command = Command::new("/bin/sh");
    command.args(["-c", &format!("ulimit -v {kib} && exec \"$0\""), env!("CARGO_BIN_EXE_agentry")]);
    start_command(command, port, dir, database_url, env, log).await
}

async fn start_command(
    mut command: Command,
    port: u16,
    dir: &std::path::Path,
    database_url: &str,
    env: &[(&str, &str)],
    log: impl Into<std::process::Stdio>,
) -> Child {
    crate::helpers::install_crypto();
    let mut child = command
        .current_dir(dir)
        .env_clear()
        .env("AGENTRY_BIND", format!("127.0.0.1:{port}"))
        .env("AGENTRY_DATABASE_URL", database_url)
        .env("AGENTRY_AUTO_MIGRATE", "true")
        .env("AGENTRY_DATA_DIR", dir.join("data"))
        .env("AGENTRY_JWT_SECRET", JWT_SECRET)
        .env("AGENTRY_SMTP_TIMEOUT_SECS", "2")
        .env("AGENTRY_MAIL_RETRY_FIRST_DELAY_SECS", "1")
        .env("AGENTRY_JOB_LEASE_SECS", "2")
        .env("AGENTRY_JOB_POLL_INTERVAL_MS", "100")
        .env("AGENTRY_LOG", "warn")
        .envs(env.iter().copied())
        .stdout(log)
        .kill_on_drop(true)
        .spawn()
        .expect("the agentry binary starts");
    let client = reqwest::Client::new();
    for _ in 0..200 {
        if client.get(format!("http://127.0.0.1:{port}/healthz")).send().await.is_ok() {
            return child;
        }
        // A process that refused its configuration has exited: say so now, not after the wait.
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the service on port {port} exited at start ({status}); its log is above");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the service did not come up on port {port}");
}

/// Registers `email` on the service at `base` and signs in: the access token. Neither request
/// counts against the tenant's plan limit.
pub async fn sign_up(base: &str, email: &str) -> String {
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{base}/api/v1/auth/register"))
        .json(&json!({"email": email, "password": "correct horse battery", "full_name": "Ada"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = client
        .post(format!("{base}/api/v1/auth/login"))
        .form(&[("username", email), ("password", "correct horse battery")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json::<serde_json::Value>().await.unwrap()["access_token"].as_str().unwrap().to_owned()
}

/// The caller's first tenant id.
pub async fn tenant_of(base: &str, token: &str) -> String {
    let me: serde_json::Value = reqwest::Client::new()
        .get(format!("{base}/api/v1/auth/me"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    me["tenants"][0]["id"].as_str().unwrap().to_owned()
}

/// Registers a tenant on the service at `base`, lifts its plan's limits (the `tenant set-plan`
/// command, as an operator would), and returns its access token.
pub async fn unlimited_tenant(base: &str, database_url: &str, email: &str) -> String {
    let token = sign_up(base, email).await;
    let tenant = tenant_of(base, &token).await;
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_agentry"))
        .args(["tenant", "set-plan", &tenant, "enterprise"])
        .env("AGENTRY_DATABASE_URL", database_url)
        .env("AGENTRY_LOG", "warn")
        .status()
        .unwrap();
    assert!(status.success());
    token
}

/// Creates `n` agents (one `agent.created` event each), spread over `bases`.
pub async fn create_agents(bases: &[String], token: &str, n: usize) {
    let client = reqwest::Client::new();
    let requests = (0..n).map(|i| {
        let (client, url) = (client.clone(), format!("{}/api/v1/agents", bases[i % bases.len()]));
        async move {
            let r = client
                .post(url)
                .bearer_auth(token)
                .json(&json!({"name": format!("agent {i}")}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201);
        }
    });
    futures_util::stream::iter(requests).buffer_unordered(16).collect::<Vec<()>>().await;
}

/// The distinct `webhook-id`s a receiver got, and how many requests in all.
pub async fn received_ids(server: &wiremock::MockServer) -> (HashSet<String>, usize) {
    let requests = server.received_requests().await.unwrap_or_default();
    let ids = requests
        .iter()
        .filter_map(|r| r.headers.get("webhook-id").and_then(|v| v.to_str().ok()).map(str::to_owned))
        .collect();
    (ids, requests.len())
}

/// Waits (at most 30 s) until a receiver has got `n` distinct events.
pub async fn wait_for_ids(server: &wiremock::MockServer, n: usize) -> (HashSet<String>, usize) {
    for _ in 0..600 {
        let (ids, total) = received_ids(server).await;
        if ids.len() >= n {
            return (ids, total);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (ids, total) = received_ids(server).await;
    panic!("the receiver got {} distinct events ({total} requests), not {n}", ids.len());
}

/// Webhooks to loopback receivers, attempts of at most 2 s, leases of 7 s.
pub const WEBHOOK_ENV: &[(&str, &str)] = &[
    ("AGENTRY_WEBHOOK_ALLOW_INSECURE", "true"),
    ("AGENTRY_WEBHOOK_ALLOW_PRIVATE", "true"),
    ("AGENTRY_WEBHOOK_TIMEOUT_SECS", "2"),
    ("AGENTRY_WEBHOOK_POLL_INTERVAL_MS", "50"),
    ("AGENTRY_WEBHOOK_RETRY_SCHEDULE", "0,1,1,1,1"),
];

//! Mail requests are durable: the service is killed (SIGKILL) while a request waits for a mail
//! server, and the e-mail goes out after a restart.

use std::time::Duration;

use agentry_mailer::test_support::SmtpSink;
use serde_json::json;
use tokio::process::{Child, Command};

use crate::helpers::JWT_SECRET;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The `agentry` binary serving on `port`, with `smtp_url` for mail.
async fn start(port: u16, dir: &std::path::Path, database_url: &str, smtp_url: &str) -> Child {
    crate::helpers::install_crypto();
    let child = Command::new(env!("CARGO_BIN_EXE_agentry"))
        .current_dir(dir)
        .env_clear()
        .env("AGENTRY_BIND", format!("127.0.0.1:{port}"))
        .env("AGENTRY_DATABASE_URL", database_url)
        .env("AGENTRY_AUTO_MIGRATE", "true")
        .env("AGENTRY_DATA_DIR", dir.join("data"))
        .env("AGENTRY_JWT_SECRET", JWT_SECRET)
        .env("AGENTRY_SMTP_URL", smtp_url)
        .env("AGENTRY_SMTP_TIMEOUT_SECS", "2")
        .env("AGENTRY_MAIL_RETRY_FIRST_DELAY_SECS", "1")
        .env("AGENTRY_JOB_LEASE_SECS", "2")
        .env("AGENTRY_JOB_POLL_INTERVAL_MS", "100")
        .env("AGENTRY_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .expect("the agentry binary starts");
    let client = reqwest::Client::new();
    for _ in 0..200 {
        if client.get(format!("http://127.0.0.1:{port}/healthz")).send().await.is_ok() {
            return child;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the service did not come up on port {port}");
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
    tokio::time::sleep(Duration::from_millis(1500)).await;
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

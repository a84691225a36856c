//! The per-address mail budget (3 e-mails of a kind per hour) holds across instances: two
//! instances on one PostgreSQL database, each taking password-reset requests for the same
//! address at once and sending the mail from its own worker, send 3 between them, never 4.

use agentry_mailer::test_support::SmtpSink;
use secrecy::SecretString;
use serde_json::json;

use crate::helpers::{start_with, test_config};

#[tokio::test]
async fn two_instances_send_no_more_than_the_budget_between_them() {
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    let sink = SmtpSink::start().await;
    let configure = |dir: &tempfile::TempDir| {
        let mut c = test_config(dir);
        c.database_url = url.clone();
        c.auto_migrate = Some(true);
        c.smtp_url = Some(SecretString::from(sink.url()));
        c.auth_rate_per_minute = 1_000;
        c
    };
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start_with(configure(&dir_a), dir_a, None).await;
    let b = start_with(configure(&dir_b), dir_b, None).await;
    // Several addresses, each a trial of its own: six requests at once, three to each instance.
    for trial in 0..4 {
        let email = format!("budget{trial}@example.com");
        assert_eq!(a.register(&email, None).await.status(), 201);
        let body = json!({"email": email});
        let requests = (0..6).map(|i| {
            let app = if i % 2 == 0 { &a } else { &b };
            app.post_json("/api/v1/auth/forgot-password", &body)
        });
        for r in futures_util::future::join_all(requests).await {
            assert_eq!(r.status(), 202);
        }
    }
    // Both instances' workers take the mail jobs as they come; once both have drained, every
    // job has run (each ends with its SMTP conversation).
    futures_util::future::join(a.drain(), b.drain()).await;
    let mails = sink.received();
    for trial in 0..4 {
        let email = format!("budget{trial}@example.com");
        let sent = mails.iter().filter(|m| m.to == [email.as_str()]).count();
        assert_eq!(sent, 3, "{email}");
    }
}

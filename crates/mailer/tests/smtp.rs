//! The mailers against a real SMTP conversation and a real directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agentry_domain::identity::Email;
use agentry_domain::mail::{EmailMessage, Mailer};
use agentry_mailer::test_support::SmtpSink;
use agentry_mailer::{FileOutbox, SmtpMailer};

fn message() -> EmailMessage {
    EmailMessage {
        to: Email::parse("ada@example.com").unwrap(),
        subject: "Your Agentry sign-in link".into(),
        text: "Sign in: https://agentry.test/api/v1/auth/magic-link/abc".into(),
        html: "<p><a href=\"https://agentry.test/api/v1/auth/magic-link/abc\">Sign in</a></p>".into(),
    }
}

fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[tokio::test]
async fn a_message_crosses_a_real_smtp_conversation_with_both_parts() {
    install_crypto();
    let sink = SmtpSink::start().await;
    let mailer =
        SmtpMailer::new(&sink.url(), "Agentry <noreply@agentry.test>", Duration::from_secs(5)).unwrap();
    mailer.send(&message()).await.unwrap();
    let received = sink.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(received.len(), 1);
    let mail = &received[0];
    assert_eq!(mail.from, "noreply@agentry.test");
    assert_eq!(mail.to, ["ada@example.com"]);
    assert!(mail.data.contains("Subject: Your Agentry sign-in link"));
    assert!(mail.data.contains("multipart/alternative"));
    assert!(mail.data.contains("text/plain"));
    assert!(mail.data.contains("text/html"));
    assert!(mail.data.contains("magic-link/abc"));
    assert!(mail.auth.is_none());
}

#[tokio::test]
async fn credentials_in_the_url_are_used() {
    install_crypto();
    let sink = SmtpSink::start().await;
    let url = format!("smtp://mailer%40agentry:s%3Dcret@{}", sink.addr);
    let mailer = SmtpMailer::new(&url, "noreply@agentry.test", Duration::from_secs(5)).unwrap();
    mailer.send(&message()).await.unwrap();
    let received = sink.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(received[0].auth, Some(("mailer@agentry".to_owned(), "s=cret".to_owned())));
}

#[tokio::test]
async fn a_refused_connection_is_an_error() {
    install_crypto();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mailer =
        SmtpMailer::new(&format!("smtp://127.0.0.1:{port}"), "noreply@agentry.test", Duration::from_secs(2))
            .unwrap();
    assert!(mailer.send(&message()).await.is_err());
}

#[tokio::test]
async fn urls_are_checked() {
    install_crypto();
    for ok in
        ["smtp://localhost:2525", "smtp://u:p@mail.example.com:587?tls=starttls", "smtps://mail.example.com"]
    {
        assert!(SmtpMailer::new(ok, "a@b.co", Duration::from_secs(1)).is_ok(), "{ok}");
    }
    for bad in
        ["http://mail.example.com", "smtps://mail.example.com?tls=starttls", "smtp://x?tls=maybe", "nonsense"]
    {
        assert!(SmtpMailer::new(bad, "a@b.co", Duration::from_secs(1)).is_err(), "{bad}");
    }
    assert!(SmtpMailer::new("smtp://localhost", "not an address", Duration::from_secs(1)).is_err());
}

#[tokio::test]
async fn the_file_outbox_writes_one_eml_per_message() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = FileOutbox::new(dir.path().join("outbox"), "noreply@agentry.test").unwrap();
    outbox.send(&message()).await.unwrap();
    outbox.send(&message()).await.unwrap();
    let files: Vec<_> = std::fs::read_dir(outbox.dir()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 2);
    let content = std::fs::read_to_string(&files[0]).unwrap();
    assert!(files[0].extension().unwrap() == "eml");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&files[0]), 0o600, "a message is readable by this user only");
        assert_eq!(mode(outbox.dir()), 0o700);
    }
    assert!(content.contains("To: ada@example.com"));
    assert!(content.contains("magic-link/abc"));
}

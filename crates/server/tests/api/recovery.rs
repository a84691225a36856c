//! Password reset and magic links, over a real SMTP conversation.

use std::time::Duration;

use agentry_mailer::test_support::{ReceivedMail, SmtpSink};
use secrecy::SecretString;
use serde_json::json;

use crate::helpers::{TestApp, json_with_status, spawn_with};

async fn spawn_with_smtp() -> (TestApp, SmtpSink) {
    let sink = SmtpSink::start().await;
    let url = sink.url();
    let app = spawn_with(|c| {
        c.smtp_url = Some(SecretString::from(url));
        c.public_url = Some("https://agentry.test".into());
    })
    .await;
    (app, sink)
}

/// The token in the first link of `mail` that follows `marker`.
fn token_after(mail: &ReceivedMail, marker: &str) -> String {
    // Undo quoted-printable soft line breaks in case the encoder folded the link.
    let data = mail.data.replace("=\r\n", "").replace("=3D", "=");
    let start = data.find(marker).unwrap_or_else(|| panic!("no {marker} in mail:\n{data}")) + marker.len();
    data[start..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect()
}

#[tokio::test]
async fn a_reset_link_arrives_and_one_of_four_concurrent_resets_wins() {
    let (app, sink) = spawn_with_smtp().await;
    let session = app.signed_in("ada@example.com").await;

    let r = app.post_json("/api/v1/auth/forgot-password", &json!({"email": "ADA@example.com"})).await;
    let accepted = json_with_status(r, 202).await;
    let mails = sink.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(mails.len(), 1);
    assert_eq!(mails[0].to, ["ada@example.com"]);
    assert!(mails[0].data.contains("Subject: Reset your Agentry password"));
    let token = token_after(&mails[0], "https://agentry.test/reset-password?token=");
    assert_eq!(token.len(), 43, "a 256-bit token");

    // Unknown addresses get the very same answer, and no mail.
    let r = app.post_json("/api/v1/auth/forgot-password", &json!({"email": "nobody@example.com"})).await;
    assert_eq!(json_with_status(r, 202).await, accepted);

    let bodies: Vec<_> =
        (0..4).map(|i| json!({"token": token, "new_password": format!("new password {i}")})).collect();
    let resets = bodies.iter().map(|body| app.post_json("/api/v1/auth/reset-password", body));
    let responses = futures_util::future::join_all(resets).await;
    let mut winner = None;
    for (i, r) in responses.into_iter().enumerate() {
        match r.status().as_u16() {
            200 => {
                assert!(winner.is_none(), "two resets succeeded");
                winner = Some(i);
            }
            400 => assert_eq!(r.json::<serde_json::Value>().await.unwrap()["error"], "invalid_token"),
            other => panic!("unexpected status {other}"),
        }
    }
    let winner = winner.expect("one reset succeeded");

    assert_eq!(app.login("ada@example.com", "correct horse battery").await.status(), 401, "old password");
    assert_eq!(
        app.login("ada@example.com", &format!("new password {winner}")).await.status(),
        200,
        "new password"
    );
    let r = app.post_json("/api/v1/auth/refresh", &json!({"refresh_token": session["refresh_token"]})).await;
    assert_eq!(r.status(), 401, "sessions from before the reset are over");
    assert_eq!(sink.received().len(), 1, "nothing was sent to the unknown address");
}

#[tokio::test]
async fn a_magic_link_exchanges_once() {
    let (app, sink) = spawn_with_smtp().await;
    assert_eq!(app.register("ada@example.com", None).await.status(), 201);
    let r = app.post_json("/api/v1/auth/magic-link", &json!({"email": "ada@example.com"})).await;
    assert_eq!(r.status(), 202);
    let mails = sink.wait_for(1, Duration::from_secs(5)).await;
    assert!(mails[0].data.contains("Subject: Your Agentry sign-in link"));
    assert!(mails[0].data.contains("text/html"));
    let token = token_after(&mails[0], "https://agentry.test/api/v1/auth/magic-link/");

    let path = format!("/api/v1/auth/magic-link/{token}");
    let pair = json_with_status(app.client.get(app.url(&path)).send().await.unwrap(), 200).await;
    assert_eq!(pair["token_type"], "bearer");
    let me = json_with_status(
        app.get_with_token("/api/v1/auth/me", pair["access_token"].as_str().unwrap()).await,
        200,
    )
    .await;
    assert_eq!(me["email"], "ada@example.com");

    let again = json_with_status(app.client.get(app.url(&path)).send().await.unwrap(), 400).await;
    assert_eq!(again["error"], "invalid_token");
    let bogus =
        json_with_status(app.client.get(app.url("/v1/auth/magic-link/nope")).send().await.unwrap(), 400)
            .await;
    assert_eq!(bogus["error"], "invalid_token");
}

#[tokio::test]
async fn thirty_requests_for_one_address_send_a_handful_of_mails() {
    let (app, sink) = spawn_with_smtp().await;
    assert_eq!(app.register("ada@example.com", None).await.status(), 201);
    let mut accepted = 0;
    let mut limited = 0;
    for _ in 0..30 {
        let r = app.post_json("/api/v1/auth/forgot-password", &json!({"email": "ada@example.com"})).await;
        match r.status().as_u16() {
            202 => {
                assert_eq!(r.headers()["x-ratelimit-limit"], "20");
                accepted += 1;
            }
            429 => {
                assert!(r.headers().contains_key("retry-after"));
                assert!(r.headers().contains_key("x-ratelimit-reset"));
                assert_eq!(r.headers()["x-ratelimit-remaining"], "0");
                let body: serde_json::Value = r.json().await.unwrap();
                assert_eq!(body["error"], "rate_limit_exceeded");
                assert!(body["retry_after"].as_u64().unwrap() >= 1);
                limited += 1;
            }
            other => panic!("unexpected status {other}"),
        }
    }
    // The per-address budget (3 an hour) holds whatever the per-address-of-client budget lets in.
    app.jobs_done().await;
    let sent = sink.received().len();
    assert!((1..=3).contains(&sent), "{sent} e-mails sent");
    // 30 forgot-password calls from one client: its recovery budget (20) cut in. Registering
    // counted against the sign-in budget, which is another.
    assert_eq!(accepted, 20);
    assert_eq!(limited, 10);
}

#[tokio::test]
async fn reset_requests_are_validated() {
    let (app, _sink) = spawn_with_smtp().await;
    let r =
        app.post_json("/api/v1/auth/reset-password", &json!({"token": "x", "new_password": "short"})).await;
    assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "new_password");
    let r = app.post_json("/api/v1/auth/reset-password", &json!({"new_password": "long enough"})).await;
    assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "token");
    let r = app
        .post_json("/api/v1/auth/reset-password", &json!({"token": "unknown", "new_password": "long enough"}))
        .await;
    assert_eq!(json_with_status(r, 400).await["error"], "invalid_token");
    let r = app.post_json("/api/v1/auth/forgot-password", &json!({"email": "not an address"})).await;
    assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "email");
}

#[tokio::test]
async fn without_smtp_mail_lands_in_the_outbox() {
    let app = crate::helpers::spawn().await;
    assert_eq!(app.register("ada@example.com", None).await.status(), 201);
    let r = app.post_json("/api/v1/auth/magic-link", &json!({"email": "ada@example.com"})).await;
    assert_eq!(r.status(), 202);
    app.jobs_done().await;
    let outbox = app.data_dir().join("outbox");
    let files: Vec<_> = std::fs::read_dir(&outbox).unwrap().filter_map(Result::ok).collect();
    assert_eq!(files.len(), 1);
    let content = std::fs::read_to_string(files[0].path()).unwrap();
    assert!(content.contains("/api/v1/auth/magic-link/"));
}

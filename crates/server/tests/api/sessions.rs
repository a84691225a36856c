//! Sessions that really end: logout, reuse detection and password reset end the access tokens
//! of those sessions at their next request, and a reset spends every other link mailed before.

use std::time::Duration;

use agentry_mailer::test_support::{ReceivedMail, SmtpSink};
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::helpers::{TestApp, json_with_status, spawn, spawn_with};

async fn me(app: &TestApp, token: &Value) -> u16 {
    app.get_with_token("/api/v1/auth/me", token.as_str().unwrap()).await.status().as_u16()
}

#[tokio::test]
async fn after_logout_the_access_token_of_that_session_is_401_and_others_live_on() {
    let app = spawn().await;
    let one = app.signed_in("ada@example.com").await;
    let two: Value = app.login("ada@example.com", "correct horse battery").await.json().await.unwrap();
    let r = app
        .post_json_with_token(
            "/api/v1/auth/logout",
            one["access_token"].as_str().unwrap(),
            &json!({"refresh_token": one["refresh_token"]}),
        )
        .await;
    assert_eq!(r.status(), 204);
    assert_eq!(me(&app, &one["access_token"]).await, 401, "the ended session's access token");
    assert_eq!(me(&app, &two["access_token"]).await, 200, "another session of the same user");
}

#[tokio::test]
async fn reuse_of_a_refresh_token_ends_the_access_tokens_of_its_family() {
    let app = spawn().await;
    let first = app.signed_in("ada@example.com").await;
    let second: Value = json_with_status(
        app.post_json("/api/v1/auth/refresh", &json!({"refresh_token": first["refresh_token"]})).await,
        200,
    )
    .await;
    assert_eq!(me(&app, &second["access_token"]).await, 200);
    // The spent token again: reuse, the family is revoked.
    let r = app.post_json("/api/v1/auth/refresh", &json!({"refresh_token": first["refresh_token"]})).await;
    assert_eq!(r.status(), 401);
    assert_eq!(me(&app, &second["access_token"]).await, 401);
    assert_eq!(me(&app, &first["access_token"]).await, 401);
}

fn token_after(mail: &ReceivedMail, marker: &str) -> String {
    let data = mail.data.replace("=\r\n", "").replace("=3D", "=");
    let start = data.find(marker).unwrap_or_else(|| panic!("no {marker} in mail:\n{data}")) + marker.len();
    data[start..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect()
}

#[tokio::test]
async fn a_reset_ends_every_session_and_spends_every_other_link() {
    let sink = SmtpSink::start().await;
    let url = sink.url();
    let app = spawn_with(|c| {
        c.smtp_url = Some(SecretString::from(url));
        c.public_url = Some("https://agentry.test".into());
    })
    .await;
    let session = app.signed_in("ada@example.com").await;
    for path in ["/api/v1/auth/forgot-password", "/api/v1/auth/forgot-password", "/api/v1/auth/magic-link"] {
        assert_eq!(app.post_json(path, &json!({"email": "ada@example.com"})).await.status(), 202);
    }
    let mails = sink.wait_for(3, Duration::from_secs(10)).await;
    let resets: Vec<String> = mails
        .iter()
        .filter(|m| m.data.contains("reset-password?token="))
        .map(|m| token_after(m, "https://agentry.test/reset-password?token="))
        .collect();
    let magic = mails
        .iter()
        .find(|m| m.data.contains("magic-link?token="))
        .map(|m| token_after(m, "https://agentry.test/magic-link?token="))
        .expect("a magic link");
    assert_eq!(resets.len(), 2);

    let r = app
        .post_json(
            "/api/v1/auth/reset-password",
            &json!({"token": resets[0], "new_password": "a new passphrase"}),
        )
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(me(&app, &session["access_token"]).await, 401, "the access token of a session from before");

    let r = app
        .post_json(
            "/api/v1/auth/reset-password",
            &json!({"token": resets[1], "new_password": "yet another one"}),
        )
        .await;
    assert_eq!(json_with_status(r, 400).await["error"], "invalid_token", "the other reset link");
    let r = app.client.get(app.url(&format!("/api/v1/auth/magic-link/{magic}"))).send().await.unwrap();
    assert_eq!(json_with_status(r, 400).await["error"], "invalid_token", "the magic link mailed before");
    assert_eq!(app.login("ada@example.com", "a new passphrase").await.status(), 200);
}

#[tokio::test]
async fn the_pages_work_without_javascript() {
    let sink = SmtpSink::start().await;
    let url = sink.url();
    let app = spawn_with(|c| c.smtp_url = Some(SecretString::from(url))).await;
    assert_eq!(app.register("ada@example.com", None).await.status(), 201);
    assert_eq!(
        app.post_json("/api/v1/auth/forgot-password", &json!({"email": "ada@example.com"})).await.status(),
        202
    );
    let mail = sink.wait_for(1, Duration::from_secs(10)).await.remove(0);
    // AGENTRY_PUBLIC_URL unset: the link names the bound address, so it works as mailed.
    let link_base = format!("{}/reset-password?token=", app.base);
    let token = token_after(&mail, &link_base);

    let page = app.client.get(format!("{link_base}{token}")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let html = page.text().await.unwrap();
    assert!(html.contains("name=\"new_password\"") && html.contains(&token));

    // The form as a browser without JavaScript posts it.
    let differ = [
        ("token", token.as_str()),
        ("new_password", "a new passphrase"),
        ("confirm_password", "another one"),
    ];
    let r = app.client.post(app.url("/reset-password")).form(&differ).send().await.unwrap();
    assert_eq!(r.status(), 422);
    assert!(r.text().await.unwrap().contains("differ"));
    let same = [
        ("token", token.as_str()),
        ("new_password", "a new passphrase"),
        ("confirm_password", "a new passphrase"),
    ];
    let r = app.client.post(app.url("/reset-password")).form(&same).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("Password changed"));
    let again = app.client.post(app.url("/reset-password")).form(&same).send().await.unwrap();
    assert_eq!(again.status(), 400, "a link works once");
    assert_eq!(app.login("ada@example.com", "a new passphrase").await.status(), 200);

    // The magic link's page: a button, not an automatic sign-in (mail scanners open links).
    assert_eq!(
        app.post_json("/api/v1/auth/magic-link", &json!({"email": "ada@example.com"})).await.status(),
        202
    );
    let mail = sink.wait_for(2, Duration::from_secs(10)).await.remove(1);
    let token = token_after(&mail, &format!("{}/magic-link?token=", app.base));
    let page = app.client.get(app.url(&format!("/magic-link?token={token}"))).send().await.unwrap();
    let (csrf, cookie) = crate::helpers::page_form_token(&page);
    let page = page.text().await.unwrap();
    assert!(page.contains("<button"));
    let form = [("token", token.as_str()), ("csrf", csrf.as_str())];
    // Posted from another site (the attacker's own link, without the page's cookie, or from
    // another origin with it): refused, no session started, the link still unspent.
    for (cookie, origin) in [(None, None), (Some(cookie.as_str()), Some("https://evil.example"))] {
        let mut post = app.client.post(app.url("/magic-link")).form(&form);
        if let Some(cookie) = cookie {
            post = post.header("cookie", cookie);
        }
        if let Some(origin) = origin {
            post = post.header("origin", origin);
        }
        let r = post.send().await.unwrap();
        assert_eq!(r.status(), 403);
        assert!(r.headers().get("set-cookie").is_none(), "no session cookie");
    }
    let r = app
        .client
        .post(app.url("/magic-link"))
        .header("cookie", &cookie)
        .header("origin", app.base.as_str())
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let html = r.text().await.unwrap();
    let start = html.find("id=\"access_token\" readonly>").unwrap() + "id=\"access_token\" readonly>".len();
    let access = &html[start..start + html[start..].find('<').unwrap()];
    assert_eq!(me(&app, &json!(access)).await, 200, "the page signed in");
    let r =
        app.client.post(app.url("/magic-link")).header("cookie", &cookie).form(&form).send().await.unwrap();
    assert_eq!(r.status(), 400, "once");
    let r = app.client.get(app.url("/reset-password")).send().await.unwrap();
    assert_eq!(r.status(), 400, "a link without its token");
}

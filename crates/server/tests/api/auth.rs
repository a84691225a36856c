//! Registration, login, the current user, refresh and logout.

use agentry_crypto::{JwtAccessTokens, JwtSettings};
use agentry_domain::identity::AccessTokens as _;
use agentry_domain::ids::{TokenFamilyId, UserId};
use base64::Engine as _;
use chrono::{Duration, Utc};
use secrecy::SecretSlice;
use serde_json::{Value, json};

use crate::helpers::{JWT_SECRET, TestApp, json_with_status, spawn, spawn_with, spawn_with_clock};

#[tokio::test]
async fn register_answers_201_with_the_user_and_welcome_credits() {
    let app = spawn_with(|c| c.welcome_credits = 250).await;
    let body =
        json_with_status(app.register("  Ada@Example.COM ", Some("Analytical Engines")).await, 201).await;
    assert!(body["id"].as_str().unwrap().starts_with("usr_"));
    assert!(body["tenant_id"].as_str().unwrap().starts_with("ten_"));
    assert_eq!(body["email"], "ada@example.com");
    assert_eq!(body["full_name"], "Ada Lovelace");
    assert_eq!(body["credits"], 250);
    let created_at = body["created_at"].as_str().unwrap();
    assert!(created_at.ends_with('Z') && created_at.len() == 24, "{created_at}");
}

#[tokio::test]
async fn welcome_credits_default_to_1000() {
    let app = spawn().await;
    let body = json_with_status(app.register("ada@example.com", None).await, 201).await;
    assert_eq!(body["credits"], 1000);
}

#[tokio::test]
async fn a_second_registration_in_any_letter_case_is_409() {
    let app = spawn().await;
    assert_eq!(app.register("ada@example.com", None).await.status(), 201);
    let body = json_with_status(app.register("ADA@Example.com", None).await, 409).await;
    assert_eq!(body["error"], "conflict");
}

#[tokio::test]
async fn concurrent_registrations_of_one_address_let_exactly_one_through() {
    let app = spawn().await;
    let attempts = (0..6).map(|i| {
        let email = if i % 2 == 0 { "race@example.com" } else { "RACE@example.com" };
        app.register(email, None)
    });
    let statuses: Vec<u16> =
        futures_util::future::join_all(attempts).await.iter().map(|r| r.status().as_u16()).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 5, "{statuses:?}");
}

#[tokio::test]
async fn an_invalid_email_is_422_naming_the_field() {
    let app = spawn().await;
    let body = json_with_status(app.register("not-an-email", None).await, 422).await;
    assert_eq!(body["error"], "validation_error");
    assert_eq!(body["details"][0]["field"], "email");
    assert!(body["details"][0]["message"].is_string());
}

#[tokio::test]
async fn login_returns_a_bearer_token_pair() {
    let app = spawn().await;
    let token = app.signed_in("ada@example.com").await;
    assert_eq!(token["token_type"], "bearer");
    assert_eq!(token["expires_in"], 3600);
    assert_eq!(token["access_token"].as_str().unwrap().split('.').count(), 3);
    assert!(token["refresh_token"].as_str().unwrap().len() >= 43);
}

#[tokio::test]
async fn wrong_password_and_unknown_email_get_the_same_401() {
    let app = spawn().await;
    assert_eq!(app.register("ada@example.com", None).await.status(), 201);
    let wrong = json_with_status(app.login("ada@example.com", "wrong password").await, 401).await;
    let unknown = json_with_status(app.login("nobody@example.com", "correct horse battery").await, 401).await;
    assert_eq!(wrong, unknown);
    assert_eq!(wrong["error"], "invalid_credentials");
}

#[tokio::test]
async fn login_without_fields_is_a_validation_error() {
    let app = spawn().await;
    let r =
        app.client.post(app.url("/api/v1/auth/login")).form(&[("username", "a@b.co")]).send().await.unwrap();
    let body = json_with_status(r, 422).await;
    assert_eq!(body["details"][0]["field"], "password");
}

async fn me(app: &TestApp, prefix: &str, token: &str) -> Value {
    json_with_status(app.get_with_token(&format!("{prefix}/auth/me"), token).await, 200).await
}

#[tokio::test]
async fn me_lists_the_tenant_named_after_the_company_with_role_owner_on_both_base_paths() {
    let app = spawn().await;
    let token = app.signed_in("ada@example.com").await;
    let access = token["access_token"].as_str().unwrap();
    let body = me(&app, "/api/v1", access).await;
    assert_eq!(body["email"], "ada@example.com");
    assert_eq!(body["is_active"], true);
    let tenants = body["tenants"].as_array().unwrap();
    assert_eq!(tenants.len(), 1);
    assert_eq!(tenants[0]["name"], "Acme");
    assert_eq!(tenants[0]["role"], "owner");
    assert_eq!(me(&app, "/v1", access).await, body);
}

#[tokio::test]
async fn without_a_company_the_tenant_is_named_after_the_user() {
    let app = spawn().await;
    assert_eq!(app.register("solo@example.com", None).await.status(), 201);
    let token: Value = app.login("solo@example.com", "correct horse battery").await.json().await.unwrap();
    let body = me(&app, "/api/v1", token["access_token"].as_str().unwrap()).await;
    assert_eq!(body["tenants"][0]["name"], "Ada Lovelace's workspace");
}

async fn refresh(app: &TestApp, refresh_token: &Value) -> reqwest::Response {
    app.post_json("/api/v1/auth/refresh", &json!({"refresh_token": refresh_token})).await
}

#[tokio::test]
async fn refresh_rotates_and_reuse_revokes_the_newer_token_too() {
    let app = spawn().await;
    let first = app.signed_in("ada@example.com").await;
    let second = json_with_status(refresh(&app, &first["refresh_token"]).await, 200).await;
    assert_ne!(second["refresh_token"], first["refresh_token"]);
    assert_eq!(second["token_type"], "bearer");
    me(&app, "/api/v1", second["access_token"].as_str().unwrap()).await;

    // The rotated token comes back: refused, and its successor dies with it.
    let body = json_with_status(refresh(&app, &first["refresh_token"]).await, 401).await;
    assert_eq!(body["error"], "unauthorized");
    assert_eq!(refresh(&app, &second["refresh_token"]).await.status(), 401);
}

#[tokio::test]
async fn an_unknown_refresh_token_is_401() {
    let app = spawn().await;
    assert_eq!(refresh(&app, &json!("made-up")).await.status(), 401);
    let body = json_with_status(app.post_json("/api/v1/auth/refresh", &json!({})).await, 422).await;
    assert_eq!(body["details"][0]["field"], "refresh_token");
}

#[tokio::test]
async fn logout_revokes_the_session() {
    let app = spawn().await;
    let token = app.signed_in("ada@example.com").await;
    let r = app
        .client
        .post(app.url("/api/v1/auth/logout"))
        .bearer_auth(token["access_token"].as_str().unwrap())
        .json(&json!({"refresh_token": token["refresh_token"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(refresh(&app, &token["refresh_token"]).await.status(), 401);
}

fn codec(_app: &TestApp, key: &[u8]) -> JwtAccessTokens {
    JwtAccessTokens::new(JwtSettings {
        secret: SecretSlice::from(key.to_vec()),
        // Without AGENTRY_PUBLIC_URL the issuer is `agentry`.
        issuer: "agentry".into(),
        audience: "agentry-api".into(),
        ttl: Duration::hours(1),
    })
    .unwrap()
}

/// The claims of a JWT, read without verifying it.
fn claims_of(jwt: &str) -> serde_json::Value {
    let payload = jwt.split('.').nth(1).unwrap();
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap())
        .unwrap()
}

async fn assert_refused_as_access_token(app: &TestApp, token: &str) {
    let r = app.get_with_token("/api/v1/auth/me", token).await;
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    let body = json_with_status(r, 401).await;
    assert_eq!(body["error"], "unauthorized", "{token}");
}

#[tokio::test]
async fn refresh_none_alg_foreign_and_expired_tokens_are_refused_as_access_tokens() {
    let app = spawn().await;
    let token = app.signed_in("ada@example.com").await;
    let me_body = me(&app, "/api/v1", token["access_token"].as_str().unwrap()).await;
    let user = UserId::from_string(me_body["id"].as_str().unwrap());
    let session = TokenFamilyId::from_string(
        claims_of(token["access_token"].as_str().unwrap())["sid"].as_str().unwrap(),
    );

    // Control: a token minted with the service's key, issuer and audience is accepted.
    let own = codec(&app, JWT_SECRET.as_bytes()).issue(&user, &session, Utc::now()).unwrap();
    me(&app, "/api/v1", &own.token).await;

    assert_refused_as_access_token(&app, token["refresh_token"].as_str().unwrap()).await;

    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let claims = json!({"sub": user.as_str(), "sid": session.as_str(), "iss": "agentry", "aud": "agentry-api",
        "iat": Utc::now().timestamp(), "exp": Utc::now().timestamp() + 600, "jti": "x", "typ": "access"});
    let none = format!("{}.{}.", b64(r#"{"alg":"none","typ":"JWT"}"#), b64(&claims.to_string()));
    assert_refused_as_access_token(&app, &none).await;

    let foreign = codec(&app, &[9u8; 40]).issue(&user, &session, Utc::now()).unwrap();
    assert_refused_as_access_token(&app, &foreign.token).await;

    let expired =
        codec(&app, JWT_SECRET.as_bytes()).issue(&user, &session, Utc::now() - Duration::hours(2)).unwrap();
    assert_refused_as_access_token(&app, &expired.token).await;

    let future =
        codec(&app, JWT_SECRET.as_bytes()).issue(&user, &session, Utc::now() + Duration::minutes(5)).unwrap();
    assert_refused_as_access_token(&app, &future.token).await;

    let other_session = TokenFamilyId::from_string("rtf_never_issued");
    let orphan = codec(&app, JWT_SECRET.as_bytes()).issue(&user, &other_session, Utc::now()).unwrap();
    assert_refused_as_access_token(&app, &orphan.token).await;

    let r = app.client.get(app.url("/api/v1/auth/me")).send().await.unwrap();
    assert_eq!(json_with_status(r, 401).await["error"], "unauthorized");
    let r =
        app.client.get(app.url("/api/v1/auth/me")).header("authorization", "Basic abc").send().await.unwrap();
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn sign_in_recovery_and_refresh_have_budgets_of_their_own() {
    // Two auth requests a minute, on a clock that stays in one minute.
    let app = spawn_with_clock(|c| c.auth_rate_per_minute = 2).await;
    // Registering and signing in spend this address's sign-in budget.
    let pair = app.signed_in("ada@example.com").await;
    let r = app.login("ada@example.com", "correct horse battery").await;
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("retry-after"));

    // Someone recovering an account from the same address has a budget of their own.
    for email in ["bob@example.com", "cy@example.com"] {
        let r = app.post_json("/api/v1/auth/forgot-password", &json!({"email": email})).await;
        assert_eq!(r.status(), 202, "{email}");
    }
    let r = app.post_json("/api/v1/auth/forgot-password", &json!({"email": "dee@example.com"})).await;
    assert_eq!(r.status(), 429);

    // A session refreshes against its own family's budget, not the address's.
    let mut refresh_token = pair["refresh_token"].as_str().unwrap().to_owned();
    for _ in 0..2 {
        let r = app.post_json("/api/v1/auth/refresh", &json!({"refresh_token": refresh_token})).await;
        assert_eq!(r.headers()["x-ratelimit-limit"], "2");
        refresh_token = json_with_status(r, 200).await["refresh_token"].as_str().unwrap().to_owned();
    }
    let r = app.post_json("/api/v1/auth/refresh", &json!({"refresh_token": refresh_token})).await;
    assert_eq!(json_with_status(r, 429).await["error"], "rate_limit_exceeded");

    // Tokens the service never issued count against the address: guessing stays throttled.
    for expected in [401, 401, 429] {
        let r = app
            .post_json("/api/v1/auth/refresh", &json!({"refresh_token": "made-up-token-0123456789"}))
            .await;
        assert_eq!(r.status(), expected);
    }
}

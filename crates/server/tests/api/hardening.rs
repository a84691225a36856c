//! The findings of the outside review, each a test that failed before its fix: client-chosen
//! chat sessions, bodies and text, races, the last credits, sessions that end, headers, HEAD,
//! malformed requests and files.

use serde_json::{Value, json};

use crate::helpers::{
    TestApp, json_with_status, on_both_databases, raw_request, slow_model, spawn, spawn_with, use_model,
};

async fn chat(app: &TestApp, token: &str, agent: &str, body: Value) -> reqwest::Response {
    app.post_json_with_token(&format!("/api/v1/agents/{agent}/chat"), token, &body).await
}

async fn history(app: &TestApp, token: &str, agent: &str, session: &str) -> reqwest::Response {
    app.get_with_token(&format!("/api/v1/agents/{agent}/sessions/{session}/messages"), token).await
}

#[tokio::test]
async fn a_client_session_id_is_created_on_first_use_and_continued_after() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let agent =
                app.create_agent(&token, json!({"name": "Helper"})).await["id"].as_str().unwrap().to_owned();
            let other =
                app.create_agent(&token, json!({"name": "Other"})).await["id"].as_str().unwrap().to_owned();

            let first = json_with_status(
                chat(&app, &token, &agent, json!({"message": "hi", "session_id": "s-1"})).await,
                200,
            )
            .await;
            let second = json_with_status(
                chat(&app, &token, &agent, json!({"message": "hi", "session_id": "s-1"})).await,
                200,
            )
            .await;
            assert_eq!(
                (first["session_id"].as_str(), second["session_id"].as_str()),
                (Some("s-1"), Some("s-1"))
            );
            assert!(
                second["usage"]["prompt_tokens"].as_u64() > first["usage"]["prompt_tokens"].as_u64(),
                "the second prompt carries the first exchange"
            );
            let h = json_with_status(history(&app, &token, &agent, "s-1").await, 200).await;
            assert_eq!(h["total"], 4);

            // The same id with another agent is another conversation; `:` and `.` are fine.
            json_with_status(
                chat(&app, &token, &other, json!({"message": "hello", "session_id": "s-1"})).await,
                200,
            )
            .await;
            assert_eq!(json_with_status(history(&app, &token, &other, "s-1").await, 200).await["total"], 2);
            assert_eq!(json_with_status(history(&app, &token, &agent, "s-1").await, 200).await["total"], 4);
            let r = chat(&app, &token, &agent, json!({"message": "hi", "session_id": "user-42:support.v2"}))
                .await;
            assert_eq!(json_with_status(r, 200).await["session_id"], "user-42:support.v2");

            // Server-made ids still come back, and work in the history route.
            let made =
                json_with_status(chat(&app, &token, &agent, json!({"message": "hi"})).await, 200).await;
            let made = made["session_id"].as_str().unwrap();
            assert!(made.starts_with("ses_"));
            assert_eq!(json_with_status(history(&app, &token, &agent, made).await, 200).await["total"], 2);

            // Another tenant sees none of it.
            let eve = app.access_token("eve@example.com").await;
            assert_eq!(history(&app, &eve, &agent, "s-1").await.status(), 404);
            assert_eq!(history(&app, &token, &agent, "s-2").await.status(), 404, "never used");
            for bad in ["has space", "slash%2Fno", &"x".repeat(129)] {
                let r = history(&app, &token, &agent, bad).await;
                assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "session_id", "{bad}");
            }
        },
    )
    .await;
}

#[tokio::test]
async fn bodies_that_are_not_objects_are_validation_errors() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    for body in ["[\"a@b.co\", \"password1\", \"Ada\"]", "7", "\"text\"", "null", "true"] {
        for (path, auth) in [("/api/v1/auth/register", false), ("/api/v1/agents", true)] {
            let mut r = app.client.post(app.url(path)).header("content-type", "application/json").body(body);
            if auth {
                r = r.bearer_auth(&token);
            }
            let answer = json_with_status(r.send().await.unwrap(), 422).await;
            assert_eq!(answer["error"], "validation_error", "{path} {body}");
            assert_eq!(answer["details"][0]["field"], "body");
        }
    }
}

/// Every text field of every route, and every path id, with U+0000 in it.
fn nul_cases(agent: &str) -> Vec<(&'static str, String, Value)> {
    let nul = "bad\u{0}value";
    let register = |field: &str| {
        let mut body = json!({"email": "n@example.com", "password": "long enough", "full_name": "N"});
        body[field] = json!(nul);
        body
    };
    vec![
        ("POST", "/api/v1/auth/register".into(), register("email")),
        ("POST", "/api/v1/auth/register".into(), register("password")),
        ("POST", "/api/v1/auth/register".into(), register("full_name")),
        ("POST", "/api/v1/auth/register".into(), register("company")),
        ("POST", "/api/v1/auth/refresh".into(), json!({"refresh_token": nul})),
        ("POST", "/api/v1/auth/forgot-password".into(), json!({"email": nul})),
        ("POST", "/api/v1/auth/magic-link".into(), json!({"email": nul})),
        ("POST", "/api/v1/auth/reset-password".into(), json!({"token": nul, "new_password": "long enough"})),
        ("POST", "/api/v1/auth/reset-password".into(), json!({"token": "t", "new_password": nul})),
        ("GET", "/api/v1/auth/magic-link/a%00b".into(), Value::Null),
        ("POST", "/api/v1/auth/logout".into(), json!({"refresh_token": nul})),
        ("POST", "/api/v1/auth/api-keys".into(), json!({"name": nul, "scopes": ["agents:read"]})),
        ("POST", "/api/v1/auth/api-keys".into(), json!({"name": "k", "scopes": [nul]})),
        (
            "POST",
            "/api/v1/auth/api-keys".into(),
            json!({"name": "k", "scopes": ["agents:read"], "expires_at": nul}),
        ),
        ("DELETE", "/api/v1/auth/api-keys/key%00".into(), Value::Null),
        ("POST", "/api/v1/agents".into(), json!({"name": nul})),
        ("POST", "/api/v1/agents".into(), json!({"name": "A", "type": nul})),
        ("POST", "/api/v1/agents".into(), json!({"name": "A", "status": nul})),
        ("POST", "/api/v1/agents".into(), json!({"name": "A", "description": nul})),
        ("POST", "/api/v1/agents".into(), json!({"name": "A", "memory_types": [nul]})),
        ("POST", "/api/v1/agents".into(), json!({"name": "A", "config": {"model": nul}})),
        ("POST", "/api/v1/agents".into(), json!({"name": "A", "config": {"system_prompt": nul}})),
        ("PATCH", format!("/api/v1/agents/{agent}"), json!({"name": nul})),
        ("PATCH", format!("/api/v1/agents/{agent}"), json!({"description": nul})),
        ("PATCH", format!("/api/v1/agents/{agent}"), json!({"config": {"model": nul}})),
        ("GET", "/api/v1/agents/agt%00x".into(), Value::Null),
        ("PATCH", "/api/v1/agents/agt%00x".into(), json!({"name": "x"})),
        ("DELETE", "/api/v1/agents/agt%00x".into(), Value::Null),
        ("POST", format!("/api/v1/agents/{agent}/chat"), json!({"message": nul})),
        ("POST", format!("/api/v1/agents/{agent}/chat"), json!({"message": "hi", "session_id": nul})),
        ("POST", "/api/v1/agents/agt%00x/chat".into(), json!({"message": "hi"})),
        ("GET", format!("/api/v1/agents/{agent}/sessions/s%00/messages"), Value::Null),
        ("GET", "/api/v1/agents?tenant_id=ten%00".into(), Value::Null),
    ]
}

#[tokio::test]
async fn a_nul_character_in_any_field_is_a_validation_error_on_both_databases() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let agent =
                app.create_agent(&token, json!({"name": "Helper"})).await["id"].as_str().unwrap().to_owned();
            for (method, path, body) in nul_cases(&agent) {
                let mut r = app.client.request(method.parse().unwrap(), app.url(&path)).bearer_auth(&token);
                if !body.is_null() {
                    r = r.json(&body);
                }
                let r = r.send().await.unwrap();
                let status = r.status().as_u16();
                let answer: Value = r.json().await.unwrap();
                assert_eq!(
                    (status, answer["error"].as_str()),
                    (422, Some("validation_error")),
                    "{method} {path} {body}: {answer}"
                );
            }
            // Login is a form; its fields too.
            let r = app
                .client
                .post(app.url("/api/v1/auth/login"))
                .form(&[("username", "a\u{0}@b.co"), ("password", "x")])
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 422);
            // Long text keeps tabs and line breaks.
            let r = chat(&app, &token, &agent, json!({"message": "line one\n\tline two"})).await;
            assert_eq!(r.status(), 200);
        },
    )
    .await;
}

#[tokio::test]
async fn error_messages_speak_json_never_rust() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let cases = [
        ("/api/v1/agents", json!({"name": "A", "config": {"max_tokens": "many"}})),
        ("/api/v1/agents", json!({"name": "A", "config": {"max_tokens": 1.5}})),
        ("/api/v1/agents", json!({"name": "A", "config": {"max_tokens": -1}})),
        ("/api/v1/agents", json!({"name": "A", "config": {"temperature": "hot"}})),
        ("/api/v1/agents", json!({"name": "A", "config": [1, 2]})),
        ("/api/v1/agents", json!({"name": ["A"]})),
        ("/api/v1/agents", json!({"name": "A", "memory_types": "semantic"})),
        ("/api/v1/billing/purchases", json!({"credits": 18_446_744_073_709_551_615_u64})),
        ("/api/v1/billing/purchases", json!({"credits": "5"})),
    ];
    for (path, body) in cases {
        let answer = json_with_status(app.post_json_with_token(path, &token, &body).await, 422).await;
        let text = answer.to_string();
        for rust in ["i64", "u32", "u64", "f64", "struct", "Option", "a sequence", "a map", "usize"] {
            assert!(!text.contains(rust), "{body} answered {text}");
        }
    }
    let r = app.get_with_token("/api/v1/agents?page=99999999999999999999999", &token).await;
    let text = json_with_status(r, 422).await.to_string();
    assert!(!text.contains("target type") && !text.contains("i64"), "{text}");
}

#[tokio::test]
async fn head_works_wherever_get_does() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    for path in ["/healthz", "/readyz", "/api/v1/agents", "/v1/auth/me", "/api/v1/openapi.json", "/docs/"] {
        let get = app.client.get(app.url(path)).bearer_auth(&token).send().await.unwrap();
        let head = app.client.head(app.url(path)).bearer_auth(&token).send().await.unwrap();
        assert_eq!((head.status(), get.status()), (get.status(), reqwest::StatusCode::OK), "{path}");
        assert_eq!(head.headers().get("content-type"), get.headers().get("content-type"), "{path}");
        assert!(head.bytes().await.unwrap().is_empty(), "{path}: no body");
    }
    let r = app.client.get(app.url("/api/v1/agents/agt_x/chat")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(r.headers()["allow"], "POST");
    let r = app.client.put(app.url("/api/v1/agents/agt_x")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(r.headers()["allow"], "GET, PATCH, DELETE, HEAD");
    assert_eq!(json_with_status(r, 405).await["error"], "method_not_allowed");
}

#[tokio::test]
async fn requests_too_malformed_to_parse_get_the_json_error_body() {
    for envelope in [agentry_server::ApiEnvelope::Bare, agentry_server::ApiEnvelope::Wrapped] {
        let app = spawn_with(|c| c.api_envelope = envelope).await;
        for request in [
            &b"GET /api/v1/agents/\x01 HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: x\r\n\r\n",
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x7fb\r\n\r\n",
        ] {
            let answer = raw_request(&app, request).await;
            let (head, body) = answer.split_once("\r\n\r\n").unwrap();
            assert!(head.starts_with("HTTP/1.1 400 "), "{answer}");
            assert!(head.contains("content-type: application/json"), "{answer}");
            let body: Value = serde_json::from_str(body).unwrap();
            match envelope {
                agentry_server::ApiEnvelope::Bare => assert_eq!(body["error"], "validation_error"),
                agentry_server::ApiEnvelope::Wrapped => assert_eq!(body["error"]["code"], "invalid_request"),
            }
        }
        // A good request on a fresh connection is untouched.
        let answer =
            raw_request(&app, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert!(
            answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with("{\"status\":\"ok\"}")
                || answer.contains("\"ok\""),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn every_response_is_nosniff_tokens_are_never_cached_and_pages_refuse_frames() {
    let app = spawn().await;
    let login = app.signed_in("ada@example.com").await;
    let r = app.login("ada@example.com", "correct horse battery").await;
    assert_eq!(r.headers()["cache-control"], "no-store");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    let key = app
        .post_json_with_token(
            "/api/v1/auth/api-keys",
            login["access_token"].as_str().unwrap(),
            &json!({"name": "k", "scopes": ["agents:read"]}),
        )
        .await;
    assert_eq!(key.headers()["cache-control"], "no-store");
    for path in [
        "/healthz",
        "/nope",
        "/docs/",
        "/reset-password?token=abc",
        "/magic-link?token=abc",
        "/assets/pages.js",
    ] {
        let r = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(r.headers()["x-content-type-options"], "nosniff", "{path}");
    }
    for path in ["/docs/", "/reset-password?token=abc", "/magic-link?token=abc"] {
        let r = app.client.get(app.url(path)).send().await.unwrap();
        let csp = r.headers()["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("script-src 'self' 'unsafe"),
            "{path}: {csp}"
        );
    }
}

#[tokio::test]
async fn failed_bearer_authentications_are_throttled_per_client_address() {
    // Behind a trusted proxy the client address comes from X-Forwarded-For: two clients on one
    // machine. (Only a header: nothing connects to those addresses.)
    let app = spawn_with(|c| {
        c.trusted_proxies = "127.0.0.1".into();
        c.auth_failures_per_minute = 5;
    })
    .await;
    let token = app.access_token("ada@example.com").await;
    let me = |bearer: &str, client: &str| {
        app.client
            .get(app.url("/api/v1/auth/me"))
            .bearer_auth(bearer.to_owned())
            .header("x-forwarded-for", client.to_owned())
            .send()
    };
    for _ in 0..5 {
        assert_eq!(me("agk_guess", "203.0.113.7").await.unwrap().status(), 401);
    }
    let r = me("agk_guess", "203.0.113.7").await.unwrap();
    assert!(r.headers().contains_key("retry-after"));
    assert_eq!(json_with_status(r, 429).await["error"], "rate_limit_exceeded");
    // Refused before the credential is looked at: even a right one.
    assert_eq!(me(&token, "203.0.113.7").await.unwrap().status(), 429);
    // Another address is not affected.
    assert_eq!(me(&token, "198.51.100.4").await.unwrap().status(), 200);
    assert_eq!(me("agk_guess", "198.51.100.4").await.unwrap().status(), 401);
}

#[tokio::test]
async fn with_one_credit_a_short_chat_succeeds_and_the_ledger_adds_up() {
    on_both_databases(
        |c| c.welcome_credits = 1,
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let agent =
                app.create_agent(&token, json!({"name": "Helper"})).await["id"].as_str().unwrap().to_owned();
            let reply =
                json_with_status(chat(&app, &token, &agent, json!({"message": "hi"})).await, 200).await;
            assert_eq!(reply["credits"], json!({"charged": 1, "remaining": 0}));
            assert!(
                reply["usage"]["total_tokens"].as_u64().unwrap() <= 1000,
                "capped at what one credit pays"
            );
            let r = chat(&app, &token, &agent, json!({"message": "hi"})).await;
            assert_eq!(json_with_status(r, 402).await["error"], "insufficient_credits");
            let ledger =
                json_with_status(app.get_with_token("/api/v1/billing/ledger", &token).await, 200).await;
            let sum: i64 =
                ledger["entries"].as_array().unwrap().iter().map(|e| e["delta"].as_i64().unwrap()).sum();
            assert_eq!(sum, 0);
            assert_eq!(ledger["entries"][0]["balance_after"], 0);
            let billing = json_with_status(app.get_with_token("/api/v1/billing", &token).await, 200).await;
            assert_eq!(billing["credits"], 0);
        },
    )
    .await;
}

#[tokio::test]
async fn a_chat_racing_the_deletion_of_its_agent_answers_404_and_leaves_nothing() {
    let model = slow_model("late", (10, 2), std::time::Duration::from_millis(400)).await;
    let uri = model.uri();
    let tweak = move |c: &mut agentry_server::Config| use_model(c, &uri);
    on_both_databases(tweak, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let before =
            json_with_status(app.get_with_token("/api/v1/billing", &token).await, 200).await["credits"]
                .clone();
        for round in 0..4 {
            let agent =
                app.create_agent(&token, json!({"name": "Doomed"})).await["id"].as_str().unwrap().to_owned();
            let session = format!("race-{round}");
            let chats: Vec<_> = (0..2)
                .map(|_| chat(&app, &token, &agent, json!({"message": "hi", "session_id": session})))
                .collect();
            let delete = async {
                tokio::time::sleep(std::time::Duration::from_millis(150)).await;
                app.delete_with_token(&format!("/api/v1/agents/{agent}"), &token).await
            };
            let (answers, deleted) = tokio::join!(futures_util::future::join_all(chats), delete);
            assert_eq!(deleted.status(), 204);
            for r in answers {
                assert_eq!(json_with_status(r, 404).await["error"], "not_found", "round {round}");
            }
        }
        for table in ["chat_sessions", "chat_messages", "credit_holds"] {
            assert_eq!(app.db.count_rows(table).await.unwrap(), 0, "{table}");
        }
        let after =
            json_with_status(app.get_with_token("/api/v1/billing", &token).await, 200).await["credits"]
                .clone();
        assert_eq!(after, before, "nothing was charged");
    })
    .await;
}

#[tokio::test]
async fn a_file_written_by_the_service_is_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let parent = tempfile::tempdir().unwrap();
    let data = parent.path().join("data");
    let data_for_config = data.clone();
    let app = spawn_with(move |c| {
        c.data_dir = data_for_config.clone();
        c.database_url = format!("sqlite://{}", data_for_config.join("agentry.db").display());
        c.jwt_secret = None;
    })
    .await;
    assert_eq!(app.register("ada@example.com", None).await.status(), 201);
    assert_eq!(
        app.post_json("/api/v1/auth/magic-link", &json!({"email": "ada@example.com"})).await.status(),
        202
    );
    app.jobs_done().await;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700, "data directory");
    assert_eq!(mode(&data.join("agentry.db")), 0o600, "database");
    assert_eq!(mode(&data.join("agentry.db-wal")), 0o600, "its write-ahead log");
    assert_eq!(mode(&data.join("jwt-secret")), 0o600, "the JWT key");
    assert_eq!(mode(&data.join("outbox")), 0o700, "outbox");
    for mail in std::fs::read_dir(data.join("outbox")).unwrap() {
        assert_eq!(mode(&mail.unwrap().path()), 0o600, "an e-mail");
    }
}

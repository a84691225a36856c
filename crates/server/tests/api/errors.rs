//! Every bad input gets a JSON error in the configured envelope, with the right status.

use serde_json::json;

use crate::helpers::{json_with_status, raw_request, spawn, spawn_with};

#[tokio::test]
async fn unknown_routes_and_wrong_methods_answer_json() {
    let app = spawn().await;
    let body =
        json_with_status(app.client.get(app.url("/api/v1/nothing-here")).send().await.unwrap(), 404).await;
    assert_eq!(body, json!({"error": "not_found", "message": "no such route"}));
    let body = json_with_status(app.client.get(app.url("/elsewhere")).send().await.unwrap(), 404).await;
    assert_eq!(body["error"], "not_found");

    let r = app.client.get(app.url("/api/v1/auth/register")).send().await.unwrap();
    assert_eq!(r.headers()["allow"], "POST");
    let body = json_with_status(r, 405).await;
    assert_eq!(body["error"], "method_not_allowed");
}

#[tokio::test]
async fn malformed_json_missing_fields_and_wrong_types_are_validation_errors() {
    let app = spawn().await;
    let send = |body: &'static str| {
        app.client
            .post(app.url("/api/v1/auth/register"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let body = json_with_status(send("{\"email\": ").await.unwrap(), 422).await;
    assert_eq!(body["error"], "validation_error");
    assert_eq!(body["details"][0]["field"], "body");

    let body = json_with_status(send("").await.unwrap(), 422).await;
    assert_eq!(body["details"][0]["field"], "body");

    let body =
        json_with_status(send(r#"{"password": "long enough", "full_name": "A"}"#).await.unwrap(), 422).await;
    assert_eq!(body["details"], json!([{"field": "email", "message": "email is required"}]));

    let body = json_with_status(
        send(r#"{"email": 42, "password": "long enough", "full_name": "A"}"#).await.unwrap(),
        422,
    )
    .await;
    assert_eq!(body["details"][0]["field"], "email");

    let body = json_with_status(send("[1, 2]").await.unwrap(), 422).await;
    assert_eq!(body["error"], "validation_error");
}

#[tokio::test]
async fn wrong_content_types_answer_415() {
    let app = spawn().await;
    let r = app
        .client
        .post(app.url("/api/v1/auth/register"))
        .header("content-type", "text/plain")
        .body(r#"{"email": "a@b.co"}"#)
        .send()
        .await
        .unwrap();
    let body = json_with_status(r, 415).await;
    assert_eq!(body["error"], "unsupported_media_type");

    // Login takes a form; a JSON body is refused the same way.
    let r =
        app.post_json("/api/v1/auth/login", &json!({"username": "a@b.co", "password": "whatever1"})).await;
    let body = json_with_status(r, 415).await;
    assert_eq!(body["error"], "unsupported_media_type");
}

#[tokio::test]
async fn bodies_over_one_mebibyte_answer_413() {
    let app = spawn().await;
    // A body a little over the limit is read to its end and thrown away, so an ordinary client,
    // which writes the whole body before it reads, gets the 413 and not a broken pipe.
    let big = format!(r#"{{"email": "a@b.co", "full_name": "{}"}}"#, "x".repeat(1024 * 1024));
    for _ in 0..3 {
        let r = app
            .client
            .post(app.url("/api/v1/auth/register"))
            .header("content-type", "application/json")
            .body(big.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(json_with_status(r, 413).await["error"], "payload_too_large");
    }

    // One declared far larger is refused from its length alone, without waiting for the body:
    // only its first kibibyte is ever sent.
    let head = "POST /api/v1/auth/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: 104857600\r\nConnection: close\r\n\r\n";
    let answer = raw_request(&app, &[head.as_bytes(), &big.as_bytes()[..1024]].concat()).await;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 413 "), "{answer}");
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["error"], "payload_too_large");

    // Just under the limit is read (and then refused for its content, not its size).
    let under = format!(r#"{{"email": "a@b.co", "full_name": "{}"}}"#, "x".repeat(1024 * 1000));
    let r = app
        .client
        .post(app.url("/api/v1/auth/register"))
        .header("content-type", "application/json")
        .body(under)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
}

#[tokio::test]
async fn the_wrapped_envelope_wraps_errors_and_successes() {
    let app = spawn_with(|c| c.api_envelope = agentry_server::ApiEnvelope::Wrapped).await;
    let r =
        app.post_json("/api/v1/auth/register", &json!({"password": "long enough", "full_name": "A"})).await;
    let body = json_with_status(r, 400).await;
    assert_eq!(
        body,
        json!({"success": false, "error": {"code": "invalid_request", "message": "email is required",
            "details": {"field": "email", "reason": "missing_required_field"}}})
    );

    let body = json_with_status(app.register("wrapped@example.com", Some("Acme")).await, 201).await;
    assert_eq!(body["success"], true);
    assert_eq!(body["data"]["email"], "wrapped@example.com");

    let body = json_with_status(app.client.get(app.url("/nope")).send().await.unwrap(), 404).await;
    assert_eq!(body["success"], false);
    assert_eq!(body["error"]["code"], "not_found");
}

#[tokio::test]
async fn the_validation_status_is_configurable() {
    let app = spawn_with(|c| c.validation_status = Some(400)).await;
    let body = json_with_status(app.register("not-an-email", None).await, 400).await;
    assert_eq!(body["error"], "validation_error");
}

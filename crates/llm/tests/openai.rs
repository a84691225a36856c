//! The OpenAI-compatible adapter against a fake server over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agentry_domain::agents::{ChatModel, ChatRole, ChatTurn, CompletionRequest, FinishReason, ModelError};
use agentry_llm::{OpenAiModel, OpenAiSettings};
use secrecy::SecretString;
use serde_json::json;
use wiremock::matchers::{bearer_token, body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn request() -> CompletionRequest {
    CompletionRequest {
        model: "gpt-test".into(),
        temperature: Some(0.3),
        max_tokens: 64,
        messages: vec![
            ChatTurn { role: ChatRole::System, content: "You are Helper.".into() },
            ChatTurn { role: ChatRole::User, content: "Hello".into() },
        ],
    }
}

fn model(server: &MockServer, timeout: Duration) -> OpenAiModel {
    let _ = rustls::crypto::ring::default_provider().install_default();
    OpenAiModel::new(OpenAiSettings {
        base_url: server.uri(),
        api_key: Some(SecretString::from("sk-test")),
        timeout,
    })
    .unwrap()
}

#[tokio::test]
async fn a_completion_is_requested_and_read_with_its_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(bearer_token("sk-test"))
        .and(body_partial_json(json!({
            "model": "gpt-test", "max_tokens": 64, "temperature": 0.3,
            "messages": [{"role": "system", "content": "You are Helper."}, {"role": "user", "content": "Hello"}]
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-1", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi!"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 17, "completion_tokens": 3, "total_tokens": 20}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let c = model(&server, Duration::from_secs(5)).complete(&request()).await.unwrap();
    assert_eq!((c.content.as_str(), c.prompt_tokens, c.completion_tokens), ("Hi!", 17, 3));
}

#[tokio::test]
async fn an_error_answer_is_an_upstream_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("overloaded"))
        .mount(&server)
        .await;
    match model(&server, Duration::from_secs(5)).complete(&request()).await {
        Err(ModelError::Upstream(msg)) => assert!(msg.contains("500") && msg.contains("overloaded"), "{msg}"),
        other => panic!("expected an upstream error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(3)).set_body_json(json!({})))
        .mount(&server)
        .await;
    let err = model(&server, Duration::from_millis(300)).complete(&request()).await.unwrap_err();
    assert!(matches!(err, ModelError::Timeout), "{err:?}");
}

#[tokio::test]
async fn an_unreadable_answer_is_an_upstream_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>"))
        .mount(&server)
        .await;
    assert!(matches!(
        model(&server, Duration::from_secs(5)).complete(&request()).await,
        Err(ModelError::Upstream(_))
    ));
}

#[tokio::test]
async fn a_base_url_ending_in_v1_is_not_doubled() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"message": {"content": "ok"}}]
        })))
        .expect(1)
        .mount(&server)
        .await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let m = OpenAiModel::new(OpenAiSettings {
        base_url: format!("{}/v1/", server.uri()),
        api_key: None,
        timeout: Duration::from_secs(5),
    })
    .unwrap();
    let c = m.complete(&request()).await.unwrap();
    assert_eq!(c.content, "ok");
    assert!(c.prompt_tokens > 0, "counted locally when the server omits usage");
}

/// Collects the pieces handed to it; stops listening after `stop_after` of them.
#[derive(Default)]
struct Pieces {
    got: std::sync::Mutex<Vec<String>>,
    stop_after: Option<usize>,
}

impl agentry_domain::agents::DeltaSink for Pieces {
    fn delta(&self, text: &str) -> bool {
        let mut got = self.got.lock().unwrap();
        got.push(text.to_owned());
        self.stop_after.is_none_or(|n| got.len() < n)
    }
}

fn sse(chunks: &[serde_json::Value]) -> String {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

fn delta(text: &str) -> serde_json::Value {
    json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

#[tokio::test]
async fn a_streamed_answer_is_handed_on_piece_by_piece_with_the_usage_of_its_last_chunk() {
    let server = MockServer::start().await;
    let body = sse(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]}),
        delta("Hel"),
        delta("lo"),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}}),
    ]);
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"stream": true, "stream_options": {"include_usage": true}})))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(body),
        )
        .expect(1)
        .mount(&server)
        .await;
    let pieces = std::sync::Arc::new(Pieces::default());
    let c = model(&server, Duration::from_secs(5)).stream(&request(), pieces.clone()).await.unwrap();
    assert_eq!(*pieces.got.lock().unwrap(), ["Hel", "lo"]);
    assert_eq!((c.content.as_str(), c.prompt_tokens, c.completion_tokens), ("Hello", 9, 2));
    assert_eq!(c.finish, FinishReason::Stop);
}

#[tokio::test]
async fn a_listener_that_leaves_ends_the_stream_and_the_reply_is_counted_here() {
    let server = MockServer::start().await;
    let body = sse(&[delta("One"), delta(" two"), delta(" three"), delta(" four")]);
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(body),
        )
        .mount(&server)
        .await;
    let pieces = std::sync::Arc::new(Pieces { stop_after: Some(2), ..Pieces::default() });
    let c = model(&server, Duration::from_secs(5)).stream(&request(), pieces.clone()).await.unwrap();
    assert_eq!(c.finish, FinishReason::Cancelled);
    assert_eq!(c.content, "One two");
    assert_eq!(c.completion_tokens, 2, "counted with cl100k: the stream's usage never came");
}

#[tokio::test]
async fn too_many_requests_is_retried_after_the_wait_the_provider_asks() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429).insert_header("retry-after", "1").set_body_string("slow down"),
        )
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let started = std::time::Instant::now();
    let c = model(&server, Duration::from_secs(10)).complete(&request()).await.unwrap();
    assert_eq!(c.content, "ok");
    assert!(started.elapsed() >= Duration::from_secs(1), "Retry-After was honoured");
}

#[tokio::test]
async fn server_errors_are_retried_twice_then_reported() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("overloaded"))
        .expect(3)
        .mount(&server)
        .await;
    match model(&server, Duration::from_secs(10)).complete(&request()).await {
        Err(ModelError::Upstream(msg)) => assert!(msg.contains("503") && msg.contains("overloaded"), "{msg}"),
        other => panic!("expected an upstream error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_wait_beyond_the_deadline_is_not_waited() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "30").set_body_string("later"))
        .expect(1)
        .mount(&server)
        .await;
    let started = std::time::Instant::now();
    let err = model(&server, Duration::from_secs(5)).complete(&request()).await.unwrap_err();
    assert!(matches!(err, ModelError::Upstream(ref m) if m.contains("429")), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_client_error_is_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_string("bad model"))
        .expect(1)
        .mount(&server)
        .await;
    assert!(matches!(
        model(&server, Duration::from_secs(5)).complete(&request()).await,
        Err(ModelError::Upstream(_))
    ));
}

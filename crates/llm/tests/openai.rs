//! The OpenAI-compatible adapter against a fake server over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agentry_domain::agents::{ChatModel, ChatRole, ChatTurn, CompletionRequest, ModelError};
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

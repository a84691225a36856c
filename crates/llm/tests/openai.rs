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
            ChatTurn::new(ChatRole::System, "You are Helper."),
            ChatTurn::new(ChatRole::User, "Hello"),
        ],
        tools: Vec::new(),
        response_schema: None,
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
async fn a_response_schema_is_sent_as_the_structured_output_format() {
    let server = MockServer::start().await;
    let schema = json!({"type": "object", "properties": {"facts": {"type": "array"}}, "required": ["facts"]});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(json!({
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"facts\": []}"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let asked = CompletionRequest { response_schema: Some(schema.clone()), ..request() };
    let c = model(&server, Duration::from_secs(5)).complete(&asked).await.unwrap();
    assert_eq!(c.content, "{\"facts\": []}");
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

fn with_weather_tool() -> CompletionRequest {
    let mut request = request();
    request.tools = vec![agentry_domain::agents::ToolSpec {
        name: "get_weather".into(),
        description: "The weather in a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }];
    request
}

#[tokio::test]
async fn tools_are_offered_and_a_call_is_read_then_answered_with_its_result() {
    let server = MockServer::start().await;
    // The second request carries the call and its result, as OpenAI wants them.
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"messages": [{}, {}, {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]
        }, {"role": "tool", "tool_call_id": "call_9", "content": "{\"temperature\":21}"}]})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"message": {"role": "assistant", "content": "21 degrees."}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 4}
        })))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city"}}]})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 9}
        })))
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    let m = model(&server, Duration::from_secs(5));
    let mut request = with_weather_tool();
    let called = m.complete(&request).await.unwrap();
    assert_eq!(called.finish, FinishReason::ToolCalls);
    assert_eq!(called.content, "");
    assert_eq!(called.tool_calls.len(), 1);
    assert_eq!(
        (called.tool_calls[0].name.as_str(), called.tool_calls[0].arguments.as_str()),
        ("get_weather", r#"{"city":"Paris"}"#)
    );
    let mut asked = ChatTurn::new(ChatRole::Assistant, "");
    asked.tool_calls = called.tool_calls.clone();
    let mut result = ChatTurn::new(ChatRole::Tool, r#"{"temperature":21}"#);
    result.tool_call_id = Some("call_9".into());
    result.name = Some("get_weather".into());
    request.messages.extend([asked, result]);
    let answered = m.complete(&request).await.unwrap();
    assert_eq!((answered.content.as_str(), answered.finish), ("21 degrees.", FinishReason::Stop));
}

#[tokio::test]
async fn streamed_tool_calls_are_put_together_from_their_deltas() {
    let server = MockServer::start().await;
    let call = |index: u32, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut function = json!({"arguments": args});
        if let Some(name) = name {
            function["name"] = json!(name);
        }
        let mut c = json!({"index": index, "function": function});
        if let Some(id) = id {
            c["id"] = json!(id);
            c["type"] = json!("function");
        }
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [c]}, "finish_reason": null}]})
    };
    let body = sse(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}, "finish_reason": null}]}),
        call(0, Some("call_a"), Some("get_weather"), ""),
        call(0, None, None, "{\"city\":"),
        call(1, Some("call_b"), Some("get_weather"), "{\"city\":\"Oslo\"}"),
        call(0, None, None, "\"Paris\"}"),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 20, "total_tokens": 50}}),
    ]);
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"stream": true, "tools": [{"type": "function"}]})))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(body),
        )
        .expect(1)
        .mount(&server)
        .await;
    let pieces = std::sync::Arc::new(Pieces::default());
    let c =
        model(&server, Duration::from_secs(5)).stream(&with_weather_tool(), pieces.clone()).await.unwrap();
    assert!(pieces.got.lock().unwrap().is_empty(), "no text");
    assert_eq!(c.finish, FinishReason::ToolCalls);
    let calls: Vec<(&str, &str)> =
        c.tool_calls.iter().map(|t| (t.id.as_str(), t.arguments.as_str())).collect();
    assert_eq!(calls, [("call_a", r#"{"city":"Paris"}"#), ("call_b", r#"{"city":"Oslo"}"#)]);
    assert_eq!((c.prompt_tokens, c.completion_tokens), (30, 20));
}

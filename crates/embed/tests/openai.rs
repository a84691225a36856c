//! The OpenAI-compatible embedder against a fake server over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agentry_domain::memory::{EmbedError, Embedder, dot};
use agentry_embed::{OpenAiEmbedder, OpenAiEmbedderSettings};
use secrecy::SecretString;
use serde_json::{Value, json};
use wiremock::matchers::{bearer_token, body_partial_json, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

fn embedder(base_url: String, dimension: usize, timeout: Duration) -> OpenAiEmbedder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    OpenAiEmbedder::new(OpenAiEmbedderSettings {
        base_url,
        api_key: Some(SecretString::from("sk-test")),
        model: "embed-test".into(),
        dimension,
        timeout,
    })
    .unwrap()
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn vectors_come_back_in_input_order_and_normalised() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(bearer_token("sk-test"))
        .and(body_partial_json(json!({"model": "embed-test", "input": ["first", "second"]})))
        // Answered out of order and not unit length.
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": [
                {"object": "embedding", "index": 1, "embedding": [0.0, 3.0, 4.0]},
                {"object": "embedding", "index": 0, "embedding": [2.0, 0.0, 0.0]}
            ],
            "model": "embed-test",
            "usage": {"prompt_tokens": 2, "total_tokens": 2}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let e = embedder(server.uri(), 3, Duration::from_secs(5));
    assert_eq!(e.model().id, "openai:embed-test");
    assert_eq!(e.model().provider, "openai");
    assert_eq!(e.model().dimension, 3);
    let out = e.embed(&texts(&["first", "second"])).await.unwrap();
    assert_eq!(out, vec![vec![1.0, 0.0, 0.0], vec![0.0, 0.6, 0.8]]);
    for v in &out {
        assert!((dot(v, v) - 1.0).abs() < 1e-6);
    }
}

#[tokio::test]
async fn a_base_url_ending_in_v1_is_accepted_and_empty_texts_are_not_sent() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(body_partial_json(json!({"input": ["only"]})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "data": [{"index": 0, "embedding": [0.0, 1.0]}]
        })))
        .expect(1)
        .mount(&server)
        .await;
    let e = embedder(format!("{}/v1/", server.uri()), 2, Duration::from_secs(5));
    let out = e.embed(&texts(&["", "only", "  "])).await.unwrap();
    assert_eq!(out, vec![vec![0.0, 0.0], vec![0.0, 1.0], vec![0.0, 0.0]]);
    // Nothing to embed: no request at all (the mock expects exactly one).
    assert_eq!(e.embed(&texts(&[""])).await.unwrap(), vec![vec![0.0, 0.0]]);
    assert!(e.embed(&[]).await.unwrap().is_empty());
}

/// Answers each request with one vector per input, `[position in the whole list, 1]`, read from
/// the input text, so that the test sees which text got which vector.
struct EchoPositions;

impl Respond for EchoPositions {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let n: f32 = t.as_str().unwrap().trim_start_matches("text ").parse().unwrap();
                json!({"index": i, "embedding": [n, 1.0]})
            })
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({"data": data}))
    }
}

#[tokio::test]
async fn long_lists_are_sent_in_batches_of_96() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(EchoPositions)
        .expect(3)
        .mount(&server)
        .await;
    let e = embedder(server.uri(), 2, Duration::from_secs(5));
    let input: Vec<String> = (0..200).map(|i| format!("text {i}")).collect();
    let out = e.embed(&input).await.unwrap();
    assert_eq!(out.len(), 200);
    for (i, v) in out.iter().enumerate() {
        let n = i as f32;
        let norm = (n * n + 1.0).sqrt();
        assert!((v[0] - n / norm).abs() < 1e-5 && (v[1] - 1.0 / norm).abs() < 1e-5, "{i}: {v:?}");
    }
    let sizes: Vec<usize> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["input"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, vec![96, 96, 8]);
}

#[tokio::test]
async fn no_key_means_no_authorization_header() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"data": [{"index": 0, "embedding": [1.0]}]})),
        )
        .mount(&server)
        .await;
    let e = OpenAiEmbedder::new(OpenAiEmbedderSettings {
        base_url: server.uri(),
        api_key: None,
        model: "m".into(),
        dimension: 1,
        timeout: Duration::from_secs(5),
    })
    .unwrap();
    e.embed(&texts(&["x"])).await.unwrap();
    let requests = server.received_requests().await.unwrap();
    assert!(requests[0].headers.get("authorization").is_none());
}

#[tokio::test]
async fn an_error_answer_is_an_upstream_error_with_the_status_and_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(ResponseTemplate::new(500).set_body_string("model overloaded"))
        .mount(&server)
        .await;
    let err = embedder(server.uri(), 2, Duration::from_secs(5)).embed(&texts(&["x"])).await.unwrap_err();
    match err {
        EmbedError::Upstream(m) => assert!(m.contains("500") && m.contains("model overloaded"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_vector_of_the_wrong_dimension_is_an_upstream_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"index": 0, "embedding": [1.0, 0.0, 0.0]}]})),
        )
        .mount(&server)
        .await;
    let err = embedder(server.uri(), 1536, Duration::from_secs(5)).embed(&texts(&["x"])).await.unwrap_err();
    match err {
        EmbedError::Upstream(m) => assert!(m.contains('3') && m.contains("1536"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn missing_duplicate_or_unreadable_answers_are_upstream_errors() {
    let answers = [
        json!({"data": [{"index": 0, "embedding": [1.0]}]}),
        json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}),
        json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 5, "embedding": [1.0]}]}),
        json!({"error": "nope"}),
    ];
    for answer in answers {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/embeddings"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer.clone()))
            .mount(&server)
            .await;
        let err =
            embedder(server.uri(), 1, Duration::from_secs(5)).embed(&texts(&["a", "b"])).await.unwrap_err();
        assert!(matches!(err, EmbedError::Upstream(_)), "{answer}: {err:?}");
    }
}

#[tokio::test]
async fn a_slow_server_is_a_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"index": 0, "embedding": [1.0]}]}))
                .set_delay(Duration::from_secs(5)),
        )
        .mount(&server)
        .await;
    let err = embedder(server.uri(), 1, Duration::from_millis(200)).embed(&texts(&["x"])).await.unwrap_err();
    assert!(matches!(err, EmbedError::Timeout), "{err:?}");
}

#[tokio::test]
async fn an_unreachable_server_is_an_upstream_error() {
    // A port nobody listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = embedder(format!("http://127.0.0.1:{port}"), 1, Duration::from_secs(5))
        .embed(&texts(&["x"]))
        .await
        .unwrap_err();
    assert!(matches!(err, EmbedError::Upstream(_)), "{err:?}");
}

//! What an outside security probe found, as tests with the real binary under a 4 GiB
//! address-space limit on both databases: templates that would allocate gigabytes while they
//! are saved (compiled), rendered, or past their step's timeout, U+0000 in an input, in a rendered value, in an HTTP answer and in
//! a webhook receiver's reply. Each execution fails (or completes) with a clear result, the
//! service stays up, another tenant's execution runs, and nothing is sent more often than its
//! schedule allows.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::processes::{WEBHOOK_ENV, free_port, start_limited, unlimited_tenant};

/// 4 GiB of address space, as the probe ran the service.
const ADDRESS_SPACE_KIB: u64 = 4 * 1024 * 1024;

/// The doubling template: 2^40 bytes after 40 instructions.
const DOUBLING: &str = "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}";

/// 1,500 strings of 80 MB each, one after the other.
const REPEATING: &str = "{% for i in range(1500) %}{% set y = ('x' ~ (i % 10)) * 40000000 %}{% endfor %}done";

struct Probe {
    base: String,
    client: reqwest::Client,
    token: String,
}

impl Probe {
    async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    async fn get(&self, path: &str) -> Value {
        let r =
            self.client.get(format!("{}{path}", self.base)).bearer_auth(&self.token).send().await.unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.unwrap()
    }

    async fn workflow(&self, steps: Value) -> String {
        let r = self.post("/api/v1/workflows", &json!({"name": "probe", "steps": steps})).await;
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
    }

    async fn execute(&self, workflow: &str, input: Value) -> String {
        let r = self.post(&format!("/api/v1/workflows/{workflow}/execute"), &json!({"input": input})).await;
        assert_eq!(r.status(), 202, "{}", r.text().await.unwrap());
        r.json::<Value>().await.unwrap()["execution_id"].as_str().unwrap().to_owned()
    }

    /// The execution once it has ended (at most 60 s).
    async fn finished(&self, id: &str) -> Value {
        for _ in 0..600 {
            let shown = self.get(&format!("/api/v1/executions/{id}")).await;
            if shown["status"] != "running" {
                return shown;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("execution {id} did not end");
    }
}

async fn receiver() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/nul-json"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(br#"{"v": "a\u0000b"}"#.to_vec(), "application/json"),
        )
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/nul-raw"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(b"raw\0byte".to_vec(), "text/plain"))
        .mount(&server)
        .await;
    server
}

fn hits(requests: &[wiremock::Request], at: &str) -> usize {
    requests.iter().filter(|r| r.url.path() == at).count()
}

async fn no_input_takes_the_service_down(database_url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut env = WEBHOOK_ENV.to_vec();
    env.push(("AGENTRY_WORKFLOW_CONCURRENCY", "4"));
    let mut service = start_limited(
        ADDRESS_SPACE_KIB,
        port,
        dir.path(),
        database_url,
        &env,
        std::process::Stdio::inherit(),
    )
    .await;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let probe = Probe {
        base: base.clone(),
        client: client.clone(),
        token: unlimited_tenant(&base, database_url, "probe@example.com").await,
    };
    let other = Probe {
        base: base.clone(),
        client,
        token: unlimited_tenant(&base, database_url, "other@example.com").await,
    };
    let server = receiver().await;

    // Constants that would be built while the template is compiled, on the saving request
    // (forty of 100 MB): refused when saved, naming the step's field, five at once; nothing is
    // built to find that out.
    let bomb = "{{ ('x' * 99999999)|length }}".repeat(40);
    let body = json!({"name": "bomb", "steps": [{"id": "t", "type": "transform", "output": bomb}]});
    let saves = (0..5).map(|_| probe.post("/api/v1/workflows", &body));
    for r in futures_util::future::join_all(saves).await {
        assert_eq!(r.status(), 422);
        let refused: Value = r.json().await.unwrap();
        assert_eq!(refused["details"][0]["field"], "steps[0].output", "{refused}");
        assert!(refused.to_string().contains("can never render"), "{refused}");
    }
    // Within the largest value, the same shape saves and runs (computed by the render).
    let large = probe
        .workflow(
            json!([{"id": "t", "type": "transform", "output": "{{ ('x' * 200000)|length }}".repeat(17)}]),
        )
        .await;
    let large_runs: Vec<String> =
        futures_util::future::join_all((0..3).map(|_| probe.execute(&large, json!({})))).await;

    // Templates that would allocate gigabytes: refused as they grow, within the step.
    let doubling = probe.workflow(json!([{"id": "t", "type": "transform", "output": DOUBLING}])).await;
    let repeating = probe
        .workflow(json!([{"id": "t", "type": "transform", "timeout_seconds": 5, "output": REPEATING}]))
        .await;
    let doubling_run = probe.execute(&doubling, json!({})).await;
    let repeating_run = probe.execute(&repeating, json!({})).await;
    // Another tenant's execution, started behind them, runs as well.
    let plain =
        other.workflow(json!([{"id": "t", "type": "transform", "output": "{{ input.n + 1 }}"}])).await;
    let plain_run = other.execute(&plain, json!({"n": 41})).await;

    // U+0000: refused in an input, replaced where it is rendered or comes from a remote answer.
    let nul = probe
        .workflow(json!([
            {"id": "rendered", "type": "transform", "output": "{{ 'a\\u0000b' }}"},
            {"id": "json", "type": "http_request", "method": "POST", "url": format!("{}/nul-json", server.uri())},
            {"id": "raw", "type": "http_request", "method": "POST", "url": format!("{}/nul-raw", server.uri())},
        ]))
        .await;
    let r =
        probe.post(&format!("/api/v1/workflows/{nul}/execute"), &json!({"input": {"x": "a\u{0}b"}})).await;
    assert_eq!(r.status(), 422);
    let refused: Value = r.json().await.unwrap();
    assert!(refused.to_string().contains("input.x") && refused.to_string().contains("U+0000"), "{refused}");
    let nul_run = probe.execute(&nul, json!({})).await;

    for run in &large_runs {
        let shown = probe.finished(run).await;
        assert_eq!(shown["output"], json!("200000".repeat(17)), "{shown}");
    }
    for run in [&doubling_run, &repeating_run] {
        let shown = probe.finished(run).await;
        assert_eq!(shown["status"], "failed", "{shown}");
        let error = shown["steps"][0]["error"].as_str().unwrap_or_default();
        assert!(error.contains("more than"), "the step says why: {shown}");
    }
    let shown = other.finished(&plain_run).await;
    assert_eq!(
        (shown["status"].clone(), shown["output"].clone()),
        (json!("completed"), json!(42)),
        "{shown}"
    );

    let shown = probe.finished(&nul_run).await;
    assert_eq!(shown["status"], "completed", "{shown}");
    assert_eq!(shown["steps"][0]["output"], json!("a\u{FFFD}b"));
    assert_eq!(shown["steps"][1]["output"]["body"], json!({"v": "a\u{FFFD}b"}));
    assert_eq!(shown["steps"][2]["output"]["body"], json!("raw\u{FFFD}byte"));
    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        (hits(&requests, "/nul-json"), hits(&requests, "/nul-raw")),
        (1, 1),
        "each request went out once"
    );

    // The service is still up, and the same process served all of it.
    assert!(service.try_wait().unwrap().is_none(), "the service is still running");
    let health = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
}

async fn a_receiver_answering_nul_is_recorded_once(database_url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let _service = start_limited(
        ADDRESS_SPACE_KIB,
        port,
        dir.path(),
        database_url,
        WEBHOOK_ENV,
        std::process::Stdio::inherit(),
    )
    .await;
    let base = format!("http://127.0.0.1:{port}");
    let probe = Probe {
        base: base.clone(),
        client: reqwest::Client::new(),
        token: unlimited_tenant(&base, database_url, "hooks@example.com").await,
    };
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(b"ok\0".to_vec(), "text/plain"))
        .mount(&server)
        .await;
    let r = probe
        .post(
            "/api/v1/webhooks",
            &json!({"url": format!("{}/hook", server.uri()), "events": ["agent.created"]}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let webhook = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    assert_eq!(probe.post("/api/v1/agents", &json!({"name": "probe"})).await.status(), 201);

    let mut delivered = Value::Null;
    for _ in 0..300 {
        let items = probe.get(&format!("/api/v1/webhooks/{webhook}/deliveries")).await["items"].clone();
        if items[0]["status"] == "delivered" {
            delivered = items[0].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(delivered["status"], "delivered", "the attempt was recorded");
    let delivery = delivered["id"].as_str().unwrap();
    let attempts = probe.get(&format!("/api/v1/webhooks/{webhook}/deliveries/{delivery}/attempts")).await;
    let attempts =
        attempts["items"].as_array().cloned().unwrap_or_else(|| attempts.as_array().cloned().unwrap());
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0]["response_body"], json!("ok\u{FFFD}"));
    assert_eq!(hits(&server.received_requests().await.unwrap(), "/hook"), 1, "sent once");
}

#[tokio::test]
async fn no_input_takes_the_service_down_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    no_input_takes_the_service_down(&format!("sqlite://{}", dir.path().join("agentry.db").display())).await;
}

#[tokio::test]
async fn no_input_takes_the_service_down_on_postgresql() {
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    no_input_takes_the_service_down(&url).await;
}

#[tokio::test]
async fn a_receiver_answering_nul_is_recorded_once_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    a_receiver_answering_nul_is_recorded_once(&format!(
        "sqlite://{}",
        dir.path().join("agentry.db").display()
    ))
    .await;
}

#[tokio::test]
async fn a_receiver_answering_nul_is_recorded_once_on_postgresql() {
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    a_receiver_answering_nul_is_recorded_once(&url).await;
}

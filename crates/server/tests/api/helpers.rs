//! A running application per test, on its own SQLite file (or PostgreSQL schema), and a client.

use std::sync::{Arc, Once};

use agentry_server::system::ManualClock;
use agentry_server::{Application, Config, Overrides};
use reqwest::{Client, Response};
use secrecy::SecretString;
use serde_json::{Value, json};

/// The JWT key the test applications sign with, so tests can mint tokens of their own.
pub const JWT_SECRET: &str = "test-secret-test-secret-test-secret-0123";

pub struct TestApp {
    pub base: String,
    pub client: Client,
    pub handle: actix_web::dev::ServerHandle,
    pub db: agentry_store::Database,
    /// The application's clock, when the test set one (see [`spawn_with_clock`]).
    pub clock: Option<Arc<ManualClock>>,
    /// Its queues of durable work (see [`TestApp::drain`]).
    pub work: agentry_server::workers::WorkSet,
    data_dir: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

pub fn install_crypto() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Where the embedding model is: `AGENTRY_EMBEDDING_MODEL_DIR`, else the repository's
/// `data/models/all-MiniLM-L6-v2` (which `make test` fills).
pub fn model_dir() -> std::path::PathBuf {
    std::env::var_os("AGENTRY_EMBEDDING_MODEL_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/models/all-MiniLM-L6-v2"),
        std::path::PathBuf::from,
    )
}

/// Whether the real embedding model can run here. Without its files a test that needs it is
/// skipped, with a note, unless `AGENTRY_REQUIRE_MODEL=1` makes that a failure.
pub fn model_available() -> bool {
    if agentry_embed::MiniLmEmbedder::files_present(&model_dir()) {
        return true;
    }
    assert!(
        std::env::var("AGENTRY_REQUIRE_MODEL").as_deref() != Ok("1"),
        "AGENTRY_REQUIRE_MODEL=1 but no embedding model in {} (run `make model`)",
        model_dir().display()
    );
    eprintln!("skipping: no embedding model in {} (run `make model`)", model_dir().display());
    false
}

/// Answers with the language model at `path` in process (not the built-in responder).
pub fn use_local_model(c: &mut Config, path: &std::path::Path) {
    c.llm_provider = agentry_server::config::LlmProvider::Smollm;
    c.llm_model_path = path.to_path_buf();
}

/// The SmolLM2 file (`AGENTRY_LLM_MODEL_PATH`, else the repository's
/// `data/models/SmolLM2-135M-Instruct.Q4_1.gguf`), or `None`, with a note, when it is absent
/// (a failure under `AGENTRY_REQUIRE_MODEL=1`).
pub fn language_model() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("AGENTRY_LLM_MODEL_PATH").map_or_else(
        || {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../data/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        },
        std::path::PathBuf::from,
    );
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var("AGENTRY_REQUIRE_MODEL").as_deref() != Ok("1"),
        "AGENTRY_REQUIRE_MODEL=1 but no language model at {} (run `make model`)",
        path.display()
    );
    eprintln!("skipping: no language model at {} (run `make model`)", path.display());
    None
}

/// The repository's root and the Python of its test venv (`make venv`), or `None`, with a note,
/// when the venv is absent (a failure under `AGENTRY_REQUIRE_TOOLS=1`).
pub fn python_tools(what: &str) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".venv-ci/bin/python");
    if python.exists() {
        return Some((root, python));
    }
    assert!(
        std::env::var("AGENTRY_REQUIRE_TOOLS").as_deref() != Ok("1"),
        "AGENTRY_REQUIRE_TOOLS=1 but no {} (run `make venv`)",
        python.display()
    );
    eprintln!("skipping {what}: no {} (run `make venv`)", python.display());
    None
}

/// A configuration for a test: port 0, its own data directory and SQLite file.
pub fn test_config(dir: &tempfile::TempDir) -> Config {
    Config {
        embedding_model_dir: model_dir(),
        bind: "127.0.0.1:0".into(),
        database_url: format!("sqlite://{}", dir.path().join("agentry.db").display()),
        data_dir: dir.path().to_path_buf(),
        jwt_secret: Some(SecretString::from(JWT_SECRET)),
        workers: Some(2),
        log: "warn".into(),
        // The deterministic responder: a test asks for SmolLM2 itself where it means to.
        llm_provider: agentry_server::config::LlmProvider::Builtin,
        // The scripted upstreams of these tests answer with replies of 1,000 tokens and more,
        // which a chat holds credits for only with replies that long allowed (the service's
        // default is 512; the tests of the cut-off reply set their agent's own limit).
        chat_max_tokens: 1024,
        ..Config::default()
    }
}

/// Starts the application with the default test configuration.
pub async fn spawn() -> TestApp {
    spawn_with(|_| {}).await
}

/// Starts the application after `tweak` has adjusted the test configuration.
pub async fn spawn_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut config = test_config(&dir);
    tweak(&mut config);
    start(config, dir).await
}

/// Starts the application with `config`, keeping `dir` alive as long as it runs.
pub async fn start(config: Config, dir: tempfile::TempDir) -> TestApp {
    start_with(config, dir, None).await
}

/// Starts the application on a clock that only moves when the test says: at the first second of
/// a minute, so rate-limit windows and expiries are the test's to control, not the wall
/// clock's.
pub async fn spawn_with_clock(tweak: impl FnOnce(&mut Config)) -> TestApp {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut config = test_config(&dir);
    tweak(&mut config);
    start_with(config, dir, Some(minute_clock())).await
}

/// A manual clock at the first second of the current minute, or at the start of the next UTC
/// day when less than half an hour of this one is left: tests move it forward by minutes and
/// count per day, so it must not cross midnight under them.
pub fn minute_clock() -> Arc<ManualClock> {
    let now = chrono::Utc::now().timestamp();
    let left_of_day = 86_400 - now.rem_euclid(86_400);
    let start = if left_of_day < 30 * 60 { now + left_of_day } else { now - now.rem_euclid(60) };
    Arc::new(ManualClock::new(chrono::DateTime::from_timestamp(start, 0).expect("a time")))
}

/// Starts the application with `config`, on `clock` when given.
pub async fn start_with(config: Config, dir: tempfile::TempDir, clock: Option<Arc<ManualClock>>) -> TestApp {
    install_crypto();
    agentry_server::telemetry::init(&config);
    let overrides =
        Overrides { clock: clock.clone().map(|c| c as Arc<dyn agentry_domain::time::Clock>), embedder: None };
    let app = Application::build_with(&config, overrides).await.expect("application starts");
    let base = format!("http://{}", app.addr());
    let handle = app.handle();
    let db = app.database().clone();
    let work = app.work();
    tokio::spawn(app.run_until_stopped());
    TestApp {
        base,
        // Idle connections are dropped before the server's keep-alive (5 s) closes them: a
        // request sent on a connection the server is closing at that moment fails, which a
        // loaded test machine (long pauses between requests) would otherwise meet now and then.
        client: Client::builder()
            .pool_idle_timeout(std::time::Duration::from_secs(2))
            .build()
            .expect("an HTTP client"),
        handle,
        db,
        clock,
        work,
        data_dir: config.data_dir.clone(),
        _dir: dir,
    }
}

impl TestApp {
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Response {
        self.client.post(self.url(path)).json(body).send().await.expect("request sent")
    }

    pub async fn post_json_with_token(&self, path: &str, token: &str, body: &Value) -> Response {
        self.client.post(self.url(path)).bearer_auth(token).json(body).send().await.expect("request sent")
    }

    pub async fn delete_with_token(&self, path: &str, token: &str) -> Response {
        self.client.delete(self.url(path)).bearer_auth(token).send().await.expect("request sent")
    }

    pub async fn put_json_with_token(&self, path: &str, token: &str, body: &Value) -> Response {
        self.client.put(self.url(path)).bearer_auth(token).json(body).send().await.expect("request sent")
    }

    pub async fn patch_json_with_token(&self, path: &str, token: &str, body: &Value) -> Response {
        self.client.patch(self.url(path)).bearer_auth(token).json(body).send().await.expect("request sent")
    }

    /// Creates an agent and returns it.
    pub async fn create_agent(&self, token: &str, body: Value) -> Value {
        json_with_status(self.post_json_with_token("/api/v1/agents", token, &body).await, 201).await
    }

    /// The tenant's events, newest first.
    pub async fn events(&self, tenant: &str) -> Vec<agentry_domain::events::Event> {
        use agentry_domain::events::EventLog as _;
        let tenant = agentry_domain::ids::TenantId::from_string(tenant);
        agentry_store::EventStore::new(self.db.clone()).recent(&tenant, 1000).await.expect("events")
    }

    /// The caller's first tenant id.
    pub async fn tenant_of(&self, token: &str) -> String {
        let me = json_with_status(self.get_with_token("/api/v1/auth/me", token).await, 200).await;
        me["tenants"][0]["id"].as_str().expect("tenant id").to_owned()
    }

    pub async fn get_with_token(&self, path: &str, token: &str) -> Response {
        self.client.get(self.url(path)).bearer_auth(token).send().await.expect("request sent")
    }

    pub async fn register(&self, email: &str, company: Option<&str>) -> Response {
        let mut body =
            json!({"email": email, "password": "correct horse battery", "full_name": "Ada Lovelace"});
        if let Some(company) = company {
            body["company"] = json!(company);
        }
        self.post_json("/api/v1/auth/register", &body).await
    }

    pub async fn login(&self, email: &str, password: &str) -> Response {
        self.client
            .post(self.url("/api/v1/auth/login"))
            .form(&[("username", email), ("password", password), ("grant_type", "password")])
            .send()
            .await
            .expect("request sent")
    }

    /// Registers `email` and signs in: the access token.
    pub async fn access_token(&self, email: &str) -> String {
        self.signed_in(email).await["access_token"].as_str().expect("access token").to_owned()
    }

    /// Registers `email` and signs in: the token response.
    pub async fn signed_in(&self, email: &str) -> Value {
        assert_eq!(self.register(email, Some("Acme")).await.status(), 201);
        let response = self.login(email, "correct horse battery").await;
        assert_eq!(response.status(), 200);
        response.json().await.expect("token JSON")
    }
}

/// Sends `request` as written on a fresh connection and returns everything the server answers
/// until it closes the connection (or 5 s pass): for requests an HTTP client would not send.
pub async fn raw_request(app: &TestApp, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let addr = app.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// The body as JSON, asserting the status first.
pub async fn json_with_status(response: Response, status: u16) -> Value {
    let actual = response.status().as_u16();
    let text = response.text().await.expect("body");
    assert_eq!(actual, status, "unexpected status, body: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("body is not JSON ({e}): {text}"))
}

impl TestApp {
    /// The application's manual clock.
    pub fn clock(&self) -> &ManualClock {
        self.clock.as_deref().expect("started with spawn_with_clock")
    }

    /// Runs the background work that is due now to its end (the fan-out of events, deliveries,
    /// executions, mail), beside the application's own workers: afterwards, every consequence
    /// of what the test did has happened, or never will.
    pub async fn drain(&self) {
        self.work.drain().await.expect("background work");
    }

    /// Waits until every queued job (mail) has run: background work is the service's own
    /// business, and tests that count its effects wait for it rather than for time.
    pub async fn jobs_done(&self) {
        let jobs = agentry_store::JobStore::new(self.db.clone());
        for _ in 0..500 {
            if jobs.pending().await.expect("jobs") == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("jobs still pending after 5 s");
    }
}

/// A fake OpenAI-compatible model server that answers every chat with `content` and the given
/// token counts after `delay`.
pub async fn slow_model(
    content: &str,
    usage: (u64, u64),
    delay: std::time::Duration,
) -> wiremock::MockServer {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let (prompt, completion) = usage;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({
                    "choices": [{"message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
                }))
                .set_delay(delay),
        )
        .mount(&server)
        .await;
    server
}

/// Points `config` at the OpenAI-compatible model server at `url`.
pub fn use_model(config: &mut Config, url: &str) {
    config.llm_provider = agentry_server::config::LlmProvider::Openai;
    url.clone_into(&mut config.llm_base_url);
    config.llm_api_key = Some(SecretString::from("sk-test"));
    config.llm_timeout_secs = 5;
}

/// Starts the application on a fresh PostgreSQL schema, or `None` when no test database is
/// configured (a failure instead under `AGENTRY_REQUIRE_POSTGRES=1`).
pub async fn spawn_postgres(tweak: impl FnOnce(&mut Config)) -> Option<TestApp> {
    let url = agentry_store::test_support::postgres_url().await.expect("a test schema")?;
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut config = test_config(&dir);
    config.database_url = url;
    config.auto_migrate = Some(true);
    tweak(&mut config);
    Some(start(config, dir).await)
}

/// [`on_both_databases`] on a manual clock (see [`spawn_with_clock`]).
pub async fn on_both_databases_with_clock<F, Fut>(tweak: impl Fn(&mut Config), body: F)
where
    F: Fn(TestApp) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    body(spawn_with_clock(&tweak).await).await;
    if let Some(url) = agentry_store::test_support::postgres_url().await.expect("a test schema") {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut config = test_config(&dir);
        config.database_url = url;
        config.auto_migrate = Some(true);
        tweak(&mut config);
        body(start_with(config, dir, Some(minute_clock())).await).await;
    }
}

/// The same test body on SQLite and, when configured, on PostgreSQL.
pub async fn on_both_databases<F, Fut>(tweak: impl Fn(&mut Config), body: F)
where
    F: Fn(TestApp) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    body(spawn_with(&tweak).await).await;
    if let Some(app) = spawn_postgres(&tweak).await {
        body(app).await;
    }
}

/// The Redis for tests: `AGENTRY_TEST_REDIS_URL`, default `redis://127.0.0.1:6379`, or `None`
/// when nothing accepts a connection there. A test that needs it is then skipped, with a note,
/// unless `AGENTRY_REQUIRE_REDIS=1` makes that a failure.
pub fn redis_url() -> Option<String> {
    let url = std::env::var("AGENTRY_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let parsed = url::Url::parse(&url).unwrap_or_else(|e| panic!("AGENTRY_TEST_REDIS_URL {url:?}: {e}"));
    let host = parsed.host_str().unwrap_or("127.0.0.1");
    let port = parsed.port().unwrap_or(6379);
    let reachable = std::net::ToSocketAddrs::to_socket_addrs(&(host, port)).is_ok_and(|mut addrs| {
        addrs.any(|a| std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(1)).is_ok())
    });
    if reachable {
        return Some(url);
    }
    assert!(
        std::env::var("AGENTRY_REQUIRE_REDIS").as_deref() != Ok("1"),
        "AGENTRY_REQUIRE_REDIS=1 but nothing answers at {url}"
    );
    eprintln!("skipping: no Redis at {url} (set AGENTRY_TEST_REDIS_URL)");
    None
}

/// A Redis key prefix no other test (or run) uses.
pub fn unique_redis_prefix() -> String {
    format!("agentry-test:{}:{}:", std::process::id(), ulid::Ulid::new())
}

/// `config` counting its rate limits in the Redis at `url`, under a prefix of its own.
pub fn use_redis(config: &mut Config, url: &str) {
    config.rate_limit_store = agentry_server::config::RateLimitStore::Redis;
    config.redis_url = Some(SecretString::from(url.to_owned()));
    config.redis_key_prefix = unique_redis_prefix();
}

/// The form token of a page that signs in (`/magic-link`, `/invitation`): the hidden field's
/// value, and the `Cookie` header that carries the page's cookie back, as a browser would.
pub fn page_form_token(page: &Response) -> (String, String) {
    let cookie = page
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("agentry_page_csrf="))
        .and_then(|v| v.split(';').next())
        .expect("the page sets its form cookie")
        .to_owned();
    let value = cookie.split_once('=').map(|(_, v)| v.to_owned()).unwrap_or_default();
    (value, cookie)
}

/// A knowledge file made by a real writer (`crates/documents/tests/fixtures`, written by
/// `scripts/fixtures/make_knowledge_fixtures.py`).
pub fn knowledge_fixture(name: &str) -> Vec<u8> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../documents/tests/fixtures").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

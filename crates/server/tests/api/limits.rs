//! Plan rate limits per tenant, the same with each rate-limit store (process memory, the
//! database, Redis), shared across instances with the shared stores, and what a request gets
//! when Redis goes away and comes back.

use agentry_domain::time::Clock as _;
use agentry_server::config::{Config, RateLimitFailure, RateLimitStore};

use crate::helpers::{
    TestApp, json_with_status, minute_clock, redis_url, spawn, spawn_with_clock, start_with, test_config,
    use_redis,
};

async fn hit(app: &TestApp, token: &str) -> reqwest::Response {
    app.get_with_token("/api/v1/agents", token).await
}

/// Runs a limit test body with each store: memory, the database (the SQLite file here; the
/// PostgreSQL statement has its own test below and in the store's contract tests), and Redis
/// when it answers.
macro_rules! with_each_store {
    ($body:ident: $memory:ident, $database:ident, $redis:ident) => {
        #[tokio::test]
        async fn $memory() {
            $body(|c: &mut Config| c.rate_limit_store = RateLimitStore::Memory).await;
        }

        #[tokio::test]
        async fn $database() {
            $body(|c: &mut Config| c.rate_limit_store = RateLimitStore::Database).await;
        }

        #[tokio::test]
        async fn $redis() {
            let Some(url) = redis_url() else { return };
            $body(move |c: &mut Config| use_redis(c, &url)).await;
        }
    };
}

with_each_store!(the_61st_request_of_a_minute_is_429_and_other_tenants_are_unaffected:
    the_61st_request_is_429_with_the_memory_store,
    the_61st_request_is_429_with_the_database_store,
    the_61st_request_is_429_with_the_redis_store);

with_each_store!(when_the_day_is_spent_the_headers_describe_the_day:
    the_day_is_spent_with_the_memory_store,
    the_day_is_spent_with_the_database_store,
    the_day_is_spent_with_the_redis_store);

async fn the_61st_request_of_a_minute_is_429_and_other_tenants_are_unaffected(
    store: impl FnOnce(&mut Config),
) {
    let app = spawn_with_clock(store).await;
    let ada = app.access_token("ada@example.com").await;
    let eve = app.access_token("eve@example.com").await;
    for i in 1..=60 {
        let r = hit(&app, &ada).await;
        assert_eq!(r.status(), 200, "request {i}");
        assert_eq!(r.headers()["x-ratelimit-limit"], "60");
        assert_eq!(r.headers()["x-ratelimit-remaining"], (60 - i).to_string().as_str());
        let reset: i64 = r.headers()["x-ratelimit-reset"].to_str().unwrap().parse().unwrap();
        assert_eq!(reset % 60, 0, "the reset is the end of the current minute");
    }
    let r = hit(&app, &ada).await;
    assert_eq!(r.headers()["x-ratelimit-remaining"], "0");
    let retry_after: u64 = r.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after));
    let body = json_with_status(r, 429).await;
    assert_eq!(body["error"], "rate_limit_exceeded");
    assert_eq!(body["retry_after"].as_u64(), Some(retry_after));

    assert_eq!(hit(&app, &eve).await.status(), 200, "another tenant has its own budget");

    // The next minute brings a new budget.
    app.clock().advance(chrono::Duration::seconds(60));
    assert_eq!(hit(&app, &ada).await.status(), 200);
}

async fn when_the_day_is_spent_the_headers_describe_the_day(store: impl FnOnce(&mut Config)) {
    let app = spawn_with_clock(store).await;
    let ada = app.access_token("ada@example.com").await;
    // 1,000 a day on Starter: 16 minutes of 60, then 40 more.
    for minute in 0..16 {
        for _ in 0..60 {
            if hit(&app, &ada).await.status() != 200 {
                panic!("refused in minute {minute}");
            }
        }
        app.clock().advance(chrono::Duration::seconds(60));
    }
    for _ in 0..40 {
        assert_eq!(hit(&app, &ada).await.status(), 200);
    }
    let r = hit(&app, &ada).await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["x-ratelimit-limit"], "1000", "the day's limit");
    assert_eq!(r.headers()["x-ratelimit-remaining"], "0");
    let reset: i64 = r.headers()["x-ratelimit-reset"].to_str().unwrap().parse().unwrap();
    assert_eq!(reset % 86_400, 0, "the end of the UTC day");
    let retry_after: i64 = r.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert_eq!(reset - app.clock().now().timestamp(), retry_after);
}

/// Two instances on one PostgreSQL database enforce one limit together: with the database
/// store (PostgreSQL's default) and with Redis.
#[tokio::test]
async fn two_instances_on_one_postgresql_database_share_the_limit() {
    two_instances_share_the_limit(|_| {}).await;
}

#[tokio::test]
async fn two_instances_with_the_redis_store_share_the_limit() {
    let Some(redis) = redis_url() else { return };
    let prefix = crate::helpers::unique_redis_prefix();
    two_instances_share_the_limit(move |c| {
        use_redis(c, &redis);
        c.redis_key_prefix.clone_from(&prefix);
    })
    .await;
}

async fn two_instances_share_the_limit(store: impl Fn(&mut Config)) {
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    let configure = |dir: &tempfile::TempDir| {
        let mut c = test_config(dir);
        c.database_url = url.clone();
        c.auto_migrate = Some(true);
        store(&mut c);
        c
    };
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // One clock for both: the same minute window, whatever the wall clock does.
    let clock = minute_clock();
    let a = start_with(configure(&dir_a), dir_a, Some(clock.clone())).await;
    let b = start_with(configure(&dir_b), dir_b, Some(clock)).await;
    let token = a.access_token("ada@example.com").await;
    for i in 0..60 {
        let app = if i % 2 == 0 { &a } else { &b };
        assert_eq!(hit(app, &token).await.status(), 200, "request {}", i + 1);
    }
    assert_eq!(hit(&a, &token).await.status(), 429);
    assert_eq!(hit(&b, &token).await.status(), 429);
}

#[tokio::test]
async fn an_enterprise_tenant_is_not_limited() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let tenant = app.tenant_of(&token).await;
    use agentry_domain::billing::CreditRepository as _;
    agentry_store::CreditStore::new(app.db.clone())
        .set_plan(
            &agentry_domain::ids::TenantId::from_string(tenant),
            agentry_domain::tenancy::Plan::Enterprise,
        )
        .await
        .unwrap();
    for _ in 0..70 {
        let r = hit(&app, &token).await;
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("x-ratelimit-limit").is_none());
    }
}

/// A Redis of the test's own, on a free loopback port, that the test can stop and start again.
struct OwnRedis {
    port: u16,
    process: Option<tokio::process::Child>,
}

impl OwnRedis {
    /// `None` (a note) when `redis-server` is not installed, unless `AGENTRY_REQUIRE_REDIS=1`.
    async fn start() -> Option<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut redis = Self { port, process: None };
        if !redis.resume().await {
            assert!(
                std::env::var("AGENTRY_REQUIRE_REDIS").as_deref() != Ok("1"),
                "AGENTRY_REQUIRE_REDIS=1 but redis-server does not start"
            );
            eprintln!("skipping: redis-server is not installed");
            return None;
        }
        Some(redis)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (nothing kept on disk) and waits until it accepts connections.
    async fn resume(&mut self) -> bool {
        let Ok(child) = tokio::process::Command::new("redis-server")
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &self.port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
        else {
            return false;
        };
        self.process = Some(child);
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.is_ok() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        false
    }

    async fn stop(&mut self) {
        if let Some(mut child) = self.process.take() {
            child.kill().await.unwrap();
        }
    }
}

/// Redis stops in the middle of the traffic: with `open` requests go on, uncounted and without
/// rate-limit headers; with `closed` they are refused with 503 and `Retry-After`. Both are
/// counted in `/metrics`. When Redis is back, counting resumes by itself.
#[tokio::test]
async fn when_redis_stops_the_failure_policy_decides_and_counting_resumes_when_it_returns() {
    let Some(mut redis) = OwnRedis::start().await else { return };
    let with_policy = |policy| {
        let url = redis.url();
        move |c: &mut Config| {
            use_redis(c, &url);
            c.rate_limit_failure = policy;
            // A stopped Redis refuses connections at once; the timeout only has to allow for
            // a busy test machine.
            c.redis_timeout_ms = 2_000;
        }
    };
    let open = spawn_with_clock(with_policy(RateLimitFailure::Open)).await;
    let closed = spawn_with_clock(with_policy(RateLimitFailure::Closed)).await;
    let (open_token, closed_token) =
        (open.access_token("ada@example.com").await, closed.access_token("eve@example.com").await);
    for (app, token) in [(&open, &open_token), (&closed, &closed_token)] {
        let r = hit(app, token).await;
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["x-ratelimit-remaining"], "59", "counted in Redis");
    }
    let errors = |scrape: &prom_text_format_parser::Scrape, policy| {
        crate::metrics::value(scrape, "agentry_rate_limit_store_errors_total", &[("policy", policy)])
            .unwrap_or(0.0)
    };
    let before = crate::metrics::scrape(&open.url("/metrics")).await;

    redis.stop().await;
    for _ in 0..3 {
        let r = hit(&open, &open_token).await;
        assert_eq!(r.status(), 200, "open: the request goes on");
        assert!(r.headers().get("x-ratelimit-limit").is_none(), "uncounted, so no rate-limit headers");
        let r = hit(&closed, &closed_token).await;
        assert_eq!(r.headers()["retry-after"], "1");
        let body = json_with_status(r, 503).await;
        assert_eq!(body["error"], "unavailable", "closed: refused until Redis answers");
    }
    let during = crate::metrics::scrape(&open.url("/metrics")).await;
    assert!(errors(&during, "open") >= errors(&before, "open") + 3.0, "open failures are counted");
    assert!(errors(&during, "closed") >= errors(&before, "closed") + 3.0, "closed failures are counted");

    assert!(redis.resume().await, "Redis starts again");
    for (app, token) in [(&open, &open_token), (&closed, &closed_token)] {
        let mut resumed = None;
        for _ in 0..100 {
            let r = hit(app, token).await;
            if r.status() == 200 && r.headers().contains_key("x-ratelimit-limit") {
                resumed = Some(r);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let r = resumed.expect("counting resumes once Redis is back");
        // Redis kept nothing on disk: the minute starts again (from its first request, or a
        // few more if a try that timed out during the restart was counted).
        let remaining: u64 = r.headers()["x-ratelimit-remaining"].to_str().unwrap().parse().unwrap();
        assert!((55..=59).contains(&remaining), "counting starts again: {remaining} remaining");
    }
}

/// With the Redis store the counters are keys in Redis, under the configured prefix, and the
/// database holds none at all: the hot path does not write to it.
#[tokio::test]
async fn the_redis_store_counts_in_redis_and_writes_no_counter_rows() {
    let Some(url) = redis_url() else { return };
    let prefix = crate::helpers::unique_redis_prefix();
    let app = spawn_with_clock(|c| {
        use_redis(c, &url);
        c.redis_key_prefix.clone_from(&prefix);
    })
    .await;
    let token = app.access_token("ada@example.com").await;
    for _ in 0..5 {
        assert_eq!(hit(&app, &token).await.status(), 200);
    }
    assert_eq!(app.db.count_rows("rate_limit_counters").await.unwrap(), 0);
    let tenant = app.tenant_of(&token).await;
    let keys = redis_keys(&url, &format!("{prefix}rl:{{tenant:{tenant}}}:*")).await;
    assert_eq!(keys, 2, "the tenant's minute and day windows");
}

/// How many keys of the Redis at `url` match `pattern` (`KEYS`, spoken in RESP over a plain
/// TCP connection: fine for a test's handful of keys).
async fn redis_keys(url: &str, pattern: &str) -> usize {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let parsed = url::Url::parse(url).unwrap();
    let address = (parsed.host_str().unwrap().to_owned(), parsed.port().unwrap_or(6379));
    let mut stream = tokio::io::BufReader::new(tokio::net::TcpStream::connect(address).await.unwrap());
    let command = format!("*2\r\n$4\r\nKEYS\r\n${}\r\n{pattern}\r\n", pattern.len());
    stream.get_mut().write_all(command.as_bytes()).await.unwrap();
    let mut header = String::new();
    stream.read_line(&mut header).await.unwrap();
    header
        .trim()
        .strip_prefix('*')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("KEYS answered {header:?}"))
}

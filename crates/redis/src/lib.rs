//! Agentry's Redis adapter: the [`RateCounter`] that several service instances share
//! (`AGENTRY_RATE_LIMIT_STORE=redis`).
//!
//! Each request is one round trip: a server-side Lua script counts the hit in each of its
//! windows in order, atomically (Redis runs a script alone), and stops after the first window
//! the hit takes past its limit — the same fixed windows, with the same semantics, as the
//! in-process and database counters, so every store gives the same answers and headers.
//!
//! Failures (Redis down, a slow answer past the timeout) come back as errors; what a request
//! then gets is the limiter's failure policy, decided in the domain, not here.

use std::sync::RwLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentry_domain::ratelimit::{RateCounter, Window};
use anyhow::Context as _;
use async_trait::async_trait;
use redis::IntoConnectionInfo as _;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// Counts one hit in each window (`KEYS[i]`, expiring at `ARGV[2i-1]`, limit `ARGV[2i]`), in
/// order, and returns the counts; stops after a window whose count passes its limit. The
/// window's key expires a little after the window ends, so Redis forgets ended windows by
/// itself.
const HIT_SCRIPT: &str = r"
local counts = {}
for i, key in ipairs(KEYS) do
  local count = redis.call('INCR', key)
  if count == 1 then
    redis.call('EXPIREAT', key, ARGV[2 * i - 1])
  end
  counts[i] = count
  if count > tonumber(ARGV[2 * i]) then
    break
  end
end
return counts
";

/// How long a window's key outlives the window: an instance whose clock lags Redis's by less
/// than this still finds the key of its current window, rather than recreating one that Redis
/// deletes at once.
const EXPIRY_MARGIN_SECS: i64 = 60;

/// How the counter reaches Redis.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// `redis://[user:password@]host:port[/db]` (plain TCP: the TLS feature is not compiled in).
    pub url: String,
    /// Prepended to every key, so that several services (or test runs) can share one Redis.
    pub key_prefix: String,
    /// The most one count may take, connecting included; past it the count fails and the
    /// limiter's failure policy applies.
    pub timeout: Duration,
}

/// After this many failed counts in a row the connection is rebuilt from scratch (see
/// [`RedisRateCounter::failed`]).
const REBUILD_AFTER_FAILURES: u32 = 3;

/// Rate-limit windows in Redis, one key per subject and window.
pub struct RedisRateCounter {
    client: redis::Client,
    config: ConnectionManagerConfig,
    /// The connection every request shares (a clone of a `ConnectionManager` is a handle to
    /// the same multiplexed connection); replaced when it stops recovering by itself.
    connection: RwLock<ConnectionManager>,
    /// Failed counts since the last success.
    failures: AtomicU32,
    /// When the connection was last rebuilt, as milliseconds since `created`; 0 for never.
    rebuilt_at_ms: AtomicU64,
    created: Instant,
    script: redis::Script,
    key_prefix: String,
    timeout: Duration,
}

impl std::fmt::Debug for RedisRateCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRateCounter").field("key_prefix", &self.key_prefix).finish_non_exhaustive()
    }
}

impl RedisRateCounter {
    /// A counter on the Redis at `settings.url`. It connects on first use and reconnects by
    /// itself after Redis went away, so the service starts (and, failing open, serves) while
    /// Redis is down.
    ///
    /// # Errors
    /// When the URL is not a Redis URL.
    pub fn new(settings: &RedisSettings) -> anyhow::Result<Self> {
        let tcp = redis::io::tcp::TcpSettings::default().set_nodelay(true);
        // A connection whose peer vanished without a reset (a dead host, a failover) would
        // otherwise wait for the kernel's retransmissions to give up, some fifteen minutes.
        #[cfg(target_os = "linux")]
        let tcp = tcp.set_user_timeout((settings.timeout * 4).max(Duration::from_secs(1)));
        let info = settings
            .url
            .as_str()
            .into_connection_info()
            .context("AGENTRY_REDIS_URL is not a Redis URL")?
            .set_tcp_settings(tcp);
        let client = redis::Client::open(info)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.timeout))
            .set_response_timeout(Some(settings.timeout))
            // A short reconnection schedule: requests wait for a reconnection in progress, and
            // the timeout below bounds that wait anyway; the next request starts a new one.
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let connection = ConnectionManager::new_lazy_with_config(client.clone(), config.clone())?;
        Ok(Self {
            client,
            config,
            connection: RwLock::new(connection),
            failures: AtomicU32::new(0),
            rebuilt_at_ms: AtomicU64::new(0),
            created: Instant::now(),
            script: redis::Script::new(HIT_SCRIPT),
            key_prefix: settings.key_prefix.clone(),
            timeout: settings.timeout,
        })
    }

    /// The key of `subject`'s `window`. The subject is in braces (a hash tag), so that a
    /// subject's windows would share a slot on a Redis Cluster; Cluster itself is not
    /// supported (the client speaks to one server).
    fn key(&self, subject: &str, window: &Window) -> String {
        format!("{}rl:{{{subject}}}:{}:{}", self.key_prefix, window.name, window.start)
    }

    fn connection(&self) -> ConnectionManager {
        self.connection.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Counts a failure. The connection manager reconnects by itself after an I/O error, but
    /// not after every failure: a refused AUTH or SELECT during a reconnection (say, Redis at
    /// its client limit, or a password being rotated) or answers that time out on a connection
    /// nobody reset leave it failing. So after a few failures in a row, at most once a second,
    /// the connection is replaced by a fresh one.
    fn failed(&self) {
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        let now_ms = u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX).max(1);
        let last = self.rebuilt_at_ms.load(Ordering::Relaxed);
        if failures < REBUILD_AFTER_FAILURES || (last != 0 && now_ms.saturating_sub(last) < 1_000) {
            return;
        }
        if self.rebuilt_at_ms.compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            return; // Another request is rebuilding it.
        }
        match ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone()) {
            Ok(fresh) => {
                *self.connection.write().unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
                self.failures.store(0, Ordering::Relaxed);
                tracing::info!(failures, "the Redis connection was replaced after failures in a row");
            }
            Err(e) => tracing::warn!(error = %e, "a new Redis connection could not be set up"),
        }
    }

    /// Whether Redis answers a PING within the timeout (for readiness checks and tests).
    ///
    /// # Errors
    /// When it does not.
    pub async fn ping(&self) -> anyhow::Result<()> {
        let mut connection = self.connection();
        let ping = redis::cmd("PING");
        tokio::time::timeout(self.timeout, ping.query_async::<String>(&mut connection))
            .await
            .context("Redis did not answer in time")??;
        Ok(())
    }
}

#[async_trait]
impl RateCounter for RedisRateCounter {
    async fn hit(&self, subject: &str, windows: &[Window]) -> anyhow::Result<Vec<u64>> {
        let mut invocation = self.script.prepare_invoke();
        for window in windows {
            invocation
                .key(self.key(subject, window))
                .arg(window.start + window.secs + EXPIRY_MARGIN_SECS)
                .arg(window.limit);
        }
        let mut connection = self.connection();
        // The whole count — waiting for a reconnection, loading the script after a Redis
        // restart, the answer — within the timeout.
        let counted = invocation.invoke_async::<Vec<u64>>(&mut connection);
        let counts = match tokio::time::timeout(self.timeout, counted).await {
            Ok(Ok(counts)) => counts,
            Ok(Err(e)) => {
                self.failed();
                return Err(anyhow::Error::new(e).context("the Redis rate-limit script failed"));
            }
            Err(_) => {
                self.failed();
                anyhow::bail!("Redis did not answer within {} ms", self.timeout.as_millis());
            }
        };
        self.failures.store(0, Ordering::Relaxed);
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Redis of the tests: `AGENTRY_TEST_REDIS_URL`, by default the local one. Skipped
    /// with a note when it does not answer, unless `AGENTRY_REQUIRE_REDIS=1`.
    async fn test_counter(prefix: &str) -> Option<RedisRateCounter> {
        let url =
            std::env::var("AGENTRY_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
        let settings = RedisSettings { url, key_prefix: prefix.to_owned(), timeout: Duration::from_secs(2) };
        let counter = RedisRateCounter::new(&settings).expect("a Redis URL");
        match counter.ping().await {
            Ok(()) => Some(counter),
            Err(e) if std::env::var("AGENTRY_REQUIRE_REDIS").as_deref() == Ok("1") => {
                panic!("AGENTRY_REQUIRE_REDIS=1 but Redis does not answer: {e:#}")
            }
            Err(e) => {
                eprintln!("skipping: Redis does not answer ({e:#})");
                None
            }
        }
    }

    fn unique_prefix() -> String {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        format!("agentry-test:{}:{nanos}:", std::process::id())
    }

    #[tokio::test]
    async fn the_redis_counter_keeps_the_counter_contract() {
        let Some(counter) = test_counter(&unique_prefix()).await else { return };
        agentry_domain::ratelimit::contract::run_all(&counter, "redis").await;
    }

    #[tokio::test]
    async fn a_window_expires_a_minute_after_it_ends() {
        let prefix = unique_prefix();
        let Some(counter) = test_counter(&prefix).await else { return };
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let start = i64::try_from(now).unwrap() - 59;
        let window = Window { name: "m", start, secs: 60, limit: 5 };
        assert_eq!(counter.hit("ttl", &[window]).await.unwrap(), [1]);
        let mut connection = counter.connection();
        let ttl: i64 =
            redis::cmd("TTL").arg(counter.key("ttl", &window)).query_async(&mut connection).await.unwrap();
        assert!((55..=61).contains(&ttl), "expires a minute after the window ends: TTL {ttl}");
    }

    #[tokio::test]
    async fn keys_carry_the_prefix_and_hash_tag_the_subject() {
        let counter = RedisRateCounter::new(&RedisSettings {
            url: "redis://127.0.0.1:1".to_owned(),
            key_prefix: "agentry:".to_owned(),
            timeout: Duration::from_millis(10),
        })
        .unwrap();
        let window = Window { name: "d", start: 86_400, secs: 86_400, limit: 1 };
        assert_eq!(counter.key("tenant:ten_1", &window), "agentry:rl:{tenant:ten_1}:d:86400");
    }

    #[tokio::test]
    async fn an_unreachable_redis_fails_at_once() {
        // Port 1 on loopback: nothing listens, the connection is refused at once.
        let counter = RedisRateCounter::new(&RedisSettings {
            url: "redis://127.0.0.1:1".to_owned(),
            key_prefix: "agentry:".to_owned(),
            timeout: Duration::from_millis(300),
        })
        .unwrap();
        let window = Window { name: "m", start: 0, secs: 60, limit: 1 };
        let e = counter.hit("x", &[window]).await.unwrap_err();
        assert!(format!("{e:#}").contains("refused"), "{e:#}");
    }

    #[tokio::test]
    async fn a_redis_that_never_answers_fails_after_the_timeout() {
        // A listener on loopback that accepts connections and never says a word.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("redis://{}", silent.local_addr().unwrap());
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((socket, _)) = silent.accept().await {
                open.push(socket);
            }
        });
        let counter = RedisRateCounter::new(&RedisSettings {
            url,
            key_prefix: "agentry:".to_owned(),
            timeout: Duration::from_millis(300),
        })
        .unwrap();
        let window = Window { name: "m", start: 0, secs: 60, limit: 1 };
        for _ in 0..REBUILD_AFTER_FAILURES {
            let e = counter.hit("x", &[window]).await.unwrap_err();
            assert!(format!("{e:#}").contains("did not answer within 300 ms"), "{e:#}");
        }
        assert!(
            counter.rebuilt_at_ms.load(Ordering::Relaxed) > 0,
            "failures in a row replace the connection"
        );
        held.abort();
    }
}

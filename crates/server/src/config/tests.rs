use secrecy::ExposeSecret as _;

use super::*;

#[test]
fn defaults_serve_the_embedded_database_on_localhost() {
    let c = Config::default();
    assert_eq!(c.bind, "127.0.0.1:8080");
    assert_eq!(c.database_url, "sqlite://data/agentry.db");
    assert!(c.migrates_on_start());
    assert_eq!(c.embedding_cache_size, 10_000);
    assert_eq!(c.embedding_batch_wait_ms, 0);
    c.validate().unwrap();
}

#[test]
fn the_rate_limit_store_follows_the_database_unless_redis_is_configured() {
    let mut c = Config::default();
    assert_eq!(c.rate_limit_backend(), RateLimitStore::Memory, "SQLite: this process");
    c.database_url = "postgres://db.internal/agentry".into();
    assert_eq!(c.rate_limit_backend(), RateLimitStore::Database, "PostgreSQL: shared");
    c.redis_url = Some(SecretString::from("redis://cache.internal:6379"));
    assert_eq!(c.rate_limit_backend(), RateLimitStore::Redis, "a Redis URL: Redis");
    c.rate_limit_store = RateLimitStore::Database;
    assert_eq!(c.rate_limit_backend(), RateLimitStore::Database, "an explicit choice wins");
    c.rate_limit_store = RateLimitStore::Redis;
    c.redis_url = None;
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("AGENTRY_REDIS_URL"), "{e}");
}

#[test]
fn the_public_url_follows_the_bound_address_unless_set() {
    let mut c = Config::default();
    assert_eq!(c.public_url_for("127.0.0.1:9000".parse().unwrap()), "http://127.0.0.1:9000");
    assert_eq!(c.public_url_for("0.0.0.0:8080".parse().unwrap()), "http://127.0.0.1:8080");
    assert_eq!(c.public_url_for("[::]:8080".parse().unwrap()), "http://[::1]:8080");
    c.public_url = Some("https://agentry.example.com/".into());
    assert_eq!(c.public_url_for("0.0.0.0:8080".parse().unwrap()), "https://agentry.example.com");
    c.public_url = Some("ftp://x".into());
    assert!(c.validate().is_err());
}

#[test]
fn file_then_environment_override_defaults() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "agentry.toml",
            "bind = \"0.0.0.0:9000\"\nwelcome_credits = 5\nlog_format = \"json\"",
        )?;
        jail.set_env("AGENTRY_WELCOME_CREDITS", "7");
        jail.set_env("AGENTRY_JWT_SECRET", "12345678901234567890123456789012");
        jail.set_env("AGENTRY_API_ENVELOPE", "wrapped");
        let c = Config::load(Path::new("agentry.toml")).map_err(|e| e.to_string())?;
        assert_eq!(c.bind, "0.0.0.0:9000");
        assert_eq!(c.welcome_credits, 7);
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.api_envelope, ApiEnvelope::Wrapped);
        assert!(c.jwt_secret.is_some());
        Ok(())
    });
}

#[test]
fn a_retry_schedule_of_one_number_is_read_as_its_text() {
    figment::Jail::expect_with(|jail| {
        jail.set_env("AGENTRY_WEBHOOK_RETRY_SCHEDULE", "5");
        jail.set_env("AGENTRY_WORK_MAX_CLAIMS", "3");
        let c = Config::load(Path::new("none.toml")).map_err(|e| e.to_string())?;
        assert_eq!(c.webhook_retry_schedule, "5");
        assert_eq!(c.webhook_schedule().map_err(|e| e.to_string())?.max_attempts(), 1);
        assert_eq!(c.work_max_claims, 3);
        c.validate().map_err(|e| e.to_string())?;
        Ok(())
    });
}

#[test]
fn settings_are_read_as_written() {
    figment::Jail::expect_with(|jail| {
        let digits = "0123456789".repeat(7)[..64].to_owned();
        jail.set_env("AGENTRY_REDIS_KEY_PREFIX", "2026");
        jail.set_env("AGENTRY_SECRET_KEY", &digits);
        jail.set_env("AGENTRY_JWT_SECRET", &digits);
        jail.set_env("AGENTRY_LLM_MODEL", "007");
        jail.set_env("AGENTRY_WELCOME_CREDITS", "0042");
        jail.set_env("AGENTRY_WEBHOOK_ALLOW_INSECURE", "true");
        jail.set_env("AGENTRY_EMBEDDING_CACHE_SIZE", "0");
        jail.set_env("AGENTRY_EMBEDDING_BATCH_WAIT_MS", "5");
        let c = Config::load(Path::new("none.toml")).map_err(|e| e.to_string())?;
        assert_eq!(c.embedding_cache_size, 0);
        assert_eq!(c.embedding_batch_wait_ms, 5);
        assert_eq!(c.redis_key_prefix, "2026");
        assert_eq!(c.secret_key.as_ref().map(|k| k.expose_secret().to_owned()), Some(digits.clone()));
        assert_eq!(c.jwt_secret.as_ref().map(|k| k.expose_secret().to_owned()), Some(digits));
        assert_eq!(c.llm_model.as_deref(), Some("007"), "leading zeros kept");
        assert_eq!(c.welcome_credits, 42);
        assert!(c.webhook_allow_insecure);
        jail.set_env("AGENTRY_WELCOME_CREDITS", "many");
        let err = Config::load(Path::new("none.toml")).unwrap_err().to_string();
        assert!(err.contains("WELCOME_CREDITS") && err.contains("AGENTRY_"), "{err}");
        Ok(())
    });
}

#[test]
fn invalid_values_are_refused_with_the_setting_named() {
    figment::Jail::expect_with(|jail| {
        jail.set_env("AGENTRY_VALIDATION_STATUS", "418");
        let err = Config::load(Path::new("none.toml")).unwrap_err().to_string();
        assert!(err.contains("AGENTRY_VALIDATION_STATUS"), "{err}");
        jail.set_env("AGENTRY_VALIDATION_STATUS", "422");
        jail.set_env("AGENTRY_DATABASE_URL", "mysql://x");
        let err = Config::load(Path::new("none.toml")).unwrap_err().to_string();
        assert!(err.contains("unsupported database URL"), "{err}");
        jail.set_env("AGENTRY_DATABASE_URL", "sqlite://data/agentry.db");
        jail.set_env("AGENTRY_EMBEDDING_BATCH_WAIT_MS", "1001");
        let err = Config::load(Path::new("none.toml")).unwrap_err().to_string();
        assert!(err.contains("AGENTRY_EMBEDDING_BATCH_WAIT_MS"), "{err}");
        Ok(())
    });
}

//! `/metrics`: every family the operations guide documents, scraped over HTTP and read with a
//! Prometheus text-format parser.

use agentry_server::Application;
use prom_text_format_parser::{Metric, Scrape, Type, ValueType};
use serde_json::json;

use crate::helpers::{TestApp, install_crypto, on_both_databases, test_config};

pub(crate) async fn scrape(url: &str) -> Scrape {
    let response = reqwest::get(url).await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    let text = response.text().await.unwrap();
    Scrape::parse(&text).expect("the Prometheus text format")
}

pub(crate) fn family<'a>(scrape: &'a Scrape, name: &str) -> Option<&'a Metric> {
    scrape.metrics.iter().find(|m| m.name == name)
}

/// The value of the sample of `name` with `labels` (a histogram's count), if there is one.
pub(crate) fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let family = family(scrape, name)?;
    let wanted = if family.kind == Type::Histogram { ValueType::Count } else { ValueType::Sample };
    family
        .samples
        .iter()
        .filter(|s| s.value.value_type == wanted)
        .find(|s| labels.iter().all(|(k, v)| s.labels.iter().any(|l| l.key == *k && l.value == *v)))
        .map(|s| s.value.value.as_f64())
}

/// Signs up, creates an agent, reads it, chats with it and is refused by the auth-route limit:
/// each kind of figure has something to count. Returns the agent's id.
async fn traffic(app: &TestApp) -> String {
    let token = app.access_token("metrics@example.com").await;
    let agent = app.create_agent(&token, json!({"name": "Counted", "type": "assistant"})).await;
    let id = agent["id"].as_str().unwrap().to_owned();
    let r = app.get_with_token(&format!("/api/v1/agents/{id}"), &token).await;
    assert_eq!(r.status(), 200);
    let r = app
        .post_json_with_token(&format!("/api/v1/agents/{id}/chat"), &token, &json!({"message": "hello"}))
        .await;
    assert_eq!(r.status(), 200);
    // The budget of the auth routes is 2 a minute here; register and login spent it.
    assert_eq!(app.login("metrics@example.com", "wrong password").await.status(), 429);
    id
}

#[tokio::test]
async fn metrics_list_every_family_with_route_templates_on_both_databases() {
    on_both_databases(
        |c| c.auth_rate_per_minute = 2,
        |app| async move {
            let agent_id = traffic(&app).await;
            let scrape = scrape(&app.url("/metrics")).await;

            // Requests by route template, method and status, with their latency.
            let read = [("route", "/api/v1/agents/{agent_id}"), ("method", "GET"), ("status", "200")];
            assert!(
                value(&scrape, "agentry_http_requests_total", &read).expect("the read, by template") >= 1.0
            );
            let chat = [("route", "/api/v1/agents/{agent_id}/chat"), ("method", "POST"), ("status", "200")];
            assert_eq!(
                family(&scrape, "agentry_http_request_duration_seconds").unwrap().kind,
                Type::Histogram
            );
            assert!(
                value(&scrape, "agentry_http_request_duration_seconds", &chat).expect("the chat's latency")
                    >= 1.0
            );
            for sample in &family(&scrape, "agentry_http_requests_total").unwrap().samples {
                for label in sample.labels.iter() {
                    assert!(!label.value.contains(&agent_id), "a raw path as a label: {}", label.value);
                }
            }

            // The database's connections and the wait for one.
            let backend = match app.db.backend() {
                agentry_store::Backend::Postgres => "postgres",
                agentry_store::Backend::Sqlite => "sqlite",
            };
            // Gauges are the process's: another test's service may have set them last, so only
            // their presence and the configured size are certain from the scrape.
            let on = [("backend", backend)];
            assert!(value(&scrape, "agentry_db_connections_max", &on).expect("the pool's size") >= 1.0);
            assert!(value(&scrape, "agentry_db_connections_open", &on).is_some());
            // What the gauges are read from: this service's own connections.
            assert!(app.db.pool_stats().open >= 1, "{:?}", app.db.pool_stats());
            assert!(value(&scrape, "agentry_db_connections_in_use", &on).is_some());
            assert!(value(&scrape, "agentry_db_connections_waiting", &on).is_some());
            assert!(value(&scrape, "agentry_db_acquire_duration_seconds", &[]).expect("waits") >= 1.0);
            if backend == "sqlite" {
                assert!(value(&scrape, "agentry_sqlite_write_queue_depth", &[]).is_some());
                assert!(value(&scrape, "agentry_sqlite_commits_total", &[]).expect("commits") >= 1.0);
                assert!(value(&scrape, "agentry_sqlite_write_units_total", &[]).expect("units") >= 1.0);
            }

            // The chat model, the credits it cost, and the refusal.
            let model = [("provider", "builtin"), ("outcome", "ok")];
            assert!(
                value(&scrape, "agentry_chat_model_duration_seconds", &model).expect("model time") >= 1.0
            );
            for kind in ["prompt", "completion"] {
                let tokens =
                    value(&scrape, "agentry_chat_tokens_total", &[("provider", "builtin"), ("kind", kind)]);
                assert!(tokens.expect("tokens") >= 1.0, "{kind} tokens");
            }
            assert!(value(&scrape, "agentry_credits_charged_total", &[]).expect("credits charged") >= 1.0);
            let refused = value(&scrape, "agentry_rate_limit_rejections_total", &[("limit", "auth_per_ip")]);
            assert!(refused.expect("the auth-route refusal") >= 1.0);

            // The background queues' backlog.
            assert!(value(&scrape, "agentry_queue_depth", &[("queue", "mail")]).is_some());
            assert!(value(&scrape, "agentry_queue_oldest_age_seconds", &[("queue", "mail")]).is_some());

            // Every family is described and typed.
            for metric in &scrape.metrics {
                assert!(metric.help_desc.is_some(), "{} has no HELP", metric.name);
                assert_ne!(metric.kind, Type::Untyped, "{} has no TYPE", metric.name);
            }
            app.handle.stop(true).await;
        },
    )
    .await;
}

#[tokio::test]
async fn metrics_bind_serves_metrics_on_a_second_address() {
    install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(&dir);
    config.metrics_bind = Some("127.0.0.1:0".into());
    let app = Application::build(&config).await.unwrap();
    let metrics = app.metrics_addr().expect("a metrics listener");
    let main = app.addr();
    let handle = app.handle();
    let running = tokio::spawn(app.run_until_stopped());
    reqwest::get(format!("http://{main}/healthz")).await.unwrap();

    let scrape = scrape(&format!("http://{metrics}/metrics")).await;
    assert!(family(&scrape, "agentry_db_connections_max").is_some());
    // Only /metrics is served there.
    let other = reqwest::get(format!("http://{metrics}/api/v1/agents")).await.unwrap();
    assert_eq!(other.status(), 404);

    handle.stop(true).await;
    running.await.unwrap().unwrap();
    assert!(reqwest::get(format!("http://{metrics}/metrics")).await.is_err(), "stopped with the service");
}

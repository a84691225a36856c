//! A webhook receiver for the benchmark (`scripts/bench.sh`): answers every POST with 204,
//! notes when each event arrived, and once nothing has arrived for `IDLE_SECS` after the
//! first delivery, prints one line and exits:
//!
//! `<deliveries> <distinct events> <deliveries per second> <p50 ms> <p99 ms>`
//!
//! The rate counts distinct events from the first event's `created_at` to the last arrival;
//! the latency is each event's arrival minus its `created_at` (the commit of the change that
//! made it, to the millisecond), so it covers fan-out, claiming, signing and sending.
//!
//! Usage: `webhook_sink PORT IDLE_SECS`

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use chrono::{DateTime, Utc};

#[derive(Default)]
struct Seen {
    deliveries: u64,
    /// Event id → (created_at, first arrival).
    first: HashMap<String, (DateTime<Utc>, DateTime<Utc>)>,
    last_arrival: Option<std::time::Instant>,
}

async fn receive(seen: web::Data<Mutex<Seen>>, body: web::Bytes) -> HttpResponse {
    let arrived = Utc::now();
    let Ok(envelope) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return HttpResponse::BadRequest().finish();
    };
    let id = envelope["id"].as_str().unwrap_or_default().to_owned();
    let created = envelope["created_at"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map_or(arrived, |t| t.with_timezone(&Utc));
    let mut seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    seen.deliveries += 1;
    seen.first.entry(id).or_insert((created, arrived));
    seen.last_arrival = Some(std::time::Instant::now());
    HttpResponse::NoContent().finish()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `<deliveries> <distinct events> <deliveries per second> <p50 ms> <p99 ms>`.
#[allow(clippy::cast_precision_loss)]
fn summary(seen: &Seen) -> String {
    let mut latencies: Vec<f64> =
        seen.first.values().map(|(c, a)| (*a - *c).num_microseconds().unwrap_or(0) as f64 / 1000.0).collect();
    latencies.sort_by(f64::total_cmp);
    let start = seen.first.values().map(|(c, _)| *c).min();
    let end = seen.first.values().map(|(_, a)| *a).max();
    let span = match (start, end) {
        (Some(s), Some(e)) => (e - s).num_milliseconds().max(1) as f64 / 1000.0,
        _ => 1.0,
    };
    format!(
        "{} {} {:.0} {:.1} {:.1}",
        seen.deliveries,
        seen.first.len(),
        seen.first.len() as f64 / span,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    )
}

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [port, idle] = args.as_slice() else {
        anyhow::bail!("usage: webhook_sink PORT IDLE_SECS");
    };
    let idle = Duration::from_secs(idle.parse()?);
    let seen = web::Data::new(Mutex::new(Seen::default()));
    let data = seen.clone();
    let server =
        HttpServer::new(move || App::new().app_data(data.clone()).default_service(web::post().to(receive)))
            .workers(1)
            .bind(("127.0.0.1", port.parse::<u16>()?))?
            .run();
    let handle = server.handle();
    let watcher = Arc::new(seen);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let done = watcher
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .last_arrival
                .is_some_and(|t| t.elapsed() >= idle);
            if done {
                let line = summary(&watcher.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
                #[allow(clippy::print_stdout)]
                {
                    println!("{line}");
                }
                handle.stop(false).await;
                return;
            }
        }
    });
    server.await?;
    Ok(())
}

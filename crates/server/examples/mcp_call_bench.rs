//! The cost of one remote MCP tool call as an agent makes it (the guarded client, the official
//! SDK: a session opened, `tools/call`, the session closed), against a plain HTTP round trip to
//! the same server, over loopback, one after the other (scripts/bench.sh mcp). It lives with the
//! server's examples so that it builds with the release build's features.
//!
//!     mcp_call_bench URL TOKEN [CALLS]
//!
//! URL is the server's MCP endpoint (`http://127.0.0.1:PORT/mcp`, `scripts/mcp_test_server.py`);
//! the plain round trip is `GET /ping` on the same server with the same headers. Prints p50 and
//! p99 of each and their ratio.

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use agentry_domain::mcp::{McpClient as _, McpEndpoint};
use agentry_egress::{EgressSettings, WebhookClient};
use serde_json::{Map, json};

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at].as_secs_f64() * 1000.0
}

fn summary(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort_unstable();
    (percentile(&times, 0.50), percentile(&times, 0.99))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, token) = (args[1].clone(), args[2].clone());
    let calls: usize = args.get(3).map_or(500, |n| n.parse().unwrap());
    let settings = EgressSettings {
        allow_private: true,
        timeout: Duration::from_secs(10),
        max_response_bytes: 1024 * 1024,
        ..EgressSettings::default()
    };
    let client = WebhookClient::new(settings, Vec::new()).unwrap();
    let endpoint = McpEndpoint {
        url: url.clone(),
        headers: vec![("Authorization".into(), format!("Bearer {token}"))],
        timeout: Duration::from_secs(10),
    };
    let arguments: Map<String, serde_json::Value> = json!({"a": 2, "b": 3}).as_object().unwrap().clone();
    let plain = reqwest::Client::new();
    let ping = url.trim_end_matches("/mcp").to_owned() + "/ping";

    let mut mcp_times = Vec::with_capacity(calls);
    let mut http_times = Vec::with_capacity(calls);
    // Warm-up (connections, the server's first requests), then alternate so that both see the
    // same machine.
    for round in 0..calls + 20 {
        let started = Instant::now();
        let result = client.call_tool(&endpoint, "add", arguments.clone()).await.unwrap();
        let mcp = started.elapsed();
        assert!(!result.is_error && result.content.to_string().contains('5'), "{:?}", result.content);
        let started = Instant::now();
        let answer = plain.get(&ping).bearer_auth(&token).send().await.unwrap();
        assert!(answer.status().is_success());
        answer.bytes().await.unwrap();
        let http = started.elapsed();
        if round >= 20 {
            mcp_times.push(mcp);
            http_times.push(http);
        }
    }
    let (mcp50, mcp99) = summary(mcp_times);
    let (http50, http99) = summary(http_times);
    println!("  remote MCP tool call (session opened, tools/call, closed), {calls} calls:");
    println!("    p50 {mcp50:.2} ms  p99 {mcp99:.2} ms");
    println!("  plain HTTP GET round trip to the same server:");
    println!("    p50 {http50:.2} ms  p99 {http99:.2} ms");
    println!("  ratio (MCP / plain): p50 {:.1}x  p99 {:.1}x", mcp50 / http50, mcp99 / http99);
}

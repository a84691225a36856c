//! Benchmark helper (`make bench-knowledge`): the embedding model's own throughput on a file's
//! chunks, with no service around it, the bound of a knowledge file's ingestion. Loads
//! all-MiniLM-L6-v2 as the service does, warms it up, then embeds the texts in batches of
//! `BATCH` (ingestion's batch), as many at once as the model runs (`MiniLmSettings`'
//! concurrency: two on two cores or more), and prints `{"chunks", "seconds", "peak_rss_mib"}`:
//! the model at its best on this machine, and the memory it takes to get there.
//!
//! `cargo run --release --example knowledge_embed_baseline -- MODEL_DIR TEXTS_JSON BATCH`
#![allow(clippy::print_stdout)]

use agentry_domain::memory::Embedder;
use agentry_embed::{MiniLmEmbedder, MiniLmSettings};
use futures_util::StreamExt as _;

/// This process's peak resident memory, in MiB (Linux).
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, texts, batch] = args.as_slice() else {
        anyhow::bail!("usage: knowledge_embed_baseline MODEL_DIR TEXTS_JSON BATCH");
    };
    let texts: Vec<String> = serde_json::from_str(&std::fs::read_to_string(texts)?)?;
    let batch: usize = batch.parse()?;
    let settings = MiniLmSettings::default();
    let at_once = settings.max_concurrency.max(1);
    let model = MiniLmEmbedder::load(std::path::Path::new(dir), settings)?;
    model.embed(&["warm up".to_owned()]).await?;
    let started = std::time::Instant::now();
    let mut batches = futures_util::stream::iter(texts.chunks(batch.max(1)))
        .map(|group| {
            let model = &model;
            async move { model.embed(group).await.map(|v| (v.len(), group.len())) }
        })
        .buffer_unordered(at_once);
    while let Some(done) = batches.next().await {
        let (vectors, texts) = done?;
        anyhow::ensure!(vectors == texts, "one vector per text");
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({"chunks": texts.len(), "seconds": seconds, "peak_rss_mib": peak_rss_mib()})
    );
    Ok(())
}

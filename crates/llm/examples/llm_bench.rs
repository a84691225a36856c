//! The local model's figures for `make bench-llm`: load time, prefill of a 45-token prompt,
//! decoded tokens per second, the memory the model holds, and the aggregate tokens per second
//! of 1, 2 and 4 concurrent chats. Prints them, and writes the prompt's tokens and the figures
//! as JSON to the file given, for `scripts/bench_llm_reference.py` to run llama.cpp on the same
//! file, prompt and threads and compare.
//!
//!   cargo run --release -p agentry-llm --example llm_bench -- MODEL.gguf OUT.json
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentry_domain::agents::{ChatModel, ChatRole, ChatTurn, CompletionRequest};
use agentry_llm::{LocalModel, LocalSettings};

const QUESTION: &str = "Our team is planning a small offsite next spring near the coast. Could you \
                        suggest three activities that work for twelve people?";
const STORY: &str = "Write a long story about a dragon who guards a library.";

fn request(question: &str, max_tokens: u32) -> CompletionRequest {
    CompletionRequest {
        model: "local".into(),
        max_tokens,
        messages: vec![
            ChatTurn::new(ChatRole::System, "You are a helpful assistant."),
            ChatTurn::new(ChatRole::User, question),
        ],
        ..CompletionRequest::default()
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Resident bytes of the process: (mapped from files, anonymous).
fn resident() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (field("RssFile:"), field("RssAnon:"))
}

fn settings(concurrency: usize) -> LocalSettings {
    LocalSettings {
        concurrency,
        timeout: Duration::from_secs(600),
        context: 2048,
        ..LocalSettings::default()
    }
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../data/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        },
        PathBuf::from,
    );
    let out = args.next().map(PathBuf::from);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let before = resident();
    let started = Instant::now();
    let model = LocalModel::load(&path, &settings(1))?;
    let load = started.elapsed().as_secs_f64();

    let prompt = model.prompt_tokens(&request(QUESTION, 1).messages)?;
    runtime.block_on(model.complete(&request(QUESTION, 1)))?; // warm-up: every weight read once
    let after = resident();
    let mut prefill = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        runtime.block_on(model.complete(&request(QUESTION, 1)))?;
        prefill.push(started.elapsed().as_secs_f64());
    }
    let prefill = median(prefill);

    let story = model.prompt_tokens(&request(STORY, 1).messages)?;
    let mut rates = Vec::new();
    let mut decoded = 0;
    for _ in 0..3 {
        let started = Instant::now();
        let done = runtime.block_on(model.complete(&request(STORY, 128)))?;
        let generating = started.elapsed().as_secs_f64() - prefill;
        decoded = done.completion_tokens;
        rates.push(done.completion_tokens.saturating_sub(1) as f64 / generating);
    }
    let decode = median(rates);
    drop(model);

    let mut aggregate = Vec::new();
    for chats in [1usize, 2, 4] {
        let model = LocalModel::load(&path, &settings(chats))?;
        runtime.block_on(model.complete(&request(STORY, 1)))?;
        let started = Instant::now();
        let done = runtime.block_on(futures_util::future::join_all((0..chats).map(|_| {
            let model = model.clone();
            async move { model.complete(&request(STORY, 64)).await }
        })));
        let tokens: u64 = done.into_iter().map(|d| d.map_or(0, |d| d.completion_tokens)).sum();
        aggregate.push((chats, tokens as f64 / started.elapsed().as_secs_f64()));
    }

    let file_bytes = std::fs::metadata(&path)?.len();
    let weights = after.0.saturating_sub(before.0);
    let working = after.1.saturating_sub(before.1);
    let threads = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    println!(
        "model: {} ({:.0} MB file), {threads} threads, context 2048",
        path.display(),
        file_bytes as f64 / 1e6
    );
    println!("load:            {:.0} ms", load * 1000.0);
    println!("prefill:         {:.0} ms for {} tokens", prefill * 1000.0, prompt.len());
    println!("decode:          {decode:.1} tokens/s (greedy, {decoded} tokens)");
    println!(
        "memory:          {:.0} MB of weights resident ({:.2}x the file), {:.0} MB of cache and buffers",
        weights as f64 / 1e6,
        weights as f64 / file_bytes as f64,
        working as f64 / 1e6
    );
    for (chats, rate) in &aggregate {
        println!("{chats} concurrent chat(s): {rate:.1} tokens/s in all");
    }
    if let Some(out) = out {
        let figures = serde_json::json!({
            "model": path, "threads": threads, "prompt": prompt, "story_prompt": story,
            "decoded": decoded, "load_s": load, "prefill_s": prefill, "decode_tps": decode,
            "weights_bytes": weights, "working_bytes": working, "file_bytes": file_bytes,
            "aggregate": aggregate,
        });
        std::fs::write(out, serde_json::to_vec_pretty(&figures)?)?;
    }
    Ok(())
}

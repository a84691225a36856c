//! SmolLM2 figures for `make bench`: load time, prefill of a ~40-token prompt, generated tokens
//! per second, and the memory-bandwidth limit they are measured against (decoding reads every
//! weight once per token, so the bytes of the weights in memory per token is the floor of its
//! time).
//!
//!   cargo run --release -p agentry-llm --example smollm_bench [-- path/to/model.gguf]
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentry_domain::agents::{ChatModel, ChatRole, ChatTurn, CompletionRequest};
use agentry_llm::{SmolLmModel, SmolLmSettings};

fn request(question: &str, max_tokens: u32) -> CompletionRequest {
    CompletionRequest {
        model: "smollm2".into(),
        temperature: None,
        max_tokens,
        messages: vec![
            ChatTurn::new(ChatRole::System, "You are a helpful assistant."),
            ChatTurn::new(ChatRole::User, question),
        ],
        tools: Vec::new(),
    }
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// Read bandwidth of this machine: one pass summing a buffer far larger than the caches.
fn read_bandwidth() -> f64 {
    let words = vec![1u64; 64 << 20]; // 512 MiB
    let mut best = f64::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        let sum: u64 = std::hint::black_box(&words).iter().copied().fold(0, u64::wrapping_add);
        std::hint::black_box(sum);
        best = best.min(started.elapsed().as_secs_f64());
    }
    (words.len() * 8) as f64 / best
}

fn main() -> anyhow::Result<()> {
    let path = std::env::args().nth(1).map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../data/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        },
        PathBuf::from,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let settings = SmolLmSettings { concurrency: 1, queue: 16, timeout: Duration::from_secs(600) };
    let started = Instant::now();
    let model = SmolLmModel::load(&path, &settings)?;
    let load = started.elapsed();

    let question = "Our team is planning a small offsite next spring near the coast. Could you suggest \
                    three activities that work for twelve people?";
    let prompt = model.prompt_tokens(&request(question, 1).messages)?.len();
    runtime.block_on(model.complete(&request(question, 1)))?; // warm-up
    let mut prefill = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        runtime.block_on(model.complete(&request(question, 1)))?;
        prefill.push(started.elapsed());
    }
    let prefill = median(prefill);

    let mut decode_rates = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let done = runtime.block_on(model.complete(&request("Write a long story about a dragon.", 128)))?;
        let generating = started.elapsed().saturating_sub(prefill).as_secs_f64();
        decode_rates.push(done.completion_tokens.saturating_sub(1) as f64 / generating);
    }
    decode_rates.sort_by(f64::total_cmp);
    let decode = decode_rates[decode_rates.len() / 2];

    let file_bytes = std::fs::metadata(&path)?.len() as f64;
    let model_bytes = model.weight_bytes() as f64;
    let bandwidth = read_bandwidth();
    let limit = bandwidth / model_bytes;
    println!(
        "SmolLM2-135M-Instruct Q4_1 ({:.0} MB file, {:.0} MB of f32 weights in memory), {} threads",
        file_bytes / 1e6,
        model_bytes / 1e6,
        candle_threads()
    );
    println!("  load                      {:>8.0} ms", load.as_secs_f64() * 1e3);
    println!(
        "  prefill, {prompt} tokens         {:>8.0} ms  ({:.0} prompt tokens/s)",
        prefill.as_secs_f64() * 1e3,
        prompt as f64 / prefill.as_secs_f64()
    );
    println!("  generation                {decode:>8.1} tokens/s");
    println!(
        "  bandwidth limit           {limit:>8.1} tokens/s  ({:.1} GB/s read / {:.0} MB per token); ratio {:.2}",
        bandwidth / 1e9,
        model_bytes / 1e6,
        decode / limit
    );
    Ok(())
}

fn candle_threads() -> usize {
    candle_core::utils::get_num_threads()
}

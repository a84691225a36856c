//! all-MiniLM-L6-v2 in process, on the real model files.
//!
//! The files are looked for in `AGENTRY_EMBEDDING_MODEL_DIR`, else in the repository's
//! `data/models/all-MiniLM-L6-v2` (`scripts/fetch-model.sh` puts them there). Without them these
//! tests say so on stderr and pass, unless `AGENTRY_REQUIRE_MODEL=1` (as in CI), when they fail.
//! Best run with `--release`: the model is slow unoptimised.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use agentry_domain::memory::{Embedder, dot};
use agentry_embed::{BatchSettings, BatchingEmbedder, MiniLmEmbedder, MiniLmSettings};

fn model_dir() -> PathBuf {
    match std::env::var_os("AGENTRY_EMBEDDING_MODEL_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/models/all-MiniLM-L6-v2"),
    }
}

/// The model, loaded once for all the tests of this binary; `None` (after a note) when its files
/// are absent and not required.
fn embedder() -> Option<&'static MiniLmEmbedder> {
    static EMBEDDER: OnceLock<Option<MiniLmEmbedder>> = OnceLock::new();
    let dir = model_dir();
    let loaded = EMBEDDER.get_or_init(|| {
        if !MiniLmEmbedder::files_present(&dir) {
            return None;
        }
        Some(MiniLmEmbedder::load(&dir, MiniLmSettings::default()).expect("the model loads"))
    });
    if loaded.is_none() {
        assert!(
            std::env::var("AGENTRY_REQUIRE_MODEL").as_deref() != Ok("1"),
            "AGENTRY_REQUIRE_MODEL=1 but the model files are not in {} (run scripts/fetch-model.sh)",
            dir.display()
        );
        eprintln!("skipped: no MiniLM model in {} (run scripts/fetch-model.sh)", dir.display());
    }
    loaded.as_ref()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

async fn one(e: &MiniLmEmbedder, text: &str) -> Vec<f32> {
    e.embed(&[text.to_string()]).await.unwrap().pop().unwrap()
}

/// The largest difference between two vectors' values.
fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max)
}

/// How close a text's vector made in a batch must be to the one made alone: padding the text to
/// the batch's longest and pooling over its own tokens only leaves rounding differences.
const SAME: f32 = 1e-5;

/// Texts of very different lengths: one word piece to past the 256-token limit.
fn uneven_texts() -> Vec<String> {
    let mut texts = strings(&[
        "Hi",
        "The customer's favourite colour is teal",
        "Short one.",
        "A considerably longer sentence, so that the shorter texts of this batch must be padded to \
         its length, which the attention mask has to keep out of their mean: padding tokens would \
         otherwise pull every short text's vector towards the padding's own representation.",
        "ok",
        "Invoices are sent on the first business day of the month, except in January, when they \
         go out on the second, and the reminders follow a week later.",
    ]);
    texts.push("memory search batching ".repeat(120));
    texts
}

#[tokio::test]
async fn the_model_is_named_and_sized() {
    let Some(e) = embedder() else { return };
    assert_eq!(e.model().provider, "minilm");
    assert_eq!(e.model().id, "minilm:all-MiniLM-L6-v2");
    assert_eq!(e.model().dimension, 384);
    let v = one(e, "Hello there").await;
    assert_eq!(v.len(), 384);
    assert!((dot(&v, &v) - 1.0).abs() < 1e-5);
}

#[tokio::test]
async fn similarities_match_sentence_transformers() {
    let Some(e) = embedder() else { return };
    let out = e
        .embed(&strings(&[
            "The cat sits on the mat",
            "A feline is resting on a rug",
            "Quarterly revenue grew by ten percent",
        ]))
        .await
        .unwrap();
    let close = dot(&out[0], &out[1]);
    let far = dot(&out[0], &out[2]);
    eprintln!("cat/feline {close:.4}, cat/revenue {far:.4}");
    assert!((close - 0.58).abs() < 0.05, "cat/feline: {close}");
    assert!((far - -0.02).abs() < 0.05, "cat/revenue: {far}");
    for v in &out {
        assert!((dot(v, v) - 1.0).abs() < 1e-5);
    }
}

#[tokio::test]
async fn the_relevant_memory_ranks_first_for_a_paraphrased_question() {
    let Some(e) = embedder() else { return };
    let memories = strings(&[
        "The office closes at 6pm on Fridays",
        "Invoices are sent on the first business day of the month",
        "The customer's favourite colour is teal",
        "Our deployment pipeline runs every night at 2am",
        "The client's account manager is called Priya",
        "Shipping to Canada takes five to seven days",
    ]);
    let vectors = e.embed(&memories).await.unwrap();
    let question = one(e, "what colour does the client like?").await;
    let mut ranked: Vec<(f32, &str)> =
        vectors.iter().zip(&memories).map(|(v, m)| (dot(v, &question), m.as_str())).collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    eprintln!("{ranked:#?}");
    assert_eq!(ranked[0].1, "The customer's favourite colour is teal", "{ranked:?}");
    assert!(ranked[0].0 - ranked[1].0 > 0.05, "not a clear winner: {ranked:?}");
}

#[tokio::test]
async fn a_text_gets_the_same_vector_alone_or_padded_in_a_batch() {
    let Some(e) = embedder() else { return };
    let texts = strings(&[
        "Hi",
        "The customer's favourite colour is teal",
        "",
        "A considerably longer sentence, so that the shorter texts of this batch must be padded to \
         its length, which the attention mask has to keep out of their mean: padding tokens would \
         otherwise pull every short text's vector towards the padding's own representation.",
        "Short one.",
    ]);
    let batch = e.embed(&texts).await.unwrap();
    assert_eq!(batch.len(), texts.len());
    for (text, in_batch) in texts.iter().zip(&batch) {
        let alone = one(e, text).await;
        let diff = max_difference(&alone, in_batch);
        assert!(diff < SAME, "{text:?}: max difference {diff}");
    }
}

#[tokio::test]
async fn empty_texts_get_zero_vectors_and_no_texts_nothing() {
    let Some(e) = embedder() else { return };
    let out = e.embed(&strings(&["", "   ", "words"])).await.unwrap();
    assert_eq!(out[0], vec![0.0; 384]);
    assert_eq!(out[1], vec![0.0; 384]);
    assert!((dot(&out[2], &out[2]) - 1.0).abs() < 1e-5);
    assert!(e.embed(&[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn many_texts_span_batches_and_keep_their_order() {
    let Some(e) = embedder() else { return };
    // 70 texts: three batches of up to 32, run concurrently, reassembled in order.
    let texts: Vec<String> = (0..70).map(|i| format!("Note number {i} about topic {}", i % 7)).collect();
    let all = e.embed(&texts).await.unwrap();
    assert_eq!(all.len(), 70);
    for i in [0, 31, 32, 33, 64, 69] {
        let alone = one(e, &texts[i]).await;
        let diff = max_difference(&alone, &all[i]);
        assert!(diff < SAME, "text {i}: max difference {diff}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_each_get_their_own_vectors() {
    let Some(e) = embedder() else { return };
    let texts = ["alpha beta", "The cat sits on the mat", "Quarterly revenue grew", "teal is a colour"];
    let mut expected = Vec::new();
    for t in texts {
        expected.push(one(e, t).await);
    }
    let calls: Vec<_> = texts
        .iter()
        .map(|t| {
            let batch = strings(&[t, "a shared second text", t]);
            tokio::spawn(async move { e.embed(&batch).await.unwrap() })
        })
        .collect();
    for (call, want) in calls.into_iter().zip(&expected) {
        let got = call.await.unwrap();
        for v in [&got[0], &got[2]] {
            let diff = max_difference(v, want);
            assert!(diff < SAME, "max difference {diff}");
        }
    }
}

#[tokio::test]
async fn texts_of_very_different_lengths_get_the_same_vectors_in_one_batch_as_alone() {
    let Some(e) = embedder() else { return };
    let texts = uneven_texts();
    let batch = e.embed(&texts).await.unwrap();
    let mut worst = 0.0f32;
    for (text, in_batch) in texts.iter().zip(&batch) {
        let diff = max_difference(&one(e, text).await, in_batch);
        assert!(diff < SAME, "{text:?}: max difference {diff}");
        worst = worst.max(diff);
    }
    eprintln!("largest difference between a text alone and in a batch: {worst:e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_batched_together_get_what_each_would_get_alone() {
    let Some(e) = embedder() else { return };
    let texts = uneven_texts();
    let mut alone = Vec::new();
    for text in &texts {
        alone.push(one(e, text).await);
    }
    // Closed only when every caller's text is in: one batch of them all, whatever the timing.
    let settings = BatchSettings {
        max_texts: texts.len(),
        max_wait: std::time::Duration::from_secs(60),
        max_in_flight: 1,
    };
    let batcher = BatchingEmbedder::new(std::sync::Arc::new(e.clone()), settings);
    let callers: Vec<_> = texts
        .iter()
        .cloned()
        .map(|text| {
            let batcher = batcher.clone();
            tokio::spawn(async move { batcher.embed_query(&text).await.unwrap() })
        })
        .collect();
    for ((caller, want), text) in callers.into_iter().zip(&alone).zip(&texts) {
        let got = caller.await.unwrap();
        let diff = max_difference(&got, want);
        assert!(diff < SAME, "{text:?}: max difference {diff}");
    }
}

#[tokio::test]
async fn texts_beyond_the_token_limit_are_truncated_not_refused() {
    let Some(e) = embedder() else { return };
    let long = "word ".repeat(2000);
    let v = one(e, &long).await;
    assert!((dot(&v, &v) - 1.0).abs() < 1e-5);
}

/// Timings, for the record: `cargo test --release -p agentry-embed --test minilm -- --nocapture
/// timings`. Asserts nothing about speed (machines differ).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timings() {
    let Some(e) = embedder() else { return };
    let sentence = "The customer's favourite colour is teal".to_string();
    one(e, &sentence).await; // warm-up
    let runs = 20;
    let started = Instant::now();
    for _ in 0..runs {
        one(e, &sentence).await;
    }
    let single = started.elapsed() / runs;
    let batch: Vec<String> = (0..32)
        .map(|i| format!("Memory {i}: the customer asked about order {} and its delivery", i * 7))
        .collect();
    e.embed(&batch).await.unwrap(); // warm-up
    let started = Instant::now();
    for _ in 0..5 {
        e.embed(&batch).await.unwrap();
    }
    let batch_time = started.elapsed() / 5;
    eprintln!("MiniLM: one short sentence {single:?}, a batch of 32 sentences {batch_time:?}");
}

//! Another GGUF model by path: a tiny Qwen2 model (random weights, SmolLM2's tokenizer, a chat
//! template of its own) written by this test, then loaded and run as `AGENTRY_LLM_MODEL_PATH`
//! would load it. What it shows: the architecture, the tokenizer and the chat format come from
//! the file, not from code that knows SmolLM2. Needs SmolLM2's file for the tokenizer (skipped
//! with a note without it, failed under `AGENTRY_REQUIRE_MODEL=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use agentry_domain::agents::{ChatModel, ChatRole, ChatTurn, CompletionRequest, FinishReason};
use agentry_llm::{LocalModel, LocalSettings};
use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

mod common;

const TEMPLATE: &str = "{% for m in messages %}### {{ m['role'] | upper }}:\n{{ m['content'] }}\n{% endfor %}\
    {% if add_generation_prompt %}### ASSISTANT:\n{% endif %}";

/// Writes a two-layer Qwen2 model with SmolLM2's vocabulary to `out`.
fn write_tiny_qwen2(tokenizer_from: &Path, out: &Path) {
    let mut file = std::fs::File::open(tokenizer_from).unwrap();
    let source = gguf_file::Content::read(&mut file).unwrap();
    let vocab = source.metadata["tokenizer.ggml.tokens"].to_vec().unwrap().len();
    let (embd, ffn, heads, kv_heads) = (64usize, 128usize, 4u32, 2u32);
    let kv = embd / heads as usize * kv_heads as usize;
    let mut metadata: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String("qwen2".into())),
        ("general.name".into(), Value::String("tiny test run 7".into())),
        ("general.alignment".into(), Value::U32(32)),
        ("qwen2.context_length".into(), Value::U32(1024)),
        ("qwen2.embedding_length".into(), Value::U32(embd as u32)),
        ("qwen2.block_count".into(), Value::U32(2)),
        ("qwen2.feed_forward_length".into(), Value::U32(ffn as u32)),
        ("qwen2.attention.head_count".into(), Value::U32(heads)),
        ("qwen2.attention.head_count_kv".into(), Value::U32(kv_heads)),
        ("qwen2.attention.layer_norm_rms_epsilon".into(), Value::F32(1e-6)),
        ("qwen2.rope.freq_base".into(), Value::F32(10_000.0)),
        ("tokenizer.chat_template".into(), Value::String(TEMPLATE.into())),
    ];
    for (key, value) in &source.metadata {
        if key.starts_with("tokenizer.") && key != "tokenizer.chat_template" {
            metadata.push((key.clone(), value.clone()));
        }
    }
    let random = |shape: &[usize]| {
        let t = Tensor::randn(0f32, 0.02, shape, &Device::Cpu).unwrap();
        QTensor::quantize(&t, GgmlDType::F32).unwrap()
    };
    let ones = |n: usize| {
        QTensor::quantize(&Tensor::ones(n, candle_core::DType::F32, &Device::Cpu).unwrap(), GgmlDType::F32)
            .unwrap()
    };
    let mut tensors: Vec<(String, QTensor)> = vec![
        ("token_embd.weight".into(), random(&[vocab, embd])),
        ("output_norm.weight".into(), ones(embd)),
        ("output.weight".into(), random(&[vocab, embd])),
    ];
    for layer in 0..2 {
        let name = |n: &str| format!("blk.{layer}.{n}");
        tensors.extend([
            (name("attn_norm.weight"), ones(embd)),
            (name("attn_q.weight"), random(&[embd, embd])),
            (name("attn_q.bias"), random(&[embd])),
            (name("attn_k.weight"), random(&[kv, embd])),
            (name("attn_k.bias"), random(&[kv])),
            (name("attn_v.weight"), random(&[kv, embd])),
            (name("attn_v.bias"), random(&[kv])),
            (name("attn_output.weight"), random(&[embd, embd])),
            (name("ffn_norm.weight"), ones(embd)),
            (name("ffn_gate.weight"), random(&[ffn, embd])),
            (name("ffn_up.weight"), random(&[ffn, embd])),
            (name("ffn_down.weight"), random(&[embd, ffn])),
        ]);
    }
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    let mut out = std::fs::File::create(out).unwrap();
    gguf_file::write(&mut out, &metadata, &tensors).unwrap();
}

#[tokio::test]
async fn another_architecture_runs_by_path_with_its_own_chat_format() {
    let Some(smollm2) = common::smollm2() else { return };
    let dir = std::env::temp_dir().join(format!("agentry-any-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("Tiny-Qwen2-Chat.F32.gguf");
    write_tiny_qwen2(&smollm2, &path);

    let m = LocalModel::load(&path, &LocalSettings::default()).unwrap();
    assert_eq!(m.info().architecture, "qwen2");
    assert_eq!(m.info().name, "tiny-qwen2-chat", "named after the file, not the run in its metadata");
    assert!(m.info().own_template);
    let turns = [ChatTurn::new(ChatRole::User, "Hello there")];
    let ids = m.prompt_tokens(&turns).unwrap();
    assert!(ids.starts_with(&m.tokenize("### USER:\n")), "the file's own format: {ids:?}");
    assert!(ids.ends_with(&m.tokenize("\n### ASSISTANT:\n")), "{ids:?}");
    assert!(!ids.contains(&m.tokenize("<|im_start|>")[0]), "not ChatML: {ids:?}");

    let request = CompletionRequest {
        model: "tiny".into(),
        max_tokens: 12,
        messages: turns.to_vec(),
        ..Default::default()
    };
    let answer = m.complete(&request).await.unwrap();
    assert!(answer.completion_tokens >= 1, "{answer:?}");
    assert!(matches!(answer.finish, FinishReason::Length | FinishReason::Stop), "{answer:?}");
    assert_eq!(answer.prompt_tokens, ids.len() as u64);
    std::fs::remove_dir_all(&dir).unwrap();
}

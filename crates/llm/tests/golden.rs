//! The local model against llama.cpp's own reference (llama-cpp-python, the version
//! `make bench-llm` pins), recorded in `golden/smollm2.json` by `scripts/llm_golden.py`: the same
//! tokens for 20 strings, the same ChatML prompt from SmolLM2's own template, and the same
//! greedy reply of up to 32 tokens. Skipped (with a note) without the model file, failed without
//! it under `AGENTRY_REQUIRE_MODEL=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use agentry_domain::agents::{ChatModel, ChatRole, ChatTurn, CompletionRequest};
use agentry_llm::{LocalModel, LocalSettings};
use serde_json::Value;

mod common;

fn golden() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/smollm2.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn load() -> Option<LocalModel> {
    let path = common::smollm2()?;
    // Pure greedy decoding, as the reference was recorded.
    let settings = LocalSettings { repeat_penalty: 1.0, ..LocalSettings::default() };
    Some(LocalModel::load(&path, &settings).unwrap())
}

fn ids(value: &Value) -> Vec<i32> {
    value.as_array().unwrap().iter().map(|v| i32::try_from(v.as_i64().unwrap()).unwrap()).collect()
}

#[test]
fn twenty_strings_tokenize_as_llama_cpp_does() {
    let Some(m) = load() else { return };
    let golden = golden();
    let cases = golden["tokenize"].as_array().unwrap();
    assert_eq!(cases.len(), 20);
    for case in cases {
        let text = case["text"].as_str().unwrap();
        assert_eq!(m.tokenize(text), ids(&case["ids"]), "{text:?}");
    }
}

#[tokio::test]
async fn the_prompt_and_the_greedy_reply_are_the_references() {
    let Some(m) = load() else { return };
    let golden = golden();
    let g = &golden["greedy"];
    let turns = vec![
        ChatTurn::new(ChatRole::System, g["system"].as_str().unwrap()),
        ChatTurn::new(ChatRole::User, g["question"].as_str().unwrap()),
    ];
    assert_eq!(m.prompt_tokens(&turns).unwrap(), ids(&g["prompt"]), "SmolLM2's template renders ChatML");
    let request =
        CompletionRequest { model: "local".into(), max_tokens: 32, messages: turns, ..Default::default() };
    let answer = m.complete(&request).await.unwrap();
    assert_eq!(answer.content, g["text"].as_str().unwrap());
    assert_eq!(answer.completion_tokens, ids(&g["tokens"]).len() as u64);
}

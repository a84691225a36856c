//! SmolLM2-135M-Instruct in process, on the real model file.
//!
//! The file is looked for in `AGENTRY_LLM_MODEL_PATH`, else in the repository's
//! `data/models/SmolLM2-135M-Instruct.Q4_1.gguf` (`make model` puts it there). Without it these
//! tests say so on stderr and pass, unless `AGENTRY_REQUIRE_MODEL=1` (as in CI), when they fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agentry_domain::agents::{
    ChatModel, ChatRole, ChatTurn, CompletionRequest, DeltaSink, FinishReason, ModelError,
};
use agentry_llm::{SmolLmModel, SmolLmSettings};

fn model_path() -> PathBuf {
    match std::env::var_os("AGENTRY_LLM_MODEL_PATH") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../data/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    }
}

fn load(concurrency: usize, queue: usize) -> Option<SmolLmModel> {
    let path = model_path();
    if !path.exists() {
        assert!(
            std::env::var("AGENTRY_REQUIRE_MODEL").as_deref() != Ok("1"),
            "AGENTRY_REQUIRE_MODEL=1 but the language model is not at {} (run `make model`)",
            path.display()
        );
        eprintln!("skipped: no language model at {} (run `make model`)", path.display());
        return None;
    }
    let settings = SmolLmSettings { concurrency, queue, timeout: Duration::from_secs(300) };
    Some(SmolLmModel::load(&path, &settings).expect("the model loads"))
}

/// The model, loaded once for the tests that share it.
fn model() -> Option<&'static SmolLmModel> {
    static MODEL: OnceLock<Option<SmolLmModel>> = OnceLock::new();
    MODEL.get_or_init(|| load(1, 16)).as_ref()
}

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

/// Collects the pieces; stops listening after `stop_after` of them.
#[derive(Default)]
struct Collect {
    pieces: Mutex<Vec<String>>,
    stop_after: Option<usize>,
}

impl DeltaSink for Collect {
    fn delta(&self, text: &str) -> bool {
        let mut pieces = self.pieces.lock().unwrap();
        pieces.push(text.to_owned());
        self.stop_after.is_none_or(|n| pieces.len() < n)
    }
}

#[tokio::test]
async fn it_knows_the_capital_of_france() {
    let Some(m) = model() else { return };
    let answer = m.complete(&request("What is the capital of France?", 64)).await.unwrap();
    assert!(answer.content.contains("Paris"), "{answer:?}");
    // The prompt as the model counts it: ChatML framing and both turns.
    let prompt = m.prompt_tokens(&request("What is the capital of France?", 64).messages).unwrap();
    assert_eq!(answer.prompt_tokens, prompt.len() as u64);
    assert!(answer.completion_tokens >= 5, "{answer:?}");
}

#[tokio::test]
async fn the_chatml_markers_are_single_tokens() {
    let Some(m) = model() else { return };
    let ids = m.prompt_tokens(&[ChatTurn::new(ChatRole::User, "Hi")]).unwrap();
    // <|im_start|> "user" "\n" "Hi" <|im_end|> "\n" <|im_start|> "ass" "istant" "\n"
    assert_eq!(ids.len(), 10, "{ids:?}");
    assert_eq!((ids[0], ids[6]), (1, 1));
    assert_eq!(ids[4], 2);
}

#[tokio::test]
async fn streamed_pieces_join_to_the_reply() {
    let Some(m) = model() else { return };
    let sink = Arc::new(Collect::default());
    let answer = m.stream(&request("Name three colours.", 30), sink.clone()).await.unwrap();
    let pieces = sink.pieces.lock().unwrap();
    assert!(pieces.len() > 3, "{pieces:?}");
    assert_eq!(pieces.concat(), answer.content);
}

#[tokio::test]
async fn a_listener_that_leaves_stops_the_generation() {
    let Some(m) = model() else { return };
    let sink = Arc::new(Collect { stop_after: Some(3), ..Collect::default() });
    let answer = m.stream(&request("Write a long story about a dragon.", 200), sink.clone()).await.unwrap();
    assert_eq!(answer.finish, FinishReason::Cancelled);
    let pieces = sink.pieces.lock().unwrap();
    assert_eq!(pieces.len(), 3);
    assert_eq!(pieces.concat(), answer.content);
    assert!(answer.completion_tokens < 20, "{answer:?}");
}

#[tokio::test]
async fn max_tokens_ends_the_reply() {
    let Some(m) = model() else { return };
    let answer = m.complete(&request("Write a long story about a dragon.", 8)).await.unwrap();
    assert_eq!(answer.finish, FinishReason::Length);
    assert_eq!(answer.completion_tokens, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_queue_callers_are_told_to_come_back() {
    let Some(m) = load(1, 0) else { return };
    // One generation runs; with no room to wait, a second is refused at once.
    let long = request("Write a long story about a dragon.", 64);
    let (first, second) = tokio::join!(m.complete(&long), async {
        tokio::task::yield_now().await;
        m.complete(&long).await
    });
    let outcomes = [first.is_ok(), second.is_ok()];
    assert_eq!(outcomes.iter().filter(|ok| **ok).count(), 1, "{outcomes:?}");
    let refused = if first.is_ok() { second } else { first };
    assert!(matches!(refused, Err(ModelError::Busy { retry_after_secs: 2 })), "{refused:?}");
}

//! The token-counting port: chat budgets its prompts with it, memory cuts documents into chunks
//! and budgets what it recalls.

/// Counts tokens the way the model's tokenizer does.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait TokenCounter: Send + Sync {
    /// Tokens of `text`.
    fn count(&self, text: &str) -> u64;
}

//! Agentry's chat-model adapters, implementing the domain's `ChatModel` and `TokenCounter`:
//! - [`Cl100kTokens`]: token counts with the real `cl100k_base` BPE (GPT-4 / GPT-3.5);
//! - [`BuiltinModel`]: an offline, deterministic responder that says plainly that it is one,
//!   echoes what it received and what it remembers of the conversation, with honest usage;
//! - [`OpenAiModel`]: any OpenAI-compatible `/v1/chat/completions` server;
//! - [`SmolLmModel`]: SmolLM2-135M-Instruct, a real small language model run in process.

mod builtin;
mod openai;
mod smollm;

pub use builtin::{BuiltinModel, Cl100kTokens};
pub use openai::{OpenAiModel, OpenAiSettings};
pub use smollm::{SmolLmModel, SmolLmSettings};

//! Agentry's chat-model adapters, implementing the domain's `ChatModel` and `TokenCounter`:
//! - [`Cl100kTokens`]: token counts with the real `cl100k_base` BPE (GPT-4 / GPT-3.5);
//! - [`BuiltinModel`]: an offline, deterministic responder that says plainly that it is one,
//!   echoes what it received and what it remembers of the conversation, with honest usage;
//! - [`OpenAiModel`]: any OpenAI-compatible `/v1/chat/completions` server;
//! - [`LocalModel`]: a GGUF chat model run in process on llama.cpp (SmolLM2-135M-Instruct by
//!   default), with our sampler, chat templates, loop guard and constrained output.

mod builtin;
mod local;
mod openai;

pub use builtin::{BuiltinModel, Cl100kTokens};
pub use local::{DEFAULT_CONTEXT, LocalModel, LocalSettings, ModelInfo, gguf_model_name};
pub use openai::{OpenAiModel, OpenAiSettings};

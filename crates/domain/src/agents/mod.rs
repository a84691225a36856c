//! Agents and chat: agents' configuration and lifecycle, conversations with them, the model
//! port, and the credit charge of every exchange.

pub mod chat;
mod model;
mod ports;
mod service;

pub use chat::{
    ChatModel, ChatRole, ChatTurn, Completion, CompletionRequest, MemoryRecall, Message, ModelError,
    NoRecall, TokenCounter, build_prompt, count_prompt,
};
pub use model::{
    Agent, AgentChanges, AgentConfig, AgentFields, AgentName, AgentStatus, AgentType, MAX_COMPLETION_TOKENS,
    MemoryType,
};
pub use ports::{AgentRepository, ConversationRepository, Exchange};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockAgentRepository, MockConversationRepository};
pub use service::{
    AgentError, AgentService, ChatError, ChatInput, ChatReply, ChatService, ChatServiceDeps, ChatSettings,
    MAX_MESSAGE_CHARS,
};

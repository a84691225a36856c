//! Agents and chat: agents' configuration and lifecycle, conversations with them, the model
//! port, and the credit charge of every exchange. Chat recalls through the memory service
//! (`recall`); memory does not know agents.

pub mod chat;
mod model;
mod ports;
mod recall;
mod service;
pub mod tools;

pub use chat::{
    ChatRole, ChatTurn, Completion, CompletionRequest, DeltaSink, FinishReason, Message, ModelError,
    NoDeltas, ToolCall, ToolResult, ToolSpec, build_prompt, count_prompt, count_request,
};
pub use model::{
    Agent, AgentChanges, AgentConfig, AgentName, AgentStatus, AgentType, ConfigChanges,
    MAX_COMPLETION_TOKENS, MAX_DESCRIPTION_CHARS, MAX_MODEL_CHARS, MAX_SYSTEM_PROMPT_CHARS, MAX_TEMPERATURE,
    NewAgent, description, memory_types,
};
pub use ports::{
    AgentRepository, ChatModel, ConversationRepository, Exchange, ExchangeOutcome, MemoryRecall,
};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockAgentRepository, MockChatModel, MockConversationRepository, MockMemoryRecall};
pub use recall::NoRecall;
pub use service::{
    AgentError, AgentService, ChatError, ChatInput, ChatReply, ChatService, ChatServiceDeps, ChatSettings,
    ClientConversation, MAX_MESSAGE_CHARS, PreparedChat, affordable_completion, chat_message,
};
#[cfg(any(test, feature = "mock"))]
pub use tools::MockToolProvider;
pub use tools::{
    AgentTool, OfferedTool, ToolAction, ToolCallContext, ToolError, ToolKind, ToolProvider, ToolRegistry,
    ToolType, Toolbox,
};

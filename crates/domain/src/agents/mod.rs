//! Agents and chat: agents' configuration and lifecycle, conversations with them, the model
//! port, and the credit charge of every exchange. Chat recalls through the memory service
//! (`recall`); memory does not know agents.
//!
//! Chat, from the request down: `chat_service` checks a request, builds its `prompt` and holds
//! its credits; `answer` drives the model calls over the `turn` state machine, running the
//! agent's tools through the `registry` of tool `providers`; `chat_api` holds what they share.
//! An agent's `tools` configuration is read and described in `tools`.

mod answer;
pub mod blocks;
pub mod chat;
mod chat_api;
mod chat_service;
mod citation;
mod episodes;
mod extraction;
mod extraction_config;
#[cfg(test)]
mod fixtures;
mod knowledge;
mod knowledge_config;
mod model;
mod ports;
mod prompt;
mod providers;
mod recall;
mod registry;
mod service;
pub mod sources;
pub mod tools;
mod turn;

pub use answer::PreparedChat;
pub use blocks::tool::CoreMemoryTools;
pub use blocks::{
    BlockActor, BlockChange, BlockError, BlockInput, BlockVersion, MemoryBlock, MemoryBlockRepository,
    MemoryBlocks,
};
pub use chat::{
    ChatRole, ChatTurn, Completion, CompletionRequest, DeltaSink, FinishReason, Message, ModelError,
    NoDeltas, ToolCall, ToolResult, ToolSpec, count_prompt, count_request,
};
pub use chat_api::{
    ChatError, ChatInput, ChatReply, ChatService, ChatServiceDeps, ChatSettings, ClientConversation,
    MAX_MESSAGE_CHARS, affordable_completion, chat_message,
};
pub use episodes::{EpisodicMemory, ExchangeReader, MemoryExtraction};
pub use extraction::{Extracted, ModelExtractor, ModelExtractorDeps, prompt as extraction_prompt};
pub use extraction_config::{ExtractionMode, Extractor};
#[cfg(any(test, feature = "mock"))]
pub use knowledge::MockKnowledgeRetrieval;
pub use knowledge::{KnowledgeRetrieval, NoKnowledge};
pub use knowledge_config::{
    AgentKnowledge, KNOWLEDGE_TOOL, KnowledgeMode, MAX_AGENT_KNOWLEDGE_BASES, knowledge_bases,
};
pub use model::{
    Agent, AgentChanges, AgentConfig, AgentName, AgentStatus, AgentType, ConfigChanges,
    MAX_COMPLETION_TOKENS, MAX_DESCRIPTION_CHARS, MAX_MODEL_CHARS, MAX_SYSTEM_PROMPT_CHARS, MAX_TEMPERATURE,
    NewAgent, description, memory_types,
};
pub use ports::{
    AgentRepository, ChatModel, ConversationRepository, Exchange, ExchangeOutcome, MemoryRecall,
    StoredExchange,
};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockAgentRepository, MockChatModel, MockConversationRepository, MockMemoryRecall};
pub use prompt::build_prompt;
#[cfg(any(test, feature = "mock"))]
pub use providers::MockToolProvider;
pub use providers::{OfferedTool, ToolCallContext, ToolProvider};
pub use recall::{NoRecall, episode_id};
pub use registry::{ToolRegistry, Toolbox};
pub use service::{AgentError, AgentService};
pub use sources::{Citation, SOURCES_HEADER, Source};
pub use tools::{AgentTool, ToolAction, ToolError, ToolKind, ToolType};

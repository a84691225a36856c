//! What the OpenAI-compatible endpoint answers: `chat.completion`, its streamed chunks, and the
//! citations of an agent's knowledge bases as the message's `annotations`.

use agentry_domain::agents::{Citation, ToolCall};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Token usage, as OpenAI reports it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CompletionUsage {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens of the reply.
    pub completion_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
}

/// A tool call of the reply, for the client to run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OutputToolCall {
    /// The call's id; answer it with a `tool` message naming it.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub kind: String,
    /// The function and its arguments.
    pub function: OutputFunction,
}

/// A called function.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OutputFunction {
    /// Its name.
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

impl From<&ToolCall> for OutputToolCall {
    fn from(c: &ToolCall) -> Self {
        Self {
            id: c.id.clone(),
            kind: "function".into(),
            function: OutputFunction { name: c.name.clone(), arguments: c.arguments.clone() },
        }
    }
}

/// The reply.
#[derive(Debug, Serialize, ToSchema)]
pub struct AssistantMessage {
    /// Always `assistant`.
    pub role: &'static str,
    /// The text; null when the reply only calls tools.
    pub content: Option<String>,
    /// The client's tools the model calls.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<OutputToolCall>,
    /// The files of the agent's knowledge bases the reply cites.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<Annotation>,
}

/// The one choice of a completion.
#[derive(Debug, Serialize, ToSchema)]
pub struct Choice {
    /// Always 0.
    pub index: u32,
    /// The reply.
    pub message: AssistantMessage,
    /// `stop` or `length`.
    pub finish_reason: &'static str,
}

/// OpenAI's `chat.completion`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatCompletion {
    /// `chatcmpl-…`.
    pub id: String,
    /// Always `chat.completion`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: i64,
    /// The `model` of the request.
    pub model: String,
    /// The reply.
    pub choices: Vec<Choice>,
    /// Token usage.
    pub usage: CompletionUsage,
}

/// What a streamed chunk adds.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct ChunkDelta {
    /// `assistant`, on the first chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// The next piece of the reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The client's tools the model calls (each whole, with its `index`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ChunkToolCall>,
    /// On the last chunk of the reply: the files it cites.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<Annotation>,
}

/// A tool call in a chunk: OpenAI's streamed shape, with its position.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChunkToolCall {
    /// Its position among the reply's calls.
    pub index: u32,
    /// The call.
    #[serde(flatten)]
    pub call: OutputToolCall,
}

/// The choice of a chunk.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChunkChoice {
    /// Always 0.
    pub index: u32,
    /// What this chunk adds.
    pub delta: ChunkDelta,
    /// On the last chunk of the reply: `stop` or `length`.
    pub finish_reason: Option<&'static str>,
}

/// OpenAI's `chat.completion.chunk`, the data of each event of a streamed answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = ChatCompletionChunkData)]
pub struct ChatCompletionChunk {
    /// The same on every chunk of a call.
    pub id: String,
    /// Always `chat.completion.chunk`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: i64,
    /// The `model` of the request.
    pub model: String,
    /// One choice; none on the usage chunk.
    pub choices: Vec<ChunkChoice>,
    /// On the usage chunk (`stream_options.include_usage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<CompletionUsage>,
}

/// A source the reply cites (its text refers to it as `[index]`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Annotation {
    /// Always `file_citation`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The cited file.
    pub file_citation: FileCitation,
}

/// The file of a citation.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FileCitation {
    /// The knowledge file's id.
    pub file_id: String,
    /// Its name.
    pub filename: String,
    /// The number the reply refers to it by (`[1]`).
    pub index: u32,
}

impl From<&Citation> for Annotation {
    fn from(c: &Citation) -> Self {
        Self {
            kind: "file_citation",
            file_citation: FileCitation {
                file_id: c.file_id.to_string(),
                filename: c.file_name.clone(),
                index: c.index,
            },
        }
    }
}

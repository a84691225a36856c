//! Constrained output: a reply that must be JSON of a schema, and tool calls.
//!
//! A small model does not call tools by itself, nor write JSON reliably. Here its reply is held
//! to a grammar (llama.cpp's GBNF, from the JSON Schema by llama.cpp's converter) so that every
//! token it may choose keeps the reply valid:
//! - with a `response_schema`, the reply is an instance of it;
//! - with tools, the model first decides, in the function-calling format SmolLM2 was trained
//!   on: `<tool_call>[{"name": …, "arguments": {…}}, …]</tool_call>`, each call's arguments
//!   held to its tool's schema, or an empty list when no tool helps. An empty list is followed
//!   by the answer, generated as text without the tools' instructions.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentry_domain::agents::{ChatRole, ChatTurn, DeltaSink, FinishReason, ToolCall, ToolSpec};
use serde_json::Value;

use super::template::TemplateTurn;

/// The grammar of a reply that is an instance of `schema`.
///
/// # Errors
/// When llama.cpp's converter refuses the schema.
pub fn schema_grammar(schema: &Value) -> anyhow::Result<String> {
    llama_cpp_2::json_schema_to_grammar(&schema.to_string())
        .map(|g| compact(&g))
        .map_err(|e| anyhow::anyhow!("the JSON schema cannot be turned into a grammar: {e}"))
}

/// `grammar` with at most one space between JSON tokens: the converter allows newlines and
/// indentation, which a small model spends its tokens on.
fn compact(grammar: &str) -> String {
    grammar
        .lines()
        .map(|line| if line.starts_with("space ::=") { "space ::= | \" \"" } else { line })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A reply as it is generated, streamed to its sink.
pub struct Reply {
    sink: Arc<dyn DeltaSink>,
    /// The whole reply.
    pub text: String,
    /// Bytes of `text` the sink has taken.
    sent: usize,
    listening: bool,
}

impl Reply {
    /// A reply that goes to `sink`.
    pub fn new(sink: Arc<dyn DeltaSink>) -> Self {
        Self { sink, text: String::new(), sent: 0, listening: true }
    }

    /// Takes the next piece. `false` when the sink no longer listens.
    pub fn push(&mut self, piece: &str) -> bool {
        self.text.push_str(piece);
        if self.listening {
            self.listening = self.sink.delta(piece);
            self.sent = self.text.len();
        }
        self.listening
    }

    /// The reply's text: what the sink took, when it stopped listening or the reply was
    /// cancelled.
    pub fn into_text(mut self, finish: FinishReason) -> String {
        if finish == FinishReason::Cancelled || !self.listening {
            self.text.truncate(self.sent);
        }
        self.text
    }
}

/// The calls a decision names (none: answer in text).
pub fn parse_decision(text: &str) -> Vec<ToolCall> {
    let list = text.trim().trim_start_matches("<tool_call>").trim_end_matches("</tool_call>");
    let Ok(Value::Array(calls)) = serde_json::from_str::<Value>(list) else { return Vec::new() };
    calls.iter().filter_map(parse_call).collect()
}

/// One call of a decision.
fn parse_call(value: &Value) -> Option<ToolCall> {
    let name = value.get("name")?.as_str()?.to_owned();
    let arguments = value.get("arguments")?.to_string();
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let id = format!("call_{:x}_{}", std::process::id(), CALLS.fetch_add(1, Ordering::Relaxed));
    Some(ToolCall { id, name, arguments })
}

/// The grammar of a decision: a list, maybe empty, of calls of the tools with arguments of
/// their schemas.
pub fn decision_grammar(tools: &[ToolSpec]) -> anyhow::Result<String> {
    // Written by hand, not with `json!`: the grammar follows the order of the properties, and
    // the model should name the tool before it writes the arguments.
    let calls: Vec<String> = tools
        .iter()
        .map(|t| {
            format!(
                r#"{{"type":"object","properties":{{"name":{{"const":{}}},"arguments":{}}},"required":["name","arguments"],"additionalProperties":false}}"#,
                Value::String(t.name.clone()),
                t.parameters
            )
        })
        .collect();
    let schema = format!(r#"{{"oneOf":[{}]}}"#, calls.join(","));
    let call = llama_cpp_2::json_schema_to_grammar(&schema)
        .map_err(|e| anyhow::anyhow!("a tool's parameters cannot be turned into a grammar: {e}"))?;
    let call = rename_root(&compact(&call), "tool-call");
    Ok(format!(
        "root ::= \"<tool_call>[\" ws (tool-call (\",\" ws tool-call)*)? ws \"]</tool_call>\"\nws ::= [ \\n]{{0,2}}\n{call}"
    ))
}

/// `grammar` with its `root` rule named `name` (so that it can be one choice of another).
fn rename_root(grammar: &str, name: &str) -> String {
    grammar
        .lines()
        .map(|line| match line.strip_prefix("root ::=") {
            Some(rest) => format!("{name} ::={rest}"),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The instructions of a decision, as SmolLM2's model card gives them for function calling.
fn decision_instructions(tools: &[ToolSpec]) -> String {
    let listed: Vec<String> = tools
        .iter()
        .map(|t| {
            format!(
                r#"{{"name": {}, "description": {}, "parameters": {}}}"#,
                Value::String(t.name.clone()),
                Value::String(t.description.trim().to_owned()),
                t.parameters
            )
        })
        .collect();
    format!(
        "You are an expert in composing functions. You are given a question and a set of possible \
         functions. Based on the question, you will need to make one or more function/tool calls \
         to achieve the purpose. If none of the functions can be used, make the tool calls an \
         empty list '[]'.\n\nYou have access to the following tools:\n<tools>[{}]</tools>\n\n\
         The output MUST strictly adhere to the following format, and NO other text MUST be \
         included.\n<tool_call>[\n{{\"name\": \"func_name1\", \"arguments\": {{\"argument1\": \
         \"value1\"}}}}\n]</tool_call>",
        listed.join(", ")
    )
}

/// The turns of a decision: its instructions, then the conversation (its own instructions
/// included, as context).
pub fn decision_turns(turns: &[ChatTurn], tools: &[ToolSpec]) -> Vec<TemplateTurn> {
    let mut out = template_turns(turns);
    let instructions = decision_instructions(tools);
    match out.first_mut() {
        Some(first) if first.role == ChatRole::System.as_str() => {
            first.content = format!("{instructions}\n\n{}", first.content);
        }
        _ => out.insert(0, TemplateTurn { role: ChatRole::System.as_str().into(), content: instructions }),
    }
    out
}

/// The turns as the chat template takes them: a call as the decision the model wrote, a tool's
/// result as a turn the model reads.
pub fn template_turns(turns: &[ChatTurn]) -> Vec<TemplateTurn> {
    turns
        .iter()
        .map(|turn| match turn.role {
            ChatRole::Tool => TemplateTurn {
                role: ChatRole::User.as_str().into(),
                content: format!(
                    "Result of the tool {}: {}",
                    turn.name.as_deref().unwrap_or("call"),
                    turn.content
                ),
            },
            ChatRole::Assistant if !turn.tool_calls.is_empty() => {
                let calls: Vec<String> = turn
                    .tool_calls
                    .iter()
                    .map(|c| {
                        let arguments: Value =
                            serde_json::from_str(&c.arguments).unwrap_or(Value::String(c.arguments.clone()));
                        format!(r#"{{"name": {}, "arguments": {arguments}}}"#, Value::String(c.name.clone()))
                    })
                    .collect();
                TemplateTurn {
                    role: turn.role.as_str().into(),
                    content: format!("<tool_call>[{}]</tool_call>", calls.join(", ")),
                }
            }
            role => TemplateTurn { role: role.as_str().into(), content: turn.content.clone() },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn search_tool() -> ToolSpec {
        ToolSpec {
            name: "memory_search".into(),
            description: "Search the memories.".into(),
            parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        }
    }

    #[test]
    fn a_decision_names_its_calls_or_none() {
        let calls = parse_decision(
            r#"<tool_call>[{"name": "memory_search", "arguments": {"query": "colour"}}]</tool_call>"#,
        );
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "memory_search");
        assert_eq!(calls[0].arguments, r#"{"query":"colour"}"#);
        assert!(parse_decision("<tool_call>[]</tool_call>").is_empty());
    }

    #[test]
    fn the_grammar_offers_calls_of_the_tools_or_none() {
        let grammar = decision_grammar(&[search_tool()]).unwrap();
        assert!(grammar.starts_with("root ::= \"<tool_call>[\""), "{grammar}");
        assert!(grammar.contains("tool-call ::="), "{grammar}");
        assert!(grammar.contains("memory_search"), "{grammar}");
        assert!(grammar.lines().any(|l| l == r#"space ::= | " ""#), "{grammar}");
    }

    #[test]
    fn calls_and_results_are_turns_the_model_reads() {
        let mut call = ChatTurn::new(ChatRole::Assistant, "");
        call.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "memory_search".into(),
            arguments: r#"{"query":"x"}"#.into(),
        }];
        let mut result = ChatTurn::new(ChatRole::Tool, r#"{"hits":[]}"#);
        result.name = Some("memory_search".into());
        let turns = decision_turns(&[ChatTurn::new(ChatRole::User, "hi"), call, result], &[search_tool()]);
        assert_eq!(turns[0].role, "system");
        assert!(
            turns[0].content.contains(r#"{"name": "memory_search", "description": "Search the memories.""#)
        );
        assert_eq!(
            turns[2].content,
            r#"<tool_call>[{"name": "memory_search", "arguments": {"query":"x"}}]</tool_call>"#
        );
        assert_eq!(turns[3].role, "user");
        assert!(turns[3].content.starts_with("Result of the tool memory_search:"));
    }
}

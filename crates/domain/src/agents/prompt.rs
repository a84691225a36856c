//! The prompt a chat sends: the agent's instructions, what it remembers that may help, as much
//! of the conversation as fits the history's token budget, and the new message.

use super::blocks::{MemoryBlock, blocks_section};
use super::chat::{ChatRole, ChatTurn, Message, count_prompt};
use super::model::Agent;
use crate::tokens::TokenCounter;

/// The agent's instructions: its system prompt, or a sentence naming it. The sentence is the one
/// small instruction-tuned models were trained with ("a helpful AI assistant named …"): SmolLM2
/// answers sensibly under it, and drifts into another language under variants as small as
/// "You are Helper, a helpful assistant agent." Its core memory `blocks` follow, in a section
/// of their own.
pub fn system_turn(agent: &Agent, blocks: &[MemoryBlock]) -> ChatTurn {
    let mut system = agent
        .config
        .system_prompt
        .clone()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| format!("You are a helpful AI assistant named {}.", agent.name.as_str()));
    // The core memory blocks, in a fixed section after the instructions.
    if let Some(section) = blocks_section(blocks) {
        system.push_str("\n\n");
        system.push_str(&section);
    }
    ChatTurn::new(ChatRole::System, system)
}

/// What the agent remembers that bears on the message, as the turn after its instructions; none
/// when it recalls nothing. Every chat route puts it there (`/agents/{id}/chat`, the
/// OpenAI-compatible endpoint), so an agent knows the same things on each.
pub fn memory_turn(memories: &[String]) -> Option<ChatTurn> {
    if memories.is_empty() {
        return None;
    }
    let listed: Vec<String> = memories.iter().map(|m| format!("- {m}")).collect();
    Some(ChatTurn::new(ChatRole::System, format!("What you remember that may help:\n{}", listed.join("\n"))))
}

/// Most characters of an earlier exchange's tool result in a prompt whose history is over its
/// budget: its beginning, then a note of how much was left out.
pub const SHORTENED_TOOL_RESULT_CHARS: usize = 200;

/// `content` cut to [`SHORTENED_TOOL_RESULT_CHARS`], with a note; `None` when it is short
/// enough already.
fn shortened(content: &str) -> Option<String> {
    let chars = content.chars().count();
    if chars <= SHORTENED_TOOL_RESULT_CHARS {
        return None;
    }
    let head: String = content.chars().take(SHORTENED_TOOL_RESULT_CHARS).collect();
    let left_out = chars - SHORTENED_TOOL_RESULT_CHARS;
    Some(format!(
        "{head}… [{left_out} more characters of this earlier tool result are left out of this prompt]"
    ))
}

/// Assembles the prompt: the system prompt, recalled memories, as much recent history as fits
/// in `history_budget` tokens, and the new message.
///
/// The history's budget is kept in two steps. First, while the history is over it, the tool
/// results of earlier exchanges are shortened, oldest first, to their first
/// [`SHORTENED_TOOL_RESULT_CHARS`] characters (they served their answer; the answer stays whole).
/// Then, if it is still over, the oldest turns are left out, newest kept first. The stored
/// conversation is never changed: only what this prompt carries.
pub fn build_prompt(
    system: ChatTurn,
    memories: &[String],
    history: &[Message],
    message: &str,
    counter: &dyn TokenCounter,
    history_budget: u64,
) -> Vec<ChatTurn> {
    let mut turns = vec![system];
    turns.extend(memory_turn(memories));
    let cost = |turn: &ChatTurn| count_prompt(counter, std::slice::from_ref(turn)) - 3;
    let mut history: Vec<ChatTurn> = history.iter().map(ChatTurn::of_message).collect();
    let mut total: u64 = history.iter().map(cost).sum();
    for turn in history.iter_mut().filter(|t| t.role == ChatRole::Tool) {
        if total <= history_budget {
            break;
        }
        if let Some(short) = shortened(&turn.content) {
            let before = cost(turn);
            turn.content = short;
            total = total - before + cost(turn);
        }
    }
    let mut kept = Vec::new();
    let mut used = 0;
    for turn in history.into_iter().rev() {
        let cost = cost(&turn);
        if used + cost > history_budget {
            break;
        }
        used += cost;
        kept.push(turn);
    }
    kept.reverse();
    // A tool result whose call was cut off would be refused by providers: the kept history
    // starts at a user or assistant turn.
    let start = kept.iter().position(|t| t.role != ChatRole::Tool).unwrap_or(kept.len());
    let mut kept = kept.split_off(start);
    // And every call the history keeps has its result, every result its call: a call answered
    // elsewhere (a client's own tool, stored with the session on the OpenAI-compatible
    // endpoint) is left out, as is a result whose call is not kept.
    let called: Vec<String> = kept.iter().flat_map(|t| t.tool_calls.iter().map(|c| c.id.clone())).collect();
    let answered: Vec<String> = kept.iter().filter_map(|t| t.tool_call_id.clone()).collect();
    for t in &mut kept {
        t.tool_calls.retain(|c| answered.contains(&c.id));
    }
    kept.retain(|t| {
        t.role != ChatRole::Tool || t.tool_call_id.as_ref().is_some_and(|id| called.contains(id))
    });
    turns.extend(kept);
    turns.push(ChatTurn::new(ChatRole::User, message));
    turns
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::agents::chat::ToolCall;
    use crate::agents::model::{AgentConfig, AgentName, AgentStatus, AgentType};
    use crate::ids::{AgentId, MessageId, SessionId, TenantId};

    struct Words;
    impl TokenCounter for Words {
        fn count(&self, text: &str) -> u64 {
            text.split_whitespace().count() as u64
        }
    }

    #[test]
    fn the_history_sent_pairs_every_call_with_its_result() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
        let agent = Agent {
            id: AgentId::from_string("agt_1"),
            tenant_id: TenantId::from_string("ten_1"),
            name: AgentName::new("Helper").unwrap(),
            agent_type: AgentType::Assistant,
            status: AgentStatus::Active,
            description: None,
            memory_types: Vec::new(),
            config: AgentConfig::default(),
            created_at: t0,
            updated_at: t0,
        };
        let message = |role, content: &str| Message {
            id: MessageId::from_string("msg"),
            tenant_id: agent.tenant_id.clone(),
            agent_id: agent.id.clone(),
            session_id: SessionId::from_string("s"),
            role,
            content: content.into(),
            prompt_tokens: 0,
            completion_tokens: 0,
            created_at: t0,
            incomplete: false,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            citations: Vec::new(),
            finish_reason: None,
        };
        let call = |id: &str| ToolCall { id: id.into(), name: "get_weather".into(), arguments: "{}".into() };
        let result = |id: &str| Message { tool_call_id: Some(id.into()), ..message(ChatRole::Tool, "{}") };
        let history = vec![
            // A result whose call is not in the history.
            result("orphan"),
            message(ChatRole::User, "weather?"),
            // Two calls, one answered here, one by a client elsewhere.
            Message { tool_calls: vec![call("a"), call("client")], ..message(ChatRole::Assistant, "") },
            result("a"),
            message(ChatRole::Assistant, "Sunny."),
        ];
        let turns = build_prompt(system_turn(&agent, &[]), &[], &history, "thanks", &Words, 10_000);
        let roles: Vec<ChatRole> = turns.iter().map(|t| t.role).collect();
        assert_eq!(
            roles,
            [
                ChatRole::System,
                ChatRole::User,
                ChatRole::Assistant,
                ChatRole::Tool,
                ChatRole::Assistant,
                ChatRole::User
            ]
        );
        assert_eq!(turns[2].tool_calls, [call("a")], "the call answered elsewhere is left out");
        assert_eq!(turns[3].tool_call_id.as_deref(), Some("a"));
    }

    #[test]
    fn over_its_budget_the_history_shortens_old_tool_results_first_then_leaves_out_old_turns() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
        let mut agent = Agent {
            id: AgentId::from_string("agt_1"),
            tenant_id: TenantId::from_string("ten_1"),
            name: AgentName::new("Helper").unwrap(),
            agent_type: AgentType::Assistant,
            status: AgentStatus::Active,
            description: None,
            memory_types: Vec::new(),
            config: AgentConfig::default(),
            created_at: t0,
            updated_at: t0,
        };
        agent.config.system_prompt = Some("Be brief.".into());
        let message = |role, content: String| Message {
            id: MessageId::from_string("msg"),
            tenant_id: agent.tenant_id.clone(),
            agent_id: agent.id.clone(),
            session_id: SessionId::from_string("s"),
            role,
            content,
            prompt_tokens: 0,
            completion_tokens: 0,
            created_at: t0,
            incomplete: false,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            citations: Vec::new(),
            finish_reason: None,
        };
        // One exchange with a tool: a question, the call, a 1,000-word result, the answer.
        let exchange = |n: usize| {
            let id = format!("call_{n}");
            vec![
                message(ChatRole::User, format!("question {n}")),
                Message {
                    tool_calls: vec![ToolCall {
                        id: id.clone(),
                        name: "search".into(),
                        arguments: "{}".into(),
                    }],
                    ..message(ChatRole::Assistant, String::new())
                },
                Message { tool_call_id: Some(id), ..message(ChatRole::Tool, "word ".repeat(1000)) },
                message(ChatRole::Assistant, format!("answer {n}")),
            ]
        };
        let history: Vec<Message> = (1..=3).flat_map(exchange).collect();
        let words = |turns: &[ChatTurn]| turns.iter().map(|t| Words.count(&t.content)).sum::<u64>();
        // Room for the newest result whole and the two older ones shortened: nothing left out.
        let turns = build_prompt(system_turn(&agent, &[]), &[], &history, "next", &Words, 1_200);
        assert_eq!(turns.len(), 1 + 12 + 1, "every turn kept");
        let results: Vec<&ChatTurn> = turns.iter().filter(|t| t.role == ChatRole::Tool).collect();
        assert!(results[0].content.contains("more characters of this earlier tool result are left out"));
        assert!(results[1].content.contains("left out"), "oldest first");
        assert_eq!(results[2].content, "word ".repeat(1000), "the newest whole, once the budget is met");
        assert!(words(&turns[1..13]) <= 1_200);
        // A smaller budget: every result is shortened before any turn is left out, and then the
        // oldest exchanges go.
        let turns = build_prompt(system_turn(&agent, &[]), &[], &history, "next", &Words, 150);
        assert!(turns.iter().filter(|t| t.role == ChatRole::Tool).all(|t| t.content.contains("left out")));
        assert!(turns.len() < 14 && turns.len() > 2, "{}", turns.len());
        assert_eq!(turns[turns.len() - 2].content, "answer 3", "the newest turns are kept");
        // Within the budget, nothing is shortened.
        let turns = build_prompt(system_turn(&agent, &[]), &[], &history, "next", &Words, 10_000);
        assert!(turns.iter().filter(|t| t.role == ChatRole::Tool).all(|t| t.content == "word ".repeat(1000)));
    }
}

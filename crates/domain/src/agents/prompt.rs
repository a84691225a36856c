//! The prompt a chat sends: the agent's instructions, what it remembers that may help, as much
//! of the conversation as fits the history's token budget, and the new message.

use super::chat::{ChatRole, ChatTurn, Message, count_prompt};
use super::model::Agent;
use crate::tokens::TokenCounter;

/// The agent's instructions: its system prompt, or a sentence naming it. The sentence is the one
/// small instruction-tuned models were trained with ("a helpful AI assistant named …"): SmolLM2
/// answers sensibly under it, and drifts into another language under variants as small as
/// "You are Helper, a helpful assistant agent."
pub fn system_turn(agent: &Agent) -> ChatTurn {
    let system = agent
        .config
        .system_prompt
        .clone()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| format!("You are a helpful AI assistant named {}.", agent.name.as_str()));
    ChatTurn::new(ChatRole::System, system)
}

/// Assembles the prompt: the system prompt, recalled memories, as much recent history as fits
/// in `history_budget` tokens (newest kept first), and the new message.
pub fn build_prompt(
    agent: &Agent,
    memories: &[String],
    history: &[Message],
    message: &str,
    counter: &dyn TokenCounter,
    history_budget: u64,
) -> Vec<ChatTurn> {
    let mut turns = vec![system_turn(agent)];
    if !memories.is_empty() {
        let listed: Vec<String> = memories.iter().map(|m| format!("- {m}")).collect();
        turns.push(ChatTurn::new(
            ChatRole::System,
            format!("What you remember that may help:\n{}", listed.join("\n")),
        ));
    }
    let mut kept = Vec::new();
    let mut used = 0;
    for m in history.iter().rev() {
        let turn = ChatTurn::of_message(m);
        let cost = count_prompt(counter, std::slice::from_ref(&turn)) - 3;
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
        let turns = build_prompt(&agent, &[], &history, "thanks", &Words, 10_000);
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
}

//! Chat with knowledge: sources in the prompt (`auto`), found by `knowledge_search` (`tool`),
//! cited by the reply, and bases checked when an agent names them.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use super::tests::{Mocks, agent, granted, input, owner, t0};
use super::*;
use crate::agents::chat::{Completion, FinishReason, ToolCall};
use crate::agents::knowledge::MockKnowledgeRetrieval;
use crate::agents::knowledge_config::{AgentKnowledge, KNOWLEDGE_TOOL};
use crate::agents::model::{AgentConfig, AgentName, AgentType, NewAgent};
use crate::agents::ports::{ExchangeOutcome, MockAgentRepository};
use crate::agents::providers::{MockToolProvider, OfferedTool};
use crate::agents::service::{AgentError, AgentService};
use crate::agents::sources::SOURCES_HEADER;
use crate::ids::{ChunkId, KnowledgeBaseId, KnowledgeFileId, MockIdGenerator};
use crate::time::MockClock;

fn source(index: u32, file: &str, page: Option<u32>, text: &str) -> Source {
    Source {
        index,
        chunk_id: ChunkId::from_string(format!("kbc_{file}_{index}")),
        file_id: KnowledgeFileId::from_string(format!("kbf_{file}")),
        file_name: file.into(),
        page,
        headings: Vec::new(),
        text: text.into(),
    }
}

fn knowing(mode: KnowledgeMode) -> Agent {
    let mut agent = agent(AgentStatus::Active);
    agent.config.knowledge_bases = vec![KnowledgeBaseId::from_string("kb_1")];
    agent.config.knowledge = AgentKnowledge { mode, top_k: 3, max_context_tokens: 1500 };
    agent
}

fn says(content: &str) -> Completion {
    Completion {
        content: content.into(),
        prompt_tokens: 100,
        completion_tokens: 10,
        finish: FinishReason::Stop,
        tool_calls: Vec::new(),
    }
}

#[tokio::test]
async fn auto_mode_puts_numbered_sources_in_the_prompt_and_the_reply_cites_those_it_names() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(knowing(KnowledgeMode::Auto))));
    m.knowledge
        .expect_sources()
        .withf(|a, q, k| a.id.as_str() == "agt_1" && q == "refunds?" && *k == 3)
        .returning(|_, _, _| {
            Ok(vec![
                source(1, "handbook.pdf", Some(2), "Refunds are paid within five days."),
                source(2, "notes.md", None, "Laptops are encrypted."),
            ])
        });
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, r.wanted))));
    m.model
        .expect_complete()
        .withf(|r| {
            let sources = &r.messages[1].content;
            r.messages.len() == 3
                && sources.starts_with(SOURCES_HEADER)
                && sources.contains("[1] handbook.pdf, page 2:\nRefunds are paid within five days.")
                && sources.contains("[2] notes.md:")
        })
        .returning(|_| Ok(says("Within five days [1].")));
    m.conversations
        .expect_record_exchange()
        .withf(|x| {
            let c = &x.reply.citations;
            c.len() == 1
                && (c[0].index, c[0].file_name.as_str(), c[0].page) == (1, "handbook.pdf", Some(2))
                && c[0].snippet == "Refunds are paid within five days."
                && x.user_message.citations.is_empty()
        })
        .returning(|_| Ok(ExchangeOutcome::Recorded { remaining: 9 }));
    let reply =
        m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("refunds?", None)).await.unwrap();
    assert_eq!(reply.message.citations[0].chunk_id.as_str(), "kbc_handbook.pdf_1");
}

#[tokio::test]
async fn tool_mode_numbers_each_searchs_results_after_the_ones_before_and_cites_them() {
    let mut m = Mocks::new();
    m.agents.expect_get().returning(|_, _| Ok(Some(knowing(KnowledgeMode::Tool))));
    m.knowledge.expect_sources().never();
    m.credits.expect_hold().returning(|r| Ok(Some(granted(r, r.wanted))));
    m.credits.expect_extend_hold().returning(|_, wanted, _, _| Ok(Some(wanted)));
    let mut tools = MockToolProvider::new();
    tools.expect_offer().returning(|_, _| {
        vec![OfferedTool {
            spec: ToolSpec { name: KNOWLEDGE_TOOL.into(), description: "d".into(), parameters: json!({}) },
            timeout: std::time::Duration::from_secs(5),
            kind: KNOWLEDGE_TOOL,
            position: usize::MAX,
        }]
    });
    // Each search's own results are numbered from 1.
    tools.expect_call().times(2).returning(|_, _, arguments| {
        let file = arguments["query"].as_str().unwrap().to_owned();
        Ok(json!({"results": [{"index": 1, "chunk_id": format!("kbc_{file}"), "file_id": "kbf_1",
                               "file_name": file, "page": 4, "headings": [], "text": "Text."}]}))
    });
    m.tools = tools;
    let calls = AtomicU64::new(0);
    m.model.expect_complete().times(3).returning(move |r| {
        let search = |query: &str| Completion {
            tool_calls: vec![ToolCall {
                id: format!("call_{query}"),
                name: KNOWLEDGE_TOOL.into(),
                arguments: json!({"query": query}).to_string(),
            }],
            finish: FinishReason::ToolCalls,
            ..says("")
        };
        match calls.fetch_add(1, Ordering::SeqCst) {
            0 => Ok(search("a.pdf")),
            1 => Ok(search("b.pdf")),
            _ => {
                let last = r.messages.last().unwrap();
                assert!(
                    last.content.contains(r#""index":2"#),
                    "the model reads the renumbered result: {}",
                    last.content
                );
                Ok(says("Both say so [2], [1]."))
            }
        }
    });
    m.conversations
        .expect_record_exchange()
        .withf(|x| {
            let c: Vec<(u32, &str)> =
                x.reply.citations.iter().map(|c| (c.index, c.file_name.as_str())).collect();
            c == [(2, "b.pdf"), (1, "a.pdf")] && x.steps[1].content.contains(r#""index":1"#)
        })
        .returning(|_| Ok(ExchangeOutcome::Recorded { remaining: 9 }));
    m.chat().chat(&owner(), &AgentId::from_string("agt_1"), input("look it up", None)).await.unwrap();
}

#[tokio::test]
async fn an_agent_may_name_only_its_tenants_knowledge_bases() {
    let mut agents = MockAgentRepository::new();
    agents.expect_create().never();
    let mut knowledge = MockKnowledgeRetrieval::new();
    knowledge
        .expect_unknown_bases()
        .withf(|t, b| t.as_str() == "ten_1" && b.len() == 2)
        .returning(|_, _| Ok(vec![KnowledgeBaseId::from_string("kb_other")]));
    let mut clock = MockClock::new();
    clock.expect_now().returning(t0);
    let mut ids = MockIdGenerator::new();
    ids.expect_generate().returning(|p| format!("{p}_1"));
    let service = AgentService::new(Arc::new(agents), Arc::new(ids), Arc::new(clock))
        .with_knowledge(Arc::new(knowledge));
    let config = AgentConfig {
        knowledge_bases: vec![KnowledgeBaseId::from_string("kb_1"), KnowledgeBaseId::from_string("kb_other")],
        ..AgentConfig::default()
    };
    let new = NewAgent {
        name: AgentName::new("Helper").unwrap(),
        agent_type: AgentType::Assistant,
        status: AgentStatus::Active,
        description: None,
        memory_types: Vec::new(),
        config,
    };
    let Err(AgentError::Invalid(errors)) = service.create(&owner(), new).await else { panic!("refused") };
    assert_eq!(errors.0.len(), 1);
    assert_eq!(errors.0[0].field, "config.knowledge_bases[1]");
    assert!(errors.0[0].message.contains("kb_other"));
}

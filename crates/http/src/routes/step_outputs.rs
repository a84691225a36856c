//! The outputs of workflow steps (`agentry_domain::workflows::outputs`) have the shapes of the
//! API's answers to the same operations; these tests keep the two alike.

#![cfg(test)]
#![allow(clippy::unwrap_used)]

use agentry_domain::agents::{ChatReply, ChatRole, Message};
use agentry_domain::ids::{AgentId, DocumentId, MemoryId, MessageId, SessionId, TenantId};
use agentry_domain::memory::SearchHit;
use agentry_domain::memory::model::{MemoryEntry, MemoryType};
use agentry_domain::memory::ranking::{Candidate, Scored};
use agentry_domain::workflows::outputs::{ChatOutput, MemoryEntryOutput, MemoryHit};
use chrono::{TimeZone, Utc};
use serde_json::json;

use crate::routes::chat::ChatResponse;
use crate::routes::memory::{MemoryEntryResponse, MemorySearchHit};

fn entry(expires: bool) -> MemoryEntry {
    let t = Utc.with_ymd_and_hms(2026, 11, 28, 9, 30, 5).unwrap();
    MemoryEntry {
        id: MemoryId::from_string("mem_1"),
        tenant_id: TenantId::from_string("ten_1"),
        agent_id: Some(AgentId::from_string("agt_1")),
        document_id: Some(DocumentId::from_string("doc_1")),
        memory_type: MemoryType::Episodic,
        key: Some("k".into()),
        content: "the text".into(),
        source: "workflow".into(),
        metadata: json!({"a": [1, "x"]}).as_object().unwrap().clone(),
        tags: vec!["t".into()],
        importance: 0.25,
        access_count: 3,
        created_at: t,
        updated_at: t,
        expires_at: expires.then_some(t),
        valid_from: t,
        invalid_at: None,
        superseded_by: None,
        origin: agentry_domain::memory::model::MemoryOrigin::Api,
        source_message_ids: Vec::new(),
    }
}

#[test]
fn a_chat_step_outputs_what_the_chat_route_answers() {
    let reply = ChatReply {
        message: Message {
            id: MessageId::from_string("msg_1"),
            tenant_id: TenantId::from_string("ten_1"),
            agent_id: AgentId::from_string("agt_1"),
            session_id: SessionId::parse("s-1").unwrap(),
            role: ChatRole::Assistant,
            content: "hello".into(),
            prompt_tokens: 12,
            completion_tokens: 3,
            created_at: Utc.with_ymd_and_hms(2026, 11, 28, 9, 30, 5).unwrap(),
            incomplete: false,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            citations: vec![agentry_domain::agents::Citation {
                index: 1,
                chunk_id: agentry_domain::ids::ChunkId::from_string("kbc_1"),
                file_id: agentry_domain::ids::KnowledgeFileId::from_string("kbf_1"),
                file_name: "handbook.pdf".into(),
                page: Some(2),
                snippet: "Refunds".into(),
            }],
            finish_reason: Some(agentry_domain::agents::FinishReason::Stop),
        },
        session_id: SessionId::parse("s-1").unwrap(),
        charged: 1,
        remaining: 99,
        finish: agentry_domain::agents::FinishReason::Stop,
    };
    assert_eq!(
        serde_json::to_value(ChatOutput::from(reply.clone())).unwrap(),
        serde_json::to_value(ChatResponse::from(reply)).unwrap()
    );
}

#[test]
fn memory_steps_output_what_the_memory_routes_answer() {
    for expires in [false, true] {
        assert_eq!(
            serde_json::to_value(MemoryEntryOutput::from(entry(expires))).unwrap(),
            serde_json::to_value(MemoryEntryResponse::from(entry(expires))).unwrap()
        );
    }
    let hit = SearchHit {
        entry: entry(false),
        ranking: Scored {
            candidate: Candidate {
                id: MemoryId::from_string("mem_1"),
                vector_rank: Some(1),
                similarity: Some(0.5),
                lexical_rank: None,
                coverage: None,
                importance: 0.25,
                updated_at: Utc.with_ymd_and_hms(2026, 11, 28, 9, 30, 5).unwrap(),
            },
            score: 0.7,
            relevance: 0.6,
            semantic: 0.6,
            lexical: 0.0,
            recency: 0.9,
        },
    };
    assert_eq!(
        serde_json::to_value(MemoryHit::from(hit.clone())).unwrap(),
        serde_json::to_value(MemorySearchHit::from(hit)).unwrap()
    );
}

#[test]
fn a_knowledge_search_step_outputs_what_the_search_route_answers() {
    use agentry_domain::ids::{ChunkId, KnowledgeBaseId, KnowledgeFileId};
    use agentry_domain::knowledge::{KnowledgeChunk, KnowledgeHit};
    use agentry_domain::workflows::outputs::KnowledgeHitOutput;

    use crate::routes::knowledge::KnowledgeSearchHit;
    let t = Utc.with_ymd_and_hms(2026, 11, 28, 9, 30, 5).unwrap();
    let hit = KnowledgeHit {
        chunk: KnowledgeChunk {
            id: ChunkId::from_string("kbc_1"),
            file_id: KnowledgeFileId::from_string("kbf_1"),
            knowledge_base_id: KnowledgeBaseId::from_string("kb_1"),
            index: 2,
            text: "the text".into(),
            page: Some(3),
            headings: vec!["Policies".into()],
            start: 10,
            end: 18,
        },
        file_name: "handbook.pdf".into(),
        ranking: Scored {
            candidate: Candidate {
                id: ChunkId::from_string("kbc_1"),
                vector_rank: Some(1),
                similarity: Some(0.5),
                lexical_rank: None,
                coverage: None,
                importance: 0.5,
                updated_at: t,
            },
            score: 0.7,
            relevance: 0.7,
            semantic: 0.7,
            lexical: 0.0,
            recency: 1.0,
        },
    };
    assert_eq!(
        serde_json::to_value(KnowledgeHitOutput::from(hit.clone())).unwrap(),
        serde_json::to_value(KnowledgeSearchHit::from(hit)).unwrap()
    );
}

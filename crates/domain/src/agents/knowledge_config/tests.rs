use super::*;

#[test]
fn knowledge_settings_are_bounded_and_stored_as_shown() {
    assert_eq!(AgentKnowledge::mode("tool").unwrap(), KnowledgeMode::Tool);
    assert_eq!(AgentKnowledge::mode("both").unwrap_err().field, "config.knowledge.mode");
    assert!(AgentKnowledge::top_k(0).is_err() && AgentKnowledge::top_k(51).is_err());
    assert_eq!(AgentKnowledge::top_k(50).unwrap(), 50);
    assert!(AgentKnowledge::max_context_tokens(99).is_err());
    assert_eq!(AgentKnowledge::max_context_tokens(32_000).unwrap(), 32_000);
    let k = AgentKnowledge { mode: KnowledgeMode::Tool, top_k: 3, max_context_tokens: 800 };
    assert_eq!(AgentKnowledge::from_stored(Some(&k.to_json())), k);
    assert_eq!(AgentKnowledge::from_stored(None), AgentKnowledge::default());
    assert_eq!(
        AgentKnowledge::default().to_json(),
        json!({"mode": "auto", "top_k": 5, "max_context_tokens": 1500})
    );
}

#[test]
fn knowledge_bases_are_ids_each_once_and_few() {
    let ids = knowledge_bases(&["kb_1".into(), "kb_2".into()]).unwrap();
    assert_eq!(ids.len(), 2);
    let errors = knowledge_bases(&["kb_1".into(), "kb_1".into(), "bad id".into()]).unwrap_err();
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["config.knowledge_bases[1]", "config.knowledge_bases[2]"]);
    let many: Vec<String> = (0..=MAX_AGENT_KNOWLEDGE_BASES).map(|i| format!("kb_{i}")).collect();
    assert_eq!(knowledge_bases(&many).unwrap_err()[0].field, "config.knowledge_bases");
}

#![allow(clippy::unwrap_used)]

use super::*;

fn fact(id: &str, content: &str) -> MemoryEntry {
    crate::memory::fixtures::entry(id, content)
}

fn candidate(text: &str, topic: Option<&str>) -> Candidate {
    Candidate { text: text.into(), topic: topic.map(str::to_owned) }
}

#[test]
fn a_new_statement_on_a_topic_invalidates_what_was_known_and_is_added() {
    let porto = candidate("The user lives in Porto.", Some("home"));
    let lyon = fact("mem_lyon", "The user lives in Lyon.");
    // However alike the two read: on a topic, a different statement replaces the known one.
    let decisions = by_rules(&porto, std::slice::from_ref(&lyon), &[(lyon.clone(), 0.97)]);
    assert_eq!(
        decisions,
        [
            Decision::Invalidate {
                id: MemoryId::from_string("mem_lyon"),
                reason: "replaced by a later statement: The user lives in Porto.".into()
            },
            Decision::Add { text: "The user lives in Porto.".into(), topic: Some("home".into()) },
        ]
    );
}

#[test]
fn a_known_fact_changes_nothing_and_a_new_one_is_added() {
    let lyon = fact("mem_lyon", "The user lives in Lyon.");
    let again = candidate("the user lives in lyon.", Some("home"));
    assert!(by_rules(&again, std::slice::from_ref(&lyon), &[]).is_empty());
    let tea = candidate("The user prefers tea.", None);
    assert!(by_rules(&tea, &[], &[(fact("mem_tea", "The user likes tea best."), 0.95)]).is_empty());
    assert_eq!(
        by_rules(&tea, &[], &[(fact("mem_x", "The user works at Acme."), 0.2)]),
        [Decision::Add { text: "The user prefers tea.".into(), topic: None }]
    );
}

#[test]
fn a_models_answer_is_read_into_decisions_on_the_facts_it_was_shown() {
    let shown = [fact("mem_lyon", "The user lives in Lyon.")];
    let answer = r#"{"facts": [
        {"event": "INVALIDATE", "id": "mem_lyon", "reason": "moved"},
        {"event": "ADD", "text": "The user lives in Porto."},
        {"event": "NONE"}
    ]}"#;
    assert_eq!(
        from_model(answer, &shown).unwrap(),
        [
            Decision::Invalidate { id: MemoryId::from_string("mem_lyon"), reason: "moved".into() },
            Decision::Add { text: "The user lives in Porto.".into(), topic: None },
        ]
    );
    let fenced = "```json\n{\"facts\": [{\"event\": \"UPDATE\", \"id\": \"mem_lyon\", \"text\": \"The user lives in Lyon, France.\"}]}\n```";
    assert_eq!(
        from_model(fenced, &shown).unwrap(),
        [Decision::Update {
            id: MemoryId::from_string("mem_lyon"),
            text: "The user lives in Lyon, France.".into()
        }]
    );
}

#[test]
fn malformed_or_foreign_answers_are_rejected_whole() {
    let shown = [fact("mem_lyon", "The user lives in Lyon.")];
    let rejected = |answer: &str| from_model(answer, &shown).unwrap_err();
    assert!(rejected("Sure! The user moved to Porto.").contains("not the expected JSON"));
    assert!(rejected(r#"{"memories": []}"#).contains("not the expected JSON"));
    assert!(rejected(r#"{"facts": [{"event": "DELETE", "id": "mem_lyon"}]}"#).contains("unknown event"));
    assert!(rejected(r#"{"facts": [{"event": "ADD"}]}"#).contains("a text is required"));
    assert!(
        rejected(
            r#"{"facts": [{"event": "ADD", "text": "x"}, {"event": "INVALIDATE", "id": "mem_other_agents"}]}"#
        )
        .contains("not one of the memories it was shown")
    );
    let long = format!(r#"{{"facts": [{{"event": "ADD", "text": "{}"}}]}}"#, "x".repeat(MAX_FACT_CHARS + 1));
    assert!(rejected(&long).contains("longer than"));
    assert_eq!(answer_schema()["required"], json!(["facts"]));
}

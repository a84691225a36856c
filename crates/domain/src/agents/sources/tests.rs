use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::ids::{ChunkId, KnowledgeFileId};

struct Words;
impl TokenCounter for Words {
    fn count(&self, text: &str) -> u64 {
        text.split_whitespace().count() as u64
    }
}

fn source(index: u32, file: &str, page: Option<u32>, text: &str) -> Source {
    Source {
        index,
        chunk_id: ChunkId::from_string(format!("kbc_{index}")),
        file_id: KnowledgeFileId::from_string(format!("kbf_{file}")),
        file_name: file.into(),
        page,
        headings: Vec::new(),
        text: text.into(),
    }
}

#[test]
fn a_reply_cites_the_sources_it_names_in_the_order_it_names_them() {
    let sources =
        vec![source(1, "a.pdf", Some(2), "Refunds take five days."), source(2, "b.md", None, "Laptops.")];
    let cited =
        citations("Laptops are encrypted [2]. Refunds take five days [1][2], see [7] and [x].", &sources);
    assert_eq!(cited.iter().map(|c| c.index).collect::<Vec<_>>(), [2, 1]);
    assert_eq!((cited[1].file_name.as_str(), cited[1].page), ("a.pdf", Some(2)));
    assert_eq!(citations("As [1, 2] say.", &sources).len(), 2);
    assert!(citations("No sources used.", &sources).is_empty());
    assert!(citations("[1]", &[]).is_empty(), "a number no source has is not a citation");
    assert!(citations("a [link](https://example.com) and [ ] and [12345]", &sources).is_empty());
}

#[test]
fn a_snippet_is_one_line_and_bounded() {
    let long = format!("line one\n\nline two {}", "word ".repeat(200));
    let c = Citation::of(&source(1, "a.txt", None, &long));
    assert!(c.snippet.starts_with("line one line two"));
    assert_eq!(c.snippet.chars().count(), SNIPPET_CHARS);
    assert!(c.snippet.ends_with('…'));
}

#[test]
fn sources_fit_their_budget_best_first_and_go_before_the_conversation() {
    let found: Vec<Source> =
        (1..=5).map(|i| source(0, &format!("f{i}.md"), None, &"word ".repeat(40 * i as usize))).collect();
    let kept = fit_sources(found.clone(), &Words, 160, 1);
    // The header is 27 words: f1 (43 with its line) and f2 (83) fit in 160; f3 and later do not.
    assert_eq!(kept.iter().map(|s| s.file_name.as_str()).collect::<Vec<_>>(), ["f1.md", "f2.md"]);
    assert_eq!(kept.iter().map(|s| s.index).collect::<Vec<_>>(), [1, 2], "numbered as kept");
    // A first source larger than the whole budget is cut, not dropped.
    let kept = fit_sources(found[4..].to_vec(), &Words, 120, 1);
    assert_eq!(kept.len(), 1);
    assert!(kept[0].text.len() < found[4].text.len());

    let turns = vec![
        ChatTurn::new(ChatRole::System, "You are Helper."),
        ChatTurn::new(ChatRole::System, "What you remember"),
        ChatTurn::new(ChatRole::User, "Hi"),
    ];
    let with = with_sources(turns.clone(), &[source(1, "a.pdf", Some(3), "Text.")]);
    assert_eq!(with.len(), 4);
    assert!(with[2].content.starts_with(SOURCES_HEADER));
    assert!(with[2].content.contains("[1] a.pdf, page 3:\nText."));
    assert_eq!(with_sources(turns.clone(), &[]), turns);
}

#[test]
fn a_tools_results_are_numbered_after_the_sources_before_them() {
    let mut sources = Sources(vec![source(1, "a.pdf", Some(1), "One.")]);
    let result = |file: &str| {
        json!({"index": 1, "chunk_id": "kbc_x", "file_id": "kbf_x", "file_name": file, "page": null,
               "headings": ["H"], "text": "T"})
    };
    let mut output = json!({"results": [result("b.md"), result("c.md")]});
    sources.adopt(&mut output);
    assert_eq!(output["results"][0]["index"], 2);
    assert_eq!(output["results"][1]["index"], 3);
    assert_eq!(sources.0.iter().map(|s| s.index).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(sources.0[2].file_name, "c.md");
    let mut other = json!({"answer": 42});
    sources.adopt(&mut other);
    assert_eq!(sources.0.len(), 3, "an output without results adds nothing");
}

proptest! {
    #[test]
    fn citations_never_invent_a_source(reply in ".{0,200}", indices in proptest::collection::vec(1u32..9, 0..5)) {
        let sources: Vec<Source> = indices.iter().map(|i| source(*i, "f.md", None, "t")).collect();
        for c in citations(&reply, &sources) {
            prop_assert!(sources.iter().any(|s| s.index == c.index));
            prop_assert!(reply.contains(&c.index.to_string()));
        }
    }
}

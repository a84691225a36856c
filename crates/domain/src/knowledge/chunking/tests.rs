use proptest::prelude::*;

use super::*;
use crate::knowledge::document::Section;

/// One token per word: easy to reason about.
struct Words;
impl TokenCounter for Words {
    fn count(&self, text: &str) -> u64 {
        text.split_whitespace().count() as u64
    }
}

/// One token per four bytes, rounded up: long words cost several.
struct Bytes4;
impl TokenCounter for Bytes4 {
    fn count(&self, text: &str) -> u64 {
        (text.len() as u64).div_ceil(4)
    }
}

fn section(page: Option<u32>, headings: &[&str], blocks: &[&str]) -> Section {
    Section {
        page,
        headings: headings.iter().map(|h| (*h).to_owned()).collect(),
        blocks: blocks.iter().map(|b| (*b).to_owned()).collect(),
    }
}

fn doc(sections: Vec<Section>) -> ParsedDocument {
    ParsedDocument { pages: None, sections }
}

fn limits(max: u32, overlap: u32) -> ChunkLimits {
    ChunkLimits { max_tokens: max, overlap_tokens: overlap }
}

#[test]
fn pages_and_headings_are_never_mixed_in_one_chunk() {
    let d = doc(vec![
        section(Some(1), &[], &["Office hours.", "Opens at nine."]),
        section(Some(2), &[], &["Refunds take fourteen days."]),
        section(None, &["Travel", "Flights"], &["Economy under six hours."]),
    ]);
    let chunks = chunk_document(&d, limits(100, 10), &Words);
    assert_eq!(chunks.len(), 3);
    assert_eq!(chunks[0].text, "Office hours.\n\nOpens at nine.");
    assert_eq!((chunks[0].page, chunks[1].page), (Some(1), Some(2)));
    assert_eq!(chunks[2].headings, ["Travel", "Flights"]);
    assert_eq!(chunks.iter().map(|c| c.index).collect::<Vec<_>>(), [0, 1, 2]);
}

#[test]
fn offsets_point_into_the_document_text_in_characters() {
    let d = doc(vec![
        section(None, &[], &["Café au lait.", "Ünïcödé text here."]),
        section(Some(3), &[], &["Ω end."]),
    ]);
    let text: Vec<char> = document_text(&d).chars().collect();
    for c in chunk_document(&d, limits(64, 0), &Words) {
        assert_eq!(text[c.start..c.end].iter().collect::<String>(), c.text);
    }
}

#[test]
fn long_blocks_are_cut_between_sentences_with_overlap() {
    let block = "a b c. d e f. g h i. j k l. m n o.";
    let chunks = chunk_document(&doc(vec![section(None, &[], &[block])]), limits(6, 3), &Words);
    let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["a b c. d e f.", "d e f. g h i.", "g h i. j k l.", "j k l. m n o."]);
}

#[test]
fn a_word_longer_than_a_chunk_is_cut_between_characters() {
    let word = "x".repeat(1000);
    let chunks = chunk_document(&doc(vec![section(None, &[], &[&word])]), limits(64, 0), &Bytes4);
    assert!(chunks.len() >= 4);
    assert!(chunks.iter().all(|c| Bytes4.count(&c.text) <= 64));
    assert_eq!(chunks.iter().map(|c| c.text.as_str()).collect::<String>(), word);
}

#[test]
fn an_empty_document_has_no_chunks() {
    assert!(chunk_document(&doc(vec![]), ChunkLimits::default(), &Words).is_empty());
    assert!(
        chunk_document(&doc(vec![section(None, &[], &["  "])]), ChunkLimits::default(), &Words).is_empty()
    );
}

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-z]{1,8}",
        1 => "[a-zé]{1,30}[.!?]",
        1 => "[A-Za-zΩ]{1,200}",
    ]
}

fn block() -> impl Strategy<Value = String> {
    proptest::collection::vec(word(), 1..120).prop_map(|w| w.join(" "))
}

fn document() -> impl Strategy<Value = ParsedDocument> {
    proptest::collection::vec(
        (
            proptest::option::of(1u32..50),
            proptest::collection::vec("[A-Z][a-z]{0,6}", 0..3),
            proptest::collection::vec(block(), 1..6),
        ),
        0..6,
    )
    .prop_map(|sections| {
        doc(sections.into_iter().map(|(page, headings, blocks)| Section { page, headings, blocks }).collect())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn chunks_fit_cover_everything_and_point_into_the_text(
        d in document(),
        max in 8u32..80,
        overlap_share in 0u32..=50,
        by_bytes in any::<bool>(),
    ) {
        let counter: &dyn TokenCounter = if by_bytes { &Bytes4 } else { &Words };
        let overlap = max * overlap_share / 100;
        let chunks = chunk_document(&d, limits(max, overlap), counter);
        let text: Vec<char> = document_text(&d).chars().collect();
        let mut covered = vec![false; text.len()];
        for (i, c) in chunks.iter().enumerate() {
            prop_assert_eq!(c.index as usize, i);
            // Never over the limit.
            prop_assert!(counter.count(&c.text) <= u64::from(max), "{} tokens: {:?}", counter.count(&c.text), c.text);
            // Exactly the slice its offsets name.
            prop_assert_eq!(text[c.start..c.end].iter().collect::<String>(), c.text.clone());
            // Within one section: its page and headings are a section's.
            prop_assert!(d.sections.iter().any(|s| s.page == c.page && s.headings == c.headings));
            covered[c.start..c.end].iter_mut().for_each(|x| *x = true);
            if i > 0 {
                // Always moving on, overlapping the previous chunk by at most the overlap.
                let prev = &chunks[i - 1];
                prop_assert!(c.start > prev.start);
                if c.start < prev.end {
                    let shared: String = text[c.start..prev.end].iter().collect();
                    prop_assert!(counter.count(&shared) <= u64::from(overlap), "overlap {:?}", shared);
                }
            }
        }
        // Every character that is not white space is in some chunk.
        for (ch, seen) in text.iter().zip(&covered) {
            prop_assert!(*seen || ch.is_whitespace(), "{:?} left out", ch);
        }
    }
}

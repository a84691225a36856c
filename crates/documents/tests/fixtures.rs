//! The committed fixtures (scripts/fixtures/make_knowledge_fixtures.py) read into the sections
//! chunking needs: pages, heading paths, paragraphs, rows and records.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use std::sync::Arc;

use agentry_documents::Parsers;
use agentry_domain::knowledge::{DocumentParser, ParseError, ParsedDocument, Section};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Recognises the fixture by its name and first 4 KiB, as an upload is, then parses it.
async fn parse(name: &str) -> Result<ParsedDocument, ParseError> {
    let parsers = Parsers::default();
    let bytes = fixture(name);
    let media_type = parsers.recognise(name, &bytes[..bytes.len().min(4096)])?;
    parsers.parse(media_type, Arc::from(bytes)).await
}

/// The section whose blocks hold `text`.
fn section_with<'a>(document: &'a ParsedDocument, text: &str) -> &'a Section {
    document
        .sections
        .iter()
        .find(|s| s.blocks.iter().any(|b| b.contains(text)))
        .unwrap_or_else(|| panic!("no block holds {text:?} in {document:#?}"))
}

fn all_text(document: &ParsedDocument) -> String {
    document
        .sections
        .iter()
        .flat_map(|s| s.headings.iter().chain(&s.blocks))
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_clean(document: &ParsedDocument) {
    for section in &document.sections {
        assert!(!section.blocks.is_empty(), "an empty section: {section:?}");
        for block in &section.blocks {
            assert!(!block.trim().is_empty(), "an empty block in {section:?}");
            assert!(!block.contains("  ") || block.starts_with(' '), "a whitespace run in {block:?}");
        }
    }
}

#[tokio::test]
async fn the_pdf_has_one_section_per_page_with_its_facts() {
    let document = parse("handbook.pdf").await.unwrap();
    assert_eq!(document.pages, Some(3));
    let pages: Vec<_> = document.sections.iter().map(|s| s.page).collect();
    assert_eq!(pages, [Some(1), Some(2), Some(3)]);
    for (page, fact) in [
        (1, "The Lisbon office opens at 08:30 and closes at 18:00 on weekdays."),
        (2, "Refunds for annual plans are paid back within fourteen days of cancellation."),
        (3, "Laptops must use full-disk encryption and lock after five minutes idle."),
    ] {
        let section = section_with(&document, fact);
        assert_eq!(section.page, Some(page), "{fact}");
        assert!(section.headings.is_empty());
        assert!(section.blocks.iter().any(|b| b == fact), "the fact is a block of its own: {section:?}");
    }
    assert_eq!(document.sections[1].blocks[0], "Refunds", "the heading line atop the page");
    assert_clean(&document);
}

#[tokio::test]
async fn the_word_file_keeps_its_heading_paths_and_table_rows() {
    let document = parse("policies.docx").await.unwrap();
    assert_eq!(document.pages, None);
    let flights = section_with(&document, "Economy class is booked for flights shorter than six hours.");
    assert_eq!(flights.headings, ["Travel", "Flights"]);
    let hotels = section_with(&document, "travel desk");
    assert_eq!(hotels.headings, ["Travel", "Hotels"]);
    let expenses = section_with(&document, "Expenses are claimed within thirty days");
    assert_eq!(expenses.headings, ["Expenses"]);
    assert!(expenses.blocks.iter().any(|b| b == "Meals | 40 EUR a day | None"), "{expenses:?}");
    assert!(expenses.blocks.iter().any(|b| b == "Category | Limit | Approval"), "{expenses:?}");
    let intro = section_with(&document, "every employee who travels");
    assert!(intro.headings.is_empty());
    assert!(!all_text(&document).contains("Travel and expenses policy"), "core properties are not text");
    assert_clean(&document);
}

#[tokio::test]
async fn the_html_page_keeps_headings_and_never_reads_scripts_or_styles() {
    let document = parse("guide.html").await.unwrap();
    let text = all_text(&document);
    for hidden in
        ["stealCookies", "document.cookie", "font-family", "display: none", "hidden-rule", "JavaScript"]
    {
        assert!(!text.contains(hidden), "{hidden:?} leaked into {text}");
    }
    assert!(
        !document.sections.iter().any(|s| s.blocks.iter().any(|b| b == "Onboarding guide")),
        "the title is head"
    );
    let welcome = section_with(&document, "This guide covers your first week.");
    assert_eq!(welcome.headings, ["Onboarding guide"]);
    let accounts = section_with(
        &document,
        "Your laptop arrives on day one; accounts are created by IT before you start.",
    );
    assert_eq!(accounts.headings, ["Onboarding guide", "Accounts"]);
    assert!(
        accounts.blocks.iter().any(|b| b == "Chat & video calls"),
        "entities decoded, one block per item"
    );
    let equipment = section_with(&document, "Monitor | Your manager");
    assert_eq!(equipment.headings, ["Onboarding guide", "Equipment"]);
    let help = section_with(&document, "#help");
    assert_eq!(help.headings, ["Getting help"], "a new h1 resets the path");
    assert!(help.blocks.contains(&"Ask in the #help channel.\nSomeone answers within the hour.".to_owned()));
    assert_clean(&document);
}

#[tokio::test]
async fn markdown_keeps_headings_items_code_and_rows() {
    let document = parse("notes.md").await.unwrap();
    assert_eq!(section_with(&document, "Version 2.4 ships on Tuesday.").headings, ["Release notes"]);
    let changes = section_with(&document, "Faster search over knowledge bases");
    assert_eq!(changes.headings, ["Release notes", "Changes"]);
    assert_eq!(changes.blocks, ["Faster search over knowledge bases", "Citations show the page number"]);
    let upgrading = section_with(&document, "agentry migrate");
    assert_eq!(upgrading.headings, ["Release notes", "Upgrading"]);
    assert!(upgrading.blocks.contains(&"agentry migrate\nagentry serve".to_owned()));
    assert!(upgrading.blocks.contains(&"workers | 4".to_owned()));
    assert_clean(&document);
}

#[tokio::test]
async fn plain_text_is_one_block_per_paragraph() {
    let document = parse("notes.txt").await.unwrap();
    assert_eq!(document.sections.len(), 1);
    assert_eq!(
        document.sections[0].blocks,
        [
            "Meeting notes, 14 January",
            "The team agreed to move the weekly review\nto Thursday afternoons.",
            "Action items: Ana drafts the agenda; Rui books the room.",
            "Next meeting: 21 January.",
        ]
    );
}

#[tokio::test]
async fn csv_is_one_block_per_record_with_its_column_names() {
    let document = parse("customers.csv").await.unwrap();
    assert_eq!(document.sections.len(), 1);
    let blocks = &document.sections[0].blocks;
    assert_eq!(blocks.len(), 5);
    assert_eq!(blocks[0], "name: Acme Corp; country: Portugal; plan: annual; seats: 25");
    assert_eq!(blocks[3], "name: Umbrella, Ltd; country: France; seats: 40", "empty values are left out");
}

#[tokio::test]
async fn damaged_and_protected_pdfs_fail_clearly() {
    assert_eq!(parse("handbook-encrypted.pdf").await, Err(ParseError::Encrypted));
    assert!(matches!(parse("handbook-truncated.pdf").await, Err(ParseError::Malformed(_))));
    assert_eq!(parse("scanned.pdf").await, Err(ParseError::NoText));
}

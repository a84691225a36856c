//! Files built to hurt: decompression bombs, page floods, deep nesting, bad encodings and random
//! bytes. Each must end as its own error (or be read), quickly, without a panic or a hang.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use std::io::{Cursor, Write};
use std::sync::Arc;
use std::time::Duration;

use agentry_documents::{MAX_ARCHIVE_ENTRIES, MAX_MARKUP_BYTES, Parsers};
use agentry_domain::knowledge::{DocumentParser, MediaType, ParseError, ParseLimits, ParsedDocument};
use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

const W_NS: &str = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";

async fn parse_with(
    limits: ParseLimits,
    media_type: MediaType,
    bytes: Vec<u8>,
) -> Result<ParsedDocument, ParseError> {
    Parsers::new(limits).parse(media_type, Arc::from(bytes)).await
}

async fn parse(media_type: MediaType, bytes: Vec<u8>) -> Result<ParsedDocument, ParseError> {
    parse_with(ParseLimits::default(), media_type, bytes).await
}

/// A zip of `members`, deflated.
fn zip(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    for (name, content) in members {
        writer.start_file(*name, options).unwrap();
        writer.write_all(content).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

fn document_xml(body: &str) -> Vec<u8> {
    format!(r#"<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{W_NS}"><w:body>{body}</w:body></w:document>"#)
        .into_bytes()
}

/// A Word file whose one paragraph holds `inflated` bytes of the letter `a`: a few dozen KiB
/// compressed.
fn docx_bomb(member: &str, inflated: usize) -> Vec<u8> {
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    writer.start_file(member, options).unwrap();
    writer.write_all(format!(r#"<w:document xmlns:w="{W_NS}"><w:body><w:p><w:r><w:t>"#).as_bytes()).unwrap();
    let chunk = vec![b'a'; 1024 * 1024];
    for _ in 0..inflated / chunk.len() {
        writer.write_all(&chunk).unwrap();
    }
    writer.write_all(b"</w:t></w:r></w:p></w:body></w:document>").unwrap();
    if member != "word/document.xml" {
        writer.start_file("word/document.xml", options).unwrap();
        writer.write_all(&document_xml("<w:p><w:r><w:t>small</w:t></w:r></w:p>")).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// A PDF of `pages` pages sharing one content stream, whose page tree declares `declared`.
fn many_pages(pages: usize, declared: i64) -> Vec<u8> {
    let mut document = Document::with_version("1.5");
    let tree = document.new_object_id();
    let font = document.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
    });
    let resources = document.add_object(dictionary! { "Font" => dictionary! { "F1" => font } });
    let content = Content {
        operations: vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 12.into()]),
            Operation::new("Td", vec![72.into(), 720.into()]),
            Operation::new("Tj", vec![Object::string_literal("A page among many.")]),
            Operation::new("ET", vec![]),
        ],
    };
    let content = document.add_object(Stream::new(dictionary! {}, content.encode().unwrap()));
    let kids: Vec<Object> = (0..pages)
        .map(|_| {
            document
                .add_object(dictionary! { "Type" => "Page", "Parent" => tree, "Contents" => content })
                .into()
        })
        .collect();
    document.objects.insert(
        tree,
        Object::Dictionary(dictionary! {
            "Type" => "Pages",
            "Kids" => kids,
            "Count" => declared,
            "Resources" => resources,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        }),
    );
    let catalog = document.add_object(dictionary! { "Type" => "Catalog", "Pages" => tree });
    document.trailer.set("Root", catalog);
    let mut bytes = Vec::new();
    document.save_to(&mut bytes).unwrap();
    bytes
}

/// Deterministic noise (a xorshift generator), so a failure can be replayed.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect()
}

#[tokio::test]
async fn a_docx_zip_bomb_is_too_large() {
    let limits = ParseLimits { max_inflated_bytes: 1024 * 1024, ..ParseLimits::default() };
    let bomb = docx_bomb("word/document.xml", 20 * 1024 * 1024);
    assert!(bomb.len() < 200 * 1024, "the bomb is small: {} bytes", bomb.len());
    match parse_with(limits, MediaType::Docx, bomb).await {
        Err(ParseError::TooLarge(message)) => assert!(message.contains("decompression bomb"), "{message}"),
        other => panic!("{other:?}"),
    }
    let styles_bomb = docx_bomb("word/styles.xml", 20 * 1024 * 1024);
    assert!(matches!(parse_with(limits, MediaType::Docx, styles_bomb).await, Err(ParseError::TooLarge(_))));
}

#[tokio::test]
async fn a_docx_under_the_inflate_limit_is_read() {
    let limits = ParseLimits { max_inflated_bytes: 4 * 1024 * 1024, ..ParseLimits::default() };
    let file = docx_bomb("word/document.xml", 2 * 1024 * 1024);
    let document = parse_with(limits, MediaType::Docx, file).await.unwrap();
    assert_eq!(document.sections[0].blocks[0].len(), 2 * 1024 * 1024);
}

#[tokio::test]
async fn archives_that_are_not_word_are_malformed() {
    let not_word = zip(&[("hello.txt", b"hello")]);
    match parse(MediaType::Docx, not_word).await {
        Err(ParseError::Malformed(message)) => assert!(message.contains("not a Word document"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        parse(MediaType::Docx, b"PK\x03\x04 not really".to_vec()).await,
        Err(ParseError::Malformed(_))
    ));
    let broken_xml = zip(&[("word/document.xml", b"<w:document xmlns:w='x'><w:body><w:p></w:body>")]);
    assert!(matches!(parse(MediaType::Docx, broken_xml).await, Err(ParseError::Malformed(_))));
}

#[tokio::test]
async fn an_archive_with_too_many_members_is_refused() {
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Stored);
    for index in 0..=MAX_ARCHIVE_ENTRIES {
        writer.start_file(format!("m/{index}"), options).unwrap();
    }
    let archive = writer.finish().unwrap().into_inner();
    assert!(matches!(parse(MediaType::Docx, archive).await, Err(ParseError::TooLarge(_))));
}

#[tokio::test]
async fn word_text_boxes_tabs_and_fallbacks() {
    let body = r#"<w:p><w:pPr><w:pStyle w:val="Heading1"/><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr><w:r><w:t>Intro</w:t></w:r></w:p>
        <w:p><w:r><w:t xml:space="preserve">a&amp;b </w:t><w:tab/><w:t>c</w:t><w:br/><w:t>d</w:t><w:delText>deleted</w:delText></w:r></w:p>
        <w:p xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:p><w:r><w:t>boxed</w:t></w:r></w:p></mc:Choice><mc:Fallback><w:p><w:r><w:t>boxed twice</w:t></w:r></w:p></mc:Fallback></mc:AlternateContent></w:r></w:p>"#;
    let file = zip(&[("word/document.xml", &document_xml(body))]);
    let document = parse(MediaType::Docx, file).await.unwrap();
    assert_eq!(document.sections.len(), 1);
    assert_eq!(document.sections[0].headings, ["Intro"]);
    assert_eq!(document.sections[0].blocks, ["a&b c\nd", "boxed"]);
}

#[tokio::test]
async fn five_thousand_pages_are_too_many() {
    match parse(MediaType::Pdf, many_pages(5_000, 5_000)).await {
        Err(ParseError::TooLarge(message)) => {
            assert!(message.contains("5000 pages, at most 2000"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // A page tree that under-declares its pages is counted, not believed.
    match parse(MediaType::Pdf, many_pages(5_000, 1)).await {
        Err(ParseError::TooLarge(message)) => assert!(message.contains("5000 pages"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_pdf_within_the_page_limit_is_read_page_by_page() {
    let document = parse(MediaType::Pdf, many_pages(12, 12)).await.unwrap();
    assert_eq!(document.pages, Some(12));
    assert_eq!(document.sections.len(), 12);
    assert_eq!(document.sections[11].page, Some(12));
    assert_eq!(document.sections[11].blocks, ["A page among many."]);
}

#[tokio::test]
async fn a_parse_past_its_timeout_is_a_timeout() {
    let limits =
        ParseLimits { max_pages: 10_000, timeout: Duration::from_nanos(1), ..ParseLimits::default() };
    let result = parse_with(limits, MediaType::Pdf, many_pages(5_000, 5_000)).await;
    assert_eq!(result, Err(ParseError::Timeout(1)));
}

#[tokio::test]
async fn random_bytes_are_malformed_never_a_panic() {
    for seed in 0..16 {
        let mut pdf = b"%PDF-1.7\n".to_vec();
        pdf.extend(noise(seed, 16 * 1024));
        let result = parse(MediaType::Pdf, pdf).await;
        assert!(matches!(result, Err(ParseError::Malformed(_))), "seed {seed}: {result:?}");
        let result = parse(MediaType::Docx, noise(seed, 4096)).await;
        assert!(matches!(result, Err(ParseError::Malformed(_))), "seed {seed}: {result:?}");
    }
}

#[tokio::test]
async fn damaged_copies_of_the_fixtures_end_in_a_result() {
    let parsers = Parsers::new(ParseLimits { timeout: Duration::from_secs(20), ..ParseLimits::default() });
    let fixtures = [
        ("handbook.pdf", MediaType::Pdf),
        ("policies.docx", MediaType::Docx),
        ("guide.html", MediaType::Html),
    ];
    for (name, media_type) in fixtures {
        let original =
            std::fs::read(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        for seed in 0..24u64 {
            let mut damaged = original.clone();
            let flips = noise(seed, 64);
            for pair in flips.chunks(2) {
                let at = usize::from(pair[0]) * damaged.len() / 256;
                damaged[at] ^= pair[1] | 1;
            }
            // Any answer but a hang or a panic: some damage leaves the file readable.
            let result = parsers.parse(media_type, Arc::from(damaged)).await;
            assert!(!matches!(result, Err(ParseError::Timeout(_))), "{name} seed {seed}: {result:?}");
        }
    }
}

#[tokio::test]
async fn html_nested_a_hundred_thousand_deep_is_read() {
    let depth = 100_000;
    let mut page = "<div>".repeat(depth);
    page.push_str("<p>deep text</p>");
    page.push_str(&"</div>".repeat(depth));
    let document = parse(MediaType::Html, page.into_bytes()).await.unwrap();
    assert_eq!(document.sections[0].blocks, ["deep text"]);

    let unclosed = format!("{}deeper{}", "<span><b><i>".repeat(depth), "<table><tr><td>".repeat(1_000));
    let document = parse(MediaType::Html, unclosed.into_bytes()).await.unwrap();
    assert!(document.sections[0].blocks.iter().any(|b| b == "deeper"), "{document:?}");
}

#[tokio::test]
async fn html_past_the_size_limit_is_too_large() {
    let page = format!("<p>{}</p>", "a".repeat(MAX_MARKUP_BYTES));
    assert!(matches!(parse(MediaType::Html, page.into_bytes()).await, Err(ParseError::TooLarge(_))));
}

#[tokio::test]
async fn html_scripts_are_skipped_however_they_are_written() {
    let page = r#"<p>before</p><SCRIPT type="module">if (a < b) { x = "</p>"; stealCookies() }</SCRIPT>
        <template><p>template text</p></template><style>p{color:red}</style>
        <script><!-- document.write("<script>stealCookies()</script>") --></script><p>after &lt;ok&gt;</p>
        <textarea>typed</textarea><iframe>frame</iframe>"#;
    let document = parse(MediaType::Html, page.as_bytes().to_vec()).await.unwrap();
    assert_eq!(document.sections[0].blocks, ["before", "after <ok>"]);
}

#[tokio::test]
async fn invalid_utf8_text_is_malformed() {
    for media_type in [MediaType::Text, MediaType::Markdown, MediaType::Csv, MediaType::Html] {
        let result = parse(media_type, b"fine so far \xff\xfe then not".to_vec()).await;
        assert!(matches!(result, Err(ParseError::Malformed(_))), "{media_type:?}: {result:?}");
    }
}

#[tokio::test]
async fn empty_and_blank_files_hold_no_text() {
    for media_type in [MediaType::Text, MediaType::Markdown, MediaType::Csv, MediaType::Html] {
        assert_eq!(parse(media_type, b" \n\t\n".to_vec()).await, Err(ParseError::NoText), "{media_type:?}");
    }
    assert_eq!(parse(MediaType::Csv, b"name,country\n".to_vec()).await, Err(ParseError::NoText));
    assert_eq!(parse(MediaType::Html, b"<script>only()</script>".to_vec()).await, Err(ParseError::NoText));
}

#[tokio::test]
async fn text_past_the_character_limit_is_too_large() {
    let limits = ParseLimits { max_chars: 1_000, ..ParseLimits::default() };
    let text = "word ".repeat(1_000).into_bytes();
    for media_type in [MediaType::Text, MediaType::Markdown, MediaType::Html] {
        let result = parse_with(limits, media_type, text.clone()).await;
        assert!(matches!(result, Err(ParseError::TooLarge(_))), "{media_type:?}: {result:?}");
    }
    let csv = format!("a,b\n{}", "1,2\n".repeat(1_000)).into_bytes();
    assert!(matches!(parse_with(limits, MediaType::Csv, csv).await, Err(ParseError::TooLarge(_))));
}

#[tokio::test]
async fn ragged_csv_rows_and_semicolons_are_read() {
    let csv = "name;city\nAna;Lisboa;extra\nRui\n".as_bytes().to_vec();
    let document = parse(MediaType::Csv, csv).await.unwrap();
    assert_eq!(document.sections[0].blocks, ["name: Ana; city: Lisboa; column 3: extra", "name: Rui"]);
}

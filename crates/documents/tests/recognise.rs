//! A file's type by its content, checked against its name.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use agentry_documents::Parsers;
use agentry_domain::knowledge::{DocumentParser, MediaType, ParseError};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
const ZIP: &[u8] = b"PK\x03\x04\x14\0\0\0\x08\0";
const PDF: &[u8] = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj";
const ELF: &[u8] = b"\x7fELF\x02\x01\x01\0\0\0";

#[test]
fn types_come_from_the_content_and_must_match_the_name() {
    let parsers = Parsers::default();
    let cases: &[(&str, &[u8], Option<MediaType>)] = &[
        ("handbook.pdf", PDF, Some(MediaType::Pdf)),
        ("HANDBOOK.PDF", PDF, Some(MediaType::Pdf)),
        ("dir/sub/handbook.Pdf", PDF, Some(MediaType::Pdf)),
        ("handbook.txt", PDF, None),
        ("handbook", PDF, None),
        ("policies.docx", ZIP, Some(MediaType::Docx)),
        ("POLICIES.DOCX", ZIP, Some(MediaType::Docx)),
        ("archive.zip", ZIP, None),
        ("notes.txt", ZIP, None),
        ("image.png", PNG, None),
        ("image.txt", PNG, None),
        ("report.pdf", PNG, None),
        ("program", ELF, None),
        ("report.pdf", b"This is not a PDF at all.\n", None),
        ("report.docx", b"Plain words.\n", None),
        ("notes.txt", b"Meeting notes\n\nMore.", Some(MediaType::Text)),
        ("server.LOG", b"12:00 started\n", Some(MediaType::Text)),
        ("notes.text", b"words", Some(MediaType::Text)),
        ("README", b"Read me first.\n", Some(MediaType::Text)),
        ("notes.md", b"# Title\n\nText.", Some(MediaType::Markdown)),
        ("NOTES.MARKDOWN", b"# Title", Some(MediaType::Markdown)),
        ("customers.csv", b"name,country\nAcme,PT\n", Some(MediaType::Csv)),
        ("Customers.CSV", b"name;country\n", Some(MediaType::Csv)),
        ("guide.html", b"<!DOCTYPE html><html><body>x</body></html>", Some(MediaType::Html)),
        ("guide.HTM", b"<p>fragment</p>", Some(MediaType::Html)),
        ("guide.html", b"text before any tag", Some(MediaType::Html)),
        ("page", b"\xef\xbb\xbf  <!doctype HTML>\n<html>", Some(MediaType::Html)),
        ("page", b"<HTML><body>x", Some(MediaType::Html)),
        ("page.txt", b"<!DOCTYPE html><html>", None),
        ("page.md", b"  <html lang=en>", None),
        ("data.json", b"{\"a\": 1}", None),
        ("script.py", b"print('hi')\n", None),
        ("notes.txt", b"caf\xc3", Some(MediaType::Text)),
        ("notes.txt", b"bad \xff byte here", None),
        ("notes.txt", b"utf-16\0l\0e\0", None),
        ("notes.txt", b"\xff\xfeu\0t\0f\0", None),
        ("empty.txt", b"", Some(MediaType::Text)),
    ];
    for (name, head, expected) in cases {
        let got = parsers.recognise(name, head);
        match expected {
            Some(media_type) => assert_eq!(got, Ok(*media_type), "{name} {head:?}"),
            None => assert!(matches!(got, Err(ParseError::Unsupported(_))), "{name} {head:?}: {got:?}"),
        }
    }
}

#[test]
fn refusals_say_what_the_content_is_and_what_the_name_says() {
    let parsers = Parsers::default();
    let message = |name: &str, head: &[u8]| match parsers.recognise(name, head) {
        Err(ParseError::Unsupported(message)) => message,
        other => panic!("{name}: {other:?}"),
    };
    let png = message("image.txt", PNG);
    assert!(png.contains("PNG image") && png.contains(".txt"), "{png}");
    let zip = message("notes.txt", ZIP);
    assert!(zip.contains("zip archive") && zip.contains(".txt"), "{zip}");
    let pdf = message("notes", PDF);
    assert!(pdf.contains("PDF") && pdf.contains("no extension"), "{pdf}");
    let text = message("report.pdf", b"hello");
    assert!(text.contains(".pdf") && text.contains("text"), "{text}");
    let json = message("data.json", b"{}");
    assert!(json.contains(".json"), "{json}");
    let binary = message("blob.bin", b"\x01\x02\0\x03");
    assert!(binary.contains("binary data"), "{binary}");
}

//! A file's type from its first bytes, checked against its name.
//!
//! The content decides: a PDF is a PDF by its `%PDF-` header, a Word file by its zip header, and
//! a text format by being UTF-8 without NUL bytes. The name then has to agree (`report.pdf` that
//! holds text is refused, as is a zip named `.txt`), and for text it tells the formats apart,
//! since Markdown, CSV and plain text look alike. Decisions:
//! - a text file without an extension is plain text (or HTML if it starts like an HTML page);
//! - a text file with an extension none of the formats use (`.json`, `.py`) is refused, naming it;
//! - a `.html`/`.htm` file is HTML whatever its text starts with (a fragment is still HTML);
//! - content that starts like an HTML page (`<!doctype html`, `<html`) under a `.txt`, `.md` or
//!   `.csv` name is refused: reading it as that format would index its markup and scripts;
//! - UTF-16 and other encodings with NUL bytes read as binary; text must be UTF-8.

use agentry_domain::knowledge::{MediaType, ParseError};

/// Magic numbers of common files that are none of the formats, to name them in the refusal.
const KNOWN_BINARY: &[(&[u8], &str)] = &[
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"\x7fELF", "an executable"),
    (b"MZ", "a Windows executable"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"Rar!", "a RAR archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "a legacy Office file (.doc, .xls, .ppt)"),
    (b"{\\rtf", "an RTF document"),
];

/// See the module's documentation.
pub(crate) fn recognise(name: &str, head: &[u8]) -> Result<MediaType, ParseError> {
    let extension = extension(name);
    let says = || match &extension {
        Some(extension) => format!("the name ends .{extension}"),
        None => "the name has no extension".to_owned(),
    };
    let is =
        |media_type: MediaType| extension.as_deref().is_some_and(|e| media_type.extensions().contains(&e));

    if head.starts_with(b"%PDF-") {
        return if is(MediaType::Pdf) {
            Ok(MediaType::Pdf)
        } else {
            Err(unsupported(format!("the content is a PDF but {}; name it .pdf", says())))
        };
    }
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        // Whether it is Word (holds `word/document.xml`) is checked when it is parsed.
        return if is(MediaType::Docx) {
            Ok(MediaType::Docx)
        } else {
            Err(unsupported(format!(
                "the content is a zip archive but {}; only Word (.docx) is read",
                says()
            )))
        };
    }
    let Some(text) = as_text(head) else {
        let what = KNOWN_BINARY
            .iter()
            .find(|(magic, _)| head.starts_with(magic))
            .map_or("binary data", |(_, what)| what);
        return Err(unsupported(format!("the content is {what}, not a PDF, Word or text file ({})", says())));
    };

    let looks_html = starts_like_html(text);
    let Some(extension) = extension.as_deref() else {
        return Ok(if looks_html { MediaType::Html } else { MediaType::Text });
    };
    if is(MediaType::Html) {
        return Ok(MediaType::Html);
    }
    let media_type = [MediaType::Markdown, MediaType::Csv, MediaType::Text].into_iter().find(|&t| is(t));
    match media_type {
        Some(_) if looks_html => {
            Err(unsupported(format!("the content is an HTML page but {}; name it .html", says())))
        }
        Some(media_type) => Ok(media_type),
        None if is(MediaType::Pdf) || is(MediaType::Docx) => {
            Err(unsupported(format!("{} but the content is text, not that format", says())))
        }
        None => Err(unsupported(format!(
            "files ending .{extension} are not read; knowledge bases read PDF, Word (.docx), HTML, Markdown, \
             text and CSV"
        ))),
    }
}

fn unsupported(message: String) -> ParseError {
    ParseError::Unsupported(message)
}

/// The lower-case extension of the last component of `name`, if it has one. A leading dot
/// (`.profile`) is part of the name, not an extension.
fn extension(name: &str) -> Option<String> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let (stem, extension) = base.rsplit_once('.')?;
    if stem.is_empty() || extension.is_empty() {
        return None;
    }
    Some(extension.to_ascii_lowercase())
}

/// `head` as text, without a UTF-8 byte order mark, if it is UTF-8 without NUL bytes. A
/// multi-byte character cut off at the very end is allowed: the head is a prefix of the file.
fn as_text(head: &[u8]) -> Option<&str> {
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    if head.contains(&0) {
        return None;
    }
    match std::str::from_utf8(head) {
        Ok(text) => Some(text),
        // `error_len() == None`: the input ended inside a character, which is not an error here.
        Err(error) if error.error_len().is_none() => std::str::from_utf8(&head[..error.valid_up_to()]).ok(),
        Err(_) => None,
    }
}

/// Whether `text` starts (after whitespace) as an HTML page does.
fn starts_like_html(text: &str) -> bool {
    let start = text.trim_start();
    let prefix = start.get(..14).or_else(|| start.get(..start.len())).unwrap_or_default();
    let prefix = prefix.to_ascii_lowercase();
    prefix.starts_with("<!doctype html") || prefix.starts_with("<html")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_are_the_last_component_lower_cased() {
        assert_eq!(extension("a/b/Report.PDF").as_deref(), Some("pdf"));
        assert_eq!(extension("C:\\x\\notes.tar.gz").as_deref(), Some("gz"));
        assert_eq!(extension(".profile"), None);
        assert_eq!(extension("README"), None);
        assert_eq!(extension("dots."), None);
    }

    #[test]
    fn a_character_cut_at_the_end_of_the_head_is_text() {
        let text = "café".as_bytes();
        assert_eq!(as_text(&text[..text.len() - 1]), Some("caf"));
        assert_eq!(as_text(b"\xef\xbb\xbfhi"), Some("hi"));
        assert_eq!(as_text(b"a\xffb"), None);
        assert_eq!(as_text(b"a\0b"), None);
    }

    #[test]
    fn html_is_recognised_by_its_start() {
        assert!(starts_like_html("\n  <!DOCTYPE HTML>"));
        assert!(starts_like_html("<HTML lang=en>"));
        assert!(starts_like_html("<html"));
        assert!(!starts_like_html("<div>"));
        assert!(!starts_like_html("ünïcödé text that is long"));
    }
}

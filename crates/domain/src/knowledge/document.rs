//! What a parser makes of a file: its type, recognised by content, and its text as sections
//! that keep the structure chunking cuts on first (pages, headings, paragraphs, records).

use std::time::Duration;

crate::string_enum! {
    /// A file type knowledge bases read.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum MediaType {
        /// PDF with a text layer, page by page.
        Pdf => "application/pdf",
        /// Word (Office Open XML).
        Docx => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        /// An HTML page (its text; scripts and styles are never read).
        Html => "text/html",
        /// Markdown.
        Markdown => "text/markdown",
        /// Plain text.
        Text => "text/plain",
        /// Comma-separated values with a header row.
        Csv => "text/csv",
    }
}

impl MediaType {
    /// The file name extensions a file of this type may carry (lower case, without the dot).
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            Self::Pdf => &["pdf"],
            Self::Docx => &["docx"],
            Self::Html => &["html", "htm"],
            Self::Markdown => &["md", "markdown"],
            Self::Text => &["txt", "text", "log"],
            Self::Csv => &["csv"],
        }
    }
}

/// One stretch of a document that shares a page and a heading path, as blocks (paragraphs,
/// list items, table rows, CSV records) that chunking keeps whole where it can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The page (from 1), for formats that have pages (PDF).
    pub page: Option<u32>,
    /// The headings it sits under, outermost first.
    pub headings: Vec<String>,
    /// Its blocks, in order, none empty.
    pub blocks: Vec<String>,
}

/// A parsed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedDocument {
    /// Pages of a paged format (PDF), else `None`.
    pub pages: Option<u32>,
    /// Its sections, in order.
    pub sections: Vec<Section>,
}

impl ParsedDocument {
    /// Whether it holds any text at all.
    pub fn has_text(&self) -> bool {
        self.sections.iter().any(|s| s.blocks.iter().any(|b| !b.trim().is_empty()))
    }
}

/// What bounds parsing one file: a file past them fails on its own, never the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseLimits {
    /// Most pages of a PDF.
    pub max_pages: u32,
    /// Most bytes compressed data may inflate to: the parts of a DOCX read together, each
    /// stream (and each page's content) of a PDF.
    pub max_inflated_bytes: u64,
    /// Most characters of text one file may yield.
    pub max_chars: usize,
    /// Longest a parse may take.
    pub timeout: Duration,
}

impl Default for ParseLimits {
    fn default() -> Self {
        Self {
            max_pages: 2_000,
            max_inflated_bytes: 200 * 1024 * 1024,
            max_chars: 10_000_000,
            timeout: Duration::from_secs(60),
        }
    }
}

/// Why a file cannot be read. Each is the file's own failure, recorded on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not one of the types knowledge bases read, or its content is not what its name says.
    #[error("unsupported file type: {0}")]
    Unsupported(String),
    /// A PDF protected by a password.
    #[error("the PDF is encrypted; upload it without a password")]
    Encrypted,
    /// Damaged or truncated.
    #[error("the file cannot be read: {0}")]
    Malformed(String),
    /// Past a limit: too many pages, inflates too far (a decompression bomb), too much text.
    #[error("the file is too large to read: {0}")]
    TooLarge(String),
    /// Read, but it holds no text (a scanned PDF without a text layer, an empty page).
    #[error("the file holds no text (a scanned document needs a text layer)")]
    NoText,
    /// Parsing took longer than the limit.
    #[error("reading the file took longer than {0} s")]
    Timeout(u64),
}

//! A source given to a model and a citation of it: what a chat numbers, and what a reply
//! refers to by number and keeps with its message.

use serde::{Deserialize, Serialize};

use crate::ids::{ChunkId, KnowledgeFileId};

/// Most characters of a citation's snippet.
pub const SNIPPET_CHARS: usize = 240;

/// A passage given to a model, with the number it is cited by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// Its number in the chat, from 1.
    pub index: u32,
    /// The chunk.
    pub chunk_id: ChunkId,
    /// Its file.
    pub file_id: KnowledgeFileId,
    /// The file's name.
    pub file_name: String,
    /// Its page, for paged formats.
    pub page: Option<u32>,
    /// The headings it sits under, outermost first.
    #[serde(default)]
    pub headings: Vec<String>,
    /// Its text.
    pub text: String,
}

impl Source {
    /// Where it is, as a person reads it: `handbook.pdf, page 2` or `guide.md, Setup › Keys`.
    pub fn place(&self) -> String {
        match (self.page, self.headings.is_empty()) {
            (Some(page), _) => format!("{}, page {page}", self.file_name),
            (None, false) => format!("{}, {}", self.file_name, self.headings.join(" › ")),
            (None, true) => self.file_name.clone(),
        }
    }
}

/// A source a reply refers to, as stored with the message and shown with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Citation {
    /// The number the reply refers to it by (`[1]`).
    pub index: u32,
    /// The cited chunk.
    pub chunk_id: ChunkId,
    /// Its file.
    pub file_id: KnowledgeFileId,
    /// The file's name.
    pub file_name: String,
    /// Its page, for paged formats.
    pub page: Option<u32>,
    /// The chunk's beginning, up to [`SNIPPET_CHARS`] characters.
    pub snippet: String,
}

impl Citation {
    /// The citation of `source`.
    pub fn of(source: &Source) -> Self {
        Self {
            index: source.index,
            chunk_id: source.chunk_id.clone(),
            file_id: source.file_id.clone(),
            file_name: source.file_name.clone(),
            page: source.page,
            snippet: snippet(&source.text),
        }
    }
}

/// `text` on one line, cut to [`SNIPPET_CHARS`] characters with an ellipsis.
fn snippet(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= SNIPPET_CHARS {
        return flat;
    }
    let mut cut: String = flat.chars().take(SNIPPET_CHARS - 1).collect();
    cut.push('…');
    cut
}

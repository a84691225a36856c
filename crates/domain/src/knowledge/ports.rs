//! What knowledge bases need from the outside world.

use std::sync::Arc;

use async_trait::async_trait;

use super::document::{MediaType, ParseError, ParsedDocument};

/// Reads the files knowledge bases accept.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait DocumentParser: Send + Sync {
    /// The type of a file from its first bytes (at least the first 4 KiB, or all of a smaller
    /// file), checked against the extension of its name.
    ///
    /// # Errors
    /// [`ParseError::Unsupported`] when the content is none of the types, or not the type its
    /// name says.
    fn recognise(&self, name: &str, head: &[u8]) -> Result<MediaType, ParseError>;

    /// The text of a file of type `media_type`, within the parser's limits. Runs off the async
    /// runtime: a slow or hostile file holds no request's thread.
    ///
    /// # Errors
    /// See [`ParseError`].
    async fn parse(&self, media_type: MediaType, bytes: Arc<[u8]>) -> Result<ParsedDocument, ParseError>;
}

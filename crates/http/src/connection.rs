//! Requests too malformed to reach the application — a request line or a header that HTTP/1.1
//! cannot parse — are answered by actix-http itself with a bare `400` and no body, and it logs
//! each one at `ERROR`. [`MalformedAsJson`] wraps each connection and replaces that answer with
//! the JSON error of the configured envelope (status 400, code `validation_error` /
//! `invalid_request`), logging it at `INFO`: a client's mistake, not the service's.
//!
//! It recognises the answer by its first line and its empty body: every response the
//! application itself makes for an error carries a JSON body, so none is mistaken for it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::{ApiError, ErrorCode};
use crate::settings::HttpSettings;

/// A connection whose parse-level error answers are rewritten as JSON.
#[derive(Debug)]
pub struct MalformedAsJson<T> {
    inner: T,
    settings: HttpSettings,
    replacing: Option<Replacement>,
}

#[derive(Debug)]
struct Replacement {
    bytes: Vec<u8>,
    written: usize,
    /// How much of the caller's buffer the replaced answer took.
    consumes: usize,
}

impl<T> MalformedAsJson<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, settings: HttpSettings) -> Self {
        Self { inner, settings, replacing: None }
    }

    /// The wrapped connection.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

/// The length of a parse-level error answer at the start of `buf`, and its status line.
fn parse_error_answer(buf: &[u8]) -> Option<(usize, &'static str)> {
    const ANSWERS: [(&[u8], &str); 4] = [
        (b"HTTP/1.1 400 Bad Request\r\n", "400 Bad Request"),
        (b"HTTP/1.0 400 Bad Request\r\n", "400 Bad Request"),
        (b"HTTP/1.1 431 Request Header Fields Too Large\r\n", "431 Request Header Fields Too Large"),
        (b"HTTP/1.0 431 Request Header Fields Too Large\r\n", "431 Request Header Fields Too Large"),
    ];
    let (_, status) = ANSWERS.iter().find(|(line, _)| buf.starts_with(line))?;
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..end]).ok()?.to_ascii_lowercase();
    head.contains("\r\ncontent-length: 0\r\n").then_some((end, *status))
}

/// The JSON answer to a malformed request under `settings`.
pub fn malformed_request_answer(settings: &HttpSettings, status_line: &str) -> Vec<u8> {
    let message = if status_line.starts_with("431") {
        "the request's headers are too large"
    } else {
        "the request could not be parsed: its request line or one of its headers is malformed"
    };
    let body = ApiError::new(ErrorCode::ValidationError, message).body(settings.envelope).to_string();
    let request_id = ulid::Ulid::new().to_string().to_lowercase();
    format!(
        "HTTP/1.1 {status_line}\r\ncontent-type: application/json\r\ncontent-length: {len}\r\n\
         connection: close\r\nx-request-id: {request_id}\r\ncache-control: no-store\r\n\
         x-content-type-options: nosniff\r\n\r\n{body}",
        len = body.len(),
    )
    .into_bytes()
}

impl<T: AsyncRead + Unpin> AsyncRead for MalformedAsJson<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for MalformedAsJson<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.replacing.is_none()
            && let Some((consumes, status)) = parse_error_answer(buf)
        {
            tracing::info!(status, "malformed request refused");
            this.replacing = Some(Replacement {
                bytes: malformed_request_answer(&this.settings, status),
                written: 0,
                consumes,
            });
        }
        if let Some(r) = &mut this.replacing {
            while r.written < r.bytes.len() {
                match Pin::new(&mut this.inner).poll_write(cx, &r.bytes[r.written..]) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => r.written += n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            let consumed = r.consumes;
            this.replacing = None;
            return Poll::Ready(Ok(consumed));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Envelope;

    #[test]
    fn only_the_bodiless_parse_error_answer_is_recognised() {
        let bare = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\ndate: x\r\n\r\n";
        assert_eq!(parse_error_answer(bare), Some((bare.len(), "400 Bad Request")));
        let ours =
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 60\r\ncontent-type: application/json\r\n\r\n{}";
        assert_eq!(parse_error_answer(ours), None);
        assert_eq!(parse_error_answer(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"), None);
    }

    #[test]
    fn the_answer_is_json_in_the_configured_envelope() {
        let answer =
            String::from_utf8(malformed_request_answer(&HttpSettings::default(), "400 Bad Request")).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"], "validation_error");
        let wrapped = HttpSettings::new(Envelope::Wrapped);
        let answer = String::from_utf8(malformed_request_answer(&wrapped, "400 Bad Request")).unwrap();
        assert!(answer.contains("\"invalid_request\""));
    }

    #[tokio::test]
    async fn a_parse_error_answer_is_rewritten_on_the_way_out() {
        use tokio::io::AsyncWriteExt as _;
        let mut out = MalformedAsJson::new(Vec::new(), HttpSettings::default());
        out.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: x\r\n\r\n").await.unwrap();
        let written = String::from_utf8(out.get_ref().clone()).unwrap();
        assert!(written.contains("\"validation_error\""), "{written}");
        let mut out = MalformedAsJson::new(Vec::new(), HttpSettings::default());
        out.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}").await.unwrap();
        assert_eq!(out.get_ref().as_slice(), b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}");
    }
}

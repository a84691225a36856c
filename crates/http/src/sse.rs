//! Server-sent events: an answer whose body is a stream of events, written as they happen,
//! with a comment line while nothing happens so that clients and proxies keep the connection.
//!
//! The producer holds an [`SseSender`]; the response holds the receiver. A client that leaves
//! drops the response body and with it the receiver: the next [`SseSender::send`] answers
//! `false`, which is how a producer (a model generating a reply) learns to stop.

use std::convert::Infallible;
use std::time::Duration;

use actix_web::HttpResponse;
use actix_web::http::header;
use actix_web::web::Bytes;
use serde::Serialize;
use tokio::sync::mpsc;

/// How long a stream may stay silent before a `: keep-alive` comment is written.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The content type of a stream of server-sent events.
pub const EVENT_STREAM: &str = "text/event-stream";

/// One event: an optional `event:` name and one line of `data:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    name: Option<&'static str>,
    data: String,
}

impl SseEvent {
    /// A named event whose data is `data` as JSON.
    pub fn named(name: &'static str, data: &impl Serialize) -> Self {
        Self { name: Some(name), data: json_line(data) }
    }

    /// An unnamed event (OpenAI's streams name none) whose data is `data` as JSON.
    pub fn data(data: &impl Serialize) -> Self {
        Self { name: None, data: json_line(data) }
    }

    /// An unnamed event with raw data, e.g. OpenAI's closing `[DONE]`.
    pub fn raw(data: &'static str) -> Self {
        Self { name: None, data: data.to_owned() }
    }

    fn encode(&self) -> Bytes {
        // JSON written by serde_json has no line breaks: one `data:` line carries it.
        Bytes::from(match self.name {
            Some(name) => format!("event: {name}\ndata: {}\n\n", self.data),
            None => format!("data: {}\n\n", self.data),
        })
    }
}

fn json_line(data: &impl Serialize) -> String {
    serde_json::to_string(data)
        .unwrap_or_else(|e| format!("{{\"error\":\"internal_error\",\"message\":\"{e}\"}}"))
}

/// Where a producer writes its events.
#[derive(Debug, Clone)]
pub struct SseSender(mpsc::UnboundedSender<SseEvent>);

impl SseSender {
    /// Queues `event` for the client; `false` when the client has left.
    pub fn send(&self, event: SseEvent) -> bool {
        self.0.send(event).is_ok()
    }

    /// Whether the client is still there, without sending anything.
    pub fn is_open(&self) -> bool {
        !self.0.is_closed()
    }
}

/// A sender and the `200 text/event-stream` response that writes what it sends, with a comment
/// after every `keep_alive` of silence. The stream ends when every sender is dropped.
pub fn channel(keep_alive: Duration) -> (SseSender, HttpResponse) {
    let (sender, receiver) = mpsc::unbounded_channel::<SseEvent>();
    let body = futures_util::stream::unfold(receiver, move |mut receiver| async move {
        match tokio::time::timeout(keep_alive, receiver.recv()).await {
            Ok(Some(event)) => Some((Ok::<_, Infallible>(event.encode()), receiver)),
            Ok(None) => None,
            Err(_silent) => Some((Ok(Bytes::from_static(b": keep-alive\n\n")), receiver)),
        }
    });
    let response = HttpResponse::Ok()
        .content_type(EVENT_STREAM)
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        // Proxies that buffer answers (nginx) pass this one through as it comes.
        .insert_header(("x-accel-buffering", "no"))
        .streaming(body);
    (SseSender(sender), response)
}

/// Whether the request's `Accept` header asks for server-sent events.
pub fn accepts_event_stream(request: &actix_web::HttpRequest) -> bool {
    request
        .headers()
        .get_all(header::ACCEPT)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case(EVENT_STREAM)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_written_as_the_format_says() {
        let named = SseEvent::named("message.delta", &serde_json::json!({"content": "a\nb"}));
        assert_eq!(named.encode(), Bytes::from("event: message.delta\ndata: {\"content\":\"a\\nb\"}\n\n"));
        assert_eq!(SseEvent::raw("[DONE]").encode(), Bytes::from("data: [DONE]\n\n"));
    }

    /// The next piece of a response body.
    async fn next(body: &mut actix_web::body::BoxBody) -> Option<Bytes> {
        use actix_web::body::MessageBody as _;
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut *body).poll_next(cx)).await.map(|r| r.unwrap())
    }

    #[actix_web::test]
    async fn silence_is_broken_by_comments_and_the_stream_ends_with_its_senders() {
        let (events, response) = channel(Duration::from_millis(5));
        let mut body = response.into_body();
        // Nothing sent yet: the stream says it is alive rather than stay silent.
        assert_eq!(next(&mut body).await, Some(Bytes::from_static(b": keep-alive\n\n")));
        assert!(events.send(SseEvent::raw("[DONE]")));
        assert_eq!(next(&mut body).await, Some(Bytes::from("data: [DONE]\n\n")));
        drop(events);
        assert_eq!(next(&mut body).await, None);
    }

    #[test]
    fn a_sender_learns_that_the_client_left() {
        let (events, response) = channel(KEEP_ALIVE);
        drop(response);
        assert!(!events.send(SseEvent::raw("[DONE]")));
    }

    #[test]
    fn the_accept_header_is_read_as_a_list() {
        let asks = |accept: &str| {
            let request = actix_web::test::TestRequest::default()
                .insert_header((header::ACCEPT, accept))
                .to_http_request();
            accepts_event_stream(&request)
        };
        assert!(asks("text/event-stream"));
        assert!(asks("application/json, Text/Event-Stream;q=0.9"));
        assert!(!asks("application/json"));
        assert!(!asks("*/*"));
    }
}

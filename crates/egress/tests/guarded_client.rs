//! The guarded client against a hand-written HTTP/1.1 server on loopback. Nothing here connects
//! anywhere but 127.0.0.1 / ::1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentry_egress::{EgressErrorKind, EgressRequest, EgressResponse, EgressSettings, GuardedClient, Method};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

const LARGE: usize = 100 * 1024;

/// A loopback HTTP/1.1 server (keep-alive) that counts accepted connections and records the
/// requests it answered.
struct TestServer {
    addr: SocketAddr,
    accepts: Arc<AtomicUsize>,
    hits: Arc<Mutex<Vec<String>>>,
}

impl TestServer {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepts = Arc::new(AtomicUsize::new(0));
        let hits = Arc::new(Mutex::new(Vec::new()));
        let (a, h) = (accepts.clone(), hits.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream, h.clone()));
            }
        });
        Self { addr, accepts, hits }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }

    fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap().clone()
    }
}

/// A listener that only counts connection attempts (and never answers).
async fn counting_listener(bind: &str) -> Option<(u16, Arc<AtomicUsize>)> {
    let listener = TcpListener::bind(bind).await.ok()?;
    let port = listener.local_addr().ok()?.port();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        while let Ok((_stream, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
        }
    });
    Some((port, count))
}

async fn serve(mut stream: TcpStream, hits: Arc<Mutex<Vec<String>>>) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut tmp = [0u8; 4096];
            match stream.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let mut request_line = lines.next().unwrap_or_default().split(' ');
        let method = request_line.next().unwrap_or_default().to_owned();
        let path = request_line.next().unwrap_or_default().to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let header =
            |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).unwrap_or_default();
        let length: usize = header("content-length").parse().unwrap_or(0);
        while buf.len() < head_end + length {
            let mut tmp = [0u8; 4096];
            match stream.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        }
        let body: Vec<u8> = buf.drain(..head_end + length).skip(head_end).collect();
        hits.lock().unwrap().push(format!("{method} {path}"));

        let response = match path.as_str() {
            "/hello" => respond("200 OK", &[("X-Test", "yes")], b"hello, agentry"),
            "/echo" => {
                let mut echoed =
                    format!("{method}\n{}\n{}\n", header("user-agent"), header("x-signature")).into_bytes();
                echoed.extend_from_slice(&body);
                respond("200 OK", &[], &echoed)
            }
            "/redirect" => respond("302 Found", &[("Location", "/target")], b""),
            "/target" => respond("200 OK", &[], b"target"),
            "/large" => respond("200 OK", &[], &vec![b'x'; LARGE]),
            "/exact" => respond("200 OK", &[], b"0123456789abcdef"),
            "/slow" => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                respond("200 OK", &[], b"late")
            }
            _ => respond("404 Not Found", &[], b"no such path"),
        };
        if stream.write_all(&response).await.is_err() {
            return;
        }
    }
}

fn respond(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for (n, v) in headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

fn client(allow_private: bool, max_response_bytes: usize, timeout: Duration) -> GuardedClient {
    GuardedClient::new(EgressSettings {
        allow_private,
        timeout,
        max_response_bytes,
        ..EgressSettings::default()
    })
    .unwrap()
}

fn open_client() -> GuardedClient {
    client(true, 1024, Duration::from_secs(5))
}

fn get(url: String) -> EgressRequest {
    EgressRequest { method: Method::GET, url, headers: Vec::new(), body: None }
}

fn header<'a>(response: &'a EgressResponse, name: &str) -> Option<&'a str> {
    response.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn a_200_is_returned_with_its_headers_and_body() {
    let server = TestServer::start().await;
    let r = open_client().send(get(server.url("/hello"))).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello, agentry");
    assert!(!r.truncated);
    assert_eq!(header(&r, "x-test"), Some("yes"));
    assert!(r.elapsed > Duration::ZERO && r.elapsed < Duration::from_secs(5));
}

#[tokio::test]
async fn method_headers_body_and_the_settings_user_agent_are_sent() {
    let server = TestServer::start().await;
    let r = open_client()
        .send(EgressRequest {
            method: Method::POST,
            url: server.url("/echo"),
            headers: vec![
                ("Content-Type".into(), "application/json".into()),
                ("X-Signature".into(), "t=1,v1=abc".into()),
            ],
            body: Some(br#"{"event":"ping"}"#.to_vec()),
        })
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        String::from_utf8(r.body).unwrap(),
        "POST\nAgentry-Webhooks/0.1\nt=1,v1=abc\n{\"event\":\"ping\"}"
    );
}

#[tokio::test]
async fn a_redirect_is_returned_as_it_is_and_not_followed() {
    let server = TestServer::start().await;
    let r = open_client().send(get(server.url("/redirect"))).await.unwrap();
    assert_eq!(r.status, 302);
    assert_eq!(header(&r, "location"), Some("/target"));
    // Give a (wrongly) followed redirect time to arrive before asserting it did not.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(server.hits(), ["GET /redirect"]);
}

#[tokio::test]
async fn a_large_body_is_cut_at_the_limit_and_marked_truncated() {
    let server = TestServer::start().await;
    let r = client(true, 1024, Duration::from_secs(5)).send(get(server.url("/large"))).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 1024);
    assert!(r.truncated);
    assert!(r.body.iter().all(|b| *b == b'x'));

    let r = client(true, LARGE + 1, Duration::from_secs(5)).send(get(server.url("/large"))).await.unwrap();
    assert_eq!((r.body.len(), r.truncated), (LARGE, false));
}

#[tokio::test]
async fn a_body_exactly_at_the_limit_is_not_truncated() {
    let server = TestServer::start().await;
    let r = client(true, 16, Duration::from_secs(5)).send(get(server.url("/exact"))).await.unwrap();
    assert_eq!((r.body.as_slice(), r.truncated), (&b"0123456789abcdef"[..], false));
    let r = client(true, 15, Duration::from_secs(5)).send(get(server.url("/exact"))).await.unwrap();
    assert_eq!((r.body.as_slice(), r.truncated), (&b"0123456789abcde"[..], true));
}

#[tokio::test]
async fn a_server_slower_than_the_timeout_gives_a_timeout() {
    let server = TestServer::start().await;
    let started = std::time::Instant::now();
    let err =
        client(true, 1024, Duration::from_millis(300)).send(get(server.url("/slow"))).await.unwrap_err();
    assert_eq!(err.kind, EgressErrorKind::Timeout, "{err}");
    assert!(err.message.contains("127.0.0.1"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_closed_port_gives_a_connection_error() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let err = open_client().send(get(format!("http://127.0.0.1:{port}/"))).await.unwrap_err();
    assert_eq!(err.kind, EgressErrorKind::Connect, "{err}");
    assert_eq!(err.kind.as_str(), "connection");
    assert!(err.message.starts_with("could not connect to 127.0.0.1"), "{err}");
}

#[tokio::test]
async fn connections_to_a_host_are_reused() {
    let server = TestServer::start().await;
    let c = open_client();
    for _ in 0..3 {
        assert_eq!(c.send(get(server.url("/hello"))).await.unwrap().status, 200);
    }
    // Clones share the pool.
    assert_eq!(c.clone().send(get(server.url("/hello"))).await.unwrap().status, 200);
    assert_eq!(server.accepts(), 1);
}

#[tokio::test]
async fn loopback_targets_are_refused_without_connecting_unless_allowed() {
    let (port, v4_count) = counting_listener("127.0.0.1:0").await.unwrap();
    // ::1 gets its own listener where the machine has IPv6.
    let v6 = counting_listener("[::1]:0").await;
    let v6_port = v6.as_ref().map_or(port, |(p, _)| *p);
    let guarded = client(false, 1024, Duration::from_secs(5));
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://[::1]:{v6_port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://127.1:{port}/"),
    ] {
        let err = guarded.send(get(url.clone())).await.unwrap_err();
        assert_eq!(err.kind, EgressErrorKind::RefusedAddress, "{url}: {err}");
        assert!(err.message.contains("loopback"), "{url}: {err}");
        assert!(err.message.contains("AGENTRY_WEBHOOK_ALLOW_PRIVATE=true"), "{url}: {err}");
    }
    let err = guarded.send(get(format!("http://localhost:{port}/"))).await.unwrap_err();
    assert!(err.message.starts_with("refusing to contact localhost: "), "{err}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(v4_count.load(Ordering::SeqCst), 0);
    if let Some((_, v6_count)) = v6 {
        assert_eq!(v6_count.load(Ordering::SeqCst), 0);
    }
}

#[tokio::test]
async fn localhost_is_reachable_when_private_targets_are_allowed() {
    let server = TestServer::start().await;
    let url = format!("http://localhost:{}/hello", server.addr.port());
    let r = open_client().send(get(url)).await.unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello, agentry"[..]));
}

#[tokio::test]
async fn an_invalid_header_fails_before_connecting() {
    let server = TestServer::start().await;
    let mut request = get(server.url("/hello"));
    request.headers.push(("Bad Name".into(), "x".into()));
    let err = open_client().send(request).await.unwrap_err();
    assert_eq!(err.kind, EgressErrorKind::Other, "{err}");
    let mut request = get(server.url("/hello"));
    request.headers.push(("X-Secret".into(), "line\nbreak".into()));
    let err = open_client().send(request).await.unwrap_err();
    assert!(!err.message.contains("line"), "header values are not echoed: {err}");
    assert_eq!(server.accepts(), 0);
}

#[tokio::test]
async fn invalid_urls_are_refused_by_send_too() {
    let c = open_client();
    for url in ["ftp://127.0.0.1/", "http://user:pw@127.0.0.1/", "nonsense"] {
        let err = c.send(get(url.into())).await.unwrap_err();
        assert_eq!(err.kind, EgressErrorKind::InvalidUrl, "{url}: {err}");
    }
}

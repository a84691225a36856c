//! An SMTP server for tests: it listens on a free local port, speaks enough ESMTP for any
//! client (EHLO, AUTH PLAIN, MAIL, RCPT, DATA with dot-unstuffing, RSET, NOOP, QUIT) and records
//! every message it accepts, so a test can read what was really sent over the wire.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One received message.
#[derive(Debug, Clone, Default)]
pub struct ReceivedMail {
    /// The envelope sender.
    pub from: String,
    /// The envelope recipients.
    pub to: Vec<String>,
    /// The message (headers and body) as transmitted, dot-unstuffed.
    pub data: String,
    /// The credentials the client authenticated with, if any.
    pub auth: Option<(String, String)>,
}

type Inbox = Arc<Mutex<Vec<ReceivedMail>>>;

/// The running server; it stops with the test's runtime.
#[derive(Debug, Clone)]
pub struct SmtpSink {
    /// Where it listens.
    pub addr: SocketAddr,
    received: Inbox,
}

impl SmtpSink {
    /// Starts a server on 127.0.0.1 and a free port.
    ///
    /// # Panics
    /// When no local port can be bound.
    #[allow(clippy::expect_used)]
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a local port");
        let addr = listener.local_addr().expect("local address");
        let received: Inbox = Arc::default();
        let inbox = received.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, inbox.clone()));
            }
        });
        Self { addr, received }
    }

    /// `smtp://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("smtp://{}", self.addr)
    }

    /// Everything received so far.
    pub fn received(&self) -> Vec<ReceivedMail> {
        self.received.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Waits up to `timeout` until at least `n` messages arrived; returns what arrived.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<ReceivedMail> {
        let deadline = Instant::now() + timeout;
        loop {
            let received = self.received();
            if received.len() >= n || Instant::now() >= deadline {
                return received;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn decode_plain(encoded: &str) -> Option<(String, String)> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let mut parts = bytes.split(|b| *b == 0).map(|p| String::from_utf8_lossy(p).into_owned());
    let _authzid = parts.next()?;
    Some((parts.next()?, parts.next()?))
}

fn address(arg: &str) -> String {
    let start = arg.find('<').map_or(0, |i| i + 1);
    let end = arg.rfind('>').unwrap_or(arg.len());
    arg.get(start..end).unwrap_or_default().to_owned()
}

async fn serve(stream: TcpStream, inbox: Inbox) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    let mut current = ReceivedMail::default();
    let mut auth = None;
    write.write_all(b"220 sink.test ESMTP ready\r\n").await?;
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let command = line.trim_end();
        let upper = command.to_ascii_uppercase();
        let reply: String = if upper.starts_with("EHLO") {
            "250-sink.test\r\n250-AUTH PLAIN\r\n250 8BITMIME".into()
        } else if upper.starts_with("HELO") {
            "250 sink.test".into()
        } else if upper.starts_with("AUTH PLAIN") {
            let inline = command.get(10..).unwrap_or_default().trim();
            let encoded = if inline.is_empty() {
                write.write_all(b"334 \r\n").await?;
                let mut next = String::new();
                lines.read_line(&mut next).await?;
                next
            } else {
                inline.to_owned()
            };
            match decode_plain(&encoded) {
                Some(credentials) => {
                    auth = Some(credentials);
                    "235 2.7.0 authenticated".into()
                }
                None => "501 malformed AUTH PLAIN".into(),
            }
        } else if upper.starts_with("MAIL FROM:") {
            current =
                ReceivedMail { from: address(&command[10..]), auth: auth.clone(), ..ReceivedMail::default() };
            "250 OK".into()
        } else if upper.starts_with("RCPT TO:") {
            current.to.push(address(&command[8..]));
            "250 OK".into()
        } else if upper == "DATA" {
            write.write_all(b"354 end with <CRLF>.<CRLF>\r\n").await?;
            loop {
                let mut data_line = String::new();
                if lines.read_line(&mut data_line).await? == 0 {
                    return Ok(());
                }
                if data_line == ".\r\n" || data_line == ".\n" {
                    break;
                }
                let unstuffed = data_line.strip_prefix('.').unwrap_or(&data_line);
                current.data.push_str(unstuffed);
            }
            inbox
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(std::mem::take(&mut current));
            "250 OK queued".into()
        } else if upper == "RSET" {
            current = ReceivedMail::default();
            "250 OK".into()
        } else if upper == "NOOP" {
            "250 OK".into()
        } else if upper == "QUIT" {
            write.write_all(b"221 bye\r\n").await?;
            return Ok(());
        } else {
            "502 command not implemented".into()
        };
        write.write_all(format!("{reply}\r\n").as_bytes()).await?;
    }
}

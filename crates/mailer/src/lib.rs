//! Agentry's e-mail adapter, implementing the domain's [`Mailer`] port:
//! - [`SmtpMailer`]: lettre over SMTP — `smtp://` (plain), `smtp://…?tls=starttls` (STARTTLS,
//!   required) or `smtps://` (implicit TLS), with optional `user:password@`;
//! - [`FileOutbox`]: each message written as an `.eml` file, for development without a mail
//!   server;
//! - [`Background`]: hands messages to either on a background task, so a request answers in the
//!   same time whether or not it sent mail.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentry_domain::mail::{EmailMessage, Mailer};
use anyhow::Context as _;
use async_trait::async_trait;
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport as _, Message, Tokio1Executor};

#[cfg(feature = "test-support")]
pub mod test_support;

fn build_message(from: &Mailbox, message: &EmailMessage) -> anyhow::Result<Message> {
    let to: Mailbox = message.to.as_str().parse().context("recipient address")?;
    Message::builder()
        .from(from.clone())
        .to(to)
        .subject(&message.subject)
        .multipart(MultiPart::alternative_plain_html(message.text.clone(), message.html.clone()))
        .context("building the e-mail")
}

/// Sends over SMTP.
pub struct SmtpMailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl std::fmt::Debug for SmtpMailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpMailer").field("from", &self.from.to_string()).finish_non_exhaustive()
    }
}

impl SmtpMailer {
    /// A mailer for `url`, sending as `from`. TLS uses the process's rustls crypto provider,
    /// which must be installed before.
    ///
    /// # Errors
    /// For an unparsable URL or sender, an unknown scheme or `tls` value.
    pub fn new(url: &str, from: &str, timeout: Duration) -> anyhow::Result<Self> {
        let parsed = url::Url::parse(url).context("AGENTRY_SMTP_URL is not a URL")?;
        let host = parsed.host_str().context("AGENTRY_SMTP_URL has no host")?;
        let tls = parsed.query_pairs().find(|(k, _)| k == "tls").map(|(_, v)| v.into_owned());
        let mut builder = match (parsed.scheme(), tls.as_deref()) {
            ("smtps", None) => AsyncSmtpTransport::<Tokio1Executor>::relay(host)?,
            ("smtp", Some("starttls" | "required")) => {
                AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(host)?
            }
            ("smtp", None | Some("none")) => {
                AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host).port(25)
            }
            (scheme, tls) => anyhow::bail!(
                "unsupported SMTP URL (scheme {scheme:?}, tls {tls:?}): use smtp://, smtp://…?tls=starttls or smtps://"
            ),
        };
        if let Some(port) = parsed.port() {
            builder = builder.port(port);
        }
        if !parsed.username().is_empty() {
            let decode = |s: &str| {
                url::form_urlencoded::parse(s.as_bytes())
                    .map(|(k, _)| k.into_owned())
                    .next()
                    .unwrap_or_default()
            };
            let user = decode(parsed.username());
            let password = decode(parsed.password().unwrap_or_default());
            builder = builder.credentials(Credentials::new(user, password));
        }
        let from = from.parse().with_context(|| format!("AGENTRY_MAIL_FROM {from:?} is not an address"))?;
        Ok(Self { transport: builder.timeout(Some(timeout)).build(), from })
    }
}

#[async_trait]
impl Mailer for SmtpMailer {
    async fn send(&self, message: &EmailMessage) -> anyhow::Result<()> {
        let email = build_message(&self.from, message)?;
        self.transport.send(email).await.context("the SMTP server refused the message")?;
        tracing::info!(subject = %message.subject, "e-mail sent over SMTP");
        Ok(())
    }
}

/// Writes each message as an `.eml` file into a directory.
#[derive(Debug)]
pub struct FileOutbox {
    dir: PathBuf,
    from: Mailbox,
}

impl FileOutbox {
    /// An outbox in `dir` (created when missing), sending as `from`.
    ///
    /// # Errors
    /// For an unparsable sender.
    pub fn new(dir: impl Into<PathBuf>, from: &str) -> anyhow::Result<Self> {
        let from = from.parse().with_context(|| format!("AGENTRY_MAIL_FROM {from:?} is not an address"))?;
        Ok(Self { dir: dir.into(), from })
    }

    /// Where messages are written.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[async_trait]
impl Mailer for FileOutbox {
    async fn send(&self, message: &EmailMessage) -> anyhow::Result<()> {
        let bytes = build_message(&self.from, message)?.formatted();
        let name = format!("{}.eml", ulid::Ulid::new().to_string().to_lowercase());
        let path = self.dir.join(name);
        tokio::fs::create_dir_all(&self.dir)
            .await
            .with_context(|| format!("creating {}", self.dir.display()))?;
        tokio::fs::write(&path, bytes).await.with_context(|| format!("writing {}", path.display()))?;
        tracing::info!(path = %path.display(), subject = %message.subject, "e-mail written to the outbox");
        Ok(())
    }
}

/// Sends on a background task: `send` returns at once and delivery failures are logged. Keeps
/// the time of a request independent of whether it sent mail (which would reveal whether an
/// address has an account) and of the mail server's latency.
pub struct Background {
    inner: Arc<dyn Mailer>,
}

impl std::fmt::Debug for Background {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Background { .. }")
    }
}

impl Background {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Mailer>) -> Self {
        Self { inner }
    }
}

#[async_trait]
impl Mailer for Background {
    async fn send(&self, message: &EmailMessage) -> anyhow::Result<()> {
        let inner = self.inner.clone();
        let message = message.clone();
        tokio::spawn(async move {
            if let Err(e) = inner.send(&message).await {
                tracing::error!(error = ?e, subject = %message.subject, "e-mail delivery failed");
            }
        });
        Ok(())
    }
}

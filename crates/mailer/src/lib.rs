//! Agentry's e-mail adapter, implementing the domain's [`Mailer`] port:
//! - [`SmtpMailer`]: lettre over SMTP — `smtp://` (plain), `smtp://…?tls=starttls` (STARTTLS,
//!   required) or `smtps://` (implicit TLS), with optional `user:password@`;
//! - [`FileOutbox`]: each message written as an `.eml` file, for development without a mail
//!   server.
//!
//! Sending is the last step of a durable mail job (see `agentry_domain::jobs`): a failure here
//! is retried by the job, not lost.

use std::path::{Path, PathBuf};
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
        let dir = self.dir.clone();
        // The messages carry sign-in and reset links: readable by this user only (0600 files
        // in a 0700 directory).
        tokio::task::spawn_blocking(move || write_private(&dir, &path, &bytes).map(|()| path))
            .await
            .context("the outbox writer stopped")??;
        tracing::info!(subject = %message.subject, dir = %self.dir.display(), "e-mail written to the outbox");
        Ok(())
    }
}

fn write_private(dir: &Path, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    if !dir.exists() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}

//! Outgoing e-mail: the message the domain composes and the port that delivers it.

use async_trait::async_trait;

use crate::identity::Email;

/// An e-mail with a plain-text and an HTML part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailMessage {
    /// The recipient.
    pub to: Email,
    /// The subject line.
    pub subject: String,
    /// The plain-text body.
    pub text: String,
    /// The HTML body.
    pub html: String,
}

/// Delivers e-mail (SMTP, or a file outbox in development).
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait Mailer: Send + Sync {
    /// Hands `message` over for delivery.
    ///
    /// # Errors
    /// When the message could not be handed over (the SMTP server refused it, the outbox is not
    /// writable).
    async fn send(&self, message: &EmailMessage) -> anyhow::Result<()>;
}

/// Escapes text for inclusion in HTML.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn html_is_escaped() {
        assert_eq!(super::escape_html(r#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }
}

//! Identifiers: prefixed, time-ordered, opaque strings (`usr_…`, `ten_…`).
//!
//! The domain never invents an identifier itself; it asks an [`IdGenerator`] so tests can
//! predict them and adapters can choose the encoding (ULID, UUIDv7).

use std::fmt;

/// Produces new unique identifiers. Implementations must return time-ordered values that are
/// safe in URLs, prefixed with `<prefix>_`.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait IdGenerator: Send + Sync {
    /// A new identifier `<prefix>_<unique part>`.
    fn generate(&self, prefix: &'static str) -> String;
}

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident, $prefix:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The prefix every identifier of this kind starts with (before the `_`).
            pub const PREFIX: &'static str = $prefix;

            /// A fresh identifier from `ids`.
            pub fn generate(ids: &dyn IdGenerator) -> Self {
                Self(ids.generate(Self::PREFIX))
            }

            /// Wraps an identifier read from storage or a request. Identifiers are opaque, so
            /// any string is accepted; a wrong one simply matches nothing.
            pub fn from_string(value: impl Into<String>) -> Self {
                Self(value.into())
            }

            /// The identifier as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The identifier as an owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// Identifies a user account.
    UserId,
    "usr"
);
id_type!(
    /// Identifies a tenant (a workspace that owns resources).
    TenantId,
    "ten"
);
id_type!(
    /// Identifies one refresh token of a family.
    RefreshTokenId,
    "rtk"
);
id_type!(
    /// Identifies a refresh-token family: every token descended from one login.
    TokenFamilyId,
    "rtf"
);
id_type!(
    /// Identifies an API key.
    ApiKeyId,
    "key"
);
id_type!(
    /// Identifies a one-time token (password reset, magic link).
    OneTimeTokenId,
    "ott"
);
id_type!(
    /// Identifies an agent.
    AgentId,
    "agt"
);
id_type!(
    /// Identifies a conversation (chat session) with an agent.
    SessionId,
    "ses"
);
id_type!(
    /// Identifies a chat message.
    MessageId,
    "msg"
);
id_type!(
    /// Identifies an event in the outbox.
    EventId,
    "evt"
);
id_type!(
    /// Identifies a credit purchase.
    PurchaseId,
    "pur"
);
id_type!(
    /// Identifies a hold of credits for a chat in progress.
    CreditHoldId,
    "hld"
);
id_type!(
    /// Identifies one entry of a tenant's credit ledger.
    LedgerEntryId,
    "led"
);
id_type!(
    /// Identifies a memory entry.
    MemoryId,
    "mem"
);
id_type!(
    /// Identifies a document added to memory (its chunks are memory entries).
    DocumentId,
    "doc"
);
id_type!(
    /// Identifies a background job.
    JobId,
    "job"
);
id_type!(
    /// Identifies a webhook subscription.
    WebhookId,
    "whk"
);
id_type!(
    /// Identifies one delivery of an event to a webhook subscription.
    DeliveryId,
    "dlv"
);
id_type!(
    /// Identifies a workflow.
    WorkflowId,
    "wf"
);
id_type!(
    /// Identifies a remote MCP server a tenant registered.
    McpServerId,
    "mcp"
);
id_type!(
    /// Identifies one execution (run) of a workflow.
    ExecutionId,
    "exe"
);
id_type!(
    /// Identifies a workflow's webhook trigger.
    TriggerId,
    "trg"
);
id_type!(
    /// Identifies an inbound integration (a receiver bound to a workflow).
    IntegrationId,
    "int"
);
id_type!(
    /// Identifies a workflow's schedule (a cron expression that starts it).
    ScheduleId,
    "sch"
);
id_type!(
    /// Identifies an invitation of an e-mail address into a tenant.
    InvitationId,
    "inv"
);
id_type!(
    /// Identifies a knowledge base: files a tenant's agents answer from.
    KnowledgeBaseId,
    "kb"
);
id_type!(
    /// Identifies a file uploaded into a knowledge base.
    KnowledgeFileId,
    "kbf"
);
id_type!(
    /// Identifies one chunk of a knowledge file (what search finds and replies cite).
    ChunkId,
    "kbc"
);

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl IdGenerator for Fixed {
        fn generate(&self, prefix: &'static str) -> String {
            format!("{prefix}_01")
        }
    }

    #[test]
    fn generated_ids_carry_their_prefix() {
        assert_eq!(UserId::generate(&Fixed).as_str(), "usr_01");
        assert_eq!(TenantId::generate(&Fixed).to_string(), "ten_01");
    }
}

impl SessionId {
    /// Most characters of a session id.
    pub const MAX_CHARS: usize = 128;

    /// Validates a session id a client chose: 1–128 characters of `[A-Za-z0-9._:-]` and `_`
    /// (the service's own ids look like `ses_01…`).
    ///
    /// # Errors
    /// A [`FieldError`](crate::validation::FieldError) naming `session_id`.
    pub fn parse(raw: &str) -> Result<Self, crate::validation::FieldError> {
        use crate::validation::{FieldError, FieldErrorKind};
        let ok_char = |c: char| c.is_ascii_alphanumeric() || "._:-_".contains(c);
        if raw.is_empty() || raw.chars().count() > Self::MAX_CHARS || !raw.chars().all(ok_char) {
            return Err(FieldError::new(
                "session_id",
                FieldErrorKind::InvalidFormat,
                "session_id must be 1–128 characters of letters, digits and . _ : -",
            ));
        }
        Ok(Self(raw.to_owned()))
    }
}

#[cfg(test)]
mod session_id_tests {
    use super::SessionId;

    #[test]
    fn clients_choose_session_ids_within_a_small_alphabet() {
        for ok in ["s-1", "user-42:support", "ses_01jc9", "a.b", &"x".repeat(128)] {
            assert_eq!(SessionId::parse(ok).unwrap().as_str(), ok);
        }
        for bad in ["", "has space", "slash/no", "nul\u{0}", "é", &"x".repeat(129)] {
            assert_eq!(SessionId::parse(bad).unwrap_err().field, "session_id", "{bad:?}");
        }
    }
}

//! Credits: every change to a tenant's balance is an entry of its ledger.
//!
//! The balance is the sum of the ledger; storage keeps it beside the tenant as well so a charge
//! can be checked and taken in one atomic statement.

use std::fmt;

use chrono::{DateTime, Utc};

use crate::ids::{LedgerEntryId, TenantId};

/// Why the balance changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerReason {
    /// Credits granted when the tenant was created at registration.
    WelcomeGrant,
}

impl LedgerReason {
    /// The reason's stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WelcomeGrant => "welcome_grant",
        }
    }

    /// Parses a stored reason.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "welcome_grant" => Some(Self::WelcomeGrant),
            _ => None,
        }
    }
}

impl fmt::Display for LedgerReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change of a tenant's credit balance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    /// Its identifier.
    pub id: LedgerEntryId,
    /// Whose balance changed.
    pub tenant_id: TenantId,
    /// The change: positive for grants and purchases, negative for usage.
    pub delta: i64,
    /// The balance right after this entry.
    pub balance_after: i64,
    /// Why.
    pub reason: LedgerReason,
    /// When.
    pub created_at: DateTime<Utc>,
}

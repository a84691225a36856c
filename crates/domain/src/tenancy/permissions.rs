//! What a caller may do: the permissions a role grants, the scopes an API key carries, and the
//! one rule that combines them — a key's rights are its scopes intersected with its user's role.

use std::fmt;
use std::str::FromStr;

use super::Role;
use crate::validation::{FieldError, FieldErrorKind};

crate::string_enum! {
    /// One right over one kind of resource.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Permission {
        /// List and read agents and their conversations.
        AgentsRead => "agents:read",
        /// Create, change and delete agents; chat with them.
        AgentsWrite => "agents:write",
        /// Search and read memory.
        MemoryRead => "memory:read",
        /// Add and delete memory.
        MemoryWrite => "memory:write",
        /// List knowledge bases, their files and chunks; search them.
        KnowledgeRead => "knowledge:read",
        /// Create, change and delete knowledge bases; upload and delete files.
        KnowledgeWrite => "knowledge:write",
        /// List and read workflows, executions and triggers.
        WorkflowsRead => "workflows:read",
        /// Create, change and delete workflows and triggers.
        WorkflowsWrite => "workflows:write",
        /// Run workflows.
        WorkflowsExecute => "workflows:execute",
        /// List and read webhook subscriptions and deliveries.
        WebhooksRead => "webhooks:read",
        /// Create, change and delete webhook subscriptions.
        WebhooksWrite => "webhooks:write",
        /// Read the plan, balance and ledger.
        BillingRead => "billing:read",
        /// Buy credits and change the plan. Not available to API keys.
        BillingWrite => "billing:write",
        /// List a tenant's members and pending invitations.
        MembersRead => "members:read",
        /// Invite, revoke invitations, change roles and remove members.
        MembersWrite => "members:write",
    }
}

impl Permission {
    fn is_read(self) -> bool {
        matches!(
            self,
            Self::AgentsRead
                | Self::MemoryRead
                | Self::KnowledgeRead
                | Self::WorkflowsRead
                | Self::WebhooksRead
                | Self::BillingRead
                | Self::MembersRead
        )
    }
}

impl Role {
    /// Whether the role grants `permission`.
    ///
    /// - `owner`: everything;
    /// - `admin`: everything but billing changes;
    /// - `member`: reads and writes agents, memory, knowledge and workflows, runs workflows, and lists
    ///   the tenant's members;
    /// - `viewer`: reads only.
    pub fn grants(self, permission: Permission) -> bool {
        use Permission::*;
        match self {
            Role::Owner => true,
            Role::Admin => permission != BillingWrite,
            Role::Member => matches!(
                permission,
                AgentsRead
                    | AgentsWrite
                    | MemoryRead
                    | MemoryWrite
                    | KnowledgeRead
                    | KnowledgeWrite
                    | WorkflowsRead
                    | WorkflowsWrite
                    | WorkflowsExecute
                    | MembersRead
            ),
            Role::Viewer => permission.is_read(),
        }
    }
}

/// A permission an API key can carry. Billing changes are not delegable to keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope(Permission);

impl Scope {
    /// The permission this scope stands for.
    pub fn permission(self) -> Permission {
        self.0
    }

    /// The scope's name (`agents:read`).
    pub fn as_str(self) -> &'static str {
        self.0.as_str()
    }

    /// Every scope a key may carry.
    pub fn all() -> impl Iterator<Item = Scope> {
        Permission::ALL.into_iter().filter(|p| *p != Permission::BillingWrite).map(Scope)
    }
}

impl FromStr for Scope {
    type Err = FieldError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::all().find(|scope| scope.as_str() == s).ok_or_else(|| {
            let known: Vec<&str> = Self::all().map(Scope::as_str).collect();
            FieldError::new(
                "scopes",
                FieldErrorKind::InvalidValue,
                format!("unknown scope {s:?}; known scopes: {}", known.join(", ")),
            )
        })
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Permission::*;
    use super::*;

    /// The whole role table, row by row: a change to what a role may do must change this test.
    #[test]
    fn role_table() {
        let table: [(Role, &[Permission]); 4] = [
            (Role::Owner, &Permission::ALL),
            (
                Role::Admin,
                &[
                    AgentsRead,
                    AgentsWrite,
                    MemoryRead,
                    MemoryWrite,
                    KnowledgeRead,
                    KnowledgeWrite,
                    WorkflowsRead,
                    WorkflowsWrite,
                    WorkflowsExecute,
                    WebhooksRead,
                    WebhooksWrite,
                    BillingRead,
                    MembersRead,
                    MembersWrite,
                ],
            ),
            (
                Role::Member,
                &[
                    AgentsRead,
                    AgentsWrite,
                    MemoryRead,
                    MemoryWrite,
                    KnowledgeRead,
                    KnowledgeWrite,
                    WorkflowsRead,
                    WorkflowsWrite,
                    WorkflowsExecute,
                    MembersRead,
                ],
            ),
            (
                Role::Viewer,
                &[
                    AgentsRead,
                    MemoryRead,
                    KnowledgeRead,
                    WorkflowsRead,
                    WebhooksRead,
                    BillingRead,
                    MembersRead,
                ],
            ),
        ];
        for (role, granted) in table {
            for permission in Permission::ALL {
                assert_eq!(role.grants(permission), granted.contains(&permission), "{role} / {permission}");
            }
        }
    }

    #[test]
    fn scopes_parse_by_name_and_exclude_billing_changes() {
        assert_eq!("agents:read".parse::<Scope>().unwrap().permission(), AgentsRead);
        assert_eq!("workflows:execute".parse::<Scope>().unwrap().permission(), WorkflowsExecute);
        assert_eq!(Scope::all().count(), 14);
        assert_eq!("members:write".parse::<Scope>().unwrap().permission(), MembersWrite);
        let err = "billing:write".parse::<Scope>().unwrap_err();
        assert_eq!(err.kind, FieldErrorKind::InvalidValue);
        assert!("agents:delete".parse::<Scope>().is_err());
        assert!("".parse::<Scope>().is_err());
    }
}

//! The caller of a request as every service sees it: a [`Principal`] acting in one tenant with
//! one role and, for an API key, its scopes; and [`Forbidden`], the refusal of an action it
//! lacks the right to. Identity resolves credentials to a principal; every other context only
//! asks it what it may do.

use super::{Permission, Plan, Role, Scope};
use crate::ids::{ApiKeyId, TenantId, UserId};

/// How the caller proved who they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A user's JWT access token: the user's role applies in full.
    AccessToken,
    /// An API key: its scopes, intersected with its user's role.
    ApiKey {
        /// The key.
        key_id: ApiKeyId,
        /// What the key may do.
        scopes: Vec<Scope>,
    },
}

/// The caller of a request, in the tenant the request acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The user (for a key: the user who made it).
    pub user_id: UserId,
    /// The tenant the request acts on.
    pub tenant_id: TenantId,
    /// The tenant's plan.
    pub plan: Plan,
    /// The user's role in that tenant.
    pub role: Role,
    /// The credential presented.
    pub credential: Credential,
}

/// The caller lacks a right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Forbidden(pub String);

impl Principal {
    /// Whether the caller may do what `permission` names: the role must grant it and, for a
    /// key, one of the key's scopes must name it.
    pub fn can(&self, permission: Permission) -> bool {
        let delegated = match &self.credential {
            Credential::AccessToken => true,
            Credential::ApiKey { scopes, .. } => scopes.iter().any(|s| s.permission() == permission),
        };
        self.role.grants(permission) && delegated
    }

    /// [`Principal::can`] as a result.
    ///
    /// # Errors
    /// [`Forbidden`] naming the missing permission.
    pub fn require(&self, permission: Permission) -> Result<(), Forbidden> {
        if self.can(permission) {
            Ok(())
        } else {
            Err(Forbidden(format!("this action needs the {permission} permission")))
        }
    }

    /// Some actions (managing API keys) are reserved to a user's own session.
    ///
    /// # Errors
    /// [`Forbidden`] when the caller used an API key.
    pub fn require_user_session(&self) -> Result<(), Forbidden> {
        match self.credential {
            Credential::AccessToken => Ok(()),
            Credential::ApiKey { .. } => {
                Err(Forbidden("API keys are managed with a user access token, not with an API key".into()))
            }
        }
    }
}

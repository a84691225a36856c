//! Tenants, memberships and roles, the plans that set a tenant's limits, and the
//! [`Principal`] every request acts as.
//!
//! A tenant is the unit of isolation: every resource belongs to exactly one, and a user reaches
//! a tenant's resources only through a [`Membership`].

use std::str::FromStr;

use chrono::{DateTime, Utc};

use crate::ids::{TenantId, UserId};
use crate::validation::{FieldError, FieldErrorKind};

mod automations;
mod permissions;
mod principal;
#[cfg(any(test, feature = "mock"))]
pub use automations::MockMemberRoles;
pub use automations::{Automation, AutomationKind, MemberRoles, NotEntitled, current_role};
pub use permissions::{Permission, Scope};
pub use principal::{CallChain, Credential, Forbidden, Nesting, Principal};

crate::bounded_text!(
    /// A tenant's display name: 1–200 characters after trimming.
    TenantName,
    "name",
    1..=200
);

crate::string_enum! {
    /// A tenant's subscription plan; it sets the tenant's rate limits.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Plan {
        /// The plan every new tenant starts on.
        Starter => "starter",
        /// Higher limits.
        Pro => "pro",
        /// Negotiated limits.
        Enterprise => "enterprise",
    }
}

impl FromStr for Plan {
    type Err = FieldError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| {
            FieldError::new("plan", FieldErrorKind::InvalidValue, format!("unknown plan {s:?}"))
        })
    }
}

crate::string_enum! {
    /// A user's role within one tenant. Ordered from most to least powerful.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Role {
        /// Everything, including billing.
        Owner => "owner",
        /// Everything but billing changes.
        Admin => "admin",
        /// Reads and writes agents, memory and workflows; executes workflows.
        Member => "member",
        /// Reads only.
        Viewer => "viewer",
    }
}

impl FromStr for Role {
    type Err = FieldError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| {
            FieldError::new("role", FieldErrorKind::InvalidValue, format!("unknown role {s:?}"))
        })
    }
}

/// A tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    /// Its identifier.
    pub id: TenantId,
    /// Its display name.
    pub name: TenantName,
    /// Its plan.
    pub plan: Plan,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// A user's membership in a tenant, with the tenant's name for display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The tenant.
    pub tenant_id: TenantId,
    /// The tenant's display name.
    pub tenant_name: String,
    /// The tenant's plan (it sets the member's rate limits in this tenant).
    pub tenant_plan: Plan,
    /// The member.
    pub user_id: UserId,
    /// The member's role in the tenant.
    pub role: Role,
    /// When the membership began.
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_plans_round_trip_through_their_names() {
        for role in [Role::Owner, Role::Admin, Role::Member, Role::Viewer] {
            assert_eq!(role.as_str().parse::<Role>().unwrap(), role);
        }
        for plan in [Plan::Starter, Plan::Pro, Plan::Enterprise] {
            assert_eq!(plan.as_str().parse::<Plan>().unwrap(), plan);
        }
        assert!("root".parse::<Role>().is_err());
        assert!("gold".parse::<Plan>().is_err());
    }

    #[test]
    fn tenant_names_are_trimmed_and_bounded() {
        assert_eq!(TenantName::new("  Acme ").unwrap().as_str(), "Acme");
        assert!(TenantName::new("   ").is_err());
        assert!(TenantName::new(&"x".repeat(201)).is_err());
    }
}

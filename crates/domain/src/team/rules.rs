//! The rules of changing a tenant's members, as pure functions: ranks, who may invite, change
//! and remove whom, and the last owner.

use crate::ids::UserId;
use crate::tenancy::{Credential, Forbidden, Permission, Principal, Role};

impl Role {
    /// The role's power: owner 3, admin 2, member 1, viewer 0. A caller may grant, change and
    /// remove only at or below their own rank.
    pub fn rank(self) -> u8 {
        match self {
            Role::Owner => 3,
            Role::Admin => 2,
            Role::Member => 1,
            Role::Viewer => 0,
        }
    }

    /// Whether this role is strictly above `other`.
    pub fn outranks(self, other: Role) -> bool {
        self.rank() > other.rank()
    }
}

/// Whether a change leaves a tenant without an owner: `owners` owners before it, the member
/// changed was `from`, and is `to` after it (`None`: removed).
pub fn leaves_no_owner(owners: u64, from: Role, to: Option<Role>) -> bool {
    from == Role::Owner && to != Some(Role::Owner) && owners <= 1
}

/// Whether `caller` may invite someone as `role`.
///
/// # Errors
/// [`Forbidden`] without `members:write`, or for a role above the caller's.
pub fn check_invite(caller: &Principal, role: Role) -> Result<(), Forbidden> {
    caller.require(Permission::MembersWrite)?;
    if role.outranks(caller.role) {
        return Err(Forbidden(format!(
            "you cannot invite as {role}: it is above your role ({})",
            caller.role
        )));
    }
    Ok(())
}

/// Whether `caller` may change a member's role from `from` to `to`.
///
/// # Errors
/// [`Forbidden`] without `members:write`, for a member above the caller's role, or for a new
/// role above it.
pub fn check_role_change(caller: &Principal, from: Role, to: Role) -> Result<(), Forbidden> {
    caller.require(Permission::MembersWrite)?;
    if from.outranks(caller.role) {
        return Err(Forbidden(format!("you cannot change the role of an {from}: it is above your role")));
    }
    if to.outranks(caller.role) {
        return Err(Forbidden(format!("you cannot grant {to}: it is above your role ({})", caller.role)));
    }
    Ok(())
}

/// Whether `caller` may remove `member`, whose role is `role`. Leaving (removing oneself)
/// takes a user's own session, or a key with `members:write`.
///
/// # Errors
/// [`Forbidden`] without the right, or for a member above the caller's role.
pub fn check_removal(caller: &Principal, member: &UserId, role: Role) -> Result<(), Forbidden> {
    if member == &caller.user_id {
        return match caller.credential {
            Credential::AccessToken => Ok(()),
            Credential::ApiKey { .. } => caller.require(Permission::MembersWrite),
        };
    }
    caller.require(Permission::MembersWrite)?;
    if role.outranks(caller.role) {
        return Err(Forbidden(format!("you cannot remove an {role}: it is above your role")));
    }
    Ok(())
}

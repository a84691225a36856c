//! A tenant's automations as its owners and admins manage them: the list of what acts as whom,
//! and taking over what acted as a member who was removed or demoted (see
//! [`crate::tenancy::Automation`]).

use super::{TeamError, TeamService};
use crate::ids::UserId;
use crate::tenancy::{Automation, Permission, Principal};

impl TeamService {
    /// The caller's tenant's automations that act as `user`, or all of them: a removed
    /// member's too, which stopped acting with their removal.
    ///
    /// # Errors
    /// [`TeamError::Forbidden`] without `members:read`.
    pub async fn automations(
        &self,
        caller: &Principal,
        user: Option<&UserId>,
    ) -> Result<Vec<Automation>, TeamError> {
        caller.require(Permission::MembersRead)?;
        Ok(self.deps.team.automations(&caller.tenant_id, user).await?)
    }

    /// Makes every automation that acts as `from` act as the caller, with the caller's role:
    /// what a removed or demoted member left acts again, under the caller's name (a paused
    /// trigger or schedule stays paused). What it took over.
    ///
    /// # Errors
    /// [`TeamError::Forbidden`] without `members:write` (owners and admins), or when `from` is
    /// a member whose role is above the caller's.
    pub async fn take_over(&self, caller: &Principal, from: &UserId) -> Result<Vec<Automation>, TeamError> {
        caller.require(Permission::MembersWrite)?;
        if let Some(member) = self.deps.team.member(&caller.tenant_id, from).await?
            && member.role.outranks(caller.role)
        {
            return Err(TeamError::Forbidden(crate::tenancy::Forbidden(format!(
                "{from} is {}, above your role ({}): only someone of their rank may take over what acts as them",
                member.role, caller.role
            ))));
        }
        if from == &caller.user_id {
            return Ok(Vec::new());
        }
        Ok(self.deps.team.take_over(&caller.tenant_id, from, &caller.user_id, caller.role).await?)
    }
}

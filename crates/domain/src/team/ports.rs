//! The port of the team context: members and invitations in storage.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Invitation, InvitationView, Member};
use crate::events::Event;
use crate::identity::{PasswordHash, User};
use crate::ids::{InvitationId, TenantId, UserId};
use crate::jobs::NewJob;
use crate::secrets::SecretDigest;
use crate::tenancy::{Automation, Role};

/// Everything an acceptance stores, in one transaction.
#[derive(Debug, Clone)]
pub struct Acceptance {
    /// The invitation.
    pub invitation_id: InvitationId,
    /// The digest its link's token must still have.
    pub digest: SecretDigest,
    /// The account to create first, for an address without one.
    pub new_user: Option<(User, PasswordHash)>,
    /// The member.
    pub user_id: UserId,
    /// The tenant.
    pub tenant_id: TenantId,
    /// The role.
    pub role: Role,
    /// `tenant.member.added`.
    pub event: Event,
    /// When.
    pub now: DateTime<Utc>,
}

/// What became of an acceptance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptOutcome {
    /// The membership exists and the invitation is spent.
    Accepted,
    /// The invitation was no longer pending (accepted, revoked or expired meanwhile), or its
    /// link carries another token now; nothing changed.
    NotUsable,
    /// The user is a member of the tenant already; nothing changed.
    AlreadyMember,
    /// The address was registered meanwhile; nothing changed.
    EmailTaken,
}

/// What became of a change of a member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberChange {
    /// Applied; what acted as the member and stopped with the change (the kinds
    /// [`AutomationKind::lost_between`](crate::tenancy::AutomationKind::lost_between) the old
    /// and new role), which the change's event lists too.
    Done(Vec<Automation>),
    /// The member is gone or their role is no longer the one the change was checked against.
    Gone,
    /// It would leave the tenant without an owner; nothing changed.
    LastOwner,
}

/// Members and invitations.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait TeamRepository: Send + Sync {
    /// The tenant's members, in the order they joined.
    async fn members(&self, tenant: &TenantId) -> anyhow::Result<Vec<Member>>;

    /// One member of the tenant.
    async fn member(&self, tenant: &TenantId, user: &UserId) -> anyhow::Result<Option<Member>>;

    /// Stores an invitation and the job that mails it, in one transaction; an earlier pending
    /// invitation of the same address into the same tenant is revoked by it.
    async fn create_invitation(&self, invitation: &Invitation, mail: &NewJob) -> anyhow::Result<()>;

    /// The tenant's invitations pending at `now`, newest first.
    async fn pending_invitations(
        &self,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Vec<Invitation>>;

    /// Revokes a pending invitation of the tenant; `false` when it has none such.
    async fn revoke_invitation(
        &self,
        tenant: &TenantId,
        invitation: &InvitationId,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool>;

    /// An invitation by id, in any state.
    async fn invitation(&self, id: &InvitationId) -> anyhow::Result<Option<InvitationView>>;

    /// An invitation by the digest of its link's token, in any state.
    async fn invitation_by_digest(&self, digest: &SecretDigest) -> anyhow::Result<Option<InvitationView>>;

    /// Gives a pending invitation a new link token (replacing any earlier one); `false` when
    /// it is no longer pending at `now`.
    async fn set_token(
        &self,
        invitation: &InvitationId,
        digest: &SecretDigest,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool>;

    /// Accepts: in one transaction, spends the invitation (only if it is pending with this
    /// digest: of concurrent acceptances exactly one wins), creates the account when asked,
    /// the membership, and the event.
    ///
    /// # Errors
    /// Only when storage fails; every refusal is an [`AcceptOutcome`].
    async fn accept(&self, acceptance: &Acceptance) -> anyhow::Result<AcceptOutcome>;

    /// Changes a member's role from `from` to `to` and stores `event`, only if the member
    /// still has `from`, and refuses ([`MemberChange::LastOwner`]) when it would leave no
    /// owner ([`leaves_no_owner`](super::leaves_no_owner)) — decided inside the transaction,
    /// under a lock of the tenant, so concurrent changes cannot together remove every owner.
    /// In the same transaction it lists the member's automations the new role stops, and
    /// stores them in `event` ([`crate::events::EventPayload::with_paused`]).
    async fn change_role(
        &self,
        tenant: &TenantId,
        user: &UserId,
        from: Role,
        to: Role,
        event: &Event,
    ) -> anyhow::Result<MemberChange>;

    /// Removes a member whose role is still `from`, revokes the API keys they made in the
    /// tenant, and stores `event` with the automations the removal stops; refuses as
    /// [`Self::change_role`] does for the last owner.
    async fn remove_member(
        &self,
        tenant: &TenantId,
        user: &UserId,
        from: Role,
        event: &Event,
        now: DateTime<Utc>,
    ) -> anyhow::Result<MemberChange>;

    /// The tenant's automations that act as `user` (every one of the tenant's, `None`), in
    /// order of kind and id: what a member's removal would stop, or has stopped.
    async fn automations<'a>(
        &self,
        tenant: &TenantId,
        user: Option<&'a UserId>,
    ) -> anyhow::Result<Vec<Automation>>;

    /// Makes every automation of the tenant that acts as `from` act as `to` with `role`, in one
    /// transaction (triggers', schedules' and integrations' authority, subscriptions' maker);
    /// what it took over.
    async fn take_over(
        &self,
        tenant: &TenantId,
        from: &UserId,
        to: &UserId,
        role: Role,
    ) -> anyhow::Result<Vec<Automation>>;
}

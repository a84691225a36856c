//! Team members (PRODUCT.md §12): invitations of e-mail addresses into a tenant with a role,
//! the tenant's members, changes of their roles and their removal.
//!
//! The rules, all of them pure functions here and checked by [`TeamService`]:
//!
//! - inviting, revoking invitations, changing roles and removing others take `members:write`
//!   (owners and admins); listing takes `members:read` (every role);
//! - nobody grants a role above their own, nor changes or removes someone whose role is above
//!   their own ([`Role::rank`]); a member may always remove themself (leave);
//! - a tenant keeps at least one owner: the last one can neither leave, be demoted nor removed
//!   ([`leaves_no_owner`], applied by the repository inside the change's transaction, so two
//!   owners demoting each other at once cannot both succeed);
//! - an invitation's link carries a 256-bit token stored only as a digest; it is single use,
//!   lives [`TeamPolicy::invitation_ttl`] (7 days) and dies when revoked or replaced by a newer
//!   invitation of the same address. The token is made when the e-mail is sent (a durable
//!   [job](crate::jobs)), so it never rests in the job table.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use crate::events::{Event, EventPayload};
use crate::identity::{
    AccountRepository, AccountService, Email, FullName, Password, PasswordHasher, TokenPair, User,
};
use crate::ids::{IdGenerator, InvitationId, TenantId, UserId};
use crate::jobs::{BackgroundJob, JobError, JobHandler, JobKind, NewJob};
use crate::mail::{EmailMessage, Mailer, escape_html};
use crate::secrets::Secrets;
use crate::tenancy::{Automation, Forbidden, Permission, Principal, Role};
use crate::time::Clock;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator};

mod automations;
mod ports;
mod rules;
#[cfg(any(test, feature = "mock"))]
pub use ports::MockTeamRepository;
pub use ports::{AcceptOutcome, Acceptance, MemberChange, TeamRepository};
pub use rules::{check_invite, check_removal, check_role_change, leaves_no_owner};

/// An invitation of an address into a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invitation {
    /// Its id.
    pub id: InvitationId,
    /// The tenant it invites into.
    pub tenant_id: TenantId,
    /// The invited address.
    pub email: Email,
    /// The role the invitee gets.
    pub role: Role,
    /// Who invited.
    pub invited_by: UserId,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When its link stops working.
    pub expires_at: DateTime<Utc>,
    /// When it was accepted, if it was.
    pub accepted_at: Option<DateTime<Utc>>,
    /// When it was revoked (or replaced by a newer one), if it was.
    pub revoked_at: Option<DateTime<Utc>>,
}

impl Invitation {
    /// Whether its link may still be accepted at `now`: not accepted, not revoked, not
    /// expired.
    pub fn is_pending(&self, now: DateTime<Utc>) -> bool {
        self.accepted_at.is_none() && self.revoked_at.is_none() && now < self.expires_at
    }
}

/// An invitation with what its e-mail and page show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvitationView {
    /// The invitation.
    pub invitation: Invitation,
    /// The tenant's display name.
    pub tenant_name: String,
    /// The inviter's name.
    pub inviter_name: String,
}

/// A member whose role changed, and what acted as them and stopped because the new role does
/// not allow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedMember {
    /// The member, with the new role.
    pub member: Member,
    /// What stopped.
    pub paused: Vec<Automation>,
}

/// A member of a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The user.
    pub user_id: UserId,
    /// Their address.
    pub email: Email,
    /// Their name.
    pub full_name: String,
    /// Their role in the tenant.
    pub role: Role,
    /// When they joined.
    pub joined_at: DateTime<Utc>,
}

/// A validated invitation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInvitation {
    /// The address to invite.
    pub email: Email,
    /// The role to give.
    pub role: Role,
}

impl NewInvitation {
    /// Validates the raw fields.
    ///
    /// # Errors
    /// [`ValidationErrors`] naming a missing or invalid `email` or `role`.
    pub fn new(email: Option<String>, role: Option<String>) -> Result<Self, ValidationErrors> {
        let mut v = Validator::new();
        let email = v.required("email", email, |e| Email::parse(&e));
        let role = v.required("role", role, |r| r.parse::<Role>());
        let (email, role) = v.finish((email, role))?;
        Ok(Self { email, role })
    }
}

/// What accepting an invitation needs: the token from the link, and either the password of
/// the invited address's account or, for an address without one, a name and a new password.
#[derive(Debug, Clone)]
pub struct AcceptInvitation {
    /// The token from the link.
    pub token: SecretString,
    /// The account's password, or the new account's.
    pub password: Option<SecretString>,
    /// The new account's name (only for an address without an account).
    pub full_name: Option<String>,
}

/// Why a team operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    /// The caller lacks the right (also: a role above their own).
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// No such member or pending invitation in the tenant.
    #[error("{0}")]
    NotFound(&'static str),
    /// The request is invalid.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// The change conflicts with the tenant's state (already a member; changed meanwhile).
    #[error("{0}")]
    Conflict(String),
    /// The change would leave the tenant without an owner.
    #[error("a tenant keeps at least one owner: make someone else an owner first")]
    LastOwner,
    /// The invitation's token is unknown, used, revoked, replaced or expired.
    #[error("the invitation is invalid, used, revoked or expired")]
    InvalidToken,
    /// The password of the invited address's account is wrong.
    #[error("invalid e-mail or password")]
    InvalidCredentials,
    /// Storage, hashing or signing failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// Settings of the team service.
#[derive(Debug, Clone)]
pub struct TeamPolicy {
    /// Base of links in e-mails.
    pub public_url: String,
    /// How long an invitation's link works.
    pub invitation_ttl: Duration,
}

impl Default for TeamPolicy {
    fn default() -> Self {
        Self { public_url: "http://127.0.0.1:8080".into(), invitation_ttl: Duration::days(7) }
    }
}

/// The ports the team service uses.
#[derive(Clone)]
pub struct TeamServiceDeps {
    /// Members and invitations.
    pub team: Arc<dyn TeamRepository>,
    /// Users (is an invited address registered?).
    pub accounts: Arc<dyn AccountRepository>,
    /// Passwords of accepting users.
    pub hasher: Arc<dyn PasswordHasher>,
    /// Sessions of accepting users.
    pub sessions: AccountService,
    /// Delivery of invitations.
    pub mailer: Arc<dyn Mailer>,
    /// Tokens and digests.
    pub secrets: Arc<dyn Secrets>,
    /// Identifiers.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for TeamServiceDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TeamServiceDeps { .. }")
    }
}

/// An invitation accepted: the new member's session and where they now belong.
#[derive(Debug, Clone)]
pub struct Joined {
    /// A session of the member, as login answers it.
    pub tokens: TokenPair,
    /// The tenant joined.
    pub tenant_id: TenantId,
    /// Its name.
    pub tenant_name: String,
    /// The role in it.
    pub role: Role,
    /// Whether an account was created for the address.
    pub registered: bool,
}

/// What an invitation's page shows before it is accepted.
#[derive(Debug, Clone)]
pub struct InvitationPreview {
    /// The invitation and its tenant's and inviter's names.
    pub view: InvitationView,
    /// Whether the address has an account (it then accepts with its password; otherwise it
    /// registers with a name and a password).
    pub has_account: bool,
}

/// Invitations, members and roles.
#[derive(Clone, Debug)]
pub struct TeamService {
    deps: TeamServiceDeps,
    policy: TeamPolicy,
}

impl TeamService {
    /// A service over `deps` with `policy`.
    pub fn new(deps: TeamServiceDeps, policy: TeamPolicy) -> Self {
        Self { deps, policy }
    }

    /// Invites `request.email` into the caller's tenant as `request.role`: stores the
    /// invitation and its mail job together.
    ///
    /// # Errors
    /// [`TeamError::Forbidden`] without `members:write` or for a role above the caller's;
    /// [`TeamError::Conflict`] when the address is a member already.
    pub async fn invite(&self, caller: &Principal, request: NewInvitation) -> Result<Invitation, TeamError> {
        check_invite(caller, request.role)?;
        let d = &self.deps;
        if let Some(existing) = d.accounts.find_credentials(&request.email).await?
            && d.team.member(&caller.tenant_id, &existing.user.id).await?.is_some()
        {
            return Err(TeamError::Conflict(format!("{} is a member of this tenant already", request.email)));
        }
        let now = d.clock.now();
        let invitation = Invitation {
            id: InvitationId::generate(d.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            email: request.email,
            role: request.role,
            invited_by: caller.user_id.clone(),
            created_at: now,
            expires_at: now + self.policy.invitation_ttl,
            accepted_at: None,
            revoked_at: None,
        };
        let job = NewJob::new(d.ids.as_ref(), &InvitationMail { invitation_id: invitation.id.clone() }, now)?;
        d.team.create_invitation(&invitation, &job).await?;
        Ok(invitation)
    }

    /// The caller's tenant's pending invitations.
    ///
    /// # Errors
    /// [`TeamError::Forbidden`] without `members:read`.
    pub async fn invitations(&self, caller: &Principal) -> Result<Vec<Invitation>, TeamError> {
        caller.require(Permission::MembersRead)?;
        Ok(self.deps.team.pending_invitations(&caller.tenant_id, self.deps.clock.now()).await?)
    }

    /// Revokes a pending invitation: its link stops working.
    ///
    /// # Errors
    /// [`TeamError::Forbidden`] without `members:write`; [`TeamError::NotFound`] for no such
    /// pending invitation in the tenant.
    pub async fn revoke(&self, caller: &Principal, invitation: &InvitationId) -> Result<(), TeamError> {
        caller.require(Permission::MembersWrite)?;
        let revoked =
            self.deps.team.revoke_invitation(&caller.tenant_id, invitation, self.deps.clock.now()).await?;
        if revoked { Ok(()) } else { Err(TeamError::NotFound("no such pending invitation")) }
    }

    /// The caller's tenant's members.
    ///
    /// # Errors
    /// [`TeamError::Forbidden`] without `members:read`.
    pub async fn members(&self, caller: &Principal) -> Result<Vec<Member>, TeamError> {
        caller.require(Permission::MembersRead)?;
        Ok(self.deps.team.members(&caller.tenant_id).await?)
    }

    /// Gives a member another role; effective at their next request.
    ///
    /// # Errors
    /// [`TeamError::Forbidden`] as [`check_role_change`] says; [`TeamError::NotFound`] for no
    /// such member; [`TeamError::LastOwner`] when it demotes the last owner.
    pub async fn change_role(
        &self,
        caller: &Principal,
        user: &UserId,
        to: Role,
    ) -> Result<ChangedMember, TeamError> {
        caller.require(Permission::MembersWrite)?;
        let d = &self.deps;
        let mut member =
            d.team.member(&caller.tenant_id, user).await?.ok_or(TeamError::NotFound("no such member"))?;
        check_role_change(caller, member.role, to)?;
        if member.role == to {
            return Ok(ChangedMember { member, paused: Vec::new() });
        }
        let event = Event::new(
            d.ids.as_ref(),
            &caller.tenant_id,
            EventPayload::TenantMemberRoleChanged {
                user_id: user.clone(),
                from: member.role.as_str().to_owned(),
                to: to.as_str().to_owned(),
                changed_by: caller.user_id.clone(),
                // Filled in by the change's transaction.
                paused: Vec::new(),
            },
            d.clock.now(),
        );
        match d.team.change_role(&caller.tenant_id, user, member.role, to, &event).await? {
            MemberChange::Done(paused) => {
                member.role = to;
                Ok(ChangedMember { member, paused })
            }
            MemberChange::Gone => {
                Err(TeamError::Conflict("the member changed meanwhile; read it again".into()))
            }
            MemberChange::LastOwner => Err(TeamError::LastOwner),
        }
    }

    /// Removes a member (or, for the caller themself, leaves): their access to the tenant and
    /// the API keys they made there end at their next request, and what acted as them stops
    /// (see [`crate::tenancy::Automation`]); what stopped.
    ///
    /// # Errors
    /// [`TeamError::Forbidden`] as [`check_removal`] says; [`TeamError::NotFound`] for no such
    /// member; [`TeamError::LastOwner`] for the last owner.
    pub async fn remove(&self, caller: &Principal, user: &UserId) -> Result<Vec<Automation>, TeamError> {
        let d = &self.deps;
        if user != &caller.user_id {
            caller.require(Permission::MembersWrite)?;
        }
        let member =
            d.team.member(&caller.tenant_id, user).await?.ok_or(TeamError::NotFound("no such member"))?;
        check_removal(caller, user, member.role)?;
        let now = d.clock.now();
        let event = Event::new(
            d.ids.as_ref(),
            &caller.tenant_id,
            EventPayload::TenantMemberRemoved {
                user_id: user.clone(),
                removed_by: caller.user_id.clone(),
                // Filled in by the removal's transaction.
                paused: Vec::new(),
            },
            now,
        );
        match d.team.remove_member(&caller.tenant_id, user, member.role, &event, now).await? {
            MemberChange::Done(paused) => Ok(paused),
            MemberChange::Gone => {
                Err(TeamError::Conflict("the member changed meanwhile; read it again".into()))
            }
            MemberChange::LastOwner => Err(TeamError::LastOwner),
        }
    }

    /// What an invitation's page shows, while its link works.
    ///
    /// # Errors
    /// [`TeamError::InvalidToken`] when the link no longer works.
    pub async fn preview(&self, token: &str) -> Result<InvitationPreview, TeamError> {
        let d = &self.deps;
        let view = self.usable(token).await?;
        let has_account = d.accounts.find_credentials(&view.invitation.email).await?.is_some();
        Ok(InvitationPreview { view, has_account })
    }

    async fn usable(&self, token: &str) -> Result<InvitationView, TeamError> {
        let d = &self.deps;
        let digest = d.secrets.digest(token);
        match d.team.invitation_by_digest(&digest).await? {
            Some(view) if view.invitation.is_pending(d.clock.now()) => Ok(view),
            _ => Err(TeamError::InvalidToken),
        }
    }

    /// Accepts an invitation: an address with an account proves it with its password; one
    /// without registers with a name and a password. The membership is created with the
    /// invitation's role, the invitation is spent, and the user is signed in.
    ///
    /// # Errors
    /// [`TeamError::InvalidToken`] for a link that no longer works (also when a concurrent
    /// acceptance won); [`TeamError::InvalidCredentials`] for a wrong password;
    /// [`TeamError::Invalid`] for a missing password or name, or a new password that is too
    /// short; [`TeamError::Conflict`] when the user is a member already.
    pub async fn accept(&self, request: AcceptInvitation) -> Result<Joined, TeamError> {
        use secrecy::ExposeSecret as _;
        let d = &self.deps;
        let digest = d.secrets.digest(request.token.expose_secret());
        let view = self.usable(request.token.expose_secret()).await?;
        let invitation = &view.invitation;
        let now = d.clock.now();
        let (user_id, new_user) = match d.accounts.find_credentials(&invitation.email).await? {
            Some(credentials) => {
                let password = request.password.ok_or_else(|| {
                    ValidationErrors::one(FieldError::new(
                        "password",
                        FieldErrorKind::MissingRequiredField,
                        "the invited address has an account: give its password",
                    ))
                })?;
                let presented = Password::presented(password);
                let matches = d.hasher.verify(&presented, Some(&credentials.password_hash)).await?;
                if !matches || !credentials.user.is_active {
                    return Err(TeamError::InvalidCredentials);
                }
                (credentials.user.id, None)
            }
            None => {
                let mut v = Validator::new();
                let full_name = v.required("full_name", request.full_name, |n| FullName::new(&n));
                let password = v.required("password", request.password, Password::from_secret);
                let (full_name, password) = v.finish((full_name, password))?;
                let hash = d.hasher.hash(&password).await?;
                let user = User {
                    id: UserId::generate(d.ids.as_ref()),
                    email: invitation.email.clone(),
                    full_name,
                    is_active: true,
                    created_at: now,
                };
                (user.id.clone(), Some((user, hash)))
            }
        };
        let registered = new_user.is_some();
        let event = Event::new(
            d.ids.as_ref(),
            &invitation.tenant_id,
            EventPayload::TenantMemberAdded {
                user_id: user_id.clone(),
                email: invitation.email.as_str().to_owned(),
                role: invitation.role.as_str().to_owned(),
                invited_by: invitation.invited_by.clone(),
            },
            now,
        );
        let acceptance = Acceptance {
            invitation_id: invitation.id.clone(),
            digest,
            new_user,
            user_id: user_id.clone(),
            tenant_id: invitation.tenant_id.clone(),
            role: invitation.role,
            event,
            now,
        };
        match d.team.accept(&acceptance).await? {
            AcceptOutcome::Accepted => {}
            AcceptOutcome::NotUsable => return Err(TeamError::InvalidToken),
            AcceptOutcome::AlreadyMember => {
                return Err(TeamError::Conflict("you are a member of this tenant already".into()));
            }
            AcceptOutcome::EmailTaken => {
                return Err(TeamError::Conflict(
                    "an account with this address was just created: accept with its password".into(),
                ));
            }
        }
        let tokens = d.sessions.start_session(&user_id).await?;
        Ok(Joined {
            tokens,
            tenant_id: invitation.tenant_id.clone(),
            tenant_name: view.tenant_name.clone(),
            role: invitation.role,
            registered,
        })
    }

    /// Sends an invitation's e-mail with a fresh link token (a retry replaces the token of an
    /// attempt that may not have arrived). An invitation no longer pending gets nothing.
    ///
    /// # Errors
    /// [`JobError::Transient`] when storage or delivery fails.
    pub async fn deliver(&self, job: &InvitationMail) -> Result<(), JobError> {
        let d = &self.deps;
        let transient = JobError::Transient;
        let Some(view) = d.team.invitation(&job.invitation_id).await.map_err(transient)? else {
            return Ok(());
        };
        let now = d.clock.now();
        if !view.invitation.is_pending(now) {
            return Ok(());
        }
        let secret = d.secrets.random_token();
        if !d.team.set_token(&view.invitation.id, &d.secrets.digest(&secret), now).await.map_err(transient)? {
            return Ok(());
        }
        d.mailer.send(&self.compose(&view, &secret)).await.map_err(transient)
    }

    fn compose(&self, view: &InvitationView, secret: &str) -> EmailMessage {
        let base = self.policy.public_url.trim_end_matches('/');
        let invitation = &view.invitation;
        let link = format!("{base}/invitation?token={secret}");
        let days = self.policy.invitation_ttl.num_days();
        let subject = format!("You are invited to {} on Agentry", view.tenant_name);
        let intro = format!(
            "{} invites you to join {} on Agentry as {}.",
            view.inviter_name,
            view.tenant_name,
            invitation.role.as_str()
        );
        let action = "Accept the invitation";
        let fallback = format!(
            "Or accept through the API: POST {base}/api/v1/auth/invitations/accept with \
             {{\"token\": \"{secret}\", \"password\": \"…\"}} (and \"full_name\" if you have no account yet)."
        );
        let footer = format!(
            "The link works once and expires in {days} days. If you do not know the sender, ignore this \
             e-mail: nothing changes."
        );
        let text = format!("Hello,\n\n{intro}\n\n{action}: {link}\n\n{fallback}\n\n{footer}\n");
        let html = format!(
            "<!doctype html><html><body style=\"font-family: sans-serif\"><p>Hello,</p><p>{intro}</p>\
             <p><a href=\"{link}\">{action}</a></p><p>{fallback}</p><p style=\"color: #666\">{footer}</p></body></html>",
            intro = escape_html(&intro),
            link = escape_html(&link),
            action = escape_html(action),
            fallback = escape_html(&fallback),
            footer = escape_html(&footer),
        );
        EmailMessage { to: invitation.email.clone(), subject, text, html }
    }
}

/// The job that mails an invitation. It names the invitation only: the token is made when the
/// e-mail is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvitationMail {
    /// The invitation.
    pub invitation_id: InvitationId,
}

impl BackgroundJob for InvitationMail {
    const KIND: JobKind = JobKind::Invitation;
}

#[async_trait]
impl JobHandler<InvitationMail> for TeamService {
    async fn run(&self, job: InvitationMail) -> Result<(), JobError> {
        self.deliver(&job).await
    }
}

#[cfg(test)]
mod tests;

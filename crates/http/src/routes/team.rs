//! `/tenants/{tenant_id}/invitations` and `/tenants/{tenant_id}/members`: team members
//! (PRODUCT.md §12), and `/auth/invitations/accept`. A tenant the caller is not a member of
//! answers 404 on every route, as does another tenant's invitation or member.

use actix_web::{HttpResponse, web};
use agentry_domain::ids::{InvitationId, UserId};
use agentry_domain::team::{AcceptInvitation, Invitation, Joined, Member, NewInvitation};
use agentry_domain::tenancy::Role;
use agentry_domain::validation::{
    TextKind, ValidationErrors, Validator, check_length, check_path_id, check_text,
};
use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::access::{AuthThrottle, TenantCaller};
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::reply::{Reply, timestamp};
use crate::routes::auth::TokenResponse;
use crate::routes::automations::AutomationResponse;

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/tenants/{tenant_id}/invitations")
            .route(web::get().to(list_invitations))
            .route(web::post().to(invite)),
    )
    .service(
        web::resource("/tenants/{tenant_id}/invitations/{invitation_id}").route(web::delete().to(revoke)),
    )
    .service(web::resource("/tenants/{tenant_id}/members").route(web::get().to(list_members)))
    .service(
        web::resource("/tenants/{tenant_id}/members/{user_id}")
            .route(web::patch().to(change_role))
            .route(web::delete().to(remove)),
    )
    .service(web::resource("/auth/invitations/accept").route(web::post().to(accept)));
}

/// Checks the id after the tenant's in a path.
pub(crate) fn second_id(raw: &str, field: &str) -> Result<(), ApiError> {
    // An id that cannot exist names nothing: 404, as an unknown one does.
    if check_path_id(raw, field).is_err() || check_length(raw, 1, 128, field).is_err() {
        return Err(ApiError::not_found(format!("no such {}", field.trim_end_matches("_id"))));
    }
    Ok(())
}

/// A role, as requests name it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RoleName {
    /// Everything, including billing.
    Owner,
    /// Everything but billing changes.
    Admin,
    /// Agents, memory and workflows; runs workflows.
    Member,
    /// Reads only.
    Viewer,
}

/// An invitation to make.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateInvitationRequest {
    /// The address to invite; trimmed and lower-cased.
    #[schema(required = true, value_type = String, format = Email, max_length = 254, example = "grace@example.com")]
    pub email: Option<String>,
    /// `owner`, `admin`, `member` or `viewer`; never above your own role (403).
    #[schema(required = true, value_type = RoleName, example = "member")]
    pub role: Option<String>,
}

impl CreateInvitationRequest {
    /// The invitation, its address and role checked.
    ///
    /// # Errors
    /// [`ValidationErrors`] naming each refused field.
    pub(crate) fn try_into_domain(self) -> Result<NewInvitation, ValidationErrors> {
        NewInvitation::new(self.email, self.role)
    }
}

/// A new role.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChangeRoleRequest {
    /// `owner`, `admin`, `member` or `viewer`; never above your own role (403).
    #[schema(required = true, value_type = RoleName, example = "admin")]
    pub role: Option<String>,
}

impl ChangeRoleRequest {
    /// The role, checked.
    ///
    /// # Errors
    /// [`ValidationErrors`] for a missing or unknown role.
    pub(crate) fn try_into_domain(self) -> Result<Role, ValidationErrors> {
        let mut v = Validator::new();
        let role = v.required("role", self.role, |r| r.parse::<Role>());
        v.finish(role)
    }
}

/// A pending invitation. Its link's token is never shown: it is only in the e-mail.
#[derive(Debug, Serialize, ToSchema)]
pub struct InvitationResponse {
    /// Invitation id.
    pub id: String,
    /// The tenant it invites into.
    pub tenant_id: String,
    /// The invited address.
    #[schema(format = Email)]
    pub email: String,
    /// The role the invitee gets.
    #[schema(example = "member")]
    pub role: &'static str,
    /// Who invited.
    pub invited_by: String,
    /// When it was made.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// When its link stops working (7 days after it was made).
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: DateTime<Utc>,
}

impl From<Invitation> for InvitationResponse {
    fn from(i: Invitation) -> Self {
        Self {
            id: i.id.into_string(),
            tenant_id: i.tenant_id.into_string(),
            email: i.email.as_str().to_owned(),
            role: i.role.as_str(),
            invited_by: i.invited_by.into_string(),
            created_at: i.created_at,
            expires_at: i.expires_at,
        }
    }
}

/// The pending invitations of a tenant, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct InvitationList {
    /// The invitations.
    pub invitations: Vec<InvitationResponse>,
    /// How many.
    pub total: usize,
}

/// A member of a tenant.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberResponse {
    /// The user's id.
    pub user_id: String,
    /// Their address.
    #[schema(format = Email)]
    pub email: String,
    /// Their name.
    pub full_name: String,
    /// Their role: `owner`, `admin`, `member` or `viewer`.
    #[schema(example = "member")]
    pub role: &'static str,
    /// When they joined.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub joined_at: DateTime<Utc>,
}

impl From<Member> for MemberResponse {
    fn from(m: Member) -> Self {
        Self {
            user_id: m.user_id.into_string(),
            email: m.email.as_str().to_owned(),
            full_name: m.full_name,
            role: m.role.as_str(),
            joined_at: m.joined_at,
        }
    }
}

/// The members of a tenant, in the order they joined.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberList {
    /// The members.
    pub members: Vec<MemberResponse>,
    /// How many.
    pub total: usize,
}

/// Invite an address into the tenant with a role: an e-mail with a single-use link (valid 7
/// days) goes out in the background. A newer invitation of the same address replaces a
/// pending one.
#[utoipa::path(
    post, path = "/api/v1/tenants/{tenant_id}/invitations", tag = "members", operation_id = "createInvitation",
    security(("bearer" = [])),
    params(("tenant_id" = String, Path, description = "Tenant id (one you are a member of)", max_length = 128)),
    request_body = CreateInvitationRequest,
    responses(
        (status = 201, description = "Invited; the e-mail is on its way", body = InvitationResponse),
        (status = 403, description = "`forbidden`: inviting needs `members:write` (owners and admins), and the role cannot be above yours"),
        (status = 404, description = "`not_found`: no such tenant of yours"),
        (status = 409, description = "`conflict`: the address is a member already"),
    )
)]
pub async fn invite(
    state: web::Data<AppState>,
    caller: TenantCaller,
    body: JsonBody<CreateInvitationRequest>,
) -> Result<Reply<InvitationResponse>, ApiError> {
    let request = body.0.try_into_domain()?;
    let invitation = state.team.invite(&caller, request).await?;
    Ok(Reply::created(invitation.into()))
}

/// The tenant's pending invitations (never their tokens).
#[utoipa::path(
    get, path = "/api/v1/tenants/{tenant_id}/invitations", tag = "members", operation_id = "listInvitations",
    security(("bearer" = [])),
    params(("tenant_id" = String, Path, description = "Tenant id (one you are a member of)", max_length = 128)),
    responses(
        (status = 200, description = "Pending invitations", body = InvitationList),
        (status = 403, description = "`forbidden`: listing needs `members:read`"),
        (status = 404, description = "`not_found`: no such tenant of yours"),
    )
)]
pub async fn list_invitations(
    state: web::Data<AppState>,
    caller: TenantCaller,
) -> Result<Reply<InvitationList>, ApiError> {
    let invitations: Vec<InvitationResponse> =
        state.team.invitations(&caller).await?.into_iter().map(Into::into).collect();
    Ok(Reply::ok(InvitationList { total: invitations.len(), invitations }))
}

/// Revoke a pending invitation: its link stops working.
#[utoipa::path(
    delete, path = "/api/v1/tenants/{tenant_id}/invitations/{invitation_id}", tag = "members", operation_id = "revokeInvitation",
    security(("bearer" = [])),
    params(
        ("tenant_id" = String, Path, description = "Tenant id (one you are a member of)", max_length = 128),
        ("invitation_id" = String, Path, description = "Invitation id", max_length = 128),
    ),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, description = "`forbidden`: revoking needs `members:write`"),
        (status = 404, description = "`not_found`: no such tenant of yours, or no such pending invitation in it"),
    )
)]
pub async fn revoke(
    state: web::Data<AppState>,
    caller: TenantCaller,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, invitation) = path.into_inner();
    second_id(&invitation, "invitation_id")?;
    state.team.revoke(&caller, &InvitationId::from_string(invitation)).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The tenant's members with their roles.
#[utoipa::path(
    get, path = "/api/v1/tenants/{tenant_id}/members", tag = "members", operation_id = "listMembers",
    security(("bearer" = [])),
    params(("tenant_id" = String, Path, description = "Tenant id (one you are a member of)", max_length = 128)),
    responses(
        (status = 200, description = "Members", body = MemberList),
        (status = 403, description = "`forbidden`: listing needs `members:read`"),
        (status = 404, description = "`not_found`: no such tenant of yours"),
    )
)]
pub async fn list_members(
    state: web::Data<AppState>,
    caller: TenantCaller,
) -> Result<Reply<MemberList>, ApiError> {
    let members: Vec<MemberResponse> =
        state.team.members(&caller).await?.into_iter().map(Into::into).collect();
    Ok(Reply::ok(MemberList { total: members.len(), members }))
}

/// Change a member's role; it applies from their next request.
#[utoipa::path(
    patch, path = "/api/v1/tenants/{tenant_id}/members/{user_id}", tag = "members", operation_id = "changeMemberRole",
    security(("bearer" = [])),
    params(
        ("tenant_id" = String, Path, description = "Tenant id (one you are a member of)", max_length = 128),
        ("user_id" = String, Path, description = "The member's user id", max_length = 128),
    ),
    request_body = ChangeRoleRequest,
    responses(
        (status = 200, description = "The member with the new role, and what acted as them and stopped because the new role does not allow it", body = ChangedMemberResponse),
        (status = 403, description = "`forbidden`: needs `members:write`; the member's role and the new one cannot be above yours"),
        (status = 404, description = "`not_found`: no such tenant of yours, or no such member in it"),
        (status = 409, description = "`conflict`: it would demote the last owner, or the member changed meanwhile"),
    )
)]
pub async fn change_role(
    state: web::Data<AppState>,
    caller: TenantCaller,
    path: web::Path<(String, String)>,
    body: JsonBody<ChangeRoleRequest>,
) -> Result<Reply<ChangedMemberResponse>, ApiError> {
    let (_, user) = path.into_inner();
    second_id(&user, "user_id")?;
    let role = body.0.try_into_domain()?;
    let changed = state.team.change_role(&caller, &UserId::from_string(user), role).await?;
    Ok(Reply::ok(ChangedMemberResponse {
        member: changed.member.into(),
        paused: changed.paused.into_iter().map(Into::into).collect(),
    }))
}

/// A member whose role changed.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChangedMemberResponse {
    /// The member, with the new role.
    #[serde(flatten)]
    pub member: MemberResponse,
    /// What acted as them (triggers, schedules, integrations, webhook subscriptions) and
    /// stopped because the new role does not allow it; an owner or admin can take it over
    /// (`POST /tenants/{tenant_id}/automations/take-over`).
    pub paused: Vec<AutomationResponse>,
}

/// A member removed.
#[derive(Debug, Serialize, ToSchema)]
pub struct RemovedMemberResponse {
    /// The former member.
    pub user_id: String,
    /// What acted as them and stopped with the removal; an owner or admin can take it over
    /// (`POST /tenants/{tenant_id}/automations/take-over`).
    pub paused: Vec<AutomationResponse>,
}

/// Remove a member, or leave (your own user id). Their access to the tenant and the API keys
/// they made in it end at their next request; what acted as them (triggers, schedules,
/// integrations, webhook subscriptions, their executions' next steps) stops at once, and the
/// answer lists it.
#[utoipa::path(
    delete, path = "/api/v1/tenants/{tenant_id}/members/{user_id}", tag = "members", operation_id = "removeMember",
    security(("bearer" = [])),
    params(
        ("tenant_id" = String, Path, description = "Tenant id (one you are a member of)", max_length = 128),
        ("user_id" = String, Path, description = "The member's user id (yours: leave)", max_length = 128),
    ),
    responses(
        (status = 200, description = "Removed, with what stopped acting as them", body = RemovedMemberResponse),
        (status = 403, description = "`forbidden`: removing others needs `members:write`, and their role cannot be above yours"),
        (status = 404, description = "`not_found`: no such tenant of yours, or no such member in it"),
        (status = 409, description = "`conflict`: the last owner can neither leave nor be removed"),
    )
)]
pub async fn remove(
    state: web::Data<AppState>,
    caller: TenantCaller,
    path: web::Path<(String, String)>,
) -> Result<Reply<RemovedMemberResponse>, ApiError> {
    let (_, user) = path.into_inner();
    second_id(&user, "user_id")?;
    let paused = state.team.remove(&caller, &UserId::from_string(user.clone())).await?;
    Ok(Reply::ok(RemovedMemberResponse {
        user_id: user,
        paused: paused.into_iter().map(Into::into).collect(),
    }))
}

/// An invitation's acceptance.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AcceptInvitationRequest {
    /// The token from the invitation's link.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 256, extensions(("x-text" = json!("one-line"))))]
    pub token: Option<SecretString>,
    /// The password of the invited address's account or, for an address without one, the new
    /// account's (8 to 128 characters).
    #[schema(value_type = Option<String>, format = Password, max_length = 1024, extensions(("x-text" = json!("one-line"))))]
    pub password: Option<SecretString>,
    /// The new account's name (1 to 200 characters), for an address without an account.
    #[schema(value_type = Option<String>, max_length = 200, extensions(("x-text" = json!("name"))))]
    pub full_name: Option<String>,
}

impl AcceptInvitationRequest {
    /// The acceptance, with the token and password checked for form.
    ///
    /// # Errors
    /// [`ValidationErrors`] for a missing token, or one or a password that is not one line.
    pub fn try_into_domain(self) -> Result<AcceptInvitation, ValidationErrors> {
        let mut v = Validator::new();
        let token = v.required("token", self.token, |t| {
            check_text(t.expose_secret(), "token", TextKind::SingleLine)?;
            check_length(t.expose_secret(), 1, 256, "token")?;
            Ok(t)
        });
        let password = v.optional("password", self.password, |p| {
            check_text(p.expose_secret(), "password", TextKind::SingleLine)?;
            check_length(p.expose_secret(), 0, 1024, "password")?;
            Ok(p)
        });
        let (token, password) = v.finish((token, password))?;
        Ok(AcceptInvitation { token, password, full_name: self.full_name })
    }
}

/// Accept an invitation: an address with an account gives its password; one without gives a
/// name and a new password and is registered. Answers a session, as login does.
#[utoipa::path(
    post, path = "/api/v1/auth/invitations/accept", tag = "members", operation_id = "acceptInvitation",
    request_body = AcceptInvitationRequest,
    extensions(("x-rate-limit" = json!("client address"))),
    responses(
        (status = 200, description = "Joined and signed in", body = TokenResponse),
        (status = 400, description = "`invalid_token`: the invitation is unknown, used, revoked, replaced or expired"),
        (status = 401, description = "`invalid_credentials`: wrong password of the invited address's account"),
        (status = 409, description = "`conflict`: you are a member of the tenant already"),
    )
)]
pub async fn accept(
    state: web::Data<AppState>,
    _throttle: AuthThrottle,
    body: JsonBody<AcceptInvitationRequest>,
) -> Result<Reply<TokenResponse>, ApiError> {
    let request = body.0.try_into_domain()?;
    let Joined { tokens, .. } = state.team.accept(request).await?;
    Ok(Reply::ok(tokens.into()))
}

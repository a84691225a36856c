//! The team in the console: members with their roles (change one, remove one, or leave),
//! pending invitations (revoke one), and a new invitation. Each action is the team route's own
//! service call with the session's principal, so role ceilings and the last-owner rule apply
//! alike.

use actix_web::{HttpResponse, web};
use agentry_domain::ids::{InvitationId, UserId};
use agentry_domain::tenancy::Role;
use minijinja::context;
use serde_json::json;

use super::render::{page, redirect};
use super::{Console, Form};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::from_json_value;
use crate::routes::team::{
    ChangeRoleRequest, CreateInvitationRequest, InvitationResponse, MemberResponse, second_id,
};

/// Routes under `/console/{tenant_id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/team", web::get().to(show))
        .route("/team/invitations", web::post().to(invite))
        .route("/team/invitations/{invitation_id}/revoke", web::post().to(revoke))
        .route("/team/members/{user_id}/role", web::post().to(change_role))
        .route("/team/members/{user_id}/remove", web::post().to(remove));
}

async fn show(state: web::Data<AppState>, c: Console) -> Result<HttpResponse, ApiError> {
    let members: Vec<MemberResponse> = state.team.members(&c).await?.into_iter().map(Into::into).collect();
    let invitations: Vec<InvitationResponse> =
        state.team.invitations(&c).await?.into_iter().map(Into::into).collect();
    page(
        &c,
        "team",
        "Team",
        "team.html",
        context! {
            members, invitations,
            roles => Role::ALL.map(Role::as_str),
            me => c.principal.user_id.to_string(),
        },
    )
}

fn team_path(c: &Console) -> String {
    format!("{}/team", c.base())
}

async fn invite(state: web::Data<AppState>, c: Console, form: Form) -> Result<HttpResponse, ApiError> {
    let request: CreateInvitationRequest =
        from_json_value(json!({ "email": form.get("email"), "role": form.text("role") }))?;
    state.team.invite(&c, request.try_into_domain()?).await?;
    Ok(redirect(team_path(&c)))
}

async fn revoke(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let invitation = path.into_inner().1;
    second_id(&invitation, "invitation_id")?;
    state.team.revoke(&c, &InvitationId::from_string(invitation)).await?;
    Ok(redirect(team_path(&c)))
}

async fn change_role(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let user = path.into_inner().1;
    second_id(&user, "user_id")?;
    let request: ChangeRoleRequest = from_json_value(json!({ "role": form.text("role") }))?;
    state.team.change_role(&c, &UserId::from_string(user), request.try_into_domain()?).await?;
    Ok(redirect(team_path(&c)))
}

/// Removes a member; removing oneself is leaving, after which the tenant is not the caller's
/// and the console goes to their first one.
async fn remove(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let user = path.into_inner().1;
    second_id(&user, "user_id")?;
    let user = UserId::from_string(user);
    state.team.remove(&c, &user).await?;
    if user == c.principal.user_id {
        return Ok(redirect("/console"));
    }
    Ok(redirect(team_path(&c)))
}

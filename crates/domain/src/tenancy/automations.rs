//! What acts with a member's rights when they are not there, and the rule that makes it follow
//! their membership.
//!
//! A trigger, a schedule or an integration starts executions as the member who made it; a
//! webhook subscription sends the tenant's events to where its maker pointed it; an agent's tool
//! runs and an execution's steps act as whoever started them. None of them keeps rights its
//! maker has lost: each reads its maker's **current** membership and role when it acts (an
//! execution before every step, a tool before every call), and acts with that role, or not at
//! all. So removing a member, or demoting them below what an automation needs, pauses it in the
//! very transaction that changes the membership; the change lists what it paused (in its answer
//! and its event), and an owner or admin can take it over under their own name, after which it
//! acts with theirs.
//!
//! Nothing acts as "the tenant" with standing rights of its own. The one exception is a webhook
//! subscription made before makers were recorded: it has no maker to follow, only sends the
//! tenant's events where an owner or admin pointed it, and stays until one of them takes it over
//! or deletes it.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{Permission, Role};
use crate::ids::{TenantId, UserId};

crate::string_enum! {
    /// A kind of thing that acts with its maker's rights.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum AutomationKind {
        /// A workflow's trigger URL.
        Trigger => "trigger",
        /// A workflow's schedule.
        Schedule => "schedule",
        /// An inbound integration receiver.
        Integration => "integration",
        /// An outbound webhook subscription.
        WebhookSubscription => "webhook_subscription",
    }
    impl Serde;
}

impl AutomationKind {
    /// What its maker must still be allowed to do for it to act.
    pub fn needs(self) -> Permission {
        match self {
            Self::Trigger | Self::Schedule | Self::Integration => Permission::WorkflowsExecute,
            Self::WebhookSubscription => Permission::WebhooksWrite,
        }
    }

    /// Whether a maker whose role is now `role` (`None`: no longer a member) lets it act.
    pub fn acts_for(self, role: Option<Role>) -> bool {
        role.is_some_and(|r| r.grants(self.needs()))
    }

    /// The kinds a member's automations stop acting as when their role goes from `from` to
    /// `to` (`None`: removed): those `from` allowed and `to` does not.
    pub fn lost_between(from: Role, to: Option<Role>) -> Vec<Self> {
        Self::ALL.iter().copied().filter(|k| k.acts_for(Some(from)) && !k.acts_for(to)).collect()
    }
}

/// One automation, as a membership change lists what it paused and as the list of a member's
/// automations shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Automation {
    /// What it is.
    #[serde(rename = "type")]
    pub kind: AutomationKind,
    /// Its id (`trg_…`, `sch_…`, `int_…`, `whk_…`).
    pub id: String,
    /// The workflow it starts (triggers, schedules, integrations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// Its name (a schedule's: its cron expression; a subscription has none here: its URL may
    /// carry the receiver's secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The member it acts as (`None`: a subscription owned by the tenant).
    #[serde(default)]
    pub acts_as: Option<UserId>,
}

/// The current role of a tenant's members, as automations read it when they act.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait MemberRoles: Send + Sync {
    /// `user`'s role in `tenant` now; `None` when they are not a member.
    async fn role_of(&self, tenant: &TenantId, user: &UserId) -> anyhow::Result<Option<Role>>;
}

/// Why something that acts for a member may not act now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotEntitled {
    /// They are no longer a member.
    #[error("it acts as {0}, who is no longer a member of this tenant; an owner or admin can take it over")]
    Gone(UserId),
    /// Their role no longer allows it.
    #[error(
        "it acts as {user}, whose role ({role}) no longer allows {needs}; an owner or admin can take it over"
    )]
    Demoted {
        /// The member.
        user: UserId,
        /// Their role now.
        role: Role,
        /// What it needs.
        needs: Permission,
    },
}

/// `user`'s current role in `tenant`, provided it still allows `needs`.
///
/// # Errors
/// [`NotEntitled`] in an `Ok` when it does not; the port's failure as `Err`.
pub async fn current_role(
    members: &dyn MemberRoles,
    tenant: &TenantId,
    user: &UserId,
    needs: Permission,
) -> anyhow::Result<Result<Role, NotEntitled>> {
    Ok(match members.role_of(tenant, user).await? {
        None => Err(NotEntitled::Gone(user.clone())),
        Some(role) if !role.grants(needs) => Err(NotEntitled::Demoted { user: user.clone(), role, needs }),
        Some(role) => Ok(role),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removal_stops_everything_and_demotion_what_the_new_role_lacks() {
        use AutomationKind::*;
        assert_eq!(
            AutomationKind::lost_between(Role::Admin, None),
            [Trigger, Schedule, Integration, WebhookSubscription]
        );
        assert_eq!(AutomationKind::lost_between(Role::Member, None), [Trigger, Schedule, Integration]);
        assert_eq!(AutomationKind::lost_between(Role::Admin, Some(Role::Member)), [WebhookSubscription]);
        assert_eq!(
            AutomationKind::lost_between(Role::Member, Some(Role::Viewer)),
            [Trigger, Schedule, Integration]
        );
        assert!(
            AutomationKind::lost_between(Role::Viewer, Some(Role::Admin)).is_empty(),
            "a promotion stops nothing"
        );
    }

    #[tokio::test]
    async fn the_current_role_decides() {
        let mut members = MockMemberRoles::new();
        members.expect_role_of().returning(|_, user| {
            Ok(match user.as_str() {
                "usr_admin" => Some(Role::Admin),
                "usr_viewer" => Some(Role::Viewer),
                _ => None,
            })
        });
        let tenant = TenantId::from_string("ten_1");
        let check = |user: &str, needs| {
            let (members, tenant, user) = (&members, &tenant, UserId::from_string(user));
            async move { current_role(members, tenant, &user, needs).await.unwrap() }
        };
        assert_eq!(check("usr_admin", Permission::WebhooksWrite).await, Ok(Role::Admin));
        let demoted = check("usr_viewer", Permission::WorkflowsExecute).await.unwrap_err();
        assert!(
            demoted.to_string().contains("whose role (viewer) no longer allows workflows:execute"),
            "{demoted}"
        );
        let gone = check("usr_gone", Permission::WorkflowsExecute).await.unwrap_err();
        assert_eq!(gone, NotEntitled::Gone(UserId::from_string("usr_gone")));
    }
}

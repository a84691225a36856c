//! What acts as a tenant's members (triggers, schedules, integrations, webhook subscriptions;
//! see `agentry_domain::tenancy::Automation`): listed by a membership change inside its
//! transaction and by the list route, and taken over by an owner or admin; and the members'
//! current roles, which every automation reads when it acts.

use agentry_domain::ids::{TenantId, UserId};
use agentry_domain::tenancy::{MemberRoles, Role};
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::schema::memberships;
use crate::team::TeamStore;
use crate::types::parse_stored;

/// Inside a transaction or a read (`$conn` of either backend): the automations of the kinds
/// `$kinds` (`&[AutomationKind]`) in tenant `$tenant` (`&str`) acting as `$user`
/// (`Option<&str>`; `None`: every one), ordered by kind, then id.
macro_rules! automations_of {
    ($conn:expr, $tenant:expr, $user:expr, $kinds:expr) => {{
        use agentry_domain::ids::UserId;
        use agentry_domain::tenancy::{Automation, AutomationKind};
        use $crate::schema::{integrations, webhook_subscriptions, workflow_schedules, workflow_triggers};
        let (tenant, user): (&str, Option<&str>) = ($tenant, $user);
        let mut found: Vec<Automation> = Vec::new();
        let named = |kind, (id, workflow, name, acts_as): (String, String, String, String)| Automation {
            kind,
            id,
            workflow_id: Some(workflow),
            name: Some(name),
            acts_as: Some(UserId::from_string(acts_as)),
        };
        for kind in $kinds.iter().copied() {
            match kind {
                AutomationKind::Trigger => {
                    let query = workflow_triggers::table
                        .filter(workflow_triggers::tenant_id.eq(tenant))
                        .order(workflow_triggers::id)
                        .select((
                            workflow_triggers::id,
                            workflow_triggers::workflow_id,
                            workflow_triggers::name,
                            workflow_triggers::run_as_user_id,
                        ));
                    let rows: Vec<(String, String, String, String)> = match user {
                        Some(u) => query.filter(workflow_triggers::run_as_user_id.eq(u)).load($conn).await?,
                        None => query.load($conn).await?,
                    };
                    found.extend(rows.into_iter().map(|r| named(kind, r)));
                }
                AutomationKind::Schedule => {
                    // A schedule has no name: its cron expression stands for one.
                    let query = workflow_schedules::table
                        .filter(workflow_schedules::tenant_id.eq(tenant))
                        .order(workflow_schedules::id)
                        .select((
                            workflow_schedules::id,
                            workflow_schedules::workflow_id,
                            workflow_schedules::cron,
                            workflow_schedules::run_as_user_id,
                        ));
                    let rows: Vec<(String, String, String, String)> = match user {
                        Some(u) => query.filter(workflow_schedules::run_as_user_id.eq(u)).load($conn).await?,
                        None => query.load($conn).await?,
                    };
                    found.extend(rows.into_iter().map(|r| named(kind, r)));
                }
                AutomationKind::Integration => {
                    let query = integrations::table
                        .filter(integrations::tenant_id.eq(tenant))
                        .order(integrations::id)
                        .select((
                            integrations::id,
                            integrations::workflow_id,
                            integrations::name,
                            integrations::run_as_user_id,
                        ));
                    let rows: Vec<(String, String, String, String)> = match user {
                        Some(u) => query.filter(integrations::run_as_user_id.eq(u)).load($conn).await?,
                        None => query.load($conn).await?,
                    };
                    found.extend(rows.into_iter().map(|r| named(kind, r)));
                }
                AutomationKind::WebhookSubscription => {
                    // No URL: it may carry the receiver's own secret, and those who read this list
                    // (members, and the receivers of membership events) may not read
                    // subscriptions.
                    let query = webhook_subscriptions::table
                        .filter(webhook_subscriptions::tenant_id.eq(tenant))
                        .order(webhook_subscriptions::id)
                        .select((webhook_subscriptions::id, webhook_subscriptions::created_by));
                    let rows: Vec<(String, Option<String>)> = match user {
                        Some(u) => query.filter(webhook_subscriptions::created_by.eq(u)).load($conn).await?,
                        None => query.load($conn).await?,
                    };
                    found.extend(rows.into_iter().map(|(id, maker)| Automation {
                        kind,
                        id,
                        workflow_id: None,
                        name: None,
                        acts_as: maker.map(UserId::from_string),
                    }));
                }
            }
        }
        Ok::<Vec<Automation>, $crate::database::StoreError>(found)
    }};
}

/// Inside a transaction (`$conn` of either backend): every automation of tenant `$tenant`
/// (`&str`) acting as `$from` (`&str`) acts as `$to` (`&str`) with `$role` (`&str`) from now on.
macro_rules! take_over_automations {
    ($conn:expr, $tenant:expr, $from:expr, $to:expr, $role:expr) => {{
        use $crate::schema::{integrations, webhook_subscriptions, workflow_schedules, workflow_triggers};
        let (tenant, from, to, role): (&str, &str, &str, &str) = ($tenant, $from, $to, $role);
        diesel::update(
            workflow_triggers::table
                .filter(workflow_triggers::tenant_id.eq(tenant))
                .filter(workflow_triggers::run_as_user_id.eq(from)),
        )
        .set((workflow_triggers::run_as_user_id.eq(to), workflow_triggers::run_as_role.eq(role)))
        .execute($conn)
        .await?;
        diesel::update(
            workflow_schedules::table
                .filter(workflow_schedules::tenant_id.eq(tenant))
                .filter(workflow_schedules::run_as_user_id.eq(from)),
        )
        .set((workflow_schedules::run_as_user_id.eq(to), workflow_schedules::run_as_role.eq(role)))
        .execute($conn)
        .await?;
        diesel::update(
            integrations::table
                .filter(integrations::tenant_id.eq(tenant))
                .filter(integrations::run_as_user_id.eq(from)),
        )
        .set((integrations::run_as_user_id.eq(to), integrations::run_as_role.eq(role)))
        .execute($conn)
        .await?;
        diesel::update(
            webhook_subscriptions::table
                .filter(webhook_subscriptions::tenant_id.eq(tenant))
                .filter(webhook_subscriptions::created_by.eq(from)),
        )
        .set(webhook_subscriptions::created_by.eq(to))
        .execute($conn)
        .await?;
        Ok::<(), $crate::database::StoreError>(())
    }};
}

#[async_trait]
impl MemberRoles for TeamStore {
    async fn role_of(&self, tenant: &TenantId, user: &UserId) -> anyhow::Result<Option<Role>> {
        let role: Option<String> = with_conn!(self.db(), conn => memberships::table
            .filter(memberships::tenant_id.eq(tenant.as_str()))
            .filter(memberships::user_id.eq(user.as_str()))
            .select(memberships::role)
            .first(conn)
            .await
            .optional())?;
        role.map(|r| parse_stored(&r, "role")).transpose()
    }
}

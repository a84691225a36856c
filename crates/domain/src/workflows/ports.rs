//! What workflows need from outside: storage of workflows, triggers and integrations.

use async_trait::async_trait;

use super::model::{Integration, Trigger, Workflow};
use crate::ids::{IntegrationId, TenantId, TriggerId, WorkflowId};
use crate::pagination::Page;
use crate::tenancy::Plan;

/// Workflows, scoped by tenant in every operation.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait WorkflowRepository: Send + Sync {
    /// Stores a new workflow.
    async fn create(&self, workflow: &Workflow) -> anyhow::Result<()>;

    /// One workflow of `tenant`.
    async fn get(&self, tenant: &TenantId, id: &WorkflowId) -> anyhow::Result<Option<Workflow>>;

    /// A page of `tenant`'s workflows, oldest first, with how many there are in all.
    async fn list(&self, tenant: &TenantId, page: Page) -> anyhow::Result<(Vec<Workflow>, u64)>;

    /// Replaces a stored workflow; `false` when it no longer exists.
    async fn update(&self, workflow: &Workflow) -> anyhow::Result<bool>;

    /// Deletes a workflow, and with it its triggers and integrations; `false` when there was
    /// none.
    async fn delete(&self, tenant: &TenantId, id: &WorkflowId) -> anyhow::Result<bool>;
}

/// A trigger found by its URL's path, with what a call to it needs: the workflow it executes
/// and its tenant's plan (which sets the rate limit the call counts against). Read together,
/// in one look-up.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerTarget {
    /// The trigger.
    pub trigger: Trigger,
    /// Its workflow.
    pub workflow: Workflow,
    /// Its tenant's plan.
    pub plan: Plan,
}

/// Webhook triggers: scoped by tenant, except the look-up by path that an (unauthenticated)
/// call to a trigger URL starts with.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait TriggerRepository: Send + Sync {
    /// Stores a new trigger; `false` when its workflow no longer exists (deleted meanwhile).
    /// MUST refuse a second trigger with the same path.
    async fn create(&self, trigger: &Trigger) -> anyhow::Result<bool>;

    /// The triggers of one workflow of `tenant`, oldest first.
    async fn list(&self, tenant: &TenantId, workflow: &WorkflowId) -> anyhow::Result<Vec<Trigger>>;

    /// Deletes a trigger of one workflow of `tenant`; `false` when there was none.
    async fn delete(&self, tenant: &TenantId, workflow: &WorkflowId, id: &TriggerId) -> anyhow::Result<bool>;

    /// The trigger whose URL has `path`, of any tenant, with its workflow and plan.
    async fn find_by_path(&self, path: &str) -> anyhow::Result<Option<TriggerTarget>>;

    /// Adds one to the trigger's `trigger_count` and returns the new count. MUST be one atomic
    /// increment in the database (`SET trigger_count = trigger_count + 1`), so concurrent calls
    /// on any number of instances are all counted. `None` when the trigger is gone.
    async fn count_call(&self, id: &TriggerId) -> anyhow::Result<Option<u64>>;
}

/// An integration found by id for its receiver, with its workflow and its tenant's plan.
#[derive(Debug, Clone, PartialEq)]
pub struct IntegrationTarget {
    /// The integration.
    pub integration: Integration,
    /// Its workflow.
    pub workflow: Workflow,
    /// Its tenant's plan.
    pub plan: Plan,
}

/// Inbound integrations: scoped by tenant, except the look-up by id that an (unauthenticated)
/// delivery to a receiver starts with.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait IntegrationRepository: Send + Sync {
    /// Stores a new integration; `false` when its workflow no longer exists (deleted
    /// meanwhile).
    async fn create(&self, integration: &Integration) -> anyhow::Result<bool>;

    /// One integration of `tenant`.
    async fn get(&self, tenant: &TenantId, id: &IntegrationId) -> anyhow::Result<Option<Integration>>;

    /// The integrations of `tenant`, oldest first.
    async fn list(&self, tenant: &TenantId) -> anyhow::Result<Vec<Integration>>;

    /// Deletes an integration of `tenant`; `false` when there was none.
    async fn delete(&self, tenant: &TenantId, id: &IntegrationId) -> anyhow::Result<bool>;

    /// The integration with this id, of any tenant, with its workflow and plan.
    async fn find_target(&self, id: &IntegrationId) -> anyhow::Result<Option<IntegrationTarget>>;
}

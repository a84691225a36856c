//! What workflows need from outside: storage.

use async_trait::async_trait;

use super::model::Workflow;
use crate::ids::{TenantId, WorkflowId};
use crate::pagination::Page;

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

    /// Deletes a workflow; `false` when there was none.
    async fn delete(&self, tenant: &TenantId, id: &WorkflowId) -> anyhow::Result<bool>;
}

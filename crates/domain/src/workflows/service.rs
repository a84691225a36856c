//! The workflow service: saving workflows, with their steps validated when saved.

use std::sync::Arc;

use serde_json::Value;

use super::model::{Workflow, check_description, check_name};
use super::ports::WorkflowRepository;
use super::steps::validate_steps;
use crate::ids::{IdGenerator, WorkflowId};
use crate::pagination::Page;
use crate::patch::Patch;
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::validation::{ValidationErrors, Validator};

/// Why a workflow operation failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    /// The caller lacks the permission.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// The request is invalid; every problem is listed.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No such workflow in the caller's tenant.
    #[error("no such workflow")]
    NotFound,
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// A workflow to create, as the request gave it.
#[derive(Debug, Clone)]
pub struct NewWorkflow {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// The steps, not yet validated.
    pub steps: Value,
    /// Whether it may be executed (default: yes).
    pub is_active: Option<bool>,
}

/// A partial update: absent fields keep their value.
#[derive(Debug, Clone, Default)]
pub struct WorkflowPatch {
    /// A new name.
    pub name: Option<String>,
    /// A new description, or `null` to clear it.
    pub description: Patch<String>,
    /// New steps, validated as at creation.
    pub steps: Option<Value>,
    /// Whether it may be executed.
    pub is_active: Option<bool>,
}

/// What the service needs.
#[derive(Clone)]
#[allow(missing_debug_implementations)] // trait objects
pub struct WorkflowServiceDeps {
    /// Storage.
    pub workflows: Arc<dyn WorkflowRepository>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Ids.
    pub ids: Arc<dyn IdGenerator>,
}

/// Workflows for requests.
#[derive(Clone)]
pub struct WorkflowService {
    deps: WorkflowServiceDeps,
}

impl std::fmt::Debug for WorkflowService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkflowService").finish_non_exhaustive()
    }
}

impl WorkflowService {
    /// A service over its dependencies.
    pub fn new(deps: WorkflowServiceDeps) -> Self {
        Self { deps }
    }

    /// Creates a workflow after validating its name, description and steps.
    ///
    /// # Errors
    /// [`WorkflowError::Forbidden`], [`WorkflowError::Invalid`].
    pub async fn create(&self, caller: &Principal, new: NewWorkflow) -> Result<Workflow, WorkflowError> {
        caller.require(Permission::WorkflowsWrite)?;
        let mut v = Validator::new();
        let name = v.check("name", check_name(&new.name));
        let description = v.optional("description", new.description, check_description);
        let steps = v.check_all(validate_steps(&new.steps));
        let (name, description, steps) = v.finish((name, description, steps))?;
        let now = self.deps.clock.now();
        let workflow = Workflow {
            id: WorkflowId::generate(self.deps.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            name,
            description: description.flatten(),
            steps,
            is_active: new.is_active.unwrap_or(true),
            created_at: now,
            updated_at: now,
        };
        self.deps.workflows.create(&workflow).await?;
        Ok(workflow)
    }

    /// One workflow of the caller's tenant.
    ///
    /// # Errors
    /// [`WorkflowError::NotFound`], [`WorkflowError::Forbidden`].
    pub async fn get(&self, caller: &Principal, id: &WorkflowId) -> Result<Workflow, WorkflowError> {
        caller.require(Permission::WorkflowsRead)?;
        self.deps.workflows.get(&caller.tenant_id, id).await?.ok_or(WorkflowError::NotFound)
    }

    /// A page of the caller's tenant's workflows and their total.
    ///
    /// # Errors
    /// [`WorkflowError::Forbidden`].
    pub async fn list(&self, caller: &Principal, page: Page) -> Result<(Vec<Workflow>, u64), WorkflowError> {
        caller.require(Permission::WorkflowsRead)?;
        Ok(self.deps.workflows.list(&caller.tenant_id, page).await?)
    }

    /// Applies a partial update; changed steps are validated as at creation.
    ///
    /// # Errors
    /// [`WorkflowError::NotFound`], [`WorkflowError::Forbidden`], [`WorkflowError::Invalid`].
    pub async fn update(
        &self,
        caller: &Principal,
        id: &WorkflowId,
        patch: WorkflowPatch,
    ) -> Result<Workflow, WorkflowError> {
        caller.require(Permission::WorkflowsWrite)?;
        let mut workflow =
            self.deps.workflows.get(&caller.tenant_id, id).await?.ok_or(WorkflowError::NotFound)?;
        let mut v = Validator::new();
        let name = v.optional("name", patch.name, |n| check_name(&n));
        // `None`: keep; `Some(d)`: set (a blank description clears it as null does).
        let description = match patch.description {
            Patch::Absent => v.check("description", Ok(None)),
            Patch::Null => v.check("description", Ok(Some(None))),
            Patch::Value(d) => v.optional("description", Some(d), check_description),
        };
        let steps = match &patch.steps {
            Some(raw) => v.check_all(validate_steps(raw).map(Some)),
            None => v.check("steps", Ok(None)),
        };
        let (name, description, steps) = v.finish((name, description, steps))?;
        workflow.name = name.unwrap_or(workflow.name);
        workflow.description = description.unwrap_or(workflow.description);
        workflow.steps = steps.unwrap_or(workflow.steps);
        workflow.is_active = patch.is_active.unwrap_or(workflow.is_active);
        workflow.updated_at = self.deps.clock.now();
        if self.deps.workflows.update(&workflow).await? { Ok(workflow) } else { Err(WorkflowError::NotFound) }
    }

    /// Deletes a workflow.
    ///
    /// # Errors
    /// [`WorkflowError::NotFound`], [`WorkflowError::Forbidden`].
    pub async fn delete(&self, caller: &Principal, id: &WorkflowId) -> Result<(), WorkflowError> {
        caller.require(Permission::WorkflowsWrite)?;
        if self.deps.workflows.delete(&caller.tenant_id, id).await? {
            Ok(())
        } else {
            Err(WorkflowError::NotFound)
        }
    }
}

#[cfg(test)]
mod tests;

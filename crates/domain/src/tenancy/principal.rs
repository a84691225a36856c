//! The caller of a request as every service sees it: a [`Principal`] acting in one tenant with
//! one role and, for an API key, its scopes; and [`Forbidden`], the refusal of an action it
//! lacks the right to. Identity resolves credentials to a principal; every other context only
//! asks it what it may do.

use super::{Permission, Plan, Role, Scope};
use crate::ids::{ApiKeyId, TenantId, UserId, WorkflowId};

/// How the caller proved who they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A user's JWT access token: the user's role applies in full.
    AccessToken,
    /// An API key: its scopes, intersected with its user's role.
    ApiKey {
        /// The key.
        key_id: ApiKeyId,
        /// What the key may do.
        scopes: Vec<Scope>,
    },
}

/// The caller of a request, in the tenant the request acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The user (for a key: the user who made it).
    pub user_id: UserId,
    /// The tenant the request acts on.
    pub tenant_id: TenantId,
    /// The tenant's plan.
    pub plan: Plan,
    /// The user's role in that tenant.
    pub role: Role,
    /// The credential presented.
    pub credential: Credential,
    /// The executions this call is made from (empty for a request): what an agent's
    /// `run_workflow` tool checks before it starts one more.
    pub chain: CallChain,
}

/// The workflows of the executions a call is made from, outermost first: empty for a request;
/// for the steps of an execution, the workflows of the executions above it and its own. An
/// agent's `run_workflow` tool, called from an execution's `agent_chat` step, starts its
/// execution one level deeper: it is refused when its workflow is already in the chain (a
/// cycle, which would otherwise start executions until the credits ran out) or when the new
/// execution would be nested more than [`CallChain::MAX_NESTING`] deep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallChain(Vec<WorkflowId>);

/// Why an execution may not be started from within a chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Nesting {
    /// The workflow is already running further up the chain.
    #[error(
        "the workflow {workflow} is already running in this chain ({path}): an agent may not start it again from inside it"
    )]
    Cycle {
        /// The workflow asked for.
        workflow: WorkflowId,
        /// The chain, `wf_a → wf_b`.
        path: String,
    },
    /// The new execution would be nested deeper than allowed.
    #[error("executions may be nested at most {max} deep; this chain ({path}) is already {depth} deep")]
    TooDeep {
        /// The deepest nesting allowed.
        max: usize,
        /// The nesting the new execution would have.
        depth: usize,
        /// The chain, `wf_a → wf_b`.
        path: String,
    },
}

impl CallChain {
    /// How deep executions may be nested below the one a request, trigger or schedule started.
    pub const MAX_NESTING: usize = 5;

    /// A chain of these workflows, outermost first.
    pub fn new(workflows: Vec<WorkflowId>) -> Self {
        Self(workflows)
    }

    /// The workflows, outermost first.
    pub fn workflows(&self) -> &[WorkflowId] {
        &self.0
    }

    /// The chain the steps of an execution of `workflow` run in, when this is the chain above it.
    #[must_use]
    pub fn then(&self, workflow: &WorkflowId) -> Self {
        let mut workflows = self.0.clone();
        workflows.push(workflow.clone());
        Self(workflows)
    }

    /// Whether an execution of `workflow` may start from this chain (which is then the chain
    /// above it).
    ///
    /// # Errors
    /// [`Nesting::Cycle`] when `workflow` is in the chain; [`Nesting::TooDeep`] when the new
    /// execution would be nested more than [`Self::MAX_NESTING`] deep.
    pub fn admits(&self, workflow: &WorkflowId) -> Result<(), Nesting> {
        let path = || self.0.iter().map(WorkflowId::as_str).collect::<Vec<_>>().join(" → ");
        if self.0.contains(workflow) {
            return Err(Nesting::Cycle { workflow: workflow.clone(), path: path() });
        }
        // An execution with `n` workflows above it is nested `n` deep.
        if self.0.len() > Self::MAX_NESTING {
            return Err(Nesting::TooDeep { max: Self::MAX_NESTING, depth: self.0.len(), path: path() });
        }
        Ok(())
    }
}

/// The caller lacks a right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Forbidden(pub String);

#[cfg(test)]
impl Principal {
    /// `usr_1` of `ten_1` (Starter) signed in with an access token, in `role`: whom the
    /// domain's tests act as.
    pub(crate) fn test(role: Role) -> Self {
        Self {
            user_id: UserId::from_string("usr_1"),
            tenant_id: TenantId::from_string("ten_1"),
            plan: Plan::Starter,
            role,
            credential: Credential::AccessToken,
            chain: Default::default(),
        }
    }
}

impl Principal {
    /// The same caller, acting from within `chain` (the steps of an execution).
    #[must_use]
    pub fn within(mut self, chain: CallChain) -> Self {
        self.chain = chain;
        self
    }

    /// Whether the caller may do what `permission` names: the role must grant it and, for a
    /// key, one of the key's scopes must name it.
    pub fn can(&self, permission: Permission) -> bool {
        let delegated = match &self.credential {
            Credential::AccessToken => true,
            Credential::ApiKey { scopes, .. } => scopes.iter().any(|s| s.permission() == permission),
        };
        self.role.grants(permission) && delegated
    }

    /// [`Principal::can`] as a result.
    ///
    /// # Errors
    /// [`Forbidden`] naming the missing permission.
    pub fn require(&self, permission: Permission) -> Result<(), Forbidden> {
        if self.can(permission) {
            Ok(())
        } else {
            Err(Forbidden(format!("this action needs the {permission} permission")))
        }
    }

    /// Some actions (managing API keys) are reserved to a user's own session.
    ///
    /// # Errors
    /// [`Forbidden`] when the caller used an API key.
    pub fn require_user_session(&self) -> Result<(), Forbidden> {
        match self.credential {
            Credential::AccessToken => Ok(()),
            Credential::ApiKey { .. } => {
                Err(Forbidden("API keys are managed with a user access token, not with an API key".into()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(ids: &[&str]) -> CallChain {
        CallChain::new(ids.iter().map(|id| WorkflowId::from_string(*id)).collect())
    }

    #[test]
    fn a_workflow_already_in_the_chain_is_a_cycle() {
        let above = chain(&["wf_a", "wf_b"]);
        let refused = above.admits(&WorkflowId::from_string("wf_a")).unwrap_err();
        assert!(matches!(refused, Nesting::Cycle { .. }));
        assert!(refused.to_string().contains("wf_a → wf_b"), "{refused}");
        assert!(above.admits(&WorkflowId::from_string("wf_c")).is_ok());
        assert!(CallChain::default().admits(&WorkflowId::from_string("wf_a")).is_ok(), "a request's");
    }

    #[test]
    fn nesting_stops_past_five() {
        // An execution with five workflows above it is nested five deep: allowed; six: refused.
        let five = chain(&["wf_1", "wf_2", "wf_3", "wf_4", "wf_5"]);
        assert!(five.admits(&WorkflowId::from_string("wf_6")).is_ok());
        let six = five.then(&WorkflowId::from_string("wf_6"));
        let refused = six.admits(&WorkflowId::from_string("wf_7")).unwrap_err();
        assert_eq!(
            refused,
            Nesting::TooDeep {
                max: 5, depth: 6, path: "wf_1 → wf_2 → wf_3 → wf_4 → wf_5 → wf_6".into()
            }
        );
    }
}

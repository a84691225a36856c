//! The agent service: agents' lifecycle (chat is `chat_service`).

use std::sync::Arc;

use super::knowledge::{KnowledgeRetrieval, NoKnowledge};
use super::model::{Agent, AgentChanges, NewAgent};
use super::ports::AgentRepository;
use crate::events::{Event, EventPayload};
use crate::ids::{AgentId, IdGenerator};
use crate::pagination::Page;
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors};

/// Why an agent operation failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The caller lacks the right.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// Invalid input.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No such agent in the caller's tenant.
    #[error("no such agent")]
    NotFound,
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// Creates, reads, changes and deletes agents.
#[derive(Clone)]
pub struct AgentService {
    agents: Arc<dyn AgentRepository>,
    /// Checks that the knowledge bases an agent names are its tenant's.
    knowledge: Arc<dyn KnowledgeRetrieval>,
    ids: Arc<dyn IdGenerator>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for AgentService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentService { .. }")
    }
}

impl AgentService {
    /// A service over `agents`.
    pub fn new(agents: Arc<dyn AgentRepository>, ids: Arc<dyn IdGenerator>, clock: Arc<dyn Clock>) -> Self {
        Self { agents, knowledge: Arc::new(NoKnowledge), ids, clock }
    }

    /// This service, checking agents' knowledge bases with `knowledge` (without it, an agent
    /// can name none).
    #[must_use]
    pub fn with_knowledge(mut self, knowledge: Arc<dyn KnowledgeRetrieval>) -> Self {
        self.knowledge = knowledge;
        self
    }

    /// Refuses an agent whose `config.knowledge_bases` names a base its tenant does not have.
    async fn check_knowledge(&self, agent: &Agent) -> Result<(), AgentError> {
        let bases = &agent.config.knowledge_bases;
        if bases.is_empty() {
            return Ok(());
        }
        let unknown = self.knowledge.unknown_bases(&agent.tenant_id, bases).await?;
        let errors: Vec<FieldError> = bases
            .iter()
            .enumerate()
            .filter(|(_, b)| unknown.contains(b))
            .map(|(i, b)| {
                FieldError::new(
                    format!("config.knowledge_bases[{i}]"),
                    FieldErrorKind::InvalidValue,
                    format!("there is no knowledge base {b} in your tenant"),
                )
            })
            .collect();
        if errors.is_empty() { Ok(()) } else { Err(ValidationErrors(errors).into()) }
    }

    /// Creates an agent in the caller's tenant and announces it (`agent.created`).
    ///
    /// # Errors
    /// [`AgentError::Forbidden`] without `agents:write`.
    pub async fn create(&self, caller: &Principal, new: NewAgent) -> Result<Agent, AgentError> {
        caller.require(Permission::AgentsWrite)?;
        let now = self.clock.now();
        let agent = Agent {
            id: AgentId::generate(self.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            name: new.name,
            agent_type: new.agent_type,
            status: new.status,
            description: new.description,
            memory_types: new.memory_types,
            config: new.config,
            created_at: now,
            updated_at: now,
        };
        self.check_knowledge(&agent).await?;
        let event =
            Event::new(self.ids.as_ref(), &agent.tenant_id, EventPayload::AgentCreated(agent.to_data()), now);
        self.agents.create(&agent, &event).await?;
        Ok(agent)
    }

    /// One agent of the caller's tenant.
    ///
    /// # Errors
    /// [`AgentError::NotFound`] when absent or another tenant's.
    pub async fn get(&self, caller: &Principal, id: &AgentId) -> Result<Agent, AgentError> {
        caller.require(Permission::AgentsRead)?;
        self.agents.get(&caller.tenant_id, id).await?.ok_or(AgentError::NotFound)
    }

    /// A page of the tenant's agents and their total.
    ///
    /// # Errors
    /// [`AgentError::Forbidden`] without `agents:read`.
    pub async fn list(&self, caller: &Principal, page: Page) -> Result<(Vec<Agent>, u64), AgentError> {
        caller.require(Permission::AgentsRead)?;
        Ok(self.agents.list(&caller.tenant_id, page).await?)
    }

    /// Every agent of the tenant, oldest first, read a page at a time (the OpenAI-compatible
    /// `models` list and `model` names: a tenant has tens of agents, not thousands).
    ///
    /// # Errors
    /// [`AgentError::Forbidden`] without `agents:read`.
    pub async fn all(&self, caller: &Principal) -> Result<Vec<Agent>, AgentError> {
        caller.require(Permission::AgentsRead)?;
        self.all_of_tenant(caller).await
    }

    /// Every agent of the caller's tenant, without a permission check of its own.
    async fn all_of_tenant(&self, caller: &Principal) -> Result<Vec<Agent>, AgentError> {
        let mut all = Vec::new();
        for page in 1.. {
            let (agents, total) =
                self.agents.list(&caller.tenant_id, Page { page, per_page: Page::MAX_PER_PAGE }).await?;
            let last = agents.len() < Page::MAX_PER_PAGE as usize;
            all.extend(agents);
            if last || all.len() as u64 >= total {
                break;
            }
        }
        Ok(all)
    }

    /// The agent an OpenAI-style `model` names: its id, or `agent:<name>` (the oldest agent of
    /// that name).
    ///
    /// # Errors
    /// [`AgentError::NotFound`] when none is the caller's.
    pub async fn by_model(&self, caller: &Principal, model: &str) -> Result<Agent, AgentError> {
        // Naming the model is part of chatting with it: the chat's permission (`agents:write`,
        // as `/agents/{id}/chat` asks), not the list's.
        caller.require(Permission::AgentsWrite)?;
        match model.strip_prefix("agent:") {
            Some(name) => {
                let all = self.all_of_tenant(caller).await?;
                all.into_iter().find(|a| a.name.as_str() == name).ok_or(AgentError::NotFound)
            }
            None => self
                .agents
                .get(&caller.tenant_id, &AgentId::from_string(model))
                .await?
                .ok_or(AgentError::NotFound),
        }
    }

    /// Applies a partial update and announces it (`agent.updated`).
    ///
    /// # Errors
    /// [`AgentError::NotFound`], [`AgentError::Forbidden`].
    pub async fn update(
        &self,
        caller: &Principal,
        id: &AgentId,
        changes: AgentChanges,
    ) -> Result<Agent, AgentError> {
        caller.require(Permission::AgentsWrite)?;
        let current = self.agents.get(&caller.tenant_id, id).await?.ok_or(AgentError::NotFound)?;
        let now = self.clock.now();
        let agent = changes.apply(&current, now);
        if agent.config.knowledge_bases != current.config.knowledge_bases {
            self.check_knowledge(&agent).await?;
        }
        let payload = EventPayload::AgentUpdated {
            agent: agent.to_data(),
            changed: AgentChanges::changed_fields(&current, &agent),
        };
        let event = Event::new(self.ids.as_ref(), &agent.tenant_id, payload, now);
        if self.agents.update(&agent, &event).await? { Ok(agent) } else { Err(AgentError::NotFound) }
    }

    /// Deletes an agent with its conversations and memory.
    ///
    /// # Errors
    /// [`AgentError::NotFound`], [`AgentError::Forbidden`].
    pub async fn delete(&self, caller: &Principal, id: &AgentId) -> Result<(), AgentError> {
        caller.require(Permission::AgentsWrite)?;
        if self.agents.delete(&caller.tenant_id, id).await? { Ok(()) } else { Err(AgentError::NotFound) }
    }
}

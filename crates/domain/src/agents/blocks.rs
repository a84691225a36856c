//! Core memory blocks (Letta's): labelled texts always in an agent's context, in a fixed section
//! of its system prompt. Its owners set them through the API; the agent edits them itself with
//! the `core_memory` tool (append, replace). Every change is a version, and a block never holds
//! more than its limit: an edit past it is refused, for a tool as an error the model reads.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::ports::AgentRepository;
use crate::ids::{AgentId, TenantId};
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::validation::{
    FieldError, FieldErrorKind, TextKind, ValidationErrors, check_long_text, check_text,
};

pub mod tool;

/// A block's limit when its owner sets none, in characters.
pub const DEFAULT_BLOCK_LIMIT: u32 = 2_000;
/// The highest limit a block may have, in characters.
pub const MAX_BLOCK_LIMIT: u32 = 20_000;
/// Most blocks of one agent.
pub const MAX_BLOCKS: usize = 20;
/// Most characters of a block's description.
pub const MAX_BLOCK_DESCRIPTION_CHARS: usize = 500;
/// How often a change that lost a race with another is tried again.
const CONFLICT_RETRIES: usize = 3;

/// One block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryBlock {
    /// The tenant.
    pub tenant_id: TenantId,
    /// The agent.
    pub agent_id: AgentId,
    /// Its label, unique per agent: `human`, `persona`, ….
    pub label: String,
    /// Its text.
    pub value: String,
    /// What it is for, as the agent is told.
    pub description: Option<String>,
    /// Most characters of its value.
    pub limit: u32,
    /// Its version, from 1; every change adds one.
    pub version: u32,
    /// When it was first set.
    pub created_at: DateTime<Utc>,
    /// Its last change.
    pub updated_at: DateTime<Utc>,
}

crate::string_enum! {
    /// What a version of a block changed.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum BlockChange {
        /// Set whole (through the API).
        Set => "set",
        /// Text appended (by the agent).
        Appended => "appended",
        /// A passage replaced (by the agent).
        Replaced => "replaced",
        /// Deleted.
        Deleted => "deleted",
    }
    impl FromStr(field = "change");
}

crate::string_enum! {
    /// Who made a change.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum BlockActor {
        /// A user or key, through the API.
        Api => "api",
        /// The agent, through the `core_memory` tool.
        Agent => "agent",
    }
    impl FromStr(field = "actor");
}

/// One version of a block, as `GET …/memory-blocks/{label}/history` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockVersion {
    /// From 1, in order.
    pub version: u32,
    /// The text after the change (empty for a deletion).
    pub value: String,
    /// What changed.
    pub change: BlockChange,
    /// Who changed it.
    pub actor: BlockActor,
    /// When.
    pub at: DateTime<Utc>,
}

/// Where blocks are kept.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait MemoryBlockRepository: Send + Sync {
    /// The agent's blocks, by label.
    async fn list(&self, tenant: &TenantId, agent: &AgentId) -> anyhow::Result<Vec<MemoryBlock>>;

    /// Writes `block` (its `version` the next one) with its history version, if the stored
    /// block's version is still `block.version - 1` (none stored: `block.version` is 1 past the
    /// last version recorded); `false`, writing nothing, when another change came first.
    async fn save(&self, block: &MemoryBlock, change: BlockChange, actor: BlockActor)
    -> anyhow::Result<bool>;

    /// Deletes the block at its `version`, recording the deletion as `version + 1`; `false`
    /// when it is gone or changed meanwhile.
    async fn delete(&self, block: &MemoryBlock, at: DateTime<Utc>) -> anyhow::Result<bool>;

    /// The last version recorded for `label` (0: none), a deleted block's included.
    async fn last_version(&self, tenant: &TenantId, agent: &AgentId, label: &str) -> anyhow::Result<u32>;

    /// A block's versions, oldest first.
    async fn history(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        label: &str,
    ) -> anyhow::Result<Vec<BlockVersion>>;
}

/// No blocks, and none kept: for a chat without core memory (tests, tools).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoBlocks;

#[async_trait]
impl MemoryBlockRepository for NoBlocks {
    async fn list(&self, _: &TenantId, _: &AgentId) -> anyhow::Result<Vec<MemoryBlock>> {
        Ok(Vec::new())
    }

    async fn save(&self, _: &MemoryBlock, _: BlockChange, _: BlockActor) -> anyhow::Result<bool> {
        Ok(false)
    }

    async fn delete(&self, _: &MemoryBlock, _: DateTime<Utc>) -> anyhow::Result<bool> {
        Ok(false)
    }

    async fn last_version(&self, _: &TenantId, _: &AgentId, _: &str) -> anyhow::Result<u32> {
        Ok(0)
    }

    async fn history(&self, _: &TenantId, _: &AgentId, _: &str) -> anyhow::Result<Vec<BlockVersion>> {
        Ok(Vec::new())
    }
}

/// Why a block operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    /// The caller lacks the right.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// Invalid input.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No such agent in the caller's tenant.
    #[error("no such agent")]
    AgentNotFound,
    /// The agent has no block of that label.
    #[error("the agent has no memory block {0:?}")]
    BlockNotFound(String),
    /// The change would take the block past its limit.
    #[error("the block {label:?} would hold {chars} characters, past its limit of {limit}")]
    OverLimit {
        /// The block.
        label: String,
        /// How long it would be.
        chars: usize,
        /// Its limit.
        limit: u32,
    },
    /// The passage to replace is not in the block.
    #[error("the block {0:?} does not contain the text to replace")]
    TextNotFound(String),
    /// Other changes kept coming first.
    #[error("the block changed meanwhile; try again")]
    Conflict,
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// A block as its owner sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockInput {
    /// Its text.
    pub value: String,
    /// What it is for.
    pub description: Option<String>,
    /// Most characters, 1–20,000 (default 2,000).
    pub limit: Option<u32>,
}

/// Checks a block's label: 1–64 lowercase letters, digits or `_`.
///
/// # Errors
/// A [`FieldError`] naming `label`.
pub fn block_label(raw: &str) -> Result<String, FieldError> {
    let ok = (1..=64).contains(&raw.len())
        && raw.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(raw.to_owned())
    } else {
        Err(FieldError::new(
            "label",
            FieldErrorKind::InvalidValue,
            "a label is 1–64 lowercase letters, digits or _",
        ))
    }
}

impl BlockInput {
    /// Checks the input: the limit in range, the description short, the value within the
    /// limit (tabs and line breaks allowed).
    ///
    /// # Errors
    /// Every refused field.
    pub fn check(&self) -> Result<u32, ValidationErrors> {
        let mut errors = Vec::new();
        let limit = self.limit.unwrap_or(DEFAULT_BLOCK_LIMIT);
        if !(1..=MAX_BLOCK_LIMIT).contains(&limit) {
            errors.push(FieldError::new(
                "limit",
                FieldErrorKind::OutOfRange,
                format!("limit must be between 1 and {MAX_BLOCK_LIMIT} characters"),
            ));
        }
        if let Some(d) = &self.description
            && let Err(e) = check_long_text(d, 0, MAX_BLOCK_DESCRIPTION_CHARS, "description")
        {
            errors.push(e);
        }
        if let Err(e) = check_text(&self.value, "value", TextKind::MultiLine) {
            errors.push(e);
        } else if self.value.chars().count() > limit as usize {
            errors.push(FieldError::new(
                "value",
                FieldErrorKind::TooLong,
                format!(
                    "value holds {} characters, past the block's limit of {limit}",
                    self.value.chars().count()
                ),
            ));
        }
        if errors.is_empty() { Ok(limit) } else { Err(ValidationErrors(errors)) }
    }
}

/// The agents' core memory blocks.
#[derive(Clone)]
pub struct MemoryBlocks {
    blocks: Arc<dyn MemoryBlockRepository>,
    agents: Arc<dyn AgentRepository>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for MemoryBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemoryBlocks { .. }")
    }
}

impl MemoryBlocks {
    /// The service over `blocks`, checking agents in `agents`.
    pub fn new(
        blocks: Arc<dyn MemoryBlockRepository>,
        agents: Arc<dyn AgentRepository>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self { blocks, agents, clock }
    }

    /// The store, for chat's prompt.
    pub fn repository(&self) -> Arc<dyn MemoryBlockRepository> {
        self.blocks.clone()
    }

    async fn agent(&self, caller: &Principal, agent: &AgentId) -> Result<(), BlockError> {
        self.agents.get(&caller.tenant_id, agent).await?.map(|_| ()).ok_or(BlockError::AgentNotFound)
    }

    /// The agent's blocks.
    ///
    /// # Errors
    /// [`BlockError::Forbidden`] without `agents:read`, [`BlockError::AgentNotFound`].
    pub async fn list(&self, caller: &Principal, agent: &AgentId) -> Result<Vec<MemoryBlock>, BlockError> {
        caller.require(Permission::AgentsRead)?;
        self.agent(caller, agent).await?;
        Ok(self.blocks.list(&caller.tenant_id, agent).await?)
    }

    /// Sets block `label` whole, creating it (at most [`MAX_BLOCKS`] per agent); whether it
    /// was created.
    ///
    /// # Errors
    /// [`BlockError::Forbidden`] without `agents:write`, [`BlockError::AgentNotFound`],
    /// [`BlockError::Invalid`].
    pub async fn put(
        &self,
        caller: &Principal,
        agent: &AgentId,
        label: &str,
        input: BlockInput,
    ) -> Result<(MemoryBlock, bool), BlockError> {
        caller.require(Permission::AgentsWrite)?;
        let label = block_label(label).map_err(|e| ValidationErrors(vec![e]))?;
        let limit = input.check()?;
        self.agent(caller, agent).await?;
        let tenant = &caller.tenant_id;
        for _ in 0..CONFLICT_RETRIES {
            let now = self.clock.now();
            let blocks = self.blocks.list(tenant, agent).await?;
            let current = blocks.iter().find(|b| b.label == label);
            if current.is_none() && blocks.len() >= MAX_BLOCKS {
                return Err(ValidationErrors(vec![FieldError::new(
                    "label",
                    FieldErrorKind::InvalidValue,
                    format!("an agent has at most {MAX_BLOCKS} memory blocks"),
                )])
                .into());
            }
            let next = match current {
                Some(b) => MemoryBlock {
                    value: input.value.clone(),
                    description: input.description.clone(),
                    limit,
                    version: b.version + 1,
                    updated_at: now,
                    ..b.clone()
                },
                None => MemoryBlock {
                    tenant_id: tenant.clone(),
                    agent_id: agent.clone(),
                    label: label.clone(),
                    value: input.value.clone(),
                    description: input.description.clone(),
                    limit,
                    version: self.blocks.last_version(tenant, agent, &label).await? + 1,
                    created_at: now,
                    updated_at: now,
                },
            };
            if self.blocks.save(&next, BlockChange::Set, BlockActor::Api).await? {
                return Ok((next, current.is_none()));
            }
        }
        Err(BlockError::Conflict)
    }

    /// Deletes block `label` (its history stays).
    ///
    /// # Errors
    /// [`BlockError::Forbidden`], [`BlockError::AgentNotFound`], [`BlockError::BlockNotFound`].
    pub async fn delete(&self, caller: &Principal, agent: &AgentId, label: &str) -> Result<(), BlockError> {
        caller.require(Permission::AgentsWrite)?;
        self.agent(caller, agent).await?;
        for _ in 0..CONFLICT_RETRIES {
            let block = self.find(&caller.tenant_id, agent, label).await?;
            if self.blocks.delete(&block, self.clock.now()).await? {
                return Ok(());
            }
        }
        Err(BlockError::Conflict)
    }

    /// Block `label`'s versions, oldest first (a deleted block's too).
    ///
    /// # Errors
    /// [`BlockError::Forbidden`], [`BlockError::AgentNotFound`], [`BlockError::BlockNotFound`]
    /// when no version of it was ever recorded.
    pub async fn history(
        &self,
        caller: &Principal,
        agent: &AgentId,
        label: &str,
    ) -> Result<Vec<BlockVersion>, BlockError> {
        caller.require(Permission::AgentsRead)?;
        self.agent(caller, agent).await?;
        let versions = self.blocks.history(&caller.tenant_id, agent, label).await?;
        if versions.is_empty() {
            return Err(BlockError::BlockNotFound(label.to_owned()));
        }
        Ok(versions)
    }

    /// The agent appends `text` to its block `label` (on a new line).
    ///
    /// # Errors
    /// [`BlockError::BlockNotFound`], [`BlockError::OverLimit`], [`BlockError::Conflict`].
    pub async fn append(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        label: &str,
        text: &str,
    ) -> Result<MemoryBlock, BlockError> {
        self.edit(tenant, agent, label, BlockChange::Appended, |value| {
            Ok(if value.is_empty() { text.to_owned() } else { format!("{value}\n{text}") })
        })
        .await
    }

    /// The agent replaces the first occurrence of `old` in its block `label` with `new`.
    ///
    /// # Errors
    /// [`BlockError::BlockNotFound`], [`BlockError::TextNotFound`], [`BlockError::OverLimit`],
    /// [`BlockError::Conflict`].
    pub async fn replace(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        label: &str,
        old: &str,
        new: &str,
    ) -> Result<MemoryBlock, BlockError> {
        self.edit(tenant, agent, label, BlockChange::Replaced, |value| {
            if old.is_empty() || !value.contains(old) {
                return Err(BlockError::TextNotFound(label.to_owned()));
            }
            Ok(value.replacen(old, new, 1))
        })
        .await
    }

    /// Changes block `label` by `change_value`, within its limit, as the agent.
    async fn edit(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        label: &str,
        change: BlockChange,
        change_value: impl Fn(&str) -> Result<String, BlockError>,
    ) -> Result<MemoryBlock, BlockError> {
        for _ in 0..CONFLICT_RETRIES {
            let block = self.find(tenant, agent, label).await?;
            let value = change_value(&block.value)?;
            let chars = value.chars().count();
            if chars > block.limit as usize {
                return Err(BlockError::OverLimit { label: label.to_owned(), chars, limit: block.limit });
            }
            let next =
                MemoryBlock { value, version: block.version + 1, updated_at: self.clock.now(), ..block };
            if self.blocks.save(&next, change, BlockActor::Agent).await? {
                return Ok(next);
            }
        }
        Err(BlockError::Conflict)
    }

    async fn find(&self, tenant: &TenantId, agent: &AgentId, label: &str) -> Result<MemoryBlock, BlockError> {
        let blocks = self.blocks.list(tenant, agent).await?;
        blocks
            .into_iter()
            .find(|b| b.label == label)
            .ok_or_else(|| BlockError::BlockNotFound(label.to_owned()))
    }
}

/// The fixed section of the system prompt that holds the agent's blocks (nothing when it has
/// none): each block under its label, with its description and how full it is, so the agent
/// knows what it can still add.
pub fn blocks_section(blocks: &[MemoryBlock]) -> Option<String> {
    if blocks.is_empty() {
        return None;
    }
    let mut section = String::from(
        "Your core memory: blocks always in your context. Keep them current with the core_memory tools when you have them.",
    );
    for b in blocks {
        let about = b.description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
        section.push_str(&format!(
            "\n<block label=\"{}\" chars=\"{}/{}\">{about}\n{}\n</block>",
            b.label,
            b.value.chars().count(),
            b.limit,
            b.value
        ));
    }
    Some(section)
}

#[cfg(test)]
mod tests;

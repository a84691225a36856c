#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use serde_json::{Map, json};

use super::tool::{APPEND, CoreMemoryTools, REPLACE};
use super::*;
use crate::agents::fixtures::{agent, t0};
use crate::agents::model::Agent;
use crate::agents::ports::MockAgentRepository;
use crate::agents::providers::{ToolCallContext, ToolProvider};
use crate::agents::tools::{AgentTool, ToolError};
use crate::ids::SessionId;
use crate::tenancy::Role;
use crate::time::MockClock;

/// Blocks kept in memory, with the versions recorded; `lose` saves fail (another change came
/// first) before they succeed.
#[derive(Default)]
struct Kept {
    blocks: Mutex<Vec<MemoryBlock>>,
    versions: Mutex<Vec<(String, BlockVersion)>>,
    lose: Mutex<usize>,
}

#[async_trait]
impl MemoryBlockRepository for Kept {
    async fn list(&self, _: &TenantId, _: &AgentId) -> anyhow::Result<Vec<MemoryBlock>> {
        Ok(self.blocks.lock().unwrap().clone())
    }

    async fn save(
        &self,
        block: &MemoryBlock,
        change: BlockChange,
        actor: BlockActor,
    ) -> anyhow::Result<bool> {
        let mut lose = self.lose.lock().unwrap();
        if *lose > 0 {
            *lose -= 1;
            return Ok(false);
        }
        let mut blocks = self.blocks.lock().unwrap();
        blocks.retain(|b| b.label != block.label);
        blocks.push(block.clone());
        let version = BlockVersion {
            version: block.version,
            value: block.value.clone(),
            change,
            actor,
            at: block.updated_at,
        };
        self.versions.lock().unwrap().push((block.label.clone(), version));
        Ok(true)
    }

    async fn delete(&self, block: &MemoryBlock, at: DateTime<Utc>) -> anyhow::Result<bool> {
        self.blocks.lock().unwrap().retain(|b| b.label != block.label);
        let version = BlockVersion {
            version: block.version + 1,
            value: String::new(),
            change: BlockChange::Deleted,
            actor: BlockActor::Api,
            at,
        };
        self.versions.lock().unwrap().push((block.label.clone(), version));
        Ok(true)
    }

    async fn last_version(&self, _: &TenantId, _: &AgentId, label: &str) -> anyhow::Result<u32> {
        let versions = self.versions.lock().unwrap();
        Ok(versions.iter().filter(|(l, _)| l == label).map(|(_, v)| v.version).max().unwrap_or(0))
    }

    async fn history(&self, _: &TenantId, _: &AgentId, label: &str) -> anyhow::Result<Vec<BlockVersion>> {
        let versions = self.versions.lock().unwrap();
        Ok(versions.iter().filter(|(l, _)| l == label).map(|(_, v)| v.clone()).collect())
    }
}

fn caller(role: Role) -> Principal {
    Principal::test(role)
}

fn service(kept: Arc<Kept>) -> MemoryBlocks {
    let mut agents = MockAgentRepository::new();
    agents
        .expect_get()
        .returning(|t, a| Ok((t.as_str() == "ten_1" && a.as_str() == "agt_1").then(|| agent(Vec::new()))));
    let mut clock = MockClock::new();
    clock.expect_now().returning(t0);
    MemoryBlocks::new(kept, Arc::new(agents), Arc::new(clock))
}

fn input(value: &str, limit: Option<u32>) -> BlockInput {
    BlockInput { value: value.into(), description: Some("Who the user is".into()), limit }
}

fn agt() -> AgentId {
    AgentId::from_string("agt_1")
}

#[tokio::test]
async fn a_block_is_set_changed_deleted_and_every_change_is_a_version() {
    let kept = Arc::new(Kept::default());
    let blocks = service(kept.clone());
    let owner = caller(Role::Owner);
    let (block, created) = blocks.put(&owner, &agt(), "human", input("Ada.", None)).await.unwrap();
    assert!(created);
    assert_eq!((block.version, block.limit), (1, DEFAULT_BLOCK_LIMIT));
    let (block, created) =
        blocks.put(&owner, &agt(), "human", input("Ada, a chemist.", Some(100))).await.unwrap();
    assert_eq!((created, block.version, block.limit), (false, 2, 100));
    blocks.delete(&owner, &agt(), "human").await.unwrap();
    assert!(blocks.list(&owner, &agt()).await.unwrap().is_empty());
    // Set again, its numbering goes on.
    let (block, created) = blocks.put(&owner, &agt(), "human", input("Bob.", None)).await.unwrap();
    assert_eq!((created, block.version), (true, 4));
    let history = blocks.history(&owner, &agt(), "human").await.unwrap();
    let changes: Vec<_> = history.iter().map(|v| (v.version, v.change)).collect();
    assert_eq!(
        changes,
        [(1, BlockChange::Set), (2, BlockChange::Set), (3, BlockChange::Deleted), (4, BlockChange::Set)]
    );
}

#[tokio::test]
async fn bad_labels_limits_and_values_past_the_limit_are_refused_and_a_viewer_reads_only() {
    let blocks = service(Arc::new(Kept::default()));
    let owner = caller(Role::Owner);
    let refused = |r: Result<(MemoryBlock, bool), BlockError>| match r {
        Err(BlockError::Invalid(v)) => v.0[0].field.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(refused(blocks.put(&owner, &agt(), "Has Space", input("x", None)).await), "label");
    assert_eq!(refused(blocks.put(&owner, &agt(), "human", input("x", Some(0))).await), "limit");
    assert_eq!(refused(blocks.put(&owner, &agt(), "human", input("x", Some(20_001))).await), "limit");
    assert_eq!(refused(blocks.put(&owner, &agt(), "human", input("123456", Some(5))).await), "value");
    let viewer = caller(Role::Viewer);
    assert!(matches!(
        blocks.put(&viewer, &agt(), "human", input("x", None)).await,
        Err(BlockError::Forbidden(_))
    ));
    assert!(blocks.list(&viewer, &agt()).await.unwrap().is_empty());
    let other = AgentId::from_string("agt_other");
    assert!(matches!(blocks.list(&owner, &other).await, Err(BlockError::AgentNotFound)));
    assert!(matches!(blocks.history(&owner, &agt(), "nothing").await, Err(BlockError::BlockNotFound(_))));
}

#[tokio::test]
async fn an_edit_that_lost_a_race_is_made_again_over_the_newer_block() {
    let kept = Arc::new(Kept::default());
    let blocks = service(kept.clone());
    blocks.put(&caller(Role::Owner), &agt(), "human", input("Ada.", None)).await.unwrap();
    *kept.lose.lock().unwrap() = 1;
    let tenant = TenantId::from_string("ten_1");
    let block = blocks.append(&tenant, &agt(), "human", "Lives in Porto.").await.unwrap();
    assert_eq!((block.value.as_str(), block.version), ("Ada.\nLives in Porto.", 2));
    *kept.lose.lock().unwrap() = CONFLICT_RETRIES;
    assert!(matches!(blocks.append(&tenant, &agt(), "human", "x").await, Err(BlockError::Conflict)));
}

fn with_core_memory() -> Agent {
    let mut a = agent(Vec::new());
    a.config.tools = AgentTool::parse_list(&json!([{"type": "core_memory"}])).unwrap();
    a
}

async fn call(
    tools: &CoreMemoryTools,
    name: &str,
    args: serde_json::Value,
) -> Result<serde_json::Value, ToolError> {
    let (owner, agent, session) = (caller(Role::Member), with_core_memory(), SessionId::from_string("ses_1"));
    let context = ToolCallContext {
        caller: &owner,
        agent: &agent,
        session_id: &session,
        timeout: std::time::Duration::from_secs(5),
    };
    let args: Map<String, serde_json::Value> = serde_json::from_value(args).unwrap();
    tools.call(context, name, args).await
}

#[tokio::test]
async fn the_agent_appends_and_replaces_through_its_tools_within_the_limit() {
    let kept = Arc::new(Kept::default());
    let blocks = service(kept.clone());
    blocks.put(&caller(Role::Owner), &agt(), "human", input("Name: Ada.", Some(40))).await.unwrap();
    let tools = CoreMemoryTools(blocks.clone());
    let offered = tools.offer(&with_core_memory(), &caller(Role::Member)).await;
    let names: Vec<_> = offered.iter().map(|t| t.spec.name.as_str()).collect();
    assert_eq!(names, [APPEND, REPLACE]);
    assert!(tools.offer(&agent(Vec::new()), &caller(Role::Member)).await.is_empty(), "not configured");

    let out = call(&tools, APPEND, json!({"label": "human", "text": "Lives in Lyon."})).await.unwrap();
    assert_eq!(out["value"], "Name: Ada.\nLives in Lyon.");
    let out = call(&tools, REPLACE, json!({"label": "human", "old": "Lyon", "new": "Porto"})).await.unwrap();
    assert_eq!(
        (out["value"].as_str(), out["version"].as_u64()),
        (Some("Name: Ada.\nLives in Porto."), Some(3))
    );

    let err =
        call(&tools, APPEND, json!({"label": "human", "text": "Works at a lab in the old town."})).await;
    assert!(matches!(&err, Err(ToolError::Failed(m)) if m.contains("past its limit of 40")), "{err:?}");
    let err = call(&tools, REPLACE, json!({"label": "human", "old": "Oslo", "new": "x"})).await;
    assert!(matches!(err, Err(ToolError::BadArguments(_))));
    let err = call(&tools, APPEND, json!({"label": "persona", "text": "x"})).await;
    assert!(matches!(&err, Err(ToolError::BadArguments(m)) if m.contains("persona")));
    assert!(matches!(call(&tools, APPEND, json!({"label": "human"})).await, Err(ToolError::BadArguments(_))));

    let history = blocks.history(&caller(Role::Owner), &agt(), "human").await.unwrap();
    let changes: Vec<_> = history.iter().map(|v| (v.change, v.actor)).collect();
    assert_eq!(
        changes,
        [
            (BlockChange::Set, BlockActor::Api),
            (BlockChange::Appended, BlockActor::Agent),
            (BlockChange::Replaced, BlockActor::Agent)
        ]
    );
}

#[test]
fn the_blocks_section_shows_each_block_with_how_full_it_is() {
    assert_eq!(blocks_section(&[]), None);
    let block = MemoryBlock {
        tenant_id: TenantId::from_string("ten_1"),
        agent_id: agt(),
        label: "human".into(),
        value: "Ada.".into(),
        description: Some("Who the user is".into()),
        limit: 2000,
        version: 1,
        created_at: t0(),
        updated_at: t0(),
    };
    let section = blocks_section(&[block]).unwrap();
    assert!(
        section.contains("<block label=\"human\" chars=\"4/2000\"> (Who the user is)\nAda.\n</block>"),
        "{section}"
    );
}

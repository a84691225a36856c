//! Agents and workflows that start each other: a workflow's `agent_chat` step talks to an agent
//! whose `run_workflow` tool starts another workflow. A cycle is refused at once, a chain stops
//! past five nested executions, and a chain runs in one worker however deep (the built-in
//! responder calls the tool its message names, so no model is needed). On both databases.

use serde_json::{Value, json};

use crate::executions::{create_workflow, execute};
use crate::helpers::{TestApp, json_with_status, on_both_databases};

/// An agent whose one tool, `next`, runs `workflow`.
async fn agent_running(app: &TestApp, token: &str, name: &str, workflow: &str) -> String {
    let tool = json!({"type": "run_workflow", "name": "next", "workflow_id": workflow, "input_schema": {"type": "object"}, "timeout_seconds": 60});
    app.create_agent(token, json!({"name": name, "config": {"tools": [tool]}})).await["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A workflow whose one step asks `agent` to use its tool `next`.
fn asking(agent: &str) -> Value {
    json!({"name": "Ask", "steps": [{"id": "ask", "type": "agent_chat", "agent_id": agent,
        "message": "Please use next.", "timeout_seconds": 120}]})
}

async fn executions(app: &TestApp, token: &str, workflow: &str) -> Vec<Value> {
    let r = app.get_with_token(&format!("/api/v1/workflows/{workflow}/executions"), token).await;
    json_with_status(r, 200).await["executions"].as_array().unwrap().clone()
}

async fn credits(app: &TestApp, token: &str) -> i64 {
    json_with_status(app.get_with_token("/api/v1/billing", token).await, 200).await["credits"]
        .as_i64()
        .unwrap()
}

async fn execution(app: &TestApp, token: &str, id: &str) -> Value {
    json_with_status(app.get_with_token(&format!("/api/v1/executions/{id}"), token).await, 200).await
}

#[tokio::test]
async fn a_workflow_whose_agent_starts_it_again_is_refused_at_once() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            // The agent first, without tools; the workflow asks it; then the agent's tool runs
            // the workflow: a cycle.
            let agent = app.create_agent(&token, json!({"name": "Looper"})).await["id"].as_str().unwrap().to_owned();
            let workflow = create_workflow(&app, &token, &asking(&agent)).await;
            let tool = json!({"type": "run_workflow", "name": "next", "workflow_id": workflow, "input_schema": {"type": "object"}});
            let r = app
                .patch_json_with_token(
                    &format!("/api/v1/agents/{agent}"),
                    &token,
                    &json!({"config": {"tools": [tool]}}),
                )
                .await;
            assert_eq!(r.status(), 200);
            let before = credits(&app, &token).await;
            let started = execute(&app, &token, &workflow, json!({})).await;
            app.drain().await;
            let done = execution(&app, &token, started["execution_id"].as_str().unwrap()).await;
            assert_eq!(done["status"], "completed", "{done}");
            let reply = done["steps"][0]["output"]["content"].as_str().unwrap();
            assert!(reply.contains("already running in this chain"), "the tool's refusal reached the agent: {reply}");
            assert_eq!(executions(&app, &token, &workflow).await.len(), 1, "nothing else was started");
            // One chat: two model calls (the tool call, then the answer), nothing more.
            assert_eq!(before - credits(&app, &token).await, 2);
        },
    )
    .await;
}

#[tokio::test]
async fn a_chain_of_executions_stops_past_five_and_runs_in_one_worker() {
    // One worker: every execution of the chain runs in the task of the one that started it,
    // so none waits for a slot its parent holds.
    on_both_databases(
        |c| c.workflow_concurrency = 1,
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            // W1 asks A1, whose tool runs W2, … W6 asks A6, whose tool would run W7.
            let last = create_workflow(
                &app,
                &token,
                &json!({"name": "Leaf", "steps": [{"id": "t", "type": "transform", "output": "leaf"}]}),
            )
            .await;
            let mut workflows = vec![last];
            for level in (1..=6).rev() {
                let agent =
                    agent_running(&app, &token, &format!("Level {level}"), workflows.last().unwrap()).await;
                workflows.push(create_workflow(&app, &token, &asking(&agent)).await);
            }
            workflows.reverse();
            let (chain, leaf) = (&workflows[..6], &workflows[6]);
            let started = execute(&app, &token, &chain[0], json!({})).await;
            app.drain().await;
            let root = execution(&app, &token, started["execution_id"].as_str().unwrap()).await;
            assert_eq!(root["status"], "completed", "{root}");
            for (depth, workflow) in chain.iter().enumerate() {
                let runs = executions(&app, &token, workflow).await;
                assert_eq!(runs.len(), 1, "one execution of level {}", depth + 1);
                assert_eq!(runs[0]["status"], "completed", "{}", runs[0]);
                assert_eq!(runs[0]["origin"], if depth == 0 { "api" } else { "agent" });
            }
            assert!(executions(&app, &token, leaf).await.is_empty(), "the sixth nesting was refused");
            let deepest =
                executions(&app, &token, &chain[5]).await[0]["execution_id"].as_str().unwrap().to_owned();
            let deepest = execution(&app, &token, &deepest).await;
            let reply = deepest["steps"][0]["output"]["content"].as_str().unwrap();
            assert!(reply.contains("nested at most 5 deep"), "{reply}");
        },
    )
    .await;
}

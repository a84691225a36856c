//! Knowledge ingestion is durable: the service is killed (SIGKILL) while it embeds a large
//! file, and after a restart the file is ingested from the start and ends indexed whole — no
//! chunk of the killed run left behind, none twice.

use std::time::{Duration, Instant};

use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::helpers::{model_available, model_dir};
use crate::processes::{free_port, start_with, unlimited_tenant};

/// A Markdown file of `sections` headed sections, each with a fact of its own.
fn large_markdown(sections: usize) -> Vec<u8> {
    let mut text = String::from("# Inventory\n\n");
    for i in 0..sections {
        text.push_str(&format!(
            "## Shelf {i}\n\nShelf {i} holds {} boxes of part number P-{i:05}, counted on day {} of the audit. \
             The boxes are stacked in row {} and were last moved by team {}.\n\n",
            i * 7 % 97,
            i % 28 + 1,
            i % 13,
            i % 5
        ));
    }
    text.into_bytes()
}

/// The JSON body of the answer to `request`.
async fn answer(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

async fn file_state(client: &reqwest::Client, url: &str, token: &str) -> Value {
    answer(client.get(url).bearer_auth(token)).await
}

async fn ingestion_survives_a_kill(database_url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let models = model_dir();
    let env = [("AGENTRY_EMBEDDING_MODEL_DIR", models.to_str().unwrap())];
    let mut first = start_with(port, dir.path(), database_url, &env, std::process::Stdio::inherit()).await;
    let token = unlimited_tenant(&base, database_url, "ada@example.com").await;
    let client = reqwest::Client::new();
    let kb = answer(
        client
            .post(format!("{base}/api/v1/knowledge-bases"))
            .bearer_auth(&token)
            .json(&json!({"name": "Inventory"})),
    )
    .await;
    let kb = kb["id"].as_str().unwrap().to_owned();
    let form = Form::new().part("file", Part::bytes(large_markdown(600)).file_name("inventory.md"));
    let r = client
        .post(format!("{base}/api/v1/knowledge-bases/{kb}/files"))
        .bearer_auth(&token)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let uploaded: Value = r.json().await.unwrap();
    let file_url =
        format!("{base}/api/v1/knowledge-bases/{kb}/files/{}", uploaded["files"][0]["id"].as_str().unwrap());

    // Kill it outright while it embeds: parsed and cut (progress past 0.1), not yet indexed.
    let mut seen = Value::Null;
    for _ in 0..600 {
        seen = file_state(&client, &file_url, &token).await;
        if seen["status"] == "processing" && seen["progress"].as_f64().unwrap() > 0.1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen["status"], "processing", "the kill came too late to prove anything: {seen}");
    first.kill().await.expect("SIGKILL");
    first.wait().await.unwrap();

    let _second = start_with(port, dir.path(), database_url, &env, std::process::Stdio::inherit()).await;
    let restarted = Instant::now();
    for _ in 0..1200 {
        seen = file_state(&client, &file_url, &token).await;
        if seen["status"] != "processing" && seen["status"] != "queued" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen["status"], "indexed", "{seen}");
    // Taken over at once (its instance is gone), not when the 15-minute lease ends.
    eprintln!("ingestion resumed and finished {:?} after the restart", restarted.elapsed());
    assert!(restarted.elapsed() < Duration::from_secs(120), "resumed after {:?}", restarted.elapsed());

    // Whole, once: as many chunks as the file says, numbered 0..n without a gap or a repeat.
    let n = seen["chunks"].as_u64().unwrap();
    assert!(n >= 50, "{seen}");
    let mut indices = Vec::new();
    let mut texts = String::new();
    let mut skip = 0;
    loop {
        let page =
            answer(client.get(format!("{file_url}/chunks?skip={skip}&limit=100")).bearer_auth(&token)).await;
        assert_eq!(page["total"].as_u64(), Some(n));
        let items = page["items"].as_array().unwrap();
        if items.is_empty() {
            break;
        }
        indices.extend(items.iter().map(|c| c["index"].as_u64().unwrap()));
        texts.extend(items.iter().map(|c| c["text"].as_str().unwrap().to_owned()));
        skip += items.len();
    }
    assert_eq!(indices, (0..n).collect::<Vec<_>>());
    // Every section made it, the first and the last.
    assert!(texts.contains("part number P-00000") && texts.contains("part number P-00599"));
}

#[tokio::test]
async fn knowledge_ingestion_survives_a_sigkill_on_sqlite() {
    if !model_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("agentry.db").display());
    ingestion_survives_a_kill(&url).await;
}

#[tokio::test]
async fn knowledge_ingestion_survives_a_sigkill_on_postgresql() {
    if !model_available() {
        return;
    }
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    ingestion_survives_a_kill(&url).await;
}

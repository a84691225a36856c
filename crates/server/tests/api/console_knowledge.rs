//! Knowledge in the console, on both databases: a base created, files uploaded several at once
//! (the form's CSRF field first), their status live while they are ingested, a search with the
//! parts of each score, a file's chunks, bases attached in an agent's settings, and a citation
//! of the playground's history opening its chunk.

use serde_json::{Value, json};

use crate::console::{Browser, location};
use crate::helpers::{TestApp, json_with_status, knowledge_fixture as fixture, on_both_databases};

async fn text(response: reqwest::Response, status: u16) -> String {
    let got = response.status().as_u16();
    let body = response.text().await.unwrap();
    assert_eq!(got, status, "{body}");
    body
}

const QUESTION: &str = "Within how many days are refunds for annual plans paid after cancellation?";

#[tokio::test]
async fn bases_are_made_filled_searched_attached_and_cited_in_the_console() {
    on_both_databases(
        |_| {},
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let tenant = app.tenant_of(&token).await;
            let mut browser = Browser::new(&app);
            browser.sign_in("ada@example.com").await;
            let knowledge = format!("/console/{tenant}/knowledge");
            assert!(text(browser.get(&knowledge).await, 200).await.contains("No knowledge bases yet"));

            // Created through the API's own checks.
            let refused = browser.post(&knowledge, &[("name", ""), ("max_tokens", "10")], true).await;
            let refused = text(refused, 422).await;
            assert!(
                refused.contains("<code>name</code>") && refused.contains("chunking.max_tokens"),
                "{refused}"
            );
            let created =
                browser.post(&knowledge, &[("name", "Handbook"), ("description", "HR")], true).await;
            assert_eq!(created.status(), 303);
            let page = location(&created);
            let base = page.rsplit('/').next().unwrap().to_owned();
            assert!(base.starts_with("kb_"), "{page}");

            // Uploads: refused without the form's token, stored with it, and shown live.
            let files = [("handbook.pdf", fixture("handbook.pdf")), ("notes.md", fixture("notes.md"))];
            let upload = format!("{page}/files");
            assert_eq!(browser.post_files(&upload, &files, false).await.status(), 403);
            assert!(text(browser.get(&page).await, 200).await.contains("No files yet"), "nothing stored");
            let uploaded = browser.post_files(&upload, &files, true).await;
            assert_eq!(location(&uploaded), format!("{page}#files"));
            let shown = text(browser.get(&page).await, 200).await;
            assert!(shown.contains("id=\"files\" data-live"), "refreshed while queued: {shown}");
            let waiting =
                shown.contains("data-status=\"queued\"") || shown.contains("data-status=\"processing\"");
            assert!(waiting && shown.contains("handbook.pdf"), "{shown}");
            app.drain().await;
            let shown = text(browser.get(&page).await, 200).await;
            assert!(
                !shown.contains("data-live") && shown.matches("data-status=\"indexed\"").count() == 2,
                "{shown}"
            );

            // Search, each result with the parts of its score.
            let q = QUESTION.replace(' ', "+").replace('?', "%3F");
            let found = text(browser.get(&format!("{page}?q={q}")).await, 200).await;
            let first = found.split("<li class=\"card\">").nth(1).expect("a result");
            assert!(first.contains("handbook.pdf, page 2"), "{found}");
            assert!(
                first.contains("by meaning") && first.contains("by words") && first.contains("Score "),
                "{first}"
            );
            let nothing = "recipe+for+chocolate+banana+bread";
            assert!(
                text(browser.get(&format!("{page}?q={nothing}")).await, 200)
                    .await
                    .contains("Nothing scores above")
            );

            // Attached in the agent's settings, through the API's update.
            let agent =
                app.create_agent(&token, json!({"name": "Clerk"})).await["id"].as_str().unwrap().to_owned();
            let agent_page = format!("/console/{tenant}/agents/{agent}");
            let settings = text(browser.get(&agent_page).await, 200).await;
            assert!(
                settings.contains(&format!("name=\"knowledge_bases\" value=\"{base}\">")),
                "unticked: {settings}"
            );
            let choose = [
                ("knowledge_bases", base.as_str()),
                ("mode", "auto"),
                ("top_k", "3"),
                ("max_context_tokens", "800"),
            ];
            let saved = browser.post(&format!("{agent_page}/knowledge"), &choose, true).await;
            assert_eq!(location(&saved), format!("{agent_page}#knowledge"));
            let shown =
                json_with_status(app.get_with_token(&format!("/api/v1/agents/{agent}"), &token).await, 200)
                    .await;
            assert_eq!(shown["config"]["knowledge_bases"], json!([base]));
            assert_eq!(
                shown["config"]["knowledge"],
                json!({"mode": "auto", "top_k": 3, "max_context_tokens": 800})
            );
            let bad = browser.post(&format!("{agent_page}/knowledge"), &[("mode", "both")], true).await;
            assert!(text(bad, 422).await.contains("config.knowledge.mode"));

            // The playground's history links each citation to its chunk.
            let body = json!({"message": QUESTION, "session_id": "console-1"});
            let reply: Value = json_with_status(
                app.post_json_with_token(&format!("/api/v1/agents/{agent}/chat"), &token, &body).await,
                200,
            )
            .await;
            let (file, chunk) = (
                reply["citations"][0]["file_id"].as_str().unwrap(),
                reply["citations"][0]["chunk_id"].as_str().unwrap(),
            );
            let history = text(browser.get(&format!("{agent_page}?session=console-1")).await, 200)
                .await
                .replace("&#x2f;", "/");
            let link = format!("/console/{tenant}/knowledge/cited/{file}?chunk={chunk}");
            assert!(
                history.contains(&format!("href=\"{link}\"")) && history.contains("[1] handbook.pdf, page 2"),
                "{history}"
            );
            let cited = browser.get(&link).await;
            assert_eq!(cited.status(), 303);
            let target = location(&cited);
            assert!(
                target.starts_with(&format!("{page}/files/{file}?skip=0"))
                    && target.ends_with(&format!("#chunk-{chunk}")),
                "{target}"
            );
            let file_page = text(browser.get(target.split('#').next().unwrap()).await, 200).await;
            assert!(
                file_page.contains(&format!("id=\"chunk-{chunk}\"")) && file_page.contains("fourteen days"),
                "{file_page}"
            );

            // Another tenant's base is not found; deleting goes through the API's rules.
            let mut other = Browser::new(&app);
            let theirs = app.access_token("mallory@example.com").await;
            let their_tenant = app.tenant_of(&theirs).await;
            other.sign_in("mallory@example.com").await;
            assert_eq!(other.get(&format!("/console/{their_tenant}/knowledge/{base}")).await.status(), 404);
            assert_eq!(browser.post(&format!("{page}/delete"), &[], false).await.status(), 403);
            assert_eq!(location(&browser.post(&format!("{page}/delete"), &[], true).await), knowledge);
            assert_eq!(browser.get(&page).await.status(), 404);
        },
    )
    .await;
}

//! Knowledge bases over HTTP: real files made by real writers (crates/documents/tests/fixtures),
//! uploaded as multipart forms, ingested by the drained background work, searched, downloaded
//! and deleted, on both databases.

use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::helpers::{
    TestApp, json_with_status, knowledge_fixture as fixture, model_available, on_both_databases,
};

fn form(files: &[(&str, Vec<u8>)]) -> Form {
    files.iter().fold(Form::new(), |form, (name, bytes)| {
        form.part("file", Part::bytes(bytes.clone()).file_name((*name).to_owned()))
    })
}

async fn create_base(app: &TestApp, token: &str, name: &str) -> String {
    let r = app.post_json_with_token("/api/v1/knowledge-bases", token, &json!({"name": name})).await;
    json_with_status(r, 201).await["id"].as_str().unwrap().to_owned()
}

async fn upload(app: &TestApp, token: &str, base: &str, form: Form) -> reqwest::Response {
    app.client
        .post(app.url(&format!("/api/v1/knowledge-bases/{base}/files")))
        .bearer_auth(token)
        .multipart(form)
        .send()
        .await
        .unwrap()
}

async fn files(app: &TestApp, token: &str, base: &str) -> Vec<Value> {
    let r = app.get_with_token(&format!("/api/v1/knowledge-bases/{base}/files"), token).await;
    json_with_status(r, 200).await["items"].as_array().unwrap().clone()
}

async fn search(app: &TestApp, token: &str, base: &str, query: &str) -> Vec<Value> {
    let r = app
        .post_json_with_token(
            &format!("/api/v1/knowledge-bases/{base}/search"),
            token,
            &json!({"query": query}),
        )
        .await;
    json_with_status(r, 200).await["results"].as_array().unwrap().clone()
}

#[tokio::test]
async fn uploaded_files_are_indexed_and_a_paraphrase_finds_the_right_page() {
    if !model_available() {
        return;
    }
    on_both_databases(
        |_| {},
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let base = create_base(&app, &token, "Handbook").await;
            let r = upload(
                &app,
                &token,
                &base,
                form(&[
                    ("handbook.pdf", fixture("handbook.pdf")),
                    ("policies.docx", fixture("policies.docx")),
                    ("guide.html", fixture("guide.html")),
                    ("notes.md", fixture("notes.md")),
                    ("customers.csv", fixture("customers.csv")),
                ]),
            )
            .await;
            let stored = json_with_status(r, 202).await;
            let stored = stored["files"].as_array().unwrap();
            assert_eq!(stored.len(), 5);
            assert_eq!(stored[0]["media_type"], "application/pdf");
            assert_eq!(
                stored[1]["media_type"],
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
            );
            assert!(stored.iter().all(|f| f["status"] == "queued" && f["duplicate"] == false), "{stored:?}");
            assert_eq!(stored[0]["sha256"].as_str().unwrap().len(), 64);

            app.drain().await;
            let listed = files(&app, &token, &base).await;
            assert!(listed.iter().all(|f| f["status"] == "indexed" && f["progress"] == 1.0), "{listed:?}");
            let pdf = listed.iter().find(|f| f["name"] == "handbook.pdf").unwrap();
            assert_eq!((pdf["pages"].as_u64(), pdf["chunks"].as_u64().unwrap() >= 3), (Some(3), true));

            // Paraphrases sharing no word with their page: meaning finds it.
            let hits = search(
                &app,
                &token,
                &base,
                "How fast do people get their money after ending a yearly subscription?",
            )
            .await;
            assert_eq!(
                (hits[0]["file_name"].as_str(), hits[0]["page"].as_u64()),
                (Some("handbook.pdf"), Some(2)),
                "{hits:?}"
            );
            assert!(hits[0]["vector_rank"].as_u64().is_some());
            let hits = search(&app, &token, &base, "What should staff do when a computer gets stolen?").await;
            assert_eq!(hits[0]["page"], 3, "{hits:?}");
            // Word's headings come with its chunks.
            let hits = search(&app, &token, &base, "nightly cap for accommodation").await;
            let docx = hits.iter().find(|h| h["file_name"] == "policies.docx").expect("the policy");
            assert_eq!(docx["headings"], json!(["Travel", "Hotels"]), "{hits:?}");

            // Across bases, and with an unrelated query nothing passes the default min_score.
            let r = app
                .post_json_with_token(
                    "/api/v1/knowledge/search",
                    &token,
                    &json!({"query": "encryption of laptops", "knowledge_base_ids": [base], "top_k": 1}),
                )
                .await;
            let found = json_with_status(r, 200).await;
            assert_eq!(found["results"].as_array().unwrap().len(), 1);
            assert_eq!(found["results"][0]["page"], 3);
            assert!(search(&app, &token, &base, "recipe for chocolate banana bread").await.is_empty());

            // A workflow's `knowledge_search` step answers as the route does.
            let workflow = json!({"name": "Lookup", "steps": [{
                "id": "find", "type": "knowledge_search", "knowledge_base_ids": ["{{ input.kb }}"],
                "query": "{{ input.question }}", "top_k": 2
            }]});
            let r = app.post_json_with_token("/api/v1/workflows", &token, &workflow).await;
            let workflow = json_with_status(r, 201).await["id"].as_str().unwrap().to_owned();
            let input = json!({"input": {"kb": base, "question": "What should staff do when a computer gets stolen?"}});
            let r = app.post_json_with_token(&format!("/api/v1/workflows/{workflow}/execute"), &token, &input).await;
            let started = json_with_status(r, 202).await;
            app.drain().await;
            let execution = started["execution_id"].as_str().unwrap();
            let r = app.get_with_token(&format!("/api/v1/executions/{execution}"), &token).await;
            let shown = json_with_status(r, 200).await;
            assert_eq!(shown["status"], "completed", "{shown}");
            let output = &shown["steps"][0]["output"];
            assert_eq!((output["results"][0]["file_name"].as_str(), output["results"][0]["page"].as_u64()), (Some("handbook.pdf"), Some(3)), "{output}");

            let tenant = app.tenant_of(&token).await;
            let indexed = app
                .events(&tenant)
                .await
                .into_iter()
                .filter(|e| e.event_type().as_str() == "knowledge.file.indexed")
                .count();
            assert_eq!(indexed, 5);
        },
    )
    .await;
}

#[tokio::test]
async fn files_that_cannot_be_read_fail_alone_with_their_reason() {
    on_both_databases(
        |_| {},
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let base = create_base(&app, &token, "Bad files").await;
            for (name, bytes) in [
                ("locked.pdf", fixture("handbook-encrypted.pdf")),
                ("cut.pdf", fixture("handbook-truncated.pdf")),
                ("scan.pdf", fixture("scanned.pdf")),
                ("notes.txt", fixture("notes.txt")),
            ] {
                let r = upload(&app, &token, &base, form(&[(name, bytes)])).await;
                json_with_status(r, 202).await;
            }
            app.drain().await;
            let listed = files(&app, &token, &base).await;
            let status = |name: &str| {
                let f = listed.iter().find(|f| f["name"] == name).unwrap();
                (f["status"].as_str().unwrap().to_owned(), f["error"].as_str().unwrap_or_default().to_owned())
            };
            let (s, e) = status("locked.pdf");
            assert_eq!(s, "failed");
            assert!(e.contains("encrypted"), "{e}");
            let (s, e) = status("cut.pdf");
            assert_eq!(s, "failed");
            assert!(e.contains("cannot be read"), "{e}");
            let (s, e) = status("scan.pdf");
            assert_eq!(s, "failed");
            assert!(e.contains("no text"), "{e}");
            assert_eq!(status("notes.txt").0, "indexed", "the others' failures touch no other file");
            let tenant = app.tenant_of(&token).await;
            let failed: Vec<_> = app
                .events(&tenant)
                .await
                .into_iter()
                .filter(|e| e.event_type().as_str() == "knowledge.file.failed")
                .collect();
            assert_eq!(failed.len(), 3);
        },
    )
    .await;
}

#[tokio::test]
async fn uploads_refuse_what_they_cannot_take_and_keep_nothing_of_it() {
    on_both_databases(
        |c| c.knowledge_max_file_bytes = 2048,
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let base = create_base(&app, &token, "Limits").await;
            let url = format!("/api/v1/knowledge-bases/{base}/files");

            // Past the size limit: 413, and the file before it in the same form is gone too.
            let big = vec![b'a'; 4096];
            let r =
                upload(&app, &token, &base, form(&[("ok.txt", b"fine".to_vec()), ("big.txt", big)])).await;
            assert_eq!(json_with_status(r, 413).await["error"], "payload_too_large");
            assert!(files(&app, &token, &base).await.is_empty());

            // Not a type we read, or not what its name says: 415.
            let elf = [b"\x7fELF".as_slice(), &[0_u8; 64]].concat();
            let r = upload(&app, &token, &base, form(&[("tool.txt", elf)])).await;
            assert_eq!(json_with_status(r, 415).await["error"], "unsupported_media_type");
            let r = upload(&app, &token, &base, form(&[("report.pdf", b"just words".to_vec())])).await;
            assert_eq!(json_with_status(r, 415).await["error"], "unsupported_media_type");
            let r = upload(&app, &token, &base, form(&[("tool.exe", b"plain".to_vec())])).await;
            assert_eq!(r.status(), 415);

            // Not a form, a part of another name, a part without a file name, no part.
            let r = app.post_json_with_token(&url, &token, &json!({"file": "x"})).await;
            assert_eq!(json_with_status(r, 415).await["error"], "unsupported_media_type");
            let other = Form::new().part("document", Part::bytes(b"x".to_vec()).file_name("a.txt"));
            let r = upload(&app, &token, &base, other).await;
            assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "file");
            let unnamed = Form::new().part("file", Part::bytes(b"x".to_vec()));
            let r = upload(&app, &token, &base, unnamed).await;
            assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "file");
            let r = upload(&app, &token, &base, Form::new().text("note", "hi")).await;
            assert_eq!(r.status(), 422);
            assert!(files(&app, &token, &base).await.is_empty());

            // The same bytes twice: one file.
            let r = upload(&app, &token, &base, form(&[("a.md", b"# Same\n\nbytes".to_vec())])).await;
            let first = json_with_status(r, 202).await["files"][0].clone();
            let r = upload(&app, &token, &base, form(&[("b.md", b"# Same\n\nbytes".to_vec())])).await;
            let again = json_with_status(r, 202).await["files"][0].clone();
            assert_eq!(
                (again["id"].clone(), again["duplicate"].clone(), again["name"].clone()),
                (first["id"].clone(), json!(true), json!("a.md"))
            );
            assert_eq!(files(&app, &token, &base).await.len(), 1);
        },
    )
    .await;
}

#[tokio::test]
async fn a_file_downloads_as_uploaded_and_is_never_shown_as_our_page() {
    on_both_databases(
        |_| {},
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let base = create_base(&app, &token, "Pages").await;
            let html = fixture("guide.html");
            let r = upload(&app, &token, &base, form(&[("../../guide.html", html.clone())])).await;
            let file = json_with_status(r, 202).await["files"][0].clone();
            assert_eq!(file["name"], "guide.html");
            let id = file["id"].as_str().unwrap();
            let r = app
                .get_with_token(&format!("/api/v1/knowledge-bases/{base}/files/{id}/content"), &token)
                .await;
            assert_eq!(r.status(), 200);
            let headers = r.headers().clone();
            assert_eq!(headers["content-type"], "text/html");
            assert!(
                headers["content-disposition"]
                    .to_str()
                    .unwrap()
                    .starts_with("attachment; filename=\"guide.html\"")
            );
            assert_eq!(headers["x-content-type-options"], "nosniff");
            assert!(headers["content-security-policy"].to_str().unwrap().contains("sandbox"));
            assert_eq!(r.bytes().await.unwrap().as_ref(), html.as_slice());

            app.drain().await;
            let r = app
                .get_with_token(&format!("/api/v1/knowledge-bases/{base}/files/{id}/chunks?limit=1"), &token)
                .await;
            let chunks = json_with_status(r, 200).await;
            assert!(chunks["total"].as_u64().unwrap() >= 1, "{chunks}");
            let text = chunks["items"][0]["text"].as_str().unwrap();
            assert!(!text.contains("stealCookies"), "scripts are never read: {text}");
            let r = app
                .get_with_token(&format!("/api/v1/knowledge-bases/{base}/files/{id}/chunks?limit=0"), &token)
                .await;
            assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "limit");

            // Deleting the file takes its chunks; deleting the base takes the rest.
            let r =
                app.delete_with_token(&format!("/api/v1/knowledge-bases/{base}/files/{id}"), &token).await;
            assert_eq!(r.status(), 204);
            let r = app.get_with_token(&format!("/api/v1/knowledge-bases/{base}/files/{id}"), &token).await;
            assert_eq!(r.status(), 404);
            let r = app.delete_with_token(&format!("/api/v1/knowledge-bases/{base}"), &token).await;
            assert_eq!(r.status(), 204);
            let r = app.get_with_token(&format!("/api/v1/knowledge-bases/{base}"), &token).await;
            assert_eq!(r.status(), 404);
        },
    )
    .await;
}

#[tokio::test]
async fn bases_are_validated_named_once_and_invisible_to_other_tenants() {
    on_both_databases(
        |_| {},
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let r = app
                .post_json_with_token(
                    "/api/v1/knowledge-bases",
                    &token,
                    &json!({"name": "Docs", "description": "All of it", "chunking": {"max_tokens": 200, "overlap_tokens": 20}}),
                )
                .await;
            let base = json_with_status(r, 201).await;
            assert_eq!(base["chunking"], json!({"max_tokens": 200, "overlap_tokens": 20}));
            assert_eq!((base["file_count"].as_u64(), base["bytes"].as_u64()), (Some(0), Some(0)));
            let id = base["id"].as_str().unwrap();
            let r = app.post_json_with_token("/api/v1/knowledge-bases", &token, &json!({"name": "Docs"})).await;
            assert_eq!(json_with_status(r, 409).await["error"], "conflict");
            for (body, field) in [
                (json!({}), "name"),
                (json!({"name": ""}), "name"),
                (json!({"name": 5}), "name"),
                (json!({"name": "x", "chunking": {"max_tokens": 10}}), "chunking.max_tokens"),
                (json!({"name": "x", "chunking": {"max_tokens": 100, "overlap_tokens": 51}}), "chunking.overlap_tokens"),
            ] {
                let r = app.post_json_with_token("/api/v1/knowledge-bases", &token, &body).await;
                assert_eq!(json_with_status(r, 422).await["details"][0]["field"], field, "{body}");
            }
            let r = app
                .patch_json_with_token(&format!("/api/v1/knowledge-bases/{id}"), &token, &json!({"description": null, "name": "Docs 2"}))
                .await;
            let changed = json_with_status(r, 200).await;
            assert_eq!((changed["name"].as_str(), changed["description"].clone()), (Some("Docs 2"), Value::Null));
            let r = app
                .post_json_with_token(&format!("/api/v1/knowledge-bases/{id}/search"), &token, &json!({"query": "x", "top_k": 51}))
                .await;
            assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "top_k");
            let r = app.post_json_with_token("/api/v1/knowledge/search", &token, &json!({"query": "x", "knowledge_base_ids": []})).await;
            assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "knowledge_base_ids");

            // Another tenant: every route answers 404, and searching the base finds nothing.
            let other = app.access_token("eve@example.com").await;
            for path in [format!("/api/v1/knowledge-bases/{id}"), format!("/api/v1/knowledge-bases/{id}/files")] {
                assert_eq!(app.get_with_token(&path, &other).await.status(), 404, "{path}");
            }
            let r = upload(&app, &other, id, form(&[("a.txt", b"hello there".to_vec())])).await;
            assert_eq!(r.status(), 404);
            let r = app.post_json_with_token("/api/v1/knowledge/search", &other, &json!({"query": "x", "knowledge_base_ids": [id]})).await;
            assert_eq!(r.status(), 404);
            let listed = json_with_status(app.get_with_token("/api/v1/knowledge-bases", &other).await, 200).await;
            assert_eq!(listed["items"], json!([]));

            // A key without `knowledge:write` reads but does not upload.
            let r = app
                .post_json_with_token("/api/v1/auth/api-keys", &token, &json!({"name": "reader", "scopes": ["knowledge:read"]}))
                .await;
            let key = json_with_status(r, 201).await["key"].as_str().unwrap().to_owned();
            assert_eq!(app.get_with_token(&format!("/api/v1/knowledge-bases/{id}"), &key).await.status(), 200);
            let r = upload(&app, &key, id, form(&[("a.txt", b"hello there".to_vec())])).await;
            assert_eq!(json_with_status(r, 403).await["error"], "forbidden");
        },
    )
    .await;
}

#[tokio::test]
async fn an_exact_identifier_ranks_its_chunk_first() {
    on_both_databases(
        |_| {},
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let base = create_base(&app, &token, "Orders").await;
            // Forty orders alike in every word but their number: meaning cannot tell them apart.
            let orders: String = (0..40)
                .map(|i| {
                    format!(
                        "## Order P-0{}\n\nOrder P-0{} was shipped from the Lisbon warehouse; its status is {} and the customer was told.\n\n",
                        1200 + i,
                        1200 + i,
                        ["delayed", "in transit", "delivered", "on hold"][i % 4]
                    )
                })
                .collect();
            let r = upload(&app, &token, &base, form(&[("orders.md", orders.into_bytes())])).await;
            assert_eq!(r.status(), 202);
            app.drain().await;
            for query in ["P-01234", "What is the status of order P-01234?", "where did p-01234 ship from"] {
                let hits = search(&app, &token, &base, query).await;
                assert_eq!(hits[0]["headings"], json!(["Order P-01234"]), "{query}: {hits:?}");
            }
            // An identifier nothing holds finds nothing by its parts.
            let hits = search(&app, &token, &base, "P-09999").await;
            assert!(hits.iter().all(|h| h["lexical_rank"].is_null()), "{hits:?}");
        },
    )
    .await;
}

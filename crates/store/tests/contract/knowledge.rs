use agentry_domain::identity::AccountRepository;
use agentry_domain::ids::{KnowledgeBaseId, KnowledgeFileId, TenantId};
use agentry_domain::knowledge::chunking::ChunkLimits;
use agentry_domain::knowledge::{
    FILE_PART_BYTES, FileAdded, FileStatus, FileStore, KnowledgeBase, KnowledgeFile, KnowledgeRepository,
    MediaType,
};
use agentry_store::{AccountStore, Database, DbFileStore, KnowledgeStore};
use chrono::{DateTime, TimeZone, Utc};

crate::contract!(
    a_base_is_stored_read_back_whole_and_counts_its_files,
    a_base_name_is_unique_per_tenant_on_create_and_update,
    the_same_bytes_in_one_base_are_one_file_even_at_once,
    deleting_a_file_or_a_base_deletes_its_content,
    file_parts_round_trip_exactly_and_are_replaced_on_retry,
    parts_of_uploads_that_never_finished_are_swept_once_old,
    another_tenants_bases_files_and_contents_are_invisible_and_untouchable,
);

pub(crate) fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 7, 9, 0, 0).unwrap()
}

fn tenant(n: &str) -> TenantId {
    TenantId::from_string(format!("ten_{n}"))
}

pub(crate) fn base(id: &str, tenant_n: &str, name: &str) -> KnowledgeBase {
    KnowledgeBase {
        id: KnowledgeBaseId::from_string(id),
        tenant_id: tenant(tenant_n),
        name: name.into(),
        description: Some("Policies — «quoted», with\nlines".into()),
        chunking: ChunkLimits { max_tokens: 300, overlap_tokens: 30 },
        file_count: 0,
        bytes: 0,
        created_at: t0(),
        updated_at: t0(),
    }
}

pub(crate) fn file(id: &str, base: &KnowledgeBase, sha: &str, bytes: u64) -> KnowledgeFile {
    KnowledgeFile {
        id: KnowledgeFileId::from_string(id),
        tenant_id: base.tenant_id.clone(),
        knowledge_base_id: base.id.clone(),
        name: format!("{id}.pdf"),
        media_type: MediaType::Pdf,
        bytes,
        sha256: sha.repeat(64 / sha.len()),
        status: FileStatus::Queued,
        error: None,
        pages: None,
        chunks: 0,
        progress: 0.0,
        created_at: t0(),
        updated_at: t0(),
    }
}

pub(crate) async fn setup(db: &Database) -> (KnowledgeStore, DbFileStore) {
    let accounts = AccountStore::new(db.clone());
    accounts.create_account(&super::accounts::account("1", "one@example.com")).await.unwrap();
    accounts.create_account(&super::accounts::account("2", "two@example.com")).await.unwrap();
    (KnowledgeStore::new(db.clone()), DbFileStore::new(db.clone()))
}

async fn a_base_is_stored_read_back_whole_and_counts_its_files(db: Database) {
    let (store, _) = setup(&db).await;
    let handbook = base("kb_1", "1", "Handbook");
    assert!(store.create_base(&handbook).await.unwrap());
    let mut empty = base("kb_2", "1", "Empty");
    empty.description = None;
    empty.chunking = ChunkLimits { max_tokens: 64, overlap_tokens: 0 };
    assert!(store.create_base(&empty).await.unwrap());
    assert_eq!(store.get_base(&handbook.tenant_id, &handbook.id).await.unwrap(), Some(handbook.clone()));

    let mut failed = file("kbf_2", &handbook, "b", 2_500);
    failed.status = FileStatus::Failed;
    failed.error = Some("the PDF is encrypted; upload it without a password".into());
    failed.pages = Some(3);
    failed.chunks = 7;
    failed.progress = 0.25;
    failed.media_type = MediaType::Docx;
    assert_eq!(store.add_file(&file("kbf_1", &handbook, "a", 1_000)).await.unwrap(), FileAdded::Added);
    assert_eq!(store.add_file(&failed).await.unwrap(), FileAdded::Added);
    assert_eq!(
        store.get_file(&handbook.tenant_id, &handbook.id, &failed.id).await.unwrap(),
        Some(failed.clone())
    );
    let listed = store.list_files(&handbook.tenant_id, &handbook.id).await.unwrap();
    assert_eq!(listed.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(), ["kbf_1", "kbf_2"]);

    let counted = KnowledgeBase { file_count: 2, bytes: 3_500, ..handbook.clone() };
    assert_eq!(store.get_base(&handbook.tenant_id, &handbook.id).await.unwrap(), Some(counted.clone()));
    assert_eq!(store.list_bases(&handbook.tenant_id).await.unwrap(), [counted, empty]);
    assert_eq!(store.usage(&handbook.tenant_id).await.unwrap(), (2, 3_500));
    assert_eq!(store.usage(&tenant("2")).await.unwrap(), (0, 0));
}

async fn a_base_name_is_unique_per_tenant_on_create_and_update(db: Database) {
    let (store, _) = setup(&db).await;
    assert!(store.create_base(&base("kb_1", "1", "Handbook")).await.unwrap());
    assert!(!store.create_base(&base("kb_2", "1", "Handbook")).await.unwrap());
    assert!(store.create_base(&base("kb_3", "2", "Handbook")).await.unwrap(), "names are per tenant");
    assert!(store.create_base(&base("kb_2", "1", "Contracts")).await.unwrap());
    assert_eq!(store.update_base(&base("kb_2", "1", "Handbook")).await.unwrap(), Some(false));
    let mut renamed = base("kb_2", "1", "Legal");
    renamed.chunking = ChunkLimits { max_tokens: 2048, overlap_tokens: 1024 };
    renamed.updated_at = t0() + chrono::Duration::minutes(1);
    assert_eq!(store.update_base(&renamed).await.unwrap(), Some(true));
    assert_eq!(store.get_base(&renamed.tenant_id, &renamed.id).await.unwrap(), Some(renamed));
    assert_eq!(store.update_base(&base("kb_9", "1", "Gone")).await.unwrap(), None);
}

async fn the_same_bytes_in_one_base_are_one_file_even_at_once(db: Database) {
    let (store, _) = setup(&db).await;
    let one = base("kb_1", "1", "One");
    let two = base("kb_2", "1", "Two");
    store.create_base(&one).await.unwrap();
    store.create_base(&two).await.unwrap();
    let uploads: Vec<_> = (0..4)
        .map(|i| {
            let store = store.clone();
            let f = file(&format!("kbf_{i}"), &one, "c", 10);
            tokio::spawn(async move { store.add_file(&f).await.unwrap() })
        })
        .collect();
    let mut added = 0;
    let mut duplicates = Vec::new();
    for u in uploads {
        match u.await.unwrap() {
            FileAdded::Added => added += 1,
            FileAdded::Duplicate(existing) => duplicates.push(existing),
        }
    }
    assert_eq!(added, 1, "exactly one upload records the file");
    let kept = store.list_files(&one.tenant_id, &one.id).await.unwrap();
    assert_eq!(kept.len(), 1);
    assert!(duplicates.iter().all(|d| *d == kept[0]), "each duplicate answers the one file");
    // The same bytes in another base are another file.
    assert_eq!(store.add_file(&file("kbf_9", &two, "c", 10)).await.unwrap(), FileAdded::Added);
}

async fn deleting_a_file_or_a_base_deletes_its_content(db: Database) {
    let (store, files) = setup(&db).await;
    let one = base("kb_1", "1", "One");
    store.create_base(&one).await.unwrap();
    for (id, sha) in [("kbf_1", "a"), ("kbf_2", "b")] {
        let f = file(id, &one, sha, 3);
        files.put_part(&one.tenant_id, &f.id, 0, b"abc").await.unwrap();
        store.add_file(&f).await.unwrap();
    }
    let first = KnowledgeFileId::from_string("kbf_1");
    assert!(store.delete_file(&one.tenant_id, &one.id, &first).await.unwrap());
    assert!(!store.delete_file(&one.tenant_id, &one.id, &first).await.unwrap());
    assert_eq!(files.get_part(&one.tenant_id, &first, 0).await.unwrap(), None);
    let second = KnowledgeFileId::from_string("kbf_2");
    assert_eq!(files.get_part(&one.tenant_id, &second, 0).await.unwrap().as_deref(), Some(&b"abc"[..]));

    assert!(store.delete_base(&one.tenant_id, &one.id).await.unwrap());
    assert!(!store.delete_base(&one.tenant_id, &one.id).await.unwrap());
    assert_eq!(store.get_file(&one.tenant_id, &one.id, &second).await.unwrap(), None);
    assert_eq!(files.get_part(&one.tenant_id, &second, 0).await.unwrap(), None);
    assert_eq!(store.usage(&one.tenant_id).await.unwrap(), (0, 0));
}

async fn file_parts_round_trip_exactly_and_are_replaced_on_retry(db: Database) {
    let (_, files) = setup(&db).await;
    let (t, f) = (tenant("1"), KnowledgeFileId::from_string("kbf_1"));
    // Every byte value, NUL included, and a full part.
    let all: Vec<u8> = (0..=255u8).cycle().take(FILE_PART_BYTES).collect();
    files.put_part(&t, &f, 0, &all).await.unwrap();
    files.put_part(&t, &f, 1, b"first try").await.unwrap();
    files.put_part(&t, &f, 1, b"\0second").await.unwrap();
    assert_eq!(files.get_part(&t, &f, 0).await.unwrap(), Some(all));
    assert_eq!(files.get_part(&t, &f, 1).await.unwrap().as_deref(), Some(&b"\0second"[..]));
    assert_eq!(files.get_part(&t, &f, 2).await.unwrap(), None);
    assert!(files.put_part(&t, &f, 2, &vec![0; FILE_PART_BYTES + 1]).await.is_err(), "a part over 1 MiB");
    files.delete(&t, &f).await.unwrap();
    assert_eq!(files.get_part(&t, &f, 0).await.unwrap(), None);
}

async fn parts_of_uploads_that_never_finished_are_swept_once_old(db: Database) {
    let (store, files) = setup(&db).await;
    let one = base("kb_1", "1", "One");
    store.create_base(&one).await.unwrap();
    let kept = file("kbf_kept", &one, "a", 3);
    files.put_part(&one.tenant_id, &kept.id, 0, b"abc").await.unwrap();
    store.add_file(&kept).await.unwrap();
    let cut_off = KnowledgeFileId::from_string("kbf_cut");
    for part in 0..3 {
        files.put_part(&one.tenant_id, &cut_off, part, b"part").await.unwrap();
    }
    // Written just now: an upload may still be writing them.
    assert_eq!(files.sweep_orphans(Utc::now() - chrono::Duration::hours(1)).await.unwrap(), 0);
    assert!(files.get_part(&one.tenant_id, &cut_off, 0).await.unwrap().is_some());
    // Old enough: the parts without a file go, a file's parts stay.
    assert_eq!(files.sweep_orphans(Utc::now() + chrono::Duration::hours(1)).await.unwrap(), 3);
    assert_eq!(files.get_part(&one.tenant_id, &cut_off, 0).await.unwrap(), None);
    assert_eq!(files.get_part(&one.tenant_id, &kept.id, 0).await.unwrap().as_deref(), Some(&b"abc"[..]));
}

async fn another_tenants_bases_files_and_contents_are_invisible_and_untouchable(db: Database) {
    let (store, files) = setup(&db).await;
    let one = base("kb_1", "1", "One");
    store.create_base(&one).await.unwrap();
    let f = file("kbf_1", &one, "a", 3);
    files.put_part(&one.tenant_id, &f.id, 0, b"abc").await.unwrap();
    store.add_file(&f).await.unwrap();
    let other = tenant("2");
    assert_eq!(store.get_base(&other, &one.id).await.unwrap(), None);
    assert!(store.list_bases(&other).await.unwrap().is_empty());
    assert!(store.list_files(&other, &one.id).await.unwrap().is_empty());
    assert_eq!(store.get_file(&other, &one.id, &f.id).await.unwrap(), None);
    assert_eq!(files.get_part(&other, &f.id, 0).await.unwrap(), None);
    assert_eq!(
        store.update_base(&KnowledgeBase { tenant_id: other.clone(), ..one.clone() }).await.unwrap(),
        None
    );
    assert!(!store.delete_file(&other, &one.id, &f.id).await.unwrap());
    assert!(!store.delete_base(&other, &one.id).await.unwrap());
    files.delete(&other, &f.id).await.unwrap();
    assert_eq!(files.get_part(&one.tenant_id, &f.id, 0).await.unwrap().as_deref(), Some(&b"abc"[..]));
    assert_eq!(store.get_file(&one.tenant_id, &one.id, &f.id).await.unwrap(), Some(f));
}

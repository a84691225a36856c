use agentry_domain::ratelimit::RateCounter;
use agentry_store::{Database, DbRateCounter};

crate::contract!(hits_count_per_bucket_and_window, concurrent_hits_are_all_counted, ended_windows_are_purged);

async fn hits_count_per_bucket_and_window(db: Database) {
    let counter = DbRateCounter::new(db);
    assert_eq!(counter.hit("ten_1:m", 60, 60).await.unwrap(), 1);
    assert_eq!(counter.hit("ten_1:m", 60, 60).await.unwrap(), 2);
    assert_eq!(counter.hit("ten_1:m", 120, 60).await.unwrap(), 1, "a new window starts at zero");
    assert_eq!(counter.hit("ten_2:m", 60, 60).await.unwrap(), 1, "buckets are separate");
}

async fn concurrent_hits_are_all_counted(db: Database) {
    let counter = DbRateCounter::new(db.clone());
    let tasks = (0..40).map(|_| {
        let counter = counter.clone();
        tokio::spawn(async move { counter.hit("ip:1:m", 0, 60).await.unwrap() })
    });
    let mut counts: Vec<u64> =
        futures_util::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    counts.sort_unstable();
    assert_eq!(counts, (1..=40).collect::<Vec<u64>>(), "every hit saw a distinct count");
}

async fn ended_windows_are_purged(db: Database) {
    let counter = DbRateCounter::new(db.clone());
    counter.hit("a:m", 0, 60).await.unwrap();
    counter.hit("a:m", 60, 60).await.unwrap();
    assert_eq!(counter.purge_expired(100).await.unwrap(), 1);
    assert_eq!(db.count_rows("rate_limit_counters").await.unwrap(), 1);
}

use agentry_domain::ratelimit::{RateCounter, Window, contract};
use agentry_store::{Database, DbRateCounter};

crate::contract!(the_database_counter_keeps_the_counter_contract, ended_windows_are_purged);

async fn the_database_counter_keeps_the_counter_contract(db: Database) {
    contract::run_all(&DbRateCounter::new(db), "db").await;
}

async fn ended_windows_are_purged(db: Database) {
    let counter = DbRateCounter::new(db.clone());
    let minute = |start| [Window { name: "m", start, secs: 60, limit: 10 }];
    counter.hit("a", &minute(0)).await.unwrap();
    counter.hit("a", &minute(60)).await.unwrap();
    assert_eq!(counter.purge_expired(100).await.unwrap(), 1);
    assert_eq!(db.count_rows("rate_limit_counters").await.unwrap(), 1);
}

//! The SQLite baseline of `make bench` (`scripts/bench.sh`): the statements that
//! `GET /api/v1/agents` sends per request — the principal (`src/accounts.rs`) and the page of 20
//! agents with the tenant's total (`src/agents.rs`), with diesel's SQLite text of them — run
//! back to back by THREADS threads for SECONDS, each thread on a connection of its own set up
//! as the service's readers are (WAL, `query_only`, the same `mmap_size`). Each statement is
//! prepared once per connection (diesel's statement cache) and its rows are read as text, as
//! the service reads them before decoding. Prints the requests completed per second.
//!
//! `cargo run --release -p agentry-store --example sqlite_baseline -- DATABASE_PATH THREADS SECONDS USER_ID FAMILY_ID TENANT_ID`
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection as _;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use diesel::{Connection as _, QueryableByName, RunQueryDsl as _, SqliteConnection};

const PRINCIPAL: &str = "SELECT `memberships`.`tenant_id`, `tenants`.`name`, `tenants`.`plan`, `memberships`.`role`, \
     `memberships`.`created_at` FROM ((`memberships` INNER JOIN `tenants` ON (`memberships`.`tenant_id` = `tenants`.`id`)) \
     INNER JOIN `users` ON (`memberships`.`user_id` = `users`.`id`)) WHERE (((`memberships`.`user_id` = ?) \
     AND (`users`.`is_active` = ?)) AND EXISTS (SELECT `refresh_tokens`.`id`, `refresh_tokens`.`family_id`, \
     `refresh_tokens`.`user_id`, `refresh_tokens`.`token_digest`, `refresh_tokens`.`status`, `refresh_tokens`.`issued_at`, \
     `refresh_tokens`.`expires_at`, `refresh_tokens`.`updated_at` FROM `refresh_tokens` WHERE (((`refresh_tokens`.`family_id` = ?) \
     AND (`refresh_tokens`.`user_id` = ?)) AND (`refresh_tokens`.`status` != ?)))) \
     ORDER BY `memberships`.`created_at` ASC, `memberships`.`tenant_id` ASC";

const PAGE: &str = "SELECT `agents`.`id`, `agents`.`tenant_id`, `agents`.`name`, `agents`.`agent_type`, `agents`.`status`, \
     `agents`.`description`, `agents`.`memory_types`, `agents`.`config`, `agents`.`created_at`, `agents`.`updated_at`, \
     (SELECT COUNT(*) FROM `agents` AS `counted` WHERE (`counted`.`tenant_id` = ?) LIMIT ?) AS `total` FROM `agents` \
     WHERE (`agents`.`tenant_id` = ?) ORDER BY `agents`.`id` ASC LIMIT ? OFFSET ?";

#[derive(QueryableByName)]
#[allow(dead_code)]
struct Membership {
    #[diesel(sql_type = Text)]
    tenant_id: String,
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    plan: String,
    #[diesel(sql_type = Text)]
    role: String,
    #[diesel(sql_type = Text)]
    created_at: String,
}

#[derive(QueryableByName)]
#[allow(dead_code)]
struct AgentRow {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    tenant_id: String,
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    agent_type: String,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Nullable<Text>)]
    description: Option<String>,
    #[diesel(sql_type = Text)]
    memory_types: String,
    #[diesel(sql_type = Text)]
    config: String,
    #[diesel(sql_type = Text)]
    created_at: String,
    #[diesel(sql_type = Text)]
    updated_at: String,
    #[diesel(sql_type = BigInt)]
    total: i64,
}

/// One request's statements.
fn request(conn: &mut SqliteConnection, user: &str, family: &str, tenant: &str) -> anyhow::Result<()> {
    let principal: Vec<Membership> = diesel::sql_query(PRINCIPAL)
        .bind::<Text, _>(user)
        .bind::<Bool, _>(true)
        .bind::<Text, _>(family)
        .bind::<Text, _>(user)
        .bind::<Text, _>("revoked")
        .load(conn)?;
    anyhow::ensure!(!principal.is_empty(), "no membership: wrong user, family or database");
    let page: Vec<AgentRow> = diesel::sql_query(PAGE)
        .bind::<Text, _>(tenant)
        .bind::<BigInt, _>(1)
        .bind::<Text, _>(tenant)
        .bind::<BigInt, _>(20)
        .bind::<BigInt, _>(0)
        .load(conn)?;
    anyhow::ensure!(page.first().is_some_and(|a| a.total > 0), "no agents in the tenant");
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, threads, seconds, user, family, tenant] = args.as_slice() else {
        anyhow::bail!("usage: sqlite_baseline DATABASE_PATH THREADS SECONDS USER_ID FAMILY_ID TENANT_ID");
    };
    let threads: usize = threads.parse()?;
    let duration = Duration::from_secs_f64(seconds.parse()?);
    let started = Instant::now();
    let counts = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<u64> {
                    let mut conn = SqliteConnection::establish(path)?;
                    conn.batch_execute(
                        "PRAGMA busy_timeout = 5000; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                         PRAGMA foreign_keys = ON; PRAGMA query_only = ON; PRAGMA mmap_size = 1073741824;",
                    )?;
                    let mut done = 0;
                    while started.elapsed() < duration {
                        request(&mut conn, user, family, tenant)?;
                        done += 1;
                    }
                    Ok(done)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().map_err(|_| anyhow::anyhow!("a thread panicked"))?)
            .collect::<anyhow::Result<Vec<u64>>>()
    })?;
    let total: u64 = counts.iter().sum();
    #[allow(clippy::cast_precision_loss)]
    let rate = total as f64 / started.elapsed().as_secs_f64();
    println!("{rate:.0}");
    Ok(())
}

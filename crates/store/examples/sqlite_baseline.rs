//! The SQLite baselines of `make bench` (`scripts/bench.sh`): the statements a route sends per
//! request, with diesel's SQLite text of them, run back to back by THREADS threads for SECONDS.
//! Prints the requests completed per second. `make bench` runs `agents` on as many threads as
//! the service has HTTP workers, and `chat` on as many as `wrk` has connections: a chat waits
//! for its writes' commit, and the chats waiting at once share one.
//!
//! - `agents`: `GET /api/v1/agents` — the principal (`src/accounts.rs`) and the page of 20 agents
//!   with the tenant's total (`src/agents.rs`).
//! - `chat`: `POST /api/v1/agents/{id}/chat` with the built-in responder, over the tenants of
//!   IDS_FILE in turn — the reads (the principal, the agent, the tenant's memory version), then
//!   the hold (`src/credits.rs`: the balance, the hold row, the tenant's update) and the
//!   exchange (`src/conversations.rs`: the hold's deletion, the session, both messages, both
//!   events, the settlement and its ledger entry), each of the two a transaction of its own.
//!
//! Each thread reads on a connection of its own set up as the service's readers are (WAL,
//! `query_only`, the same `mmap_size`). The writes go to one writer thread with a connection
//! set up as the service's writer is (SQLite has one writer at a time): it runs the units that
//! are waiting when it is free in one `BEGIN IMMEDIATE … COMMIT`, as the service's writer does
//! (group commit), but without the service's savepoint per unit (a unit that failed would end
//! the run here). Each statement is prepared once per connection (diesel's statement cache) and
//! rows are read as text, as the service reads them before decoding.
//!
//! ```text
//! cargo run --release -p agentry-store --example sqlite_baseline -- agents DATABASE_PATH THREADS SECONDS USER_ID FAMILY_ID TENANT_ID
//! cargo run --release -p agentry-store --example sqlite_baseline -- chat DATABASE_PATH THREADS SECONDS IDS_FILE
//! ```
//!
//! IDS_FILE: one tenant per line, `USER_ID FAMILY_ID TENANT_ID AGENT_ID`.
#![allow(clippy::print_stdout)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
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

const AGENT: &str = "SELECT `agents`.`id`, `agents`.`tenant_id`, `agents`.`name`, `agents`.`agent_type`, `agents`.`status`, \
     `agents`.`description`, `agents`.`memory_types`, `agents`.`config`, `agents`.`created_at`, `agents`.`updated_at` \
     FROM `agents` WHERE ((`agents`.`tenant_id` = ?) AND (`agents`.`id` = ?)) LIMIT ?";

const MEMORY_VERSION: &str = "SELECT `memory_scopes`.`version`, `memory_scopes`.`reset_version` FROM `memory_scopes` \
     WHERE (`memory_scopes`.`tenant_id` = ?) LIMIT ?";

const BALANCE: &str = "SELECT `tenants`.`credits` FROM `tenants` WHERE (`tenants`.`id` = ?) LIMIT ?";

const INSERT_HOLD: &str =
    "INSERT INTO `credit_holds` (`id`, `tenant_id`, `amount`, `created_at`) VALUES (?, ?, ?, ?)";

const TAKE: &str = "UPDATE `tenants` SET `credits` = (`tenants`.`credits` - ?), `held` = (`tenants`.`held` + ?) \
     WHERE ((`tenants`.`id` = ?) AND (`tenants`.`credits` >= ?))";

const RELEASE: &str =
    "DELETE FROM `credit_holds` WHERE (`credit_holds`.`id` = ?) RETURNING `credit_holds`.`amount`";

const INSERT_SESSION: &str = "INSERT INTO `chat_sessions` (`id`, `tenant_id`, `agent_id`, `created_at`) \
     VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING";

const INSERT_MESSAGE: &str = "INSERT INTO `chat_messages` (`id`, `tenant_id`, `agent_id`, `session_id`, `role`, \
     `content`, `prompt_tokens`, `completion_tokens`, `created_at`, `incomplete`, `tool_calls`, `tool_call_id`, \
     `tool_name`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

const INSERT_EVENT: &str =
    "INSERT INTO `events` (`id`, `tenant_id`, `event_type`, `data`, `created_at`) VALUES (?, ?, ?, ?, ?)";

const SETTLE: &str = "UPDATE `tenants` SET `credits` = (`tenants`.`credits` + ?), `held` = (`tenants`.`held` + ?), \
     `ledger_seq` = (`tenants`.`ledger_seq` + ?) WHERE (`tenants`.`id` = ?) \
     RETURNING `tenants`.`credits`, `tenants`.`held`, `tenants`.`ledger_seq`";

const INSERT_LEDGER: &str = "INSERT INTO `credit_ledger` (`id`, `tenant_id`, `delta`, `balance_after`, `reason`, \
     `created_at`, `reference`, `seq`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";

/// The benchmark's chat message and the built-in responder's reply to it, with its usage.
const QUESTION: &str = "Hello! What can you tell me about the weather on Mars today?";
const REPLY: &str = "I am Agentry's built-in responder: no language model is connected, so I can only reflect what \
     I receive. You said: \"Hello! What can you tell me about the weather on Mars today?\" (14 tokens). This is the \
     first message of our conversation.";

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

/// An agent as the service's agent statement reads it.
#[derive(QueryableByName)]
#[allow(dead_code)]
struct Agent {
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
}

/// A row of the page: an agent and the tenant's total.
#[derive(QueryableByName)]
struct AgentRow {
    #[diesel(embed)]
    #[allow(dead_code)]
    agent: Agent,
    #[diesel(sql_type = BigInt)]
    total: i64,
}

/// `GET /api/v1/agents`' statements.
fn list_agents(conn: &mut SqliteConnection, user: &str, family: &str, tenant: &str) -> anyhow::Result<()> {
    principal(conn, user, family)?;
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

fn principal(conn: &mut SqliteConnection, user: &str, family: &str) -> anyhow::Result<()> {
    let principal: Vec<Membership> = diesel::sql_query(PRINCIPAL)
        .bind::<Text, _>(user)
        .bind::<Bool, _>(true)
        .bind::<Text, _>(family)
        .bind::<Text, _>(user)
        .bind::<Text, _>("revoked")
        .load(conn)?;
    anyhow::ensure!(!principal.is_empty(), "no membership: wrong user, family or database");
    Ok(())
}

#[derive(QueryableByName)]
#[allow(dead_code)]
struct MemoryVersion {
    #[diesel(sql_type = BigInt)]
    version: i64,
    #[diesel(sql_type = BigInt)]
    reset_version: i64,
}

#[derive(QueryableByName)]
struct Credits {
    #[diesel(sql_type = BigInt)]
    credits: i64,
}

#[derive(QueryableByName)]
struct Amount {
    #[diesel(sql_type = BigInt)]
    amount: i64,
}

#[derive(QueryableByName)]
struct Settled {
    #[diesel(sql_type = BigInt)]
    credits: i64,
    #[diesel(sql_type = BigInt)]
    held: i64,
    #[diesel(sql_type = BigInt)]
    ledger_seq: i64,
}

/// One benchmark tenant of the chat baseline.
struct Tenant {
    user: String,
    family: String,
    tenant: String,
    agent: String,
}

/// The time as the service stores it on SQLite (`src/types.rs`).
fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// A unit of work for the writer thread: its statements, answering a number (the hold's amount).
type Unit = Box<dyn FnOnce(&mut SqliteConnection) -> anyhow::Result<i64> + Send>;

/// The most units in one transaction, as in the service's writer.
const MAX_GROUP: usize = 64;

/// A unit waiting for the writer, with where its answer goes once its group committed.
type Queued = (Unit, mpsc::SyncSender<anyhow::Result<i64>>);

/// The way to the writer thread.
#[derive(Clone)]
struct Writer(mpsc::Sender<Queued>);

impl Writer {
    /// Runs `unit` in the writer's next group and waits for the group's commit.
    fn run(&self, unit: Unit) -> anyhow::Result<i64> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.0.send((unit, reply)).map_err(|_| anyhow::anyhow!("the writer stopped"))?;
        answer.recv().map_err(|_| anyhow::anyhow!("the writer stopped"))?
    }
}

/// The writer thread's loop: the units waiting when it is free, in one transaction, then each
/// unit's answer, until every [`Writer`] is dropped.
fn write_in_groups(mut conn: SqliteConnection, units: &mpsc::Receiver<Queued>) -> anyhow::Result<()> {
    while let Ok(first) = units.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match units.try_recv() {
                Ok(unit) => group.push(unit),
                Err(_) => break,
            }
        }
        conn.batch_execute("BEGIN IMMEDIATE")?;
        let done: Vec<_> = group.into_iter().map(|(unit, reply)| (unit(&mut conn), reply)).collect();
        let commit = conn.batch_execute("COMMIT");
        for (result, reply) in done {
            let answer = match &commit {
                Ok(()) => result,
                Err(e) => Err(anyhow::anyhow!("the commit failed: {e}")),
            };
            let _ = reply.send(answer);
        }
        commit?;
    }
    Ok(())
}

/// One chat's statements: the reads on the thread's reader, then the hold and the exchange
/// each a unit of the writer. `id` makes the new rows' ids unique.
fn chat(reader: &mut SqliteConnection, writer: &Writer, t: &Tenant, id: u64) -> anyhow::Result<()> {
    principal(reader, &t.user, &t.family)?;
    let agent: Vec<Agent> = diesel::sql_query(AGENT)
        .bind::<Text, _>(&t.tenant)
        .bind::<Text, _>(&t.agent)
        .bind::<BigInt, _>(1)
        .load(reader)?;
    anyhow::ensure!(agent.len() == 1, "no such agent");
    let _version: Vec<MemoryVersion> =
        diesel::sql_query(MEMORY_VERSION).bind::<Text, _>(&t.tenant).bind::<BigInt, _>(1).load(reader)?;

    let (tenant, agent) = (t.tenant.clone(), t.agent.clone());
    let hold = format!("hld_b{id}");
    let (wanted, cost) = (2_i64, 1_i64);
    let held = writer.run(Box::new({
        let (tenant, hold) = (tenant.clone(), hold.clone());
        move |conn| {
            let balance: Credits =
                diesel::sql_query(BALANCE).bind::<Text, _>(&tenant).bind::<BigInt, _>(1).get_result(conn)?;
            let amount = wanted.min(balance.credits);
            anyhow::ensure!(amount >= 1, "the benchmark tenant ran out of credits");
            diesel::sql_query(INSERT_HOLD)
                .bind::<Text, _>(&hold)
                .bind::<Text, _>(&tenant)
                .bind::<BigInt, _>(amount)
                .bind::<Text, _>(now())
                .execute(conn)?;
            let taken = diesel::sql_query(TAKE)
                .bind::<BigInt, _>(amount)
                .bind::<BigInt, _>(amount)
                .bind::<Text, _>(&tenant)
                .bind::<BigInt, _>(amount)
                .execute(conn)?;
            anyhow::ensure!(taken == 1, "the balance moved");
            Ok(amount)
        }
    }))?;
    anyhow::ensure!(held == wanted, "held {held}");

    writer.run(Box::new(move |conn| {
        let session = format!("ses_b{id}");
        let released: Amount = diesel::sql_query(RELEASE).bind::<Text, _>(&hold).get_result(conn)?;
        let at = now();
        diesel::sql_query(INSERT_SESSION)
            .bind::<Text, _>(&session)
            .bind::<Text, _>(&tenant)
            .bind::<Text, _>(&agent)
            .bind::<Text, _>(&at)
            .execute(conn)?;
        for (suffix, role, content, prompt, completion) in
            [("u", "user", QUESTION, 0_i64, 0_i64), ("a", "assistant", REPLY, 37, 55)]
        {
            diesel::sql_query(INSERT_MESSAGE)
                .bind::<Text, _>(format!("msg_b{id}{suffix}"))
                .bind::<Text, _>(&tenant)
                .bind::<Text, _>(&agent)
                .bind::<Text, _>(&session)
                .bind::<Text, _>(role)
                .bind::<Text, _>(content)
                .bind::<BigInt, _>(prompt)
                .bind::<BigInt, _>(completion)
                .bind::<Text, _>(&at)
                .bind::<Bool, _>(false)
                .bind::<Nullable<Text>, _>(None::<String>)
                .bind::<Nullable<Text>, _>(None::<String>)
                .bind::<Nullable<Text>, _>(None::<String>)
                .execute(conn)?;
        }
        for (suffix, kind, data) in [
            (
                "c",
                "agent.message.created",
                serde_json::json!({"role": "user", "content": QUESTION, "agent_id": agent,
                    "message_id": format!("msg_b{id}u"), "conversation_id": session}),
            ),
            (
                "d",
                "agent.message.completed",
                serde_json::json!({"content": REPLY, "agent_id": agent, "latency_ms": 1,
                    "message_id": format!("msg_b{id}a"), "tokens_used": 92, "conversation_id": session}),
            ),
        ] {
            diesel::sql_query(INSERT_EVENT)
                .bind::<Text, _>(format!("evt_b{id}{suffix}"))
                .bind::<Text, _>(&tenant)
                .bind::<Text, _>(kind)
                .bind::<Text, _>(data.to_string())
                .bind::<Text, _>(&at)
                .execute(conn)?;
        }
        let settled: Settled = diesel::sql_query(SETTLE)
            .bind::<BigInt, _>(released.amount - cost)
            .bind::<BigInt, _>(-released.amount)
            .bind::<BigInt, _>(1)
            .bind::<Text, _>(&tenant)
            .get_result(conn)?;
        diesel::sql_query(INSERT_LEDGER)
            .bind::<Text, _>(format!("led_b{id}"))
            .bind::<Text, _>(&tenant)
            .bind::<BigInt, _>(-cost)
            .bind::<BigInt, _>(settled.credits + settled.held)
            .bind::<Text, _>("chat_usage")
            .bind::<Text, _>(&at)
            .bind::<Nullable<Text>, _>(Some(format!("msg_b{id}a")))
            .bind::<BigInt, _>(settled.ledger_seq)
            .execute(conn)?;
        Ok(0)
    }))?;
    Ok(())
}

/// A connection set up as the service's are (`src/sqlite.rs`): readers `query_only`.
fn open(path: &str, query_only: bool) -> anyhow::Result<SqliteConnection> {
    let mut conn = SqliteConnection::establish(path)?;
    conn.batch_execute(&format!(
        "PRAGMA busy_timeout = 5000; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
         PRAGMA foreign_keys = ON; PRAGMA query_only = {}; PRAGMA mmap_size = 1073741824;",
        if query_only { "ON" } else { "OFF" }
    ))?;
    Ok(conn)
}

/// Runs `request` on `threads` threads, each with a reader of its own, for `duration`; prints
/// the requests completed per second.
fn run(
    path: &str,
    threads: usize,
    duration: Duration,
    request: impl Fn(&mut SqliteConnection) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let counts = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<u64> {
                    let mut conn = open(path, true)?;
                    let mut done = 0;
                    while started.elapsed() < duration {
                        request(&mut conn)?;
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

const USAGE: &str = "usage: sqlite_baseline agents DATABASE_PATH THREADS SECONDS USER_ID FAMILY_ID TENANT_ID\n       \
                     sqlite_baseline chat DATABASE_PATH THREADS SECONDS IDS_FILE";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (route, path, threads, seconds, rest) = match args.as_slice() {
        [route, path, threads, seconds, rest @ ..] => (route.as_str(), path, threads, seconds, rest),
        _ => anyhow::bail!(USAGE),
    };
    let threads: usize = threads.parse()?;
    let duration = Duration::from_secs_f64(seconds.parse()?);
    match (route, rest) {
        ("agents", [user, family, tenant]) => {
            run(path, threads, duration, |conn| list_agents(conn, user, family, tenant))
        }
        ("chat", [ids]) => {
            let tenants = std::fs::read_to_string(ids)?
                .lines()
                .filter(|line| !line.trim().is_empty())
                .map(|line| match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                    [user, family, tenant, agent] => Ok(Tenant {
                        user: (*user).to_owned(),
                        family: (*family).to_owned(),
                        tenant: (*tenant).to_owned(),
                        agent: (*agent).to_owned(),
                    }),
                    _ => anyhow::bail!("a line of {ids} is not USER_ID FAMILY_ID TENANT_ID AGENT_ID: {line}"),
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            anyhow::ensure!(!tenants.is_empty(), "{ids} names no tenant");
            let (units, queue) = mpsc::channel();
            let conn = open(path, false)?;
            let writer_thread = std::thread::spawn(move || write_in_groups(conn, &queue));
            let writer = Writer(units);
            // The tenants in turn, as the benchmark's wrk script takes them; ids unique per run.
            let next = AtomicU64::new(0);
            let run_id = std::process::id();
            let ran = run(path, threads, duration, |reader| {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let tenant = &tenants[usize::try_from(n)? % tenants.len()];
                chat(reader, &writer, tenant, u64::from(run_id) * 1_000_000_000 + n)
            });
            drop(writer);
            writer_thread.join().map_err(|_| anyhow::anyhow!("the writer panicked"))??;
            ran
        }
        _ => anyhow::bail!(USAGE),
    }
}

//! `agentry`: the Agentry service.

use std::io::Write as _;
use std::path::PathBuf;

use agentry_domain::billing::CreditRepository as _;
use agentry_domain::events::consumers::EventStream as _;
use agentry_domain::ids::{EventId, TenantId};
use agentry_domain::tenancy::Plan;
use agentry_server::{Application, Config, adapters, telemetry};
use agentry_store::{ConsumerStore, CreditStore};
use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: a request allocates often and briefly, and glibc's
/// malloc was a sixth of the hot path's CPU time (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Agentry: a multi-tenant platform for AI agents.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Configuration file; missing is fine (defaults and AGENTRY_* variables apply).
    #[arg(long, env = "AGENTRY_CONFIG", default_value = "agentry.toml", global = true)]
    config: PathBuf,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the HTTP API (the default).
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Operator actions on tenants.
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// Operator actions on memory.
    #[command(subcommand)]
    Memory(MemoryCommand),
    /// Operator actions on knowledge bases.
    #[command(subcommand)]
    Knowledge(KnowledgeCommand),
    /// The outbox's consumers (webhook fan-out, memory of chats).
    #[command(subcommand)]
    Events(EventsCommand),
}

#[derive(Debug, Subcommand)]
enum EventsCommand {
    /// Each consumer's cursor, how many events it is behind, and the events it failed.
    Consumers,
    /// Make a consumer's parked events due again (all of them, or one).
    Retry {
        /// The consumer's name, as `agentry events consumers` shows it.
        consumer: String,
        /// Only this event (`evt_…`).
        event_id: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum KnowledgeCommand {
    /// Queue every indexed file whose chunks were embedded by another model than the
    /// configured one for ingestion again (its chunks stay searchable until the new ones
    /// replace them); the running service's workers do the work.
    Reindex {
        /// Every indexed file, whatever model embedded it.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Debug, Subcommand)]
enum MemoryCommand {
    /// Re-embed every memory whose embedding was made by another model than the configured
    /// one (after switching models, or after `make model` replaced the hashing fallback).
    Reindex {
        /// Entries embedded per batch.
        #[arg(long, default_value_t = 64)]
        batch: usize,
    },
}

#[derive(Debug, Subcommand)]
enum TenantCommand {
    /// Move a tenant to another plan (starter, pro, enterprise); its rate limits follow.
    SetPlan {
        /// The tenant's id (`ten_…`).
        tenant_id: String,
        /// `starter`, `pro` or `enterprise`.
        plan: String,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = Config::load(&cli.config)?;
    telemetry::init(&config);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => Application::build(&config).await?.run_until_stopped().await,
        Command::Migrate => {
            let db = adapters::open_database(&config).await?;
            let applied = db.migrate().await?;
            tracing::info!(applied, "migrations applied");
            Ok(())
        }
        Command::Memory(MemoryCommand::Reindex { batch }) => {
            let db = adapters::open_database(&config).await?;
            db.migrate().await?;
            let memory = adapters::memory_service(&config, &db, adapters::build_embedder(&config)?, None);
            let mut total = 0;
            loop {
                let done = memory.reindex_batch(batch.max(1)).await?;
                if done == 0 {
                    break;
                }
                total += done;
                tracing::info!(done = total, "re-embedded");
            }
            tracing::info!(total, model = %memory.embedder().model().id, "memory reindexed");
            Ok(())
        }
        Command::Knowledge(KnowledgeCommand::Reindex { all }) => {
            let db = adapters::open_database(&config).await?;
            db.migrate().await?;
            let ids: std::sync::Arc<dyn agentry_domain::ids::IdGenerator> =
                std::sync::Arc::new(agentry_server::system::UlidIds::default());
            let clock: std::sync::Arc<dyn agentry_domain::time::Clock> =
                std::sync::Arc::new(agentry_server::system::SystemClock);
            let (knowledge, _) = agentry_server::knowledge::knowledge_services(
                &config,
                &db,
                adapters::build_embedder(&config)?,
                ids,
                clock,
            );
            let queued = knowledge.reindex(all).await?;
            tracing::info!(queued, "knowledge files queued for ingestion again");
            Ok(())
        }
        Command::Events(command) => {
            let db = adapters::open_database(&config).await?;
            db.migrate().await?;
            let stream = ConsumerStore::new(db);
            match command {
                EventsCommand::Consumers => {
                    let report = agentry_server::event_report::consumers_report(&stream.status().await?);
                    std::io::stdout().lock().write_all(report.as_bytes())?;
                }
                EventsCommand::Retry { consumer, event_id } => {
                    let event = event_id.map(EventId::from_string);
                    let n = stream.retry_parked(&consumer, event, chrono::Utc::now()).await?;
                    writeln!(std::io::stdout().lock(), "{n} parked events of {consumer} are due again")?;
                }
            }
            Ok(())
        }
        Command::Tenant(TenantCommand::SetPlan { tenant_id, plan }) => {
            let plan: Plan = plan.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
            let db = adapters::open_database(&config).await?;
            let tenant = TenantId::from_string(tenant_id);
            anyhow::ensure!(CreditStore::new(db).set_plan(&tenant, plan).await?, "no tenant {tenant}");
            tracing::info!(%tenant, plan = plan.as_str(), "plan changed");
            Ok(())
        }
    }
}

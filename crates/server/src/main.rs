//! `agentry`: the Agentry service.

use std::path::PathBuf;

use agentry_server::{Application, Config, app, telemetry};
use clap::{Parser, Subcommand};

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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = Config::load(&cli.config)?;
    telemetry::init(&config);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => Application::build(&config).await?.run_until_stopped().await,
        Command::Migrate => {
            let db = app::open_database(&config).await?;
            let applied = db.migrate().await?;
            tracing::info!(applied, "migrations applied");
            Ok(())
        }
    }
}

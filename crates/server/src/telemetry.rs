//! Structured logs: `text` or `json` lines, filtered by `AGENTRY_LOG` (or `RUST_LOG`).

use tracing_subscriber::EnvFilter;

use crate::config::{Config, LogFormat};

/// Installs the global subscriber. Calling it twice is harmless (the second call is ignored),
/// which lets tests start several applications in one process.
pub fn init(config: &Config) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .or_else(|| EnvFilter::try_new(&config.log).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).with_ansi(ansi);
    let _ = match config.log_format {
        LogFormat::Json => {
            builder.json().flatten_event(true).with_current_span(true).with_span_list(false).try_init()
        }
        LogFormat::Text => builder.compact().try_init(),
    };
}

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
    // actix-http logs every malformed request and dropped connection at ERROR ("stream error:
    // request parse error"): a client's fault, which the connection wrapper answers in JSON and
    // logs at INFO. A filter that names the target keeps its own say.
    let filter = if config.log.contains("actix_http")
        || std::env::var("RUST_LOG").is_ok_and(|f| f.contains("actix_http"))
    {
        filter
    } else {
        filter.add_directive("actix_http::h1::dispatcher=off".parse().expect("a valid directive"))
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).with_ansi(ansi);
    let _ = match config.log_format {
        LogFormat::Json => {
            builder.json().flatten_event(true).with_current_span(true).with_span_list(false).try_init()
        }
        LogFormat::Text => builder.compact().try_init(),
    };
}

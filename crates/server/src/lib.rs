//! Agentry's composition root: configuration, wiring of every adapter into the domain's ports,
//! the `agentry` command line, logging and graceful shutdown.

pub mod app;
pub mod config;
pub mod keys;
pub mod system;
pub mod telemetry;

pub use app::Application;
pub use config::Config;

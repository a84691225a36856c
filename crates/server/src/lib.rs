//! Agentry's composition root: configuration, wiring of every adapter into the domain's ports,
//! the `agentry` command line, logging and graceful shutdown.

pub mod adapters;
pub mod app;
pub mod background;
pub mod config;
pub mod event_report;
pub mod keys;
pub mod knowledge;
pub mod metrics;
pub mod runner;
pub mod services;
pub mod steps;
pub mod system;
pub mod telemetry;
pub mod tools;
pub mod workers;

pub use app::{Application, Overrides};
pub use config::{ApiEnvelope, Config};

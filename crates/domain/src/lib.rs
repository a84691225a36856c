#![doc = include_str!("../README.md")]
//!
//! # Layout
//! - [`identity`]: users, passwords, access and refresh tokens, the account service.
//! - [`tenancy`]: tenants, memberships and roles, plans.
//! - [`billing`]: the credit ledger.
//! - [`ids`], [`time`], [`secrets`]: identifiers, the clock and randomness, all behind ports so
//!   tests are deterministic.
//! - [`mail`]: the e-mail port; [`ratelimit`]: fixed-window quotas over a counting port.
//! - [`validation`]: the field-level error type every value object reports with.

pub mod billing;
pub mod identity;
pub mod ids;
pub mod mail;
pub mod ratelimit;
pub mod secrets;
pub mod tenancy;
pub mod time;
pub mod validation;

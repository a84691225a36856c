//! Memory that learns from conversations: facts extracted from each stored exchange, each
//! compared with what the agent already knows and decided on (add it, update a fact, invalidate
//! a contradicted one, or nothing), applied with its history in one transaction.

pub mod decision;
pub mod rules;

/// A fact found in an exchange, before it is compared with what is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The fact, as the agent will read it.
    pub text: String,
    /// What it is about (`home`, `name`, …) when its kind has one: a new fact on a topic
    /// replaces the current one.
    pub topic: Option<String>,
}

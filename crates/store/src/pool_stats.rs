//! [`PoolStats`]: the state of a database's connections, which both backends report
//! (`database.rs` for PostgreSQL's pools, `sqlite.rs` for the readers and the writer thread).

/// The state of a database's connections, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Most connections (SQLite: reader connections) that may be open.
    pub max: usize,
    /// Connections open.
    pub open: usize,
    /// Connections lent to a request or unit of work.
    pub in_use: usize,
    /// Callers waiting for a connection.
    pub waiting: usize,
    /// SQLite: units of work waiting for the writer thread.
    pub queued_writes: usize,
    /// SQLite: transactions the writer committed.
    pub commits: u64,
    /// SQLite: units of work the writer ran.
    pub write_units: u64,
}

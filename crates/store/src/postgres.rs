//! The PostgreSQL connection repositories query through.

use std::future::Future;

use diesel::QueryResult;
use diesel::pg::Pg;
use diesel::query_builder::{AsQuery, QueryFragment, QueryId};
use diesel_async::{AsyncConnectionCore, AsyncPgConnection, SimpleAsyncConnection};

use crate::statements::{CachedBySql, uncacheable};

/// A PostgreSQL connection as repositories see it: diesel-async's, except that every query
/// runs as a prepared statement kept for the connection's life, including the updates, upserts
/// and inserts of optional values diesel would prepare afresh each time (see
/// [`crate::statements`]).
///
/// `C` is `&mut AsyncPgConnection` for a pooled connection, or `&AsyncPgConnection` (a
/// [`PgPipeline`]) for pipelining.
#[derive(Clone, Copy)]
pub struct PgConn<C>(pub(crate) C);

impl<'a> PgConn<&'a mut AsyncPgConnection> {
    /// Wraps a pooled connection (a pool's guard or a transaction's connection, by deref).
    pub(crate) fn new(conn: &'a mut AsyncPgConnection) -> Self {
        Self(conn)
    }
}

/// A shared handle to a PostgreSQL connection for **pipelining**: statements started together
/// through copies of it go out back to back and their answers come back in order, so a batch of
/// independent statements costs one round trip.
pub type PgPipeline<'a> = PgConn<&'a AsyncPgConnection>;

impl<C: SimpleAsyncConnection> SimpleAsyncConnection for PgConn<C> {
    fn batch_execute(&mut self, query: &str) -> impl Future<Output = QueryResult<()>> + Send {
        self.0.batch_execute(query)
    }
}

impl<C: AsyncConnectionCore<Backend = Pg>> AsyncConnectionCore for PgConn<C> {
    type LoadFuture<'conn, 'query> = C::LoadFuture<'conn, 'query>;
    type ExecuteFuture<'conn, 'query> = C::ExecuteFuture<'conn, 'query>;
    type Stream<'conn, 'query> = C::Stream<'conn, 'query>;
    type Row<'conn, 'query> = C::Row<'conn, 'query>;
    type Backend = Pg;

    fn load<'conn, 'query, T>(&'conn mut self, source: T) -> Self::LoadFuture<'conn, 'query>
    where
        T: AsQuery + 'query,
        T::Query: QueryFragment<Pg> + QueryId + 'query,
    {
        let query = source.as_query();
        if uncacheable(&query, &Pg) { self.0.load(CachedBySql(query)) } else { self.0.load(query) }
    }

    fn execute_returning_count<'conn, 'query, T>(
        &'conn mut self,
        source: T,
    ) -> Self::ExecuteFuture<'conn, 'query>
    where
        T: QueryFragment<Pg> + QueryId + 'query,
    {
        if uncacheable(&source, &Pg) {
            self.0.execute_returning_count(CachedBySql(source))
        } else {
            self.0.execute_returning_count(source)
        }
    }
}

/// What a repository body asks of its connection beyond running queries, on either backend.
pub(crate) trait Pipelining {
    /// A handle for pipelined statements: PostgreSQL only (SQLite runs each statement where it
    /// is awaited, and nothing is gained by batching).
    fn pipeline(&mut self) -> Option<PgPipeline<'_>>;
}

impl Pipelining for PgConn<&mut AsyncPgConnection> {
    fn pipeline(&mut self) -> Option<PgPipeline<'_>> {
        Some(PgConn(&*self.0))
    }
}

impl Pipelining for crate::sqlite::SqliteConn {
    fn pipeline(&mut self) -> Option<PgPipeline<'_>> {
        None
    }
}

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
/// `C` is `&mut AsyncPgConnection`: a pooled connection, or a transaction's.
pub struct PgConn<C>(pub(crate) C);

impl<'a> PgConn<&'a mut AsyncPgConnection> {
    /// Wraps a pooled connection (a pool's guard or a transaction's connection, by deref).
    pub(crate) fn new(conn: &'a mut AsyncPgConnection) -> Self {
        Self(conn)
    }

    /// Inside a unit of work that stores work in `queue`: tells the other instances when it
    /// commits (see [`crate::signals`]).
    pub(crate) async fn announce(&mut self, queue: crate::signals::WorkQueue) -> QueryResult<()> {
        self.batch_execute(&crate::signals::notify_sql(queue)).await
    }
}

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

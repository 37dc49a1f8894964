//! Statements prepared once per connection. The store's SQL is a fixed set of texts: each is
//! parsed and described once on a connection (deadpool's statement cache) and then runs in
//! one round trip, where a text statement takes two (prepare, then run) and is planned anew
//! each time. A task's three calls make some 40 statements: this halves their round trips.

use std::future::Future;

use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, Row};

/// A statement's parameters.
type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// `execute`, `query`, `query_one` and `query_opt` of a connection or a transaction, each
/// running `sql` as the statement the connection prepared for it.
pub(super) trait Prepared: GenericClient {
    /// The rows `sql` changed.
    fn execute_prepared<'a>(
        &'a self,
        sql: &'a str,
        params: Params<'a>,
    ) -> impl Future<Output = Result<u64, Error>> + Send + 'a {
        async move { self.execute(&self.prepare_cached(sql).await?, params).await }
    }

    /// The rows `sql` returns.
    fn query_prepared<'a>(
        &'a self,
        sql: &'a str,
        params: Params<'a>,
    ) -> impl Future<Output = Result<Vec<Row>, Error>> + Send + 'a {
        async move { self.query(&self.prepare_cached(sql).await?, params).await }
    }

    /// The one row `sql` returns; an error for none or more.
    fn query_one_prepared<'a>(
        &'a self,
        sql: &'a str,
        params: Params<'a>,
    ) -> impl Future<Output = Result<Row, Error>> + Send + 'a {
        async move {
            self.query_one(&self.prepare_cached(sql).await?, params)
                .await
        }
    }

    /// The row `sql` returns, if any; an error for more than one.
    fn query_opt_prepared<'a>(
        &'a self,
        sql: &'a str,
        params: Params<'a>,
    ) -> impl Future<Output = Result<Option<Row>, Error>> + Send + 'a {
        async move {
            self.query_opt(&self.prepare_cached(sql).await?, params)
                .await
        }
    }
}

impl<Client: GenericClient> Prepared for Client {}

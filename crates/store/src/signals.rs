//! Wake-ups of the background workers when work is stored, so they need not poll for it.
//!
//! Every unit of work that stores work for a worker — a job, deliveries, an execution, a
//! knowledge file, or outbox events for the fan-out — signals its [`WorkQueue`] once it has committed: in-process
//! at once ([`WorkSignals`]), and on PostgreSQL also to every other instance of the same
//! database and schema, by a `NOTIFY` sent from the very transaction that stores the work (so
//! it is delivered at commit, and never for work rolled back). Each instance keeps one
//! connection listening ([`listen`]). Workers still poll, rarely, as a safety net.
//!
//! Outbox events are the exception: they are written by nearly every request (chat, agents,
//! credits), and a `NOTIFY` makes PostgreSQL serialise the commits of the transactions that
//! send it. The instance that wrote an event fans it out itself, woken in-process.

use std::sync::Arc;
use std::time::Duration;

use diesel::QueryableByName;
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _, SimpleAsyncConnection as _};
use futures_util::StreamExt as _;
use tokio::sync::Notify;

/// The channel of the `NOTIFY`s; the payload is `<schema>:<queue>`.
const CHANNEL: &str = "agentry_work";

agentry_domain::string_enum! {
    /// A queue whose worker can be woken.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum WorkQueue {
        /// Jobs (mail).
        Jobs => "jobs",
        /// Webhook deliveries.
        Deliveries => "deliveries",
        /// Workflow executions.
        Executions => "executions",
        /// Outbox events waiting for the webhook fan-out.
        Outbox => "outbox",
        /// Knowledge files waiting for ingestion.
        Knowledge => "knowledge",
    }
}

impl WorkQueue {
    fn index(self) -> usize {
        self as usize
    }
}

/// The wake-ups of one process's workers, one per queue. A signal that comes while the worker
/// is busy is kept, so it looks again as soon as it is free: no signal is lost.
#[derive(Debug, Default)]
pub struct WorkSignals {
    notifies: [Arc<Notify>; 5],
}

impl WorkSignals {
    /// Wakes the worker of `queue`.
    pub fn notify(&self, queue: WorkQueue) {
        self.notifies[queue.index()].notify_one();
    }

    /// Wakes every worker (an instance went silent: its work is free to take over).
    pub fn notify_all(&self) {
        for queue in WorkQueue::ALL {
            self.notify(queue);
        }
    }

    /// What the worker of `queue` waits on.
    pub fn waiter(&self, queue: WorkQueue) -> Arc<Notify> {
        self.notifies[queue.index()].clone()
    }
}

/// The statement that tells the other instances of this database and schema that work was
/// stored in `queue`, delivered when its transaction commits.
pub(crate) fn notify_sql(queue: WorkQueue) -> String {
    format!("SELECT pg_notify('{CHANNEL}', current_schema() || ':{}')", queue.as_str())
}

#[derive(QueryableByName)]
struct SchemaRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    schema: String,
}

/// Listens on PostgreSQL at `url` for work other instances (and this one) stored, and wakes this
/// process's workers, until the process ends. A lost connection is opened again after a
/// second, and every worker is woken then (what was signalled meanwhile was missed).
pub fn listen(url: String, signals: Arc<WorkSignals>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match listen_once(&url, &signals).await {
                Ok(()) => tracing::warn!("the connection listening for stored work closed; opening it again"),
                Err(e) => {
                    tracing::warn!(error = %e, "listening for stored work failed; trying again in a second")
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            signals.notify_all();
        }
    })
}

async fn listen_once(url: &str, signals: &WorkSignals) -> anyhow::Result<()> {
    let mut conn = AsyncPgConnection::establish(url).await?;
    let schema: SchemaRow =
        diesel::sql_query("SELECT current_schema() AS schema").get_result(&mut conn).await?;
    conn.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
    let mut notifications = std::pin::pin!(conn.notifications_stream());
    while let Some(notification) = notifications.next().await {
        let notification = notification?;
        let Some((from_schema, queue)) = notification.payload.split_once(':') else { continue };
        if from_schema != schema.schema {
            continue;
        }
        if let Some(queue) = WorkQueue::parse(queue) {
            signals.notify(queue);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_round_trip_their_names() {
        for queue in WorkQueue::ALL {
            assert_eq!(WorkQueue::parse(queue.as_str()), Some(queue));
        }
        assert_eq!(WorkQueue::parse("mail"), None);
        assert!(notify_sql(WorkQueue::Jobs).ends_with("':jobs')"));
    }

    #[tokio::test]
    async fn a_signal_that_comes_while_nobody_waits_is_kept() {
        let signals = WorkSignals::default();
        signals.notify(WorkQueue::Executions);
        // Already notified: the wait ends at once.
        tokio::time::timeout(Duration::from_secs(5), signals.waiter(WorkQueue::Executions).notified())
            .await
            .expect("the kept signal");
    }
}

//! Background workers. Each loop lives here; what it decides lives in the domain
//! ([`JobRunner`], the stale-hold sweep). Work is always a row first (see
//! `agentry_domain::jobs`), so a worker that dies loses nothing: another claims the row when
//! its lease ends.

use std::sync::Arc;
use std::time::Duration;

use agentry_domain::billing::BillingService;
use agentry_domain::jobs::{InstanceRegistry, JobRunner};
use agentry_domain::time::Clock;
use agentry_domain::webhooks::WebhookService;
use agentry_domain::workflows::{ExecutionService, ExecutionWaker};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

/// Runs due jobs until `stop` turns true, looking every `poll`. A batch that started is
/// finished before the loop looks at `stop` again.
///
/// A request that stores a job does not wake the worker: the job runs at the next poll, apart
/// from the request. So the work a mail request causes — more for an address with an account
/// than for one without — never runs alongside that request and cannot show in its timing.
pub fn spawn_job_worker(
    runner: JobRunner,
    poll: Duration,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if *stop.borrow() {
                return;
            }
            match runner.run_due().await {
                Ok(0) => {}
                // More may be due: look again at once.
                Ok(_) => continue,
                Err(e) => tracing::error!(error = ?e, "claiming jobs failed"),
            }
            tokio::select! {
                () = tokio::time::sleep(poll) => {}
                _ = stop.changed() => {}
            }
        }
    })
}

/// Returns the credits of chats that never settled (the process died mid-chat) once they are
/// older than any chat can take.
pub fn spawn_hold_sweeper(
    billing: BillingService,
    llm_timeout_secs: u64,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let max_age = chrono::Duration::seconds(i64::try_from(llm_timeout_secs).unwrap_or(60) * 2 + 120);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            match billing.release_stale_holds(max_age).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(released = n, "returned the credits of unfinished chats"),
                Err(e) => tracing::error!(error = ?e, "releasing stale credit holds failed"),
            }
        }
    })
}

/// The two loops of outbound webhooks, until `stop` turns true:
///
/// - the dispatcher turns new outbox events into deliveries and, when it made some, wakes the
///   sender at once (so the first attempt follows the commit by about half a poll interval);
/// - the sender claims due deliveries and attempts them concurrently; a batch that started
///   is finished (its attempts recorded) before the loop looks at `stop` again, so SIGTERM
///   lets in-flight attempts finish.
///
/// Both only poll rows, so any number of instances can run them on one database.
pub fn spawn_webhook_workers(
    webhooks: WebhookService,
    poll: Duration,
    stop: watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let wake = Arc::new(Notify::new());
    let dispatcher = {
        let (webhooks, wake, mut stop) = (webhooks.clone(), wake.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                if *stop.borrow() {
                    return;
                }
                let full = match webhooks.dispatch().await {
                    Ok(d) => {
                        if d.deliveries > 0 {
                            wake.notify_one();
                        }
                        d.events >= webhooks.settings().dispatch_batch as usize
                    }
                    Err(e) => {
                        tracing::error!(error = ?e, "dispatching events to webhooks failed");
                        false
                    }
                };
                if full {
                    // A full batch: more events are waiting.
                    continue;
                }
                tokio::select! {
                    () = tokio::time::sleep(poll) => {}
                    _ = stop.changed() => {}
                }
            }
        })
    };
    let sender = {
        let mut stop = stop;
        tokio::spawn(async move {
            loop {
                if *stop.borrow() {
                    return;
                }
                match webhooks.deliver_due().await {
                    Ok(0) => {}
                    // More may be due: look again at once.
                    Ok(_) => continue,
                    Err(e) => tracing::error!(error = ?e, "claiming webhook deliveries failed"),
                }
                tokio::select! {
                    () = tokio::time::sleep(poll) => {}
                    () = wake.notified() => {}
                    _ = stop.changed() => {}
                }
            }
        })
    };
    vec![dispatcher, sender]
}

/// Wakes the execution worker of this process when a request stores an execution.
#[derive(Debug, Default)]
pub struct NotifyWaker(pub Arc<Notify>);

impl ExecutionWaker for NotifyWaker {
    fn wake(&self) {
        self.0.notify_one();
    }
}

/// Runs workflow executions until `stop` turns true: claims as many as it has free slots
/// (`concurrency` at once), runs each as a task, and looks again when one finishes, when this
/// process stores a new one (`wake`), or every `poll` (executions other instances stored, and
/// those whose worker died once their lease ends).
///
/// On stop it claims nothing more; the running ones finish the step they are in and are given
/// back (another instance, or this one after a restart, resumes them at their next step).
pub fn spawn_execution_worker(
    executions: ExecutionService,
    wake: Arc<Notify>,
    poll: Duration,
    concurrency: usize,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut running = tokio::task::JoinSet::new();
        let stopping = stop.clone();
        let keep_going: Arc<dyn Fn() -> bool + Send + Sync> = Arc::new(move || !*stopping.borrow());
        loop {
            if *stop.borrow() {
                break;
            }
            while running.try_join_next().is_some() {}
            let free = concurrency.saturating_sub(running.len());
            if free > 0 {
                match executions.claim(u32::try_from(free).unwrap_or(u32::MAX)).await {
                    Ok(claimed) => {
                        // Fewer than asked: none is waiting. As many: every slot is busy. Either
                        // way the next look waits for a wake-up, a finished run or the poll.
                        for execution in claimed {
                            let (service, keep_going) = (executions.clone(), keep_going.clone());
                            running.spawn(async move {
                                let id = execution.execution.id.clone();
                                if let Err(e) = service.run(execution, keep_going.as_ref()).await {
                                    tracing::error!(execution_id = %id, error = ?e, "running an execution failed; it resumes when its lease ends");
                                }
                            });
                        }
                    }
                    Err(e) => tracing::error!(error = ?e, "claiming workflow executions failed"),
                }
            }
            tokio::select! {
                () = tokio::time::sleep(poll) => {}
                () = wake.notified() => {}
                _ = stop.changed() => {}
                Some(_) = running.join_next(), if !running.is_empty() => {}
            }
        }
        while running.join_next().await.is_some() {}
    })
}

/// This instance's heartbeat: while it beats, the leases the instance takes are its own; once
/// it is silent for the instance timeout (the process was killed), any instance may take them
/// over. It beats until [`Heartbeat::stop`], which comes after the other workers have finished
/// what they hold, and then leaves the registry so nothing waits for the timeout.
#[allow(missing_debug_implementations)] // trait objects
pub struct Heartbeat {
    registry: Arc<dyn InstanceRegistry>,
    id: String,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Heartbeat {
    /// Beats once (so the instance is known before it takes any lease), then every `every`.
    ///
    /// # Errors
    /// When the first beat cannot be recorded.
    pub async fn start(
        registry: Arc<dyn InstanceRegistry>,
        id: String,
        clock: Arc<dyn Clock>,
        every: Duration,
    ) -> anyhow::Result<Self> {
        registry.beat(&id, clock.now()).await?;
        let (stop, mut stopped) = watch::channel(false);
        let task = {
            let (registry, id) = (registry.clone(), id.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = tick.tick() => {}
                        _ = stopped.changed() => return,
                    }
                    if let Err(e) = registry.beat(&id, clock.now()).await {
                        tracing::error!(error = ?e, "recording this instance's heartbeat failed");
                    }
                }
            })
        };
        Ok(Self { registry, id, stop, task })
    }

    /// Stops beating and leaves the registry: what this instance still holds is free at once.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        if let Err(e) = self.registry.leave(&self.id).await {
            tracing::warn!(error = ?e, "leaving the instance registry failed; its leases free when its heartbeat goes stale");
        }
    }
}

//! The worker's side of executions: running a claimed execution's steps under its lease
//! (see the [parent module](super) for what is stored when), and executions as a kind of work.

use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::super::execution_state::{
    Execution, ExecutionStatus, InvalidTransition, MAX_STEP_RUNS, StepStatus,
};
use super::super::outputs::output_size;
use super::super::ports::{After, ClaimedExecution, ExecutionRun, Finish, StepFailure};
use super::super::steps::{OnError, Step, StepAction};
use super::super::template::TemplateContext;
use super::{EXECUTION_QUEUE, ExecutionService, ExecutionSettings, RunOutcome};
use crate::events::{Event, EventPayload, ExecutionCompletedData, ExecutionFailedData, ExecutionWaitingData};
use crate::storable;
use crate::tenancy::{Credential, Permission, Plan, Principal, current_role};
use crate::work::{Claimed, Lease, LeaseQueue, Ran, WorkKind};

/// What happens after a step ran: decided from its run and its `retry`, `on_error` and `next`
/// ([`decide`]), applied by the executor ([`ExecutionService::apply`]) and stored with the
/// step's result in one transaction.
#[derive(Debug, Clone, PartialEq)]
enum Next {
    /// The step produced its output: the execution goes on at `to` (its `next`), or the step
    /// after it, or completes with this output after the last.
    Done { output: Value, to: Option<String> },
    /// The attempt failed and the step is tried again at `at`.
    Retry { failure: StepFailure, at: DateTime<Utc> },
    /// The step failed and its `on_error` goes on: at `to`, or the step after it.
    Recover { failure: StepFailure, to: Option<String> },
    /// The step failed: so does the execution.
    Fail(StepFailure),
    /// The step waits until `until` (a `wait`), and the execution with it.
    Wait { until: DateTime<Utc> },
}

impl Next {
    /// What the run led to, as `/metrics` counts step runs.
    fn label(&self) -> &'static str {
        match self {
            Self::Done { .. } => "done",
            Self::Retry { .. } => "retry",
            Self::Recover { .. } => "recovered",
            Self::Fail(_) => "failed",
            Self::Wait { .. } => "waiting",
        }
    }
}

/// What the run of `step`, at its attempt `attempt`, leads to at `now`.
/// `run` is the step's output and the step it chose to lead to (a `condition`), or its failure.
fn decide(step: &Step, run: Result<Produced, StepFailure>, attempt: u32, now: DateTime<Utc>) -> Next {
    let failure = match run {
        Ok(Produced { wait_until: Some(until), .. }) => return Next::Wait { until },
        Ok(Produced { output, chose, wait_until: None }) => {
            return Next::Done { output, to: chose.or_else(|| step.next().map(str::to_owned)) };
        }
        Err(failure) => failure,
    };
    if let Some(wait) = step.retry().and_then(|policy| policy.wait_after(attempt, &failure)) {
        let at = now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX);
        return Next::Retry { failure, at };
    }
    match step.on_error() {
        OnError::Fail => Next::Fail(failure),
        OnError::Continue => Next::Recover { failure, to: None },
        OnError::Goto(to) => Next::Recover { failure, to: Some(to.as_str().to_owned()) },
    }
}

/// What a step's run produced: its output, and the step it chose to lead to (a `condition`),
/// or the time it waits for (a `wait` whose time has not come).
struct Produced {
    output: Value,
    chose: Option<String>,
    wait_until: Option<DateTime<Utc>>,
}

impl Produced {
    fn output(output: Value) -> Self {
        Self { output, chose: None, wait_until: None }
    }
}

/// The output of a `wait` that waited until `until`.
fn waited(until: DateTime<Utc>) -> Value {
    serde_json::json!({ "waited_until": until.to_rfc3339_opts(chrono::SecondsFormat::Millis, true) })
}

/// What applying a [`Next`] did.
struct Applied {
    /// What becomes of the execution (stored with the step's result).
    after: After,
    /// How the run ends, when it does.
    end: Option<RunOutcome>,
    /// The position of the step the execution goes on at.
    then: Option<usize>,
}

/// What starting a step came to: what its run leads to and the lease to record its result
/// under, or how the execution's run stopped before it ran.
enum StepStart {
    Ran(Next, Lease),
    Stopped(RunOutcome),
}

/// How a run of a claimed execution ended, and when it is due again if a step backs off.
pub(super) struct RunEnd {
    pub(super) outcome: RunOutcome,
    pub(super) due_again: Option<DateTime<Utc>>,
}

impl From<RunOutcome> for RunEnd {
    fn from(outcome: RunOutcome) -> Self {
        Self { outcome, due_again: None }
    }
}

impl ExecutionService {
    /// Runs a claimed execution's remaining steps (see [`Self::run_steps`]); how it ended.
    ///
    /// # Errors
    /// When storage fails; the lease then runs out and another worker resumes the execution.
    pub async fn run_execution(
        &self,
        claimed: ClaimedExecution,
        keep_going: &(dyn Fn() -> bool + Send + Sync),
    ) -> anyhow::Result<RunOutcome> {
        Ok(self.run_steps(claimed, keep_going, None).await?.outcome)
    }

    /// Runs a claimed execution from the step it is at, each step leading to the next
    /// ([`Next`]), storing each step's start and result under the lease, until it ends, a step
    /// backs off (the execution is then due again later), it is cancelled, or the lease is
    /// lost. Before each step it asks `keep_going`; when that says no (the service is
    /// stopping) it gives the execution back for another worker to resume. With `given_up`,
    /// the step it is at fails with that reason instead of running (it was claimed too often
    /// without finishing).
    async fn run_steps(
        &self,
        claimed: ClaimedExecution,
        keep_going: &(dyn Fn() -> bool + Send + Sync),
        given_up: Option<StepFailure>,
    ) -> anyhow::Result<RunEnd> {
        let d = &self.deps;
        let Claimed { item: ExecutionRun { mut execution, steps, run_as, call_chain }, lease, claims: _ } =
            claimed;
        let mut caller = Principal {
            user_id: run_as.user_id,
            tenant_id: execution.tenant_id.clone(),
            // The plan only sets rate limits, which apply where a request enters.
            plan: Plan::Starter,
            role: run_as.role,
            credential: Credential::AccessToken,
            // What its agents' tools start runs one level deeper.
            chain: call_chain.then(&execution.workflow_id),
        };
        let mut context =
            TemplateContext::new(execution.input.clone()).with_trigger(execution.trigger.clone());
        for result in execution.steps() {
            if let Some(output) = result.output().filter(|_| result.status() == StepStatus::Completed) {
                context.add_output(&result.step_id, output.clone());
            }
        }
        let mut at = match resume_at(&execution, &steps) {
            Resume::At(at) => at,
            Resume::Ended => return Ok(RunOutcome::Cancelled.into()),
        };
        while let Some(index) = at {
            let Some(step) = steps.get(index) else { break };
            let following = (index + 1 < steps.len()).then_some(index + 1);
            if !keep_going() {
                d.executions.release(&execution.id, &lease).await?;
                return Ok(RunOutcome::Released.into());
            }
            let (next, step_lease) = match waiting_until(&execution, step) {
                // The wait this claim resumes (the execution came due): it ends now, unless
                // the execution was woken before its time.
                Some(until) => {
                    let now = d.clock.now();
                    let next = match &given_up {
                        Some(failure) => Next::Fail(failure.clone()),
                        None if until <= now => {
                            Next::Done { output: waited(until), to: step.next().map(str::to_owned) }
                        }
                        None => Next::Wait { until },
                    };
                    (next, lease.clone())
                }
                None => {
                    let start = self.start_and_run(
                        &mut execution,
                        step,
                        &lease,
                        given_up.as_ref(),
                        &mut caller,
                        &context,
                    );
                    match start.await? {
                        StepStart::Ran(next, step_lease) => (next, step_lease),
                        StepStart::Stopped(outcome) => return Ok(outcome.into()),
                    }
                }
            };
            let applied =
                self.apply(&mut execution, &steps, step, next, following, &mut context, d.clock.now())?;
            let Some(result) = execution.step(step.id()) else { break };
            let due_again = match &applied.after {
                After::DueAt(due) | After::Wait { until: due, .. } => Some(*due),
                _ => None,
            };
            if !d.executions.record_step(&execution.id, &step_lease, result, applied.after).await? {
                tracing::warn!(execution_id = %execution.id, step = %step.id(), "execution was taken over by another worker; step result dropped");
                return Ok(RunOutcome::LostLease.into());
            }
            if let Some(outcome) = applied.end {
                // A cancel that came while the last step ran keeps the execution cancelled.
                return Ok(match self.status_of(&execution).await {
                    Some(ExecutionStatus::Cancelled) => RunOutcome::Cancelled.into(),
                    _ => RunEnd { outcome, due_again },
                });
            }
            at = applied.then;
        }
        // Every step had completed before this claim (the result that ended it was stored but
        // its end was not: impossible, as both are one transaction).
        Ok(RunOutcome::Completed.into())
    }

    /// Starts `step` of `execution` under `lease` and runs it (unless the execution was given
    /// up, or made too many step runs): what it leads to and the lease its result is recorded
    /// under, or why the run stopped before it (a cancel, a lost lease).
    async fn start_and_run(
        &self,
        execution: &mut Execution,
        step: &Step,
        lease: &Lease,
        given_up: Option<&StepFailure>,
        caller: &mut Principal,
        context: &TemplateContext,
    ) -> anyhow::Result<StepStart> {
        let d = &self.deps;
        let over_limit = execution.step_runs() >= MAX_STEP_RUNS;
        let started_at = d.clock.now();
        execution.start_step(step.id(), started_at)?;
        let step_lease =
            Lease { token: lease.token.clone(), until: started_at + step_window(step, &self.settings) };
        let Some(started) = execution.step(step.id()) else {
            anyhow::bail!("step {} is not among the execution's results", step.id());
        };
        if !d.executions.start_step(&execution.id, &step_lease, started, started_at).await? {
            return Ok(StepStart::Stopped(self.why_stopped(execution).await));
        }
        let attempt = started.attempts();
        // Each step acts with its starter's role now, not the one they had when it started:
        // a starter who was removed, or demoted below running workflows, stops it here.
        let entitled = match given_up {
            Some(failure) => Err(failure.clone()),
            None if over_limit => Err(StepFailure::new(format!(
                "the execution stopped: it made {MAX_STEP_RUNS} step runs, the most one may (does a loop through next or on_error never end?)"
            ))),
            None => current_role(
                d.members.as_ref(),
                &caller.tenant_id,
                &caller.user_id,
                Permission::WorkflowsExecute,
            )
            .await?
            .map_err(|lost| StepFailure::new(format!("the execution stopped: {lost}"))),
        };
        let next = match entitled {
            // Not the step's own failure: no retry or route applies.
            Err(failure) => Next::Fail(failure),
            Ok(role) => {
                caller.role = role;
                let run = self.perform(caller, step, context).await;
                decide(step, run, attempt, d.clock.now())
            }
        };
        // A run, counted once: a wait that ends later completes without running again.
        metrics::counter!(
            crate::metrics::WORKFLOW_STEP_RUNS,
            "type" => step.step_type().as_str(),
            "outcome" => next.label()
        )
        .increment(1);
        Ok(StepStart::Ran(next, step_lease))
    }

    /// Applies `next`, what the run of `step` decided, to `execution` at `at`: the step's
    /// result; its output for the later steps' templates; the branch it took; the execution's
    /// due time, or its end with its event. `following`: the step after `step` in the list.
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &self,
        execution: &mut Execution,
        steps: &[Step],
        step: &Step,
        next: Next,
        following: Option<usize>,
        context: &mut TemplateContext,
        at: DateTime<Utc>,
    ) -> Result<Applied, InvalidTransition> {
        // Where the execution goes on: the step named, or the next in the list.
        let go_on =
            |execution: &mut Execution, to: Option<String>| -> Result<Option<usize>, InvalidTransition> {
                match to {
                    None => Ok(following),
                    Some(to) => {
                        execution.branch_from(step.id(), &to)?;
                        Ok(steps.iter().position(|s| s.id() == to))
                    }
                }
            };
        let (output, then) = match next {
            Next::Done { output, to } => {
                execution.complete_step(step.id(), output.clone(), at)?;
                context.add_output(step.id(), output.clone());
                (output, go_on(execution, to)?)
            }
            Next::Recover { failure, to } => {
                execution.fail_step(step.id(), failure.message, at)?;
                (Value::Null, go_on(execution, to)?)
            }
            Next::Retry { failure, at: due } => {
                execution.retry_step(step.id(), failure.message, due, at)?;
                return Ok(Applied { after: After::DueAt(due), end: Some(RunOutcome::Retrying), then: None });
            }
            Next::Wait { until } => {
                execution.wait_step(step.id(), until, at)?;
                let event = Box::new(self.waiting_event(execution, step, until, at));
                return Ok(Applied {
                    after: After::Wait { until, event },
                    end: Some(RunOutcome::Waiting),
                    then: None,
                });
            }
            Next::Fail(failure) => {
                execution.fail_step(step.id(), failure.message.clone(), at)?;
                let error = format!("step {} failed: {}", step.id(), failure.message);
                execution.fail(error.clone(), at)?;
                let event = self.failed_event(execution, step, error, at);
                let after = After::Finish(Box::new(Finish::of(execution, event)));
                return Ok(Applied { after, end: Some(RunOutcome::Failed), then: None });
            }
        };
        if then.is_some() {
            return Ok(Applied { after: After::GoOn, end: None, then });
        }
        execution.complete(output.clone(), at)?;
        let event = self.completed_event(execution, output, at);
        let after = After::Finish(Box::new(Finish::of(execution, event)));
        Ok(Applied { after, end: Some(RunOutcome::Completed), then: None })
    }

    /// The event of an execution that completed with `output` at `at`.
    fn completed_event(&self, execution: &Execution, output: Value, at: DateTime<Utc>) -> Event {
        let payload = EventPayload::WorkflowExecutionCompleted(ExecutionCompletedData {
            execution_id: execution.id.clone(),
            workflow_id: execution.workflow_id.clone(),
            output,
            duration_ms: millis_between(execution.started_at, at),
        });
        Event::new(self.deps.ids.as_ref(), &execution.tenant_id, payload, at)
    }

    /// The event of an execution that waits at `step` until `until`, from `at`.
    fn waiting_event(
        &self,
        execution: &Execution,
        step: &Step,
        until: DateTime<Utc>,
        at: DateTime<Utc>,
    ) -> Event {
        let payload = EventPayload::WorkflowExecutionWaiting(ExecutionWaitingData {
            execution_id: execution.id.clone(),
            workflow_id: execution.workflow_id.clone(),
            step_id: step.id().to_owned(),
            until,
        });
        Event::new(self.deps.ids.as_ref(), &execution.tenant_id, payload, at)
    }

    /// The event of an execution that failed at `step` with `error` at `at`.
    fn failed_event(&self, execution: &Execution, step: &Step, error: String, at: DateTime<Utc>) -> Event {
        let payload = EventPayload::WorkflowExecutionFailed(ExecutionFailedData {
            execution_id: execution.id.clone(),
            workflow_id: execution.workflow_id.clone(),
            step_id: step.id().to_owned(),
            error,
            duration_ms: millis_between(execution.started_at, at),
        });
        Event::new(self.deps.ids.as_ref(), &execution.tenant_id, payload, at)
    }

    /// Renders and performs one step within its timeout, checking its output's size. A
    /// `condition` is decided here, not performed.
    async fn perform(
        &self,
        caller: &Principal,
        step: &Step,
        context: &TemplateContext,
    ) -> Result<Produced, StepFailure> {
        let deadline = Instant::now() + step.timeout();
        let action = render_off_runtime(step, context, deadline).await?;
        match action {
            StepAction::Condition { case, next } => {
                let output = serde_json::json!({"case": case, "next": next});
                return Ok(Produced { output, chose: next, wait_until: None });
            }
            StepAction::Wait(wait) => {
                let now = self.deps.clock.now();
                let until = wait.ends(now);
                return Ok(if until <= now {
                    Produced::output(waited(until))
                } else {
                    Produced { output: Value::Null, chose: None, wait_until: Some(until) }
                });
            }
            _ => {}
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        // Outputs and failures quote remote answers (an HTTP response, a model's reply): stored
        // alike on both databases.
        let output = match self.deps.performer.perform(caller, action, remaining, self).await {
            Ok(output) => storable::json(output),
            Err(failure) => return Err(StepFailure { message: storable::text(failure.message), ..failure }),
        };
        output_size(&output).map_err(|e| StepFailure::new(e.to_string()))?;
        Ok(Produced::output(output))
    }

    async fn status_of(&self, execution: &Execution) -> Option<ExecutionStatus> {
        match self.deps.executions.get(&execution.tenant_id, &execution.id).await {
            Ok(found) => found.map(|e| e.status()),
            Err(e) => {
                tracing::error!(execution_id = %execution.id, error = ?e, "reading an execution's status failed");
                None
            }
        }
    }

    /// Why a step could not start: a cancel, a deleted workflow, or a lost lease.
    async fn why_stopped(&self, execution: &Execution) -> RunOutcome {
        match self.status_of(execution).await {
            Some(ExecutionStatus::Running) => RunOutcome::LostLease,
            _ => RunOutcome::Cancelled,
        }
    }
}

/// Executions as a kind of work: the worker claims running executions and runs their steps.
#[async_trait]
impl WorkKind for ExecutionService {
    type Item = ExecutionRun;

    fn name(&self) -> &'static str {
        EXECUTION_QUEUE
    }

    fn queue(&self) -> &dyn LeaseQueue<ExecutionRun> {
        self.deps.due.as_ref()
    }

    fn lease(&self) -> chrono::Duration {
        self.settings.lease
    }

    fn concurrency(&self) -> u32 {
        self.settings.concurrency
    }

    fn max_claims(&self) -> u32 {
        self.settings.max_claims
    }

    async fn run(
        &self,
        claimed: ClaimedExecution,
        keep_going: &(dyn Fn() -> bool + Send + Sync),
    ) -> anyhow::Result<Ran> {
        let end = self.run_steps(claimed, keep_going, None).await?;
        Ok(Ran { outcome: end.outcome.into(), due_again: end.due_again })
    }

    /// The step the execution is at fails with the reason, and so does the execution.
    async fn give_up(&self, claimed: ClaimedExecution, reason: String) -> anyhow::Result<Ran> {
        Ok(Ran::ended(
            self.run_steps(claimed, &|| true, Some(StepFailure::new(reason))).await?.outcome.into(),
        ))
    }
}

/// Renders `step` on a thread of its own, so that a template that takes its whole timeout
/// never holds one of the async runtime's threads; the render stops itself at `deadline`. A
/// render that panics fails the step rather than the worker.
async fn render_off_runtime(
    step: &Step,
    context: &TemplateContext,
    deadline: Instant,
) -> Result<StepAction, StepFailure> {
    let (sender, receiver) = futures_channel::oneshot::channel();
    let (step, context) = (step.clone(), context.clone());
    std::thread::Builder::new()
        .name("template-render".to_owned())
        .spawn(move || {
            let _ = sender.send(step.render(&context, Some(deadline)));
        })
        .map_err(|e| StepFailure::new(format!("the step's templates could not be rendered: {e}")))?;
    match receiver.await {
        Ok(rendered) => rendered.map_err(|e| StepFailure::new(e.to_string())),
        Err(_) => Err(StepFailure::new("rendering the step's templates failed unexpectedly")),
    }
}

/// Where a claimed execution resumes.
enum Resume {
    /// At this position (`None`: after its last step, which cannot be: see [`resume_at`]).
    At(Option<usize>),
    /// It ended meanwhile (a finished execution is never claimed).
    Ended,
}

/// Where a claimed `execution` of `steps` resumes: at the step it is at, unless that step has
/// finished (its result was stored, the next step's start was not), then where that step led:
/// its branch, or the step after it. An execution stored before executions kept the step they
/// are at resumes at its first step that has not completed.
fn resume_at(execution: &Execution, steps: &[Step]) -> Resume {
    let position = |id: &str| steps.iter().position(|s| s.id() == id);
    let Some(at) = execution.at_step().and_then(position) else {
        return match execution.steps().iter().position(|r| r.status() != StepStatus::Completed) {
            Some(first) if execution.steps()[first].status() == StepStatus::Skipped => Resume::Ended,
            first => Resume::At(first.or(Some(steps.len()))),
        };
    };
    match execution.step(steps[at].id()).map(|r| (r.status(), r.branch())) {
        Some((StepStatus::Skipped, _)) => Resume::Ended,
        Some((StepStatus::Completed | StepStatus::Failed, Some(branch))) => Resume::At(position(branch)),
        Some((StepStatus::Completed | StepStatus::Failed, None)) => Resume::At(Some(at + 1)),
        _ => Resume::At(Some(at)),
    }
}

/// When the wait of `step` ends, if `execution` waits at it (a claim resumed it).
fn waiting_until(execution: &Execution, step: &Step) -> Option<DateTime<Utc>> {
    execution.step(step.id()).filter(|r| r.status() == StepStatus::Waiting).and_then(|r| r.next_run_at())
}

/// How long a claim must hold an execution while `step` runs: its timeout and the lease.
fn step_window(step: &Step, settings: &ExecutionSettings) -> chrono::Duration {
    chrono::Duration::from_std(step.timeout()).unwrap_or(chrono::Duration::MAX) + settings.lease
}

fn millis_between(from: DateTime<Utc>, to: DateTime<Utc>) -> u64 {
    u64::try_from((to - from).num_milliseconds()).unwrap_or(0)
}

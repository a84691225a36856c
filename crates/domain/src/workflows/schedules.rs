//! Schedules: a workflow started at the ticks of a 5-field cron expression in an IANA time zone
//! (PRODUCT.md §13).
//!
//! Each due tick starts exactly one execution, however many instances look at once: the
//! execution's deduplication key is the tick (unique per schedule in the executions table), and
//! a schedule moves to its next tick only by a compare-and-set on the tick it was at. An
//! instance that dies between the two leaves the tick due; whoever looks next starts it (or
//! finds the execution already started) and moves on. After downtime the latest missed tick
//! runs once and the earlier ones are counted in `missed_count`.
//!
//! Executions act as the schedule's creator with the role they had then, count against the
//! tenant's plan limit like any call, and spend credits like any execution. A tick the plan
//! limit refuses, or whose workflow is inactive, is counted as missed.

use std::str::FromStr as _;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde_json::{Map, Value, json};

use super::ExecutionOrigin;
use super::executions::{ExecutionError, ExecutionService};
use super::inbound::{InboundError, count_against_plan};
use super::model::RunAs;
use super::ports::{Advance, DueSchedule, ScheduleRepository, WorkflowRepository};
use crate::ids::{IdGenerator, ScheduleId, TenantId, WorkflowId};
use crate::ratelimit::{PlanTable, RateLimiter};
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors};

/// The time zone of a schedule that names none.
pub const DEFAULT_TIMEZONE: &str = "UTC";
/// Longest cron expression, in characters.
pub const MAX_CRON_CHARS: usize = 100;
/// Most ticks counted one by one after downtime; beyond, the count is this (a schedule every
/// minute down for a year would otherwise be half a million steps).
const MAX_COUNTED_TICKS: u64 = 100_000;

/// A parsed schedule: its cron expression and time zone.
#[derive(Debug, Clone)]
pub struct CronSpec {
    cron: Cron,
    zone: chrono_tz::Tz,
}

impl CronSpec {
    /// Parses a standard 5-field cron expression (minute, hour, day of month, month, day of
    /// week; names, ranges, steps and lists, and the `@hourly`… nicknames) and an IANA zone.
    ///
    /// # Errors
    /// A [`FieldError`] for each of `cron` and `timezone` that is invalid.
    pub fn parse(cron: &str, timezone: &str) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let fields = cron.split_whitespace().count();
        let parsed = if cron.chars().count() > MAX_CRON_CHARS {
            Err(format!("cron is longer than {MAX_CRON_CHARS} characters"))
        } else if !cron.trim_start().starts_with('@') && fields != 5 {
            Err(format!("cron must have 5 fields (minute hour day-of-month month day-of-week), not {fields}"))
        } else {
            CronParser::builder()
                .seconds(Seconds::Disallowed)
                .year(Year::Disallowed)
                .build()
                .parse(cron)
                .map_err(|e| format!("cron is not a valid expression: {e}"))
        };
        let cron = parsed.map_err(|m| errors.push(FieldError::new("cron", FieldErrorKind::InvalidFormat, m)));
        let zone = chrono_tz::Tz::from_str(timezone).map_err(|_| {
            errors.push(FieldError::new(
                "timezone",
                FieldErrorKind::InvalidValue,
                "timezone must be an IANA time zone name, such as UTC or Europe/Berlin",
            ));
        });
        match (cron, zone) {
            (Ok(cron), Ok(zone)) => {
                let spec = Self { cron, zone };
                // An expression may parse and still name no date at all (`0 0 31 2 *`): refused
                // rather than stored as a schedule that never runs. The ticks of an expression
                // recur every four years at most, so any starting point finds one if any exists.
                if spec.next_after(DateTime::UNIX_EPOCH).is_none() {
                    errors.push(FieldError::new(
                        "cron",
                        FieldErrorKind::InvalidValue,
                        "cron never matches a date (such as the 31st of February), so it would never run",
                    ));
                    return Err(errors);
                }
                Ok(spec)
            }
            _ => Err(errors),
        }
    }

    /// The first tick strictly after `t`, or `None` when the expression never matches again
    /// (`0 0 30 2 *`). A local time that a daylight-saving change skips runs at the first time
    /// after the change; one that occurs twice runs once.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = t.with_timezone(&self.zone);
        self.cron.find_next_occurrence(&local, false).ok().map(|next| next.with_timezone(&Utc))
    }

    /// The ticks due at `now` for a schedule whose next tick is `next`: the latest due tick
    /// runs, the earlier ones are missed, and the schedule moves to the first tick after `now`.
    pub fn due(&self, next: DateTime<Utc>, now: DateTime<Utc>) -> DueTicks {
        let mut run = next;
        let mut missed = 0;
        let mut following = self.next_after(next);
        while let Some(t) = following.filter(|t| *t <= now) {
            run = t;
            missed += 1;
            if missed >= MAX_COUNTED_TICKS {
                following = self.next_after(now);
                break;
            }
            following = self.next_after(t);
        }
        DueTicks { run, missed, next: following }
    }
}

/// What a due schedule does now (see [`CronSpec::due`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueTicks {
    /// The tick to run.
    pub run: DateTime<Utc>,
    /// Earlier due ticks that do not run.
    pub missed: u64,
    /// The schedule's next tick; `None` when there is none.
    pub next: Option<DateTime<Utc>>,
}

/// A workflow's schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Its id.
    pub id: ScheduleId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The workflow it starts.
    pub workflow_id: WorkflowId,
    /// The cron expression, as given.
    pub cron: String,
    /// The IANA time zone its ticks are read in.
    pub timezone: String,
    /// The input of every execution it starts.
    pub input: Map<String, Value>,
    /// Whether it starts executions.
    pub is_active: bool,
    /// Whose authority its executions act with.
    pub run_as: RunAs,
    /// Its next tick (none while inactive, or when the expression never matches again).
    pub next_run_at: Option<DateTime<Utc>>,
    /// The last tick that started an execution.
    pub last_run_at: Option<DateTime<Utc>>,
    /// Ticks that started nothing: missed while the service was down, refused by the plan
    /// limit, or due while the workflow was inactive.
    pub missed_count: u64,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change by its owners.
    pub updated_at: DateTime<Utc>,
}

/// Why a schedule operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// The caller lacks the permission.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// The request is invalid; every problem is listed.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No such workflow in the caller's tenant.
    #[error("no such workflow")]
    WorkflowNotFound,
    /// No such schedule of that workflow.
    #[error("no such schedule of this workflow")]
    NotFound,
    /// Storage failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// A schedule to create.
#[derive(Debug, Clone, Default)]
pub struct NewSchedule {
    /// The cron expression.
    pub cron: String,
    /// The time zone; absent: UTC.
    pub timezone: Option<String>,
    /// The executions' input; absent: `{}`.
    pub input: Option<Map<String, Value>>,
    /// Whether it runs; absent: yes.
    pub is_active: Option<bool>,
}

/// A change of a schedule: absent fields stay.
#[derive(Debug, Clone, Default)]
pub struct SchedulePatch {
    /// A new cron expression.
    pub cron: Option<String>,
    /// A new time zone.
    pub timezone: Option<String>,
    /// A new input.
    pub input: Option<Map<String, Value>>,
    /// Pause (`false`) or resume (`true`).
    pub is_active: Option<bool>,
}

/// What the service needs.
#[derive(Clone)]
#[allow(missing_debug_implementations)] // trait objects
pub struct ScheduleServiceDeps {
    /// Schedules.
    pub schedules: Arc<dyn ScheduleRepository>,
    /// Workflows (a schedule is made for one of the caller's).
    pub workflows: Arc<dyn WorkflowRepository>,
    /// Starts executions.
    pub executions: ExecutionService,
    /// Counts ticks against the tenant's plan.
    pub limiter: RateLimiter,
    /// The plan limits.
    pub plans: PlanTable,
    /// Ids.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

/// Schedules for requests, and the ticker that starts their executions.
#[derive(Clone)]
pub struct ScheduleService {
    deps: ScheduleServiceDeps,
}

impl std::fmt::Debug for ScheduleService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScheduleService").finish_non_exhaustive()
    }
}

fn spec_of(cron: &str, timezone: &str) -> Result<CronSpec, ScheduleError> {
    CronSpec::parse(cron, timezone).map_err(|errors| ScheduleError::Invalid(ValidationErrors(errors)))
}

impl ScheduleService {
    /// A service over its dependencies.
    pub fn new(deps: ScheduleServiceDeps) -> Self {
        Self { deps }
    }

    /// Makes a schedule for a workflow of the caller's tenant. Its executions act as the
    /// caller, with the caller's present role; a schedule executes the workflow on its own, so
    /// making one needs `workflows:execute` as well as `workflows:write`.
    ///
    /// # Errors
    /// [`ScheduleError::Forbidden`], [`ScheduleError::Invalid`], [`ScheduleError::WorkflowNotFound`].
    pub async fn create(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
        new: NewSchedule,
    ) -> Result<Schedule, ScheduleError> {
        caller.require(Permission::WorkflowsWrite)?;
        caller.require(Permission::WorkflowsExecute)?;
        let timezone = new.timezone.unwrap_or_else(|| DEFAULT_TIMEZONE.to_owned());
        let spec = spec_of(&new.cron, &timezone)?;
        let d = &self.deps;
        if d.workflows.get(&caller.tenant_id, workflow_id).await?.is_none() {
            return Err(ScheduleError::WorkflowNotFound);
        }
        let now = d.clock.now();
        let is_active = new.is_active.unwrap_or(true);
        let schedule = Schedule {
            id: ScheduleId::generate(d.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            workflow_id: workflow_id.clone(),
            cron: new.cron.trim().to_owned(),
            timezone,
            input: new.input.unwrap_or_default(),
            is_active,
            run_as: RunAs { user_id: caller.user_id.clone(), role: caller.role },
            next_run_at: if is_active { spec.next_after(now) } else { None },
            last_run_at: None,
            missed_count: 0,
            created_at: now,
            updated_at: now,
        };
        if !d.schedules.create(&schedule).await? {
            return Err(ScheduleError::WorkflowNotFound);
        }
        Ok(schedule)
    }

    /// The schedules of a workflow of the caller's tenant, oldest first.
    ///
    /// # Errors
    /// [`ScheduleError::Forbidden`], [`ScheduleError::WorkflowNotFound`].
    pub async fn list(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
    ) -> Result<Vec<Schedule>, ScheduleError> {
        caller.require(Permission::WorkflowsRead)?;
        if self.deps.workflows.get(&caller.tenant_id, workflow_id).await?.is_none() {
            return Err(ScheduleError::WorkflowNotFound);
        }
        Ok(self.deps.schedules.list(&caller.tenant_id, workflow_id).await?)
    }

    /// Changes a schedule. A new expression, zone or resumption computes the next tick from
    /// now: ticks missed while it was paused are not run.
    ///
    /// # Errors
    /// [`ScheduleError::Forbidden`], [`ScheduleError::Invalid`], [`ScheduleError::NotFound`].
    pub async fn update(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
        id: &ScheduleId,
        patch: SchedulePatch,
    ) -> Result<Schedule, ScheduleError> {
        caller.require(Permission::WorkflowsWrite)?;
        caller.require(Permission::WorkflowsExecute)?;
        let d = &self.deps;
        let mut schedule =
            d.schedules.get(&caller.tenant_id, workflow_id, id).await?.ok_or(ScheduleError::NotFound)?;
        let timing_changed =
            patch.cron.is_some() || patch.timezone.is_some() || patch.is_active == Some(true);
        if let Some(cron) = patch.cron {
            schedule.cron = cron.trim().to_owned();
        }
        if let Some(timezone) = patch.timezone {
            schedule.timezone = timezone;
        }
        let spec = spec_of(&schedule.cron, &schedule.timezone)?;
        if let Some(input) = patch.input {
            schedule.input = input;
        }
        if let Some(active) = patch.is_active {
            schedule.is_active = active;
        }
        let now = d.clock.now();
        if !schedule.is_active {
            schedule.next_run_at = None;
        } else if timing_changed || schedule.next_run_at.is_none() {
            schedule.next_run_at = spec.next_after(now);
        }
        schedule.updated_at = now;
        if !d.schedules.update(&schedule).await? {
            return Err(ScheduleError::NotFound);
        }
        Ok(schedule)
    }

    /// Deletes a schedule: it starts nothing more.
    ///
    /// # Errors
    /// [`ScheduleError::Forbidden`], [`ScheduleError::NotFound`].
    pub async fn delete(
        &self,
        caller: &Principal,
        workflow_id: &WorkflowId,
        id: &ScheduleId,
    ) -> Result<(), ScheduleError> {
        caller.require(Permission::WorkflowsWrite)?;
        if self.deps.schedules.delete(&caller.tenant_id, workflow_id, id).await? {
            Ok(())
        } else {
            Err(ScheduleError::NotFound)
        }
    }

    /// One pass of the ticker: starts the executions of up to `limit` due schedules and moves
    /// each on. Returns how many it handled (due, less those left due by a failure).
    ///
    /// # Errors
    /// When the schedules cannot be read. A schedule whose execution could not be stored is
    /// left due, for the next pass.
    pub async fn run_due(&self, limit: u32) -> anyhow::Result<usize> {
        let d = &self.deps;
        let now = d.clock.now();
        let due = d.schedules.due(now, limit).await?;
        let mut handled = 0;
        for item in &due {
            let schedule = &item.schedule;
            let Some(from) = schedule.next_run_at else { continue };
            let ticks = match CronSpec::parse(&schedule.cron, &schedule.timezone) {
                Ok(spec) => spec.due(from, now),
                Err(_) => {
                    // Stored by an older version that accepted it: stop rather than spin.
                    tracing::error!(schedule_id = %schedule.id, cron = %schedule.cron, "a stored schedule does not parse; it is stopped");
                    DueTicks { run: from, missed: 0, next: None }
                }
            };
            let ran = match self.start(item, ticks.run).await {
                Ok(ran) => ran,
                Err(e) => {
                    tracing::warn!(schedule_id = %schedule.id, error = %e, "a scheduled execution could not be started; it stays due");
                    continue;
                }
            };
            let advance = Advance {
                from,
                next_run_at: ticks.next,
                ran: ran.then_some(ticks.run),
                missed: ticks.missed + u64::from(!ran),
            };
            if !d.schedules.advance(&schedule.id, &advance).await? {
                tracing::debug!(schedule_id = %schedule.id, "another instance moved the schedule on first");
            }
            handled += 1;
        }
        Ok(handled)
    }

    /// Starts the execution of `tick` (or finds the one already started for it); `false` when
    /// the tick starts nothing (the workflow is inactive, or the plan limit is spent).
    async fn start(&self, due: &DueSchedule, tick: DateTime<Utc>) -> anyhow::Result<bool> {
        let d = &self.deps;
        let schedule = &due.schedule;
        if !due.workflow.is_active {
            tracing::info!(schedule_id = %schedule.id, "the workflow is inactive; the tick is missed");
            return Ok(false);
        }
        match count_against_plan(&d.limiter, d.plans, &schedule.tenant_id, due.plan).await {
            Ok(_) => {}
            Err(InboundError::RateLimited(_)) => {
                tracing::warn!(schedule_id = %schedule.id, "the tenant's plan limit is spent; the tick is missed");
                return Ok(false);
            }
            Err(e) => return Err(anyhow::anyhow!("counting the tick against the plan: {e}")),
        }
        let tick_text = crate::time::rfc3339::format(&tick);
        let started = d
            .executions
            .start(
                &due.workflow,
                Value::Object(schedule.input.clone()),
                json!({"schedule_id": schedule.id, "tick": tick_text}),
                ExecutionOrigin::Schedule(schedule.id.clone()),
                schedule.run_as.clone(),
                Some(tick_text),
            )
            .await;
        match started {
            Ok(_) => Ok(true),
            Err(ExecutionError::Inactive) => Ok(false),
            Err(ExecutionError::NotEntitled(lost)) => {
                tracing::warn!(schedule_id = %schedule.id, "the tick is missed: {lost}");
                Ok(false)
            }
            Err(e) => Err(anyhow::anyhow!("starting the execution: {e}")),
        }
    }
}

#[cfg(test)]
mod tests;

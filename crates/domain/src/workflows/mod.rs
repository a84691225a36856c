//! Workflows: steps run in order on an input, their executions, and what starts them (webhook
//! triggers and inbound integrations). This module is the pure part: models, checks, state
//! machines and templates; no I/O.
//!
//! - [`model`]: workflows, triggers, integrations, and the validation of names, descriptions and
//!   allowed methods;
//! - [`execution_state`]: executions and step results, the state machines they move through
//!   only by their transitions;
//! - [`steps`]: the step kinds and their typed parameters, [`validate_steps`] (deserialising a
//!   workflow's steps when it is saved or loaded), and the [`StepAction`] a step becomes once
//!   rendered;
//! - [`outputs`]: what steps output, and the limit on an output's size;
//! - [`ports`]: the [`WorkflowRepository`], [`TriggerRepository`], [`IntegrationRepository`],
//!   [`ScheduleRepository`], [`ExecutionRepository`] ports (and [`StepPerformer`], declared with the executor), with the values that cross them;
//! - [`service`]: [`WorkflowService`], saving workflows for requests;
//! - [`executions`]: [`ExecutionService`], starting executions and running their steps;
//! - [`template`]: rendering the templates inside step parameters (MiniJinja) and finding what
//!   they refer to;
//! - [`triggers`]: [`TriggerService`], trigger URLs and the calls to them;
//! - [`integrations`]: [`IntegrationService`], integrations and the deliveries to their
//!   receivers;
//! - [`schedules`]: [`ScheduleService`], cron schedules and the ticker that starts them;
//! - [`inbound`]: what trigger calls and integration deliveries share (the execution's input,
//!   errors, the tenant's rate limit);
//! - [`signatures`]: the proofs inbound webhooks carry (trigger secrets and signatures, each
//!   integration kind's scheme), redelivery ids, and Slack's URL verification.

pub mod execution_state;
pub mod executions;
mod failure;
pub mod inbound;
pub mod integrations;
pub mod model;
pub mod outputs;
mod ports;
pub mod schedules;
mod service;
pub mod signatures;
pub mod steps;
pub mod template;
#[cfg(test)]
mod test_support;
pub mod triggers;
mod waiting;

pub use execution_state::{
    AttemptError, CANCELLED_ERROR, CANCELLED_WAIT_ERROR, Execution, ExecutionEvent, ExecutionOrigin,
    ExecutionRecord, ExecutionStatus, InvalidState, InvalidTransition, MAX_STEP_RUNS, StepEvent, StepRecord,
    StepResult, StepStatus, step_transition, transition,
};
#[cfg(any(test, feature = "mock"))]
pub use executions::MockStepPerformer;
pub use executions::{
    DEFAULT_MAX_CLAIMS, EXECUTION_QUEUE, ExecutionError, ExecutionService, ExecutionServiceDeps,
    ExecutionSettings, RunOutcome, StepPerformer,
};
pub use inbound::InboundError;
pub use integrations::{
    IntegrationDelivery, IntegrationError, IntegrationService, IntegrationServiceDeps, IntegrationStarted,
    NewIntegration, Received,
};
pub use model::{
    DEFAULT_TRIGGER_METHODS, Integration, IntegrationKind, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, RunAs,
    TRIGGER_METHODS, Trigger, Workflow, check_allowed_methods, check_description, check_name,
};
pub use outputs::{MAX_STEP_OUTPUT_BYTES, OutputTooLarge, output_size};
pub use ports::{
    Advance, After, ClaimedExecution, DueSchedule, ExecutionRepository, ExecutionRun, FailureKind, Finish,
    IntegrationRepository, IntegrationTarget, NewExecution, ScheduleRepository, Started, StepFailure,
    TriggerRepository, TriggerTarget, WorkflowRepository,
};
#[cfg(any(test, feature = "mock"))]
pub use ports::{
    MockExecutionRepository, MockIntegrationRepository, MockScheduleRepository, MockTriggerRepository,
    MockWorkflowRepository,
};
pub use schedules::{
    CronSpec, DueTicks, NewSchedule, Schedule, ScheduleError, SchedulePatch, ScheduleService,
    ScheduleServiceDeps,
};
pub use service::{NewWorkflow, WorkflowError, WorkflowPatch, WorkflowService, WorkflowServiceDeps};
pub use signatures::{
    Headers, SignatureError, TIMESTAMP_TOLERANCE_SECONDS, TriggerProof, delivery_id,
    url_verification_challenge, verify_integration, verify_service_signature, verify_trigger,
};
pub use steps::{
    DEFAULT_STEP_TIMEOUT_SECONDS, HttpMethod, MAX_STEP_ID_CHARS, MAX_STEP_TIMEOUT_SECONDS, MAX_STEPS,
    MAX_TOP_K, Step, StepAction, StepId, StepKind, StepType, steps_to_json, validate_step_list,
    validate_steps,
};
pub use template::{
    RenderError, Renderer, StepRef, TemplateContext, TemplateRefs, TemplateSyntaxError, analyze, is_template,
    render, render_str,
};
pub use triggers::{NewTrigger, TriggerCall, TriggerError, TriggerFired, TriggerService, TriggerServiceDeps};
#[cfg(any(test, feature = "mock"))]
pub use waiting::MockWorkflowRunner;
pub use waiting::WorkflowRunner;

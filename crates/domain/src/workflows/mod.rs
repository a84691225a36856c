//! Workflows: steps run in order on an input, their executions, and what starts them (webhook
//! triggers and inbound integrations). This module is the pure part: models, checks, state
//! machines and templates; no I/O.
//!
//! - [`model`]: workflows, executions and step results with their state machines, triggers,
//!   integrations, and the validation of names, descriptions and allowed methods;
//! - [`steps`]: the step types and their parameters, [`validate_steps`] (run when a workflow is
//!   saved), the [`StepAction`] a step becomes once rendered, and the output size limit;
//! - [`ports`]: the [`WorkflowRepository`], [`TriggerRepository`] and [`IntegrationRepository`]
//!   ports;
//! - [`service`]: [`WorkflowService`], saving workflows for requests;
//! - [`executions`]: [`ExecutionService`], starting executions and running their steps;
//! - [`template`]: rendering the templates inside step parameters (MiniJinja) and finding what
//!   they refer to;
//! - [`triggers`]: [`TriggerService`], trigger URLs and the calls to them;
//! - [`integrations`]: [`IntegrationService`], integrations and the deliveries to their
//!   receivers;
//! - [`inbound`]: what trigger calls and integration deliveries share (the execution's input,
//!   errors, the tenant's rate limit);
//! - [`signatures`]: the proofs inbound webhooks carry (trigger secrets and signatures, each
//!   integration kind's scheme), redelivery ids, and Slack's URL verification.

pub mod executions;
pub mod inbound;
pub mod integrations;
pub mod model;
pub mod outputs;
mod ports;
mod service;
pub mod signatures;
pub mod steps;
pub mod template;
#[cfg(test)]
mod test_support;
pub mod triggers;

pub use executions::{
    ClaimedExecution, DEFAULT_MAX_CLAIMS, EXECUTION_QUEUE, ExecutionError, ExecutionRepository, ExecutionRun,
    ExecutionService, ExecutionServiceDeps, ExecutionSettings, Finish, NewExecution, RunOutcome, Started,
    StepFailure, StepPerformer,
};
#[cfg(any(test, feature = "mock"))]
pub use executions::{MockExecutionRepository, MockStepPerformer};
pub use inbound::InboundError;
pub use integrations::{
    IntegrationDelivery, IntegrationError, IntegrationService, IntegrationServiceDeps, IntegrationStarted,
    NewIntegration, Received,
};
pub use model::{
    DEFAULT_TRIGGER_METHODS, Execution, ExecutionEvent, ExecutionOrigin, ExecutionStatus, Integration,
    IntegrationKind, InvalidTransition, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, RunAs, StepEvent, StepResult,
    StepStatus, TRIGGER_METHODS, Trigger, Workflow, check_allowed_methods, check_description, check_name,
    step_transition, transition,
};
#[cfg(any(test, feature = "mock"))]
pub use ports::MockWorkflowRepository;
pub use ports::WorkflowRepository;
pub use ports::{IntegrationRepository, IntegrationTarget, TriggerRepository, TriggerTarget};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockIntegrationRepository, MockTriggerRepository};
pub use service::{NewWorkflow, WorkflowError, WorkflowPatch, WorkflowService, WorkflowServiceDeps};
pub use signatures::{
    Headers, SignatureError, TIMESTAMP_TOLERANCE_SECONDS, TriggerProof, delivery_id,
    url_verification_challenge, verify_integration, verify_service_signature, verify_trigger,
};
pub use steps::{
    DEFAULT_STEP_TIMEOUT_SECONDS, HttpMethod, MAX_STEP_ID_CHARS, MAX_STEP_OUTPUT_BYTES,
    MAX_STEP_TIMEOUT_SECONDS, MAX_STEPS, MAX_TOP_K, OutputTooLarge, Step, StepAction, StepType,
    check_step_id, output_size, steps_to_json, validate_step_list, validate_steps,
};
pub use template::{
    RenderError, StepRef, TemplateContext, TemplateRefs, TemplateSyntaxError, analyze, is_template, render,
    render_str,
};
pub use triggers::{NewTrigger, TriggerCall, TriggerError, TriggerFired, TriggerService, TriggerServiceDeps};

ALTER TABLE workflow_step_results DROP COLUMN attempt_errors;
ALTER TABLE workflow_step_results DROP COLUMN branch;
ALTER TABLE workflow_step_results DROP COLUMN next_run_at;
ALTER TABLE workflow_step_results DROP COLUMN attempts;
DROP INDEX workflow_executions_due_idx;
ALTER TABLE workflow_executions DROP COLUMN step_runs;
ALTER TABLE workflow_executions DROP COLUMN at_step;
ALTER TABLE workflow_executions DROP COLUMN due_at;

-- Executions as a small state machine over the one durable-work queue: an execution is at a
-- step (named by its id; NULL before its first), is due at a time (a step backing off before
-- its next attempt is a row that is not yet due, holding no lease), and counts the step runs it
-- made, which a loop through `next` or `on_error` may not take past the limit. A step's result
-- counts its attempts, when it runs next, the branch it took and each failed attempt's error.
-- (SQLite adds a NOT NULL column only with a constant default: every row gets its start.)
ALTER TABLE workflow_executions ADD COLUMN due_at TEXT NOT NULL DEFAULT '';
UPDATE workflow_executions SET due_at = started_at;
ALTER TABLE workflow_executions ADD COLUMN at_step TEXT;
ALTER TABLE workflow_executions ADD COLUMN step_runs BIGINT NOT NULL DEFAULT 0;
-- The claim takes running executions that are due, earliest due first.
CREATE INDEX workflow_executions_due_idx ON workflow_executions (due_at) WHERE status = 'running';

ALTER TABLE workflow_step_results ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_step_results ADD COLUMN next_run_at TEXT;
ALTER TABLE workflow_step_results ADD COLUMN branch TEXT;
ALTER TABLE workflow_step_results ADD COLUMN attempt_errors TEXT NOT NULL DEFAULT '[]';
UPDATE workflow_step_results SET attempts = 1 WHERE status IN ('running', 'completed', 'failed');

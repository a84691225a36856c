-- Back to running executions only: a waiting one is failed with its waiting step, since the
-- version before cannot resume it.
UPDATE workflow_step_results SET status = 'failed', error = 'the execution was cancelled while this step waited',
    next_run_at = NULL, finished_at = started_at WHERE status = 'waiting';
UPDATE workflow_executions SET status = 'cancelled', error = 'cancelled on request', finished_at = updated_at
    WHERE status = 'waiting';
DROP INDEX workflow_executions_due_idx;
CREATE INDEX workflow_executions_due_idx ON workflow_executions (due_at) WHERE status = 'running';

-- An execution may wait (a `wait` step): status `waiting`, due when its wait ends, holding no
-- lease. The claim takes running and waiting executions that are due, earliest due first, so
-- the index it reads covers both (written as the claim writes its condition).
DROP INDEX workflow_executions_due_idx;
CREATE INDEX workflow_executions_due_idx ON workflow_executions (due_at)
    WHERE status IN ('running', 'waiting');

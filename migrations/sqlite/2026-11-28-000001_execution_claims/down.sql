ALTER TABLE workflow_executions DROP COLUMN claims;

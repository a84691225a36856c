ALTER TABLE webhook_subscriptions DROP COLUMN created_by;
DROP INDEX workflow_executions_tenant_running_idx;
ALTER TABLE workflow_executions DROP COLUMN call_chain;

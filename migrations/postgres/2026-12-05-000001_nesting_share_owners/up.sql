-- The workflows of the executions above one that an agent's run_workflow tool started,
-- outermost first (empty for an execution started any other way): an agent may not start a
-- workflow already in its chain, nor nest executions more than five deep.
ALTER TABLE workflow_executions ADD COLUMN call_chain JSONB NOT NULL DEFAULT '[]';
-- The claim counts each tenant's running executions under a live lease against the tenant's
-- share of the workers.
CREATE INDEX workflow_executions_tenant_running_idx ON workflow_executions (tenant_id) WHERE status = 'running';

-- Who made a subscription: it follows its maker's membership (it stops when they are removed or
-- demoted below webhooks:write). NULL: made before makers were recorded, owned by the tenant.
ALTER TABLE webhook_subscriptions ADD COLUMN created_by TEXT;

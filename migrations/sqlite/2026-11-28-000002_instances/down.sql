ALTER TABLE workflow_executions DROP COLUMN lease_owner;
ALTER TABLE webhook_deliveries DROP COLUMN lease_owner;
ALTER TABLE jobs DROP COLUMN lease_owner;
DROP TABLE instances;

DROP TABLE workflow_schedules;
ALTER TABLE instances DROP COLUMN fingerprints;
ALTER TABLE workflow_executions DROP COLUMN trigger_details;

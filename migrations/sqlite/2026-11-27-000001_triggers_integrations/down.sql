DROP TABLE integrations;
DROP TABLE workflow_triggers;

DROP TABLE workflow_step_results;
DROP TABLE workflow_executions;

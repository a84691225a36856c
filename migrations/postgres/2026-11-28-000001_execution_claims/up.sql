-- How often each execution was claimed by a worker: an execution that keeps crashing or
-- stalling its worker is failed once this passes the limit, instead of being retried forever.
ALTER TABLE workflow_executions ADD COLUMN claims BIGINT NOT NULL DEFAULT 0;

-- Executions of workflows and the result of each of their steps. An execution keeps the steps
-- it runs (the workflow's, when it started) and whose authority they act with; a worker holds
-- it under a lease (the job table's rules) while its steps run.
CREATE TABLE workflow_executions (
    id             TEXT PRIMARY KEY,
    tenant_id      TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    workflow_id    TEXT        NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    status         TEXT        NOT NULL,
    input          JSONB       NOT NULL,
    output         JSONB,
    error          TEXT,
    steps          JSONB       NOT NULL,
    origin_kind    TEXT        NOT NULL,
    origin_id      TEXT,
    dedup_key      TEXT,
    run_as_user_id TEXT        NOT NULL,
    run_as_role    TEXT        NOT NULL,
    lease_token    TEXT,
    lease_until    TIMESTAMPTZ,
    started_at     TIMESTAMPTZ NOT NULL,
    finished_at    TIMESTAMPTZ,
    updated_at     TIMESTAMPTZ NOT NULL
);
-- A repeated start from one trigger or integration with one key is the same execution.
CREATE UNIQUE INDEX workflow_executions_dedup_idx ON workflow_executions (origin_id, dedup_key)
    WHERE dedup_key IS NOT NULL;
CREATE INDEX workflow_executions_list_idx ON workflow_executions (tenant_id, workflow_id, started_at DESC, id DESC);
-- The worker's claim looks only at running executions.
CREATE INDEX workflow_executions_running_idx ON workflow_executions (lease_until) WHERE status = 'running';

CREATE TABLE workflow_step_results (
    execution_id TEXT        NOT NULL REFERENCES workflow_executions (id) ON DELETE CASCADE,
    position     INTEGER     NOT NULL,
    step_id      TEXT        NOT NULL,
    step_type    TEXT        NOT NULL,
    status       TEXT        NOT NULL,
    output       JSONB,
    error        TEXT,
    started_at   TIMESTAMPTZ,
    finished_at  TIMESTAMPTZ,
    PRIMARY KEY (execution_id, position)
);

-- What each running instance was configured with, as fingerprints (never the keys): instances
-- on one database must agree on the JWT key, the secret key and the issuer, or tokens one signs
-- are refused by the others. /readyz compares them and names the setting that differs.
ALTER TABLE instances ADD COLUMN fingerprints TEXT NOT NULL DEFAULT '{}';

-- The details of the call, integration event or schedule tick that started an execution,
-- which its templates read as `trigger.*` (NULL: started by the API or an agent).
ALTER TABLE workflow_executions ADD COLUMN trigger_details TEXT;

-- Schedules: a workflow started at the ticks of a cron expression in a time zone. A due tick
-- starts one execution, deduplicated by (schedule, tick) in workflow_executions; next_run_at
-- moves on only by a compare-and-set on its old value, so one instance advances each tick.
CREATE TABLE workflow_schedules (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    workflow_id     TEXT        NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    cron            TEXT        NOT NULL,
    timezone        TEXT        NOT NULL,
    input           TEXT       NOT NULL,
    is_active       BOOLEAN     NOT NULL,
    run_as_user_id  TEXT        NOT NULL,
    run_as_role     TEXT        NOT NULL,
    next_run_at     TEXT,
    last_run_at     TEXT,
    missed_count    BIGINT      NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX workflow_schedules_workflow_idx ON workflow_schedules (tenant_id, workflow_id, id);
CREATE INDEX workflow_schedules_workflow_fk_idx ON workflow_schedules (workflow_id);
CREATE INDEX workflow_schedules_due_idx ON workflow_schedules (next_run_at) WHERE is_active;

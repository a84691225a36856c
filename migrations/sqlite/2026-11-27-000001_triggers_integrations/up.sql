-- Webhook triggers (a URL whose calls execute a workflow) and inbound integrations (a
-- receiver of one kind bound to a workflow). Both go with their workflow: deleting it deletes
-- them. Their secrets are sealed (AES-256-GCM, bound to the row's id): a call's proof is
-- checked against the secret in clear. Executions they start act as their creator
-- (run_as_user_id with the role they had then).

CREATE TABLE workflow_triggers (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    workflow_id     TEXT        NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    -- The opaque random token of the trigger's URL.
    path            TEXT        NOT NULL,
    name            TEXT        NOT NULL,
    -- Upper-case method names, a JSON array.
    allowed_methods TEXT        NOT NULL,
    secret_sealed   TEXT        NOT NULL,
    is_active       BOOLEAN     NOT NULL,
    -- Incremented in place (trigger_count = trigger_count + 1) by each call that started an
    -- execution.
    trigger_count   BIGINT      NOT NULL DEFAULT 0,
    run_as_user_id  TEXT        NOT NULL,
    run_as_role     TEXT        NOT NULL,
    created_at      TEXT        NOT NULL
);
CREATE UNIQUE INDEX workflow_triggers_path_idx ON workflow_triggers (path);
CREATE INDEX workflow_triggers_workflow_idx ON workflow_triggers (tenant_id, workflow_id, id);
CREATE INDEX workflow_triggers_workflow_fk_idx ON workflow_triggers (workflow_id);

CREATE TABLE integrations (
    id                    TEXT PRIMARY KEY,
    tenant_id             TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind                  TEXT        NOT NULL CHECK (kind IN
                              ('chat', 'code-host', 'issue-tracker', 'issue-tracker-2', 'incident', 'wiki')),
    name                  TEXT        NOT NULL,
    workflow_id           TEXT        NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    signing_secret_sealed TEXT        NOT NULL,
    run_as_user_id        TEXT        NOT NULL,
    run_as_role           TEXT        NOT NULL,
    created_at            TEXT        NOT NULL
);
CREATE INDEX integrations_tenant_idx ON integrations (tenant_id, id);
CREATE INDEX integrations_workflow_idx ON integrations (workflow_id);

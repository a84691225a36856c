-- Core memory blocks: labelled texts always in an agent's context, edited by its owners and
-- by the agent itself (the core_memory tool), each change kept as a version.
CREATE TABLE memory_blocks (
    tenant_id   TEXT        NOT NULL,
    agent_id    TEXT        NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    label       TEXT        NOT NULL,
    value       TEXT        NOT NULL,
    description TEXT,
    char_limit  INTEGER     NOT NULL,
    version     INTEGER     NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (agent_id, label)
);

-- Every version of a block, its deletion included; kept while the agent exists (a block
-- deleted and set again continues its numbering).
CREATE TABLE memory_block_history (
    tenant_id TEXT        NOT NULL,
    agent_id  TEXT        NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    label     TEXT        NOT NULL,
    version   INTEGER     NOT NULL,
    value     TEXT        NOT NULL,
    change    TEXT        NOT NULL,
    actor     TEXT        NOT NULL,
    at        TEXT NOT NULL,
    PRIMARY KEY (agent_id, label, version)
);

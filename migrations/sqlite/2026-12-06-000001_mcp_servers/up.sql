-- Remote MCP servers a tenant registers: their agents use the servers' tools. The headers sent
-- to a server are sealed (AES-256-GCM, bound to the row's id) and never shown again; their
-- names are kept in clear to be shown. The last discovery (tools/list) is kept with its
-- outcome: the tools, or the error.
CREATE TABLE mcp_servers (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name            TEXT        NOT NULL,
    url             TEXT        NOT NULL,
    headers_sealed  TEXT        NOT NULL,
    header_names    TEXT        NOT NULL,
    -- A JSON array of tool names, or NULL: every tool the server lists.
    allowed_tools   TEXT,
    timeout_seconds INTEGER     NOT NULL,
    status          TEXT        NOT NULL,
    error           TEXT,
    -- [{name, description, input_schema}] as the server listed them.
    tools           TEXT        NOT NULL,
    checked_at      TEXT,
    created_at      TEXT        NOT NULL,
    updated_at      TEXT        NOT NULL
);
CREATE UNIQUE INDEX mcp_servers_name_idx ON mcp_servers (tenant_id, name);

-- Memory that learns: entries hold since a time and may stop holding (a later fact
-- contradicted them: invalidated, never deleted), record what wrote them and the chat messages
-- they were learned from, and keep the history of their changes.
ALTER TABLE memory_entries ADD COLUMN valid_from TIMESTAMPTZ;
UPDATE memory_entries SET valid_from = created_at;
ALTER TABLE memory_entries ALTER COLUMN valid_from SET NOT NULL;
ALTER TABLE memory_entries ADD COLUMN invalid_at TIMESTAMPTZ;
ALTER TABLE memory_entries ADD COLUMN superseded_by TEXT;
ALTER TABLE memory_entries ADD COLUMN origin TEXT NOT NULL DEFAULT 'api';
UPDATE memory_entries SET origin = CASE
    WHEN document_id IS NOT NULL THEN 'document'
    WHEN source = 'chat' THEN 'extraction'
    ELSE 'api' END;
ALTER TABLE memory_entries ADD COLUMN source_message_ids JSONB NOT NULL DEFAULT '[]';

-- Each change of an entry, from its first recorded version on (an entry with no row here is
-- as it was written: version 1).
CREATE TABLE memory_history (
    memory_id           TEXT        NOT NULL REFERENCES memory_entries (id) ON DELETE CASCADE,
    tenant_id           TEXT        NOT NULL,
    version             INTEGER     NOT NULL,
    content             TEXT        NOT NULL,
    change              TEXT        NOT NULL,
    reason              TEXT,
    source_message_ids  JSONB       NOT NULL,
    at                  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (memory_id, version)
);

-- The exchanges extraction has applied, written with what it applied: the same exchange
-- handed over again changes nothing.
CREATE TABLE memory_extractions (
    tenant_id    TEXT        NOT NULL,
    message_id   TEXT        NOT NULL,
    agent_id     TEXT        NOT NULL,
    changes      INTEGER     NOT NULL,
    extracted_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, message_id)
);

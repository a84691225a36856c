-- A new fact on a topic (`home`, `name`, …) replaces the agent's current fact on it: found by
-- this index, without a vector search. `->>` reads the JSON member as text on both databases.
CREATE INDEX memory_entries_topic_idx ON memory_entries (tenant_id, agent_id, (metadata ->> 'topic'))
    WHERE invalid_at IS NULL;

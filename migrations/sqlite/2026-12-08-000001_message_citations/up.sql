-- A reply that answered from an agent's knowledge bases keeps the sources it cites (JSON text of
-- [{index, chunk_id, file_id, file_name, page, snippet}]); null when it cites none.
ALTER TABLE chat_messages ADD COLUMN citations TEXT;

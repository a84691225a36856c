-- A streamed reply whose client left mid-way is stored as far as it was generated, and marked.
ALTER TABLE chat_messages ADD COLUMN incomplete BOOLEAN NOT NULL DEFAULT 0;

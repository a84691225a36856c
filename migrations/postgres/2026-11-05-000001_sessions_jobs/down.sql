DROP TABLE jobs;
DROP INDEX chat_messages_session_idx;
CREATE INDEX chat_messages_session_idx ON chat_messages (session_id, id);
ALTER TABLE chat_messages DROP CONSTRAINT chat_messages_session_fkey;
ALTER TABLE chat_sessions DROP CONSTRAINT chat_sessions_pkey;
ALTER TABLE chat_sessions ADD CONSTRAINT chat_sessions_pkey PRIMARY KEY (id);
ALTER TABLE chat_messages ADD CONSTRAINT chat_messages_session_id_fkey
    FOREIGN KEY (session_id) REFERENCES chat_sessions (id) ON DELETE CASCADE;

ALTER TABLE chat_messages DROP COLUMN finish_reason;

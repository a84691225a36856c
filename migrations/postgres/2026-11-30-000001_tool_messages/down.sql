DELETE FROM chat_messages WHERE role = 'tool';
ALTER TABLE chat_messages DROP COLUMN tool_name;
ALTER TABLE chat_messages DROP COLUMN tool_call_id;
ALTER TABLE chat_messages DROP COLUMN tool_calls;
ALTER TABLE chat_messages DROP CONSTRAINT chat_messages_role_check;
ALTER TABLE chat_messages ADD CONSTRAINT chat_messages_role_check CHECK (role IN ('user', 'assistant'));

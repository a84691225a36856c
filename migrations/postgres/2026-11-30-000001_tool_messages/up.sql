-- Agents call tools: a conversation keeps the assistant's calls (JSON text of
-- [{id, name, arguments}]) and each tool's result as a message of role `tool`.
ALTER TABLE chat_messages DROP CONSTRAINT chat_messages_role_check;
ALTER TABLE chat_messages ADD CONSTRAINT chat_messages_role_check CHECK (role IN ('user', 'assistant', 'tool'));
ALTER TABLE chat_messages ADD COLUMN tool_calls TEXT;
ALTER TABLE chat_messages ADD COLUMN tool_call_id TEXT;
ALTER TABLE chat_messages ADD COLUMN tool_name TEXT;

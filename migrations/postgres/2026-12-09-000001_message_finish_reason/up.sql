-- Why a reply ended: stop, length (cut off at the token limit), tool_calls or cancelled (its
-- streaming client left). Null for the messages of people and tools, and for replies stored
-- before it was kept.
ALTER TABLE chat_messages ADD COLUMN finish_reason TEXT;

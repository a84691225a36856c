DROP TABLE events;
DROP TABLE purchases;
DROP TABLE credit_holds;
DROP TABLE chat_messages;
DROP TABLE chat_sessions;
DROP TABLE agents;
ALTER TABLE credit_ledger DROP COLUMN reference;

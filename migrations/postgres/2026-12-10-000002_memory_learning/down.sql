DROP TABLE memory_extractions;
DROP TABLE memory_history;
ALTER TABLE memory_entries DROP COLUMN source_message_ids;
ALTER TABLE memory_entries DROP COLUMN origin;
ALTER TABLE memory_entries DROP COLUMN superseded_by;
ALTER TABLE memory_entries DROP COLUMN invalid_at;
ALTER TABLE memory_entries DROP COLUMN valid_from;

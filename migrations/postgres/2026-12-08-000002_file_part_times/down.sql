DROP INDEX knowledge_file_parts_written_idx;
ALTER TABLE knowledge_file_parts DROP COLUMN written_at;

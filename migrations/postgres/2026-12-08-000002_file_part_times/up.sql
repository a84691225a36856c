-- When each part of a file's bytes was written: parts of an upload cut off by a crash (no file row
-- ever came) are swept once they are old enough that no upload can still be writing them.
-- Parts written before this column existed read as null and count as old.
ALTER TABLE knowledge_file_parts ADD COLUMN written_at TIMESTAMPTZ;
CREATE INDEX knowledge_file_parts_written_idx ON knowledge_file_parts (written_at);

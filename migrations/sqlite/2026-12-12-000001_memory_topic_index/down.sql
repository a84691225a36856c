DROP INDEX memory_entries_topic_idx;

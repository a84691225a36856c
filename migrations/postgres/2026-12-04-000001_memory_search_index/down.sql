ALTER INDEX memory_entries_search_idx SET (fastupdate = on);

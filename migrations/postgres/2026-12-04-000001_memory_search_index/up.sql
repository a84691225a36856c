-- Every search reads the full-text index (the word counts and the ranked match). With GIN's
-- default `fastupdate`, new entries wait in the index's pending list, which every search reads
-- in full, word by word, until a vacuum or 4 MB of entries merge it into the index: after a
-- bulk of new memories, each search paid for all of them. Off, each insert puts its words in
-- the index at once (a memory's text has a few dozen), and a search reads only the index.
ALTER INDEX memory_entries_search_idx SET (fastupdate = off);
-- What is pending now goes into the index.
SELECT gin_clean_pending_list('memory_entries_search_idx'::regclass);

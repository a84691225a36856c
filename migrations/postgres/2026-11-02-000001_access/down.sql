DROP TABLE rate_limit_counters;
DROP TABLE one_time_tokens;
DROP TABLE api_keys;

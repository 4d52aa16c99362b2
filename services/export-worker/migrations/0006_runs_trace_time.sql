-- A trace's runs in time order (POST /runs/query with `trace`, the console's trace page): keyset
-- paging on (start_time, id) within one trace is an index range scan, where the index on trace_id
-- alone read and sorted every run of the trace for each page (a 5,000-run trace: 50 pages, each
-- reading 5,000 rows). Its first column serves every lookup by trace_id the old index did.
CREATE INDEX runs_trace_time ON runs (trace_id, start_time, id);
DROP INDEX runs_trace;

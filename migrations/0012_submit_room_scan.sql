-- 0012_submit_room_scan.sql: a submission's count of its project's delta
-- rows no longer reads the rows folded since the last VACUUM (issue 15).
--
-- tessera_submit_room() (0011) sums the project's project_pending_delta
-- rows. The planner read them with a bitmap scan, which never marks an
-- index entry dead: every row a fold had deleted was fetched again by
-- every submission until autovacuum came (at most once a minute; at 2,000
-- submissions a second that is 120,000 rows). With 20,000 jobs queued by
-- one INSERT and folded, a submission's statement hit 132 buffers and
-- spent 0.43 of its 0.68 ms there; perf on the backends: 44 % of their
-- CPU in the function, the bitmap scan and heap_hot_search_buffer most of
-- it. A plain index scan marks the entries of rows dead to every snapshot
-- (kill_prior_tuple) the first time it meets them, so the next count
-- skips them: 17 buffers, 0.02 ms (tests/integration/
-- test_submit_concurrent.c: 22 against 132 at every call). Sequential
-- scans are off too, so that the planner, refused the bitmap, cannot pick
-- a read of the whole table, dead rows included. The lock's statement
-- reads the project by its name's index either way.
ALTER FUNCTION tessera_submit_room(text, bigint[], boolean) SET enable_bitmapscan = off;
ALTER FUNCTION tessera_submit_room(text, bigint[], boolean) SET enable_seqscan = off;

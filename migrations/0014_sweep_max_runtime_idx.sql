-- 0014_sweep_max_runtime_idx.sql: the scheduler's sweep finds the jobs
-- past their maximum runtime without reading every job (issue 15).
--
-- The sweep (server/store/store_sched.c) runs each second and each cycle;
-- its part that stops jobs past max_runtime_seconds read the whole job
-- table, every job ever run and its dead row versions, because no index
-- served "running or suspended, with a maximum runtime": at 1,000 nodes,
-- 11,738 rows and 6,009 buffers a sweep (EXPLAIN in the fleet bench); the
-- sweep took 9 to 35 ms a call, 4 to 5 a second, most of it there. Building
-- the index holds off writes to job once, for one pass over the table.
-- This index holds only the jobs it looks for (its WHERE repeats the
-- statement's, so the planner may use it): none when no job has a maximum
-- runtime.
CREATE INDEX job_max_runtime_idx ON job (id)
    WHERE max_runtime_seconds > 0 AND state IN ('running', 'suspended');

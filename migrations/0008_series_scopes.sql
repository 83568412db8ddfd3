-- 0008_series_scopes.sql: the metric series of departments and of running
-- jobs, and two figures more per point (issue 18).
--
-- scope 'department' (its name): the sum of its projects' figures, its
-- capacity its quota; scope 'job' (the job's id): a running job's figures.
-- pending_gpus: the GPUs requested by pending jobs. idle_gpus: the GPUs
-- allocated to running jobs whose own utilization is under 1 % of their
-- allocation at the sample; integrated over time it is the idle GPU-hours
-- (server/README.md).
ALTER TABLE metric_point
    ADD COLUMN pending_gpus double precision NOT NULL DEFAULT 0,
    ADD COLUMN idle_gpus    double precision NOT NULL DEFAULT 0,
    DROP CONSTRAINT metric_point_scope_check,
    ADD CONSTRAINT metric_point_scope_check
        CHECK (scope IN ('cluster', 'department', 'project', 'node', 'gpu', 'job'));

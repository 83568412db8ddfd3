-- 0010_physical_gpu.sql: where a job's GPU runs on its node (issue 17).
--
-- The scheduler's assignment is logical (job_gpu.gpu_id); the node-level
-- scheduler may run a fractional job on another physical GPU of the same
-- node, and the agent reports it. job_gpu.physical_idx is that GPU's index
-- on the node; NULL until the agent reports it (agents before issue 17
-- never do: read as the logical GPU).
ALTER TABLE job_gpu
    ADD COLUMN physical_idx integer,
    ADD CONSTRAINT job_gpu_physical_idx_check CHECK (physical_idx >= 0 AND physical_idx < 64);

-- 0004_collisions.sql: what the node's collision resolver needs from the
-- server: which node ran which attempt of a job (so that a resolver's event
-- about an attempt is stored whatever became of the job since), the host
-- swap a running job's detached memory takes, and each job's idle detach.

-- One row per placement of a job on a node: (job, attempt) ran on node_id.
-- Written by the trigger below whenever a job is bound to a node; a job's
-- earlier attempts keep their rows, so an agent may still report events
-- about them (and only about attempts that ran on its own node).
CREATE TABLE job_attempt (
    job_id     bigint NOT NULL,
    attempt    integer NOT NULL,
    node_id    bigint NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_attempt_pkey PRIMARY KEY (job_id, attempt),
    CONSTRAINT job_attempt_job_fkey FOREIGN KEY (job_id) REFERENCES job (id) ON DELETE CASCADE,
    CONSTRAINT job_attempt_node_fkey FOREIGN KEY (node_id) REFERENCES node (id) ON DELETE CASCADE
);
CREATE INDEX job_attempt_node_idx ON job_attempt (node_id);

-- The jobs placed now: their current attempt ran (or runs) on their node.
INSERT INTO job_attempt (job_id, attempt, node_id, started_at)
SELECT id, attempt, node_id, coalesce(attempt_started_at, updated_at)
FROM job WHERE node_id IS NOT NULL AND attempt > 0;

-- A bind sets node_id and attempt: record the pair. A suspended job resumes
-- in the same attempt on the same node: its row is already there.
CREATE FUNCTION tessera_job_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_attempt (job_id, attempt, node_id)
    VALUES (NEW.id, NEW.attempt, NEW.node_id)
    ON CONFLICT (job_id, attempt) DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER job_attempt_record AFTER INSERT OR UPDATE OF node_id, attempt ON job
    FOR EACH ROW WHEN (NEW.node_id IS NOT NULL AND NEW.attempt > 0)
    EXECUTE FUNCTION tessera_job_attempt();

-- swapped_bytes: a running job's GPU memory that its node keeps in its host
-- swap reserve while the job runs (idle detach, time-sharing), as its agent
-- last reported; it counts against the node's swap. Only running jobs hold
-- any: the trigger below clears it when the job leaves running.
-- idle_swap_after_seconds: after this long idle on its GPUs, the job's GPU
-- memory is swapped out while its processes keep running; 0: never.
-- Resolved at submission (the kind's default when not given).
ALTER TABLE job
    ADD COLUMN swapped_bytes           bigint NOT NULL DEFAULT 0,
    ADD COLUMN idle_swap_after_seconds integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT job_swapped_bytes_check
        CHECK (swapped_bytes >= 0 AND (state = 'running' OR swapped_bytes = 0)),
    ADD CONSTRAINT job_idle_swap_after_check
        CHECK (idle_swap_after_seconds >= 0 AND idle_swap_after_seconds <= 604800);

CREATE FUNCTION tessera_job_swap_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.swapped_bytes := 0;
    RETURN NEW;
END $$;

CREATE TRIGGER job_swap_clear BEFORE UPDATE ON job
    FOR EACH ROW WHEN (NEW.state <> 'running' AND NEW.swapped_bytes <> 0)
    EXECUTE FUNCTION tessera_job_swap_clear();

-- 0003_suspend.sql: suspend in place and the node's collision resolver.
--
-- A node declares how its agent resolves GPU memory collisions (wait,
-- priority, swap); swap_bytes (0002) is its host swap reserve. A job may
-- refuse swap. A suspended job keeps its node and attempt, its processes
-- stopped and its GPU memory in the node's host swap; its GPUs are free for
-- others, and it resumes only on the GPUs it held before.
ALTER TABLE node
    ADD COLUMN collision text NOT NULL DEFAULT 'wait',
    ADD CONSTRAINT node_collision_check CHECK (collision IN ('wait', 'priority', 'swap'));

-- swap: the job accepts being swapped (false: never suspended, never placed
-- where a swap resolver could swap its burst). suspended_bytes: the host swap
-- it holds while suspending or suspended. suspend_held: suspended on request;
-- it waits for POST /resume. suspended_gpu_ids / _bytes: the GPUs (and bytes
-- packed on each) it held when it was suspended: it resumes only there.
ALTER TABLE job
    ADD COLUMN swap                boolean NOT NULL DEFAULT true,
    ADD COLUMN suspended_bytes     bigint NOT NULL DEFAULT 0,
    ADD COLUMN suspend_held        boolean NOT NULL DEFAULT false,
    ADD COLUMN suspended_gpu_ids   bigint[],
    ADD COLUMN suspended_gpu_bytes bigint[],
    DROP CONSTRAINT job_state_check,
    ADD CONSTRAINT job_state_check CHECK (state IN ('pending', 'scheduled', 'running', 'evicting',
        'cancelling', 'suspending', 'suspended', 'resuming', 'succeeded', 'failed', 'cancelled')),
    ADD CONSTRAINT job_suspended_bytes_check CHECK (suspended_bytes >= 0);

-- Events an agent reports (the collision resolver's actions) carry the
-- attempt and a sequence number per attempt, so a resent report stores each
-- once.
ALTER TABLE job_event
    ADD COLUMN attempt integer,
    ADD COLUMN seq     integer;
CREATE UNIQUE INDEX job_event_seq_key ON job_event (job_id, attempt, seq) WHERE seq IS NOT NULL;

-- A job holds GPUs (job_gpu rows) only while scheduled, running, resuming,
-- suspending or stopping: a suspended one has given them back.
CREATE OR REPLACE FUNCTION tessera_job_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- a job holds GPUs only while scheduled, running, resuming, suspending or
    -- stopping
    IF TG_OP = 'UPDATE'
       AND NEW.state IN ('pending', 'suspended', 'succeeded', 'failed', 'cancelled') THEN
        DELETE FROM job_gpu WHERE job_id = NEW.id;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.node_id IS NOT NULL THEN
        UPDATE node SET generation = generation + 1 WHERE id = OLD.node_id;
        PERFORM pg_notify('tessera_node', OLD.node_id::text);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.node_id IS NOT NULL
       AND (TG_OP = 'INSERT' OR NEW.node_id IS DISTINCT FROM OLD.node_id) THEN
        UPDATE node SET generation = generation + 1 WHERE id = NEW.node_id;
        PERFORM pg_notify('tessera_node', NEW.node_id::text);
    END IF;
    PERFORM pg_notify('tessera_sched', '');
    RETURN NULL;
END $$;

-- The scheduler also wakes when a job's hold is cleared, and when a node's
-- resolver changes (where a job refusing swap may go).
CREATE TRIGGER job_hold_notify AFTER UPDATE OF suspend_held ON job
    FOR EACH STATEMENT EXECUTE FUNCTION tessera_sched_wake();
DROP TRIGGER node_state_notify ON node;
CREATE TRIGGER node_state_notify AFTER INSERT OR DELETE OR UPDATE OF state, cpu, memory_bytes,
    labels, swap_bytes, gpu_reserve_bytes, collision ON node
    FOR EACH STATEMENT EXECUTE FUNCTION tessera_sched_wake();

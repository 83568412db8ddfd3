-- 0002_lifecycle.sql: what running jobs on nodes needs: the node's desired
-- state generation and heartbeat, each job's placement on GPUs and its
-- attempts, live samples, logs, the metric time series, and the triggers that
-- wake the scheduler and the agents.

-- generation: the version of the node's desired state; bumped (by the job
-- trigger below) whenever a job assigned to the node changes state or node,
-- so an agent long-polls on it.
ALTER TABLE node
    ADD COLUMN generation        bigint NOT NULL DEFAULT 1,
    ADD COLUMN agent_version     text,
    ADD COLUMN swap_bytes        bigint NOT NULL DEFAULT 0,
    ADD COLUMN gpu_reserve_bytes bigint NOT NULL DEFAULT 0,
    ADD COLUMN registered_at     timestamptz,
    ADD CONSTRAINT node_resources_check
        CHECK (cpu >= 0 AND memory_bytes >= 0 AND swap_bytes >= 0 AND gpu_reserve_bytes >= 0);

-- The latest sample the node's agent sent for each GPU.
ALTER TABLE gpu
    ADD COLUMN utilization       double precision NOT NULL DEFAULT 0,
    ADD COLUMN memory_used_bytes bigint NOT NULL DEFAULT 0,
    ADD COLUMN sampled_at        timestamptz,
    ADD CONSTRAINT gpu_sample_check CHECK (utilization >= 0 AND utilization <= 1
                                           AND memory_used_bytes >= 0);

-- attempt: bumped at every bind; agents name (id, attempt) in reports so that
-- a late report about an earlier attempt changes nothing.
-- attempt_started_at: when the current attempt started running (protection
-- counts from it). stop_reason: why a stop was asked (evicted, cancelled,
-- node_lost). last_active_at: the last sample with GPU utilization above 0.
ALTER TABLE job
    ADD COLUMN attempt            integer NOT NULL DEFAULT 0,
    ADD COLUMN grace_seconds      integer NOT NULL DEFAULT 30,
    ADD COLUMN checkpoint_dir     text,
    ADD COLUMN pid                integer,
    ADD COLUMN attempt_started_at timestamptz,
    ADD COLUMN stop_reason        text,
    ADD COLUMN gpu_utilization    double precision NOT NULL DEFAULT 0,
    ADD COLUMN gpu_memory_used_bytes bigint NOT NULL DEFAULT 0,
    ADD COLUMN sampled_at         timestamptz,
    ADD COLUMN last_active_at     timestamptz,
    ADD COLUMN log_bytes          bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT job_grace_check CHECK (grace_seconds >= 0 AND grace_seconds <= 86400);

-- Fair share as the scheduler computed it last (GPUs).
ALTER TABLE project
    ADD COLUMN deserved_gpus   double precision NOT NULL DEFAULT 0,
    ADD COLUMN fair_share_gpus double precision NOT NULL DEFAULT 0;

-- The GPUs a scheduled or running job holds, and the bytes packed on each.
CREATE TABLE job_gpu (
    job_id       bigint NOT NULL,
    gpu_id       bigint NOT NULL,
    memory_bytes bigint NOT NULL,
    CONSTRAINT job_gpu_pkey PRIMARY KEY (job_id, gpu_id),
    CONSTRAINT job_gpu_memory_check CHECK (memory_bytes > 0),
    CONSTRAINT job_gpu_job_fkey FOREIGN KEY (job_id) REFERENCES job (id) ON DELETE CASCADE,
    CONSTRAINT job_gpu_gpu_fkey FOREIGN KEY (gpu_id) REFERENCES gpu (id) ON DELETE CASCADE
);
CREATE INDEX job_gpu_gpu_idx ON job_gpu (gpu_id);

-- A job's output as its agents shipped it: chunks at byte offsets within one
-- attempt's output. Read in (attempt, offset_bytes) order.
CREATE TABLE job_log (
    job_id       bigint NOT NULL,
    attempt      integer NOT NULL,
    offset_bytes bigint NOT NULL,
    data         bytea NOT NULL,
    at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_log_pkey PRIMARY KEY (job_id, attempt, offset_bytes),
    CONSTRAINT job_log_offset_check CHECK (offset_bytes >= 0),
    CONSTRAINT job_log_job_fkey FOREIGN KEY (job_id) REFERENCES job (id) ON DELETE CASCADE
);

-- Time series of allocation and utilization. One row per scope, key and
-- bucket at one resolution (seconds); coarser resolutions are averages of
-- finer ones. scope: cluster (key ''), project (name), node (name), gpu
-- ("node/index"). capacity: GPUs there (a project: its quota).
CREATE TABLE metric_point (
    resolution_s      integer NOT NULL,
    scope             text NOT NULL,
    key               text NOT NULL,
    at                timestamptz NOT NULL,
    capacity          double precision NOT NULL DEFAULT 0,
    allocated         double precision NOT NULL DEFAULT 0,
    utilized          double precision NOT NULL DEFAULT 0,
    memory_used_bytes double precision NOT NULL DEFAULT 0,
    running_jobs      double precision NOT NULL DEFAULT 0,
    pending_jobs      double precision NOT NULL DEFAULT 0,
    samples           integer NOT NULL DEFAULT 1,
    CONSTRAINT metric_point_pkey PRIMARY KEY (resolution_s, scope, key, at),
    CONSTRAINT metric_point_scope_check CHECK (scope IN ('cluster', 'project', 'node', 'gpu'))
);
CREATE INDEX metric_point_at_idx ON metric_point (resolution_s, at);

-- Free a job's GPUs when it leaves them; wake the scheduler (channel
-- tessera_sched) on anything that can change its decisions, and the agents (channel tessera_node, payload the node id) when
-- their desired state changes. NOTIFY is delivered at commit, once per
-- distinct payload per transaction.
CREATE FUNCTION tessera_job_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- a job holds GPUs only while scheduled, running or stopping
    IF TG_OP = 'UPDATE' AND NEW.state IN ('pending', 'succeeded', 'failed', 'cancelled') THEN
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

CREATE TRIGGER job_insert_delete_notify AFTER INSERT OR DELETE ON job
    FOR EACH ROW EXECUTE FUNCTION tessera_job_changed();
CREATE TRIGGER job_update_notify AFTER UPDATE ON job
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
                       OR OLD.node_id IS DISTINCT FROM NEW.node_id)
    EXECUTE FUNCTION tessera_job_changed();

CREATE FUNCTION tessera_sched_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tessera_sched', '');
    RETURN NULL;
END $$;

CREATE TRIGGER project_quota_notify AFTER INSERT OR DELETE OR UPDATE OF quota_gpus,
    over_quota_weight, limit_gpus, priority, department_id ON project
    FOR EACH STATEMENT EXECUTE FUNCTION tessera_sched_wake();
CREATE TRIGGER department_quota_notify AFTER INSERT OR DELETE OR UPDATE OF quota_gpus,
    over_quota_weight, limit_gpus, priority ON department
    FOR EACH STATEMENT EXECUTE FUNCTION tessera_sched_wake();
CREATE TRIGGER node_state_notify AFTER INSERT OR DELETE OR UPDATE OF state, cpu, memory_bytes,
    labels, swap_bytes, gpu_reserve_bytes ON node
    FOR EACH STATEMENT EXECUTE FUNCTION tessera_sched_wake();
CREATE TRIGGER gpu_notify AFTER INSERT OR DELETE OR UPDATE OF memory_bytes, model ON gpu
    FOR EACH STATEMENT EXECUTE FUNCTION tessera_sched_wake();

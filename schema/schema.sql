-- schema.sql: the whole Tessera database schema as the migrations leave it
-- (migrations/0001_init.sql to 0015_submit_room_rows.sql, plus the
-- schema_migration table the server creates to record them). Read it to learn the schema; never apply it to a
-- database the server will migrate. tests/integration/test_store_migrate.c
-- fails when this file and the migrated database differ. See README.md.
--
-- schema version: 15

-- Applied migrations, created by the server (server/store/migrate.c).
CREATE TABLE schema_migration (
    version    integer NOT NULL,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT schema_migration_pkey PRIMARY KEY (version)
);

CREATE TABLE department (
    id                bigint GENERATED ALWAYS AS IDENTITY,
    name              text NOT NULL,
    quota_gpus        double precision NOT NULL DEFAULT 0,
    over_quota_weight double precision NOT NULL DEFAULT 1,
    limit_gpus        double precision,
    priority          integer NOT NULL DEFAULT 0,
    revision          bigint NOT NULL DEFAULT 1,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT department_pkey PRIMARY KEY (id),
    CONSTRAINT department_name_key UNIQUE (name),
    CONSTRAINT department_name_check CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    CONSTRAINT department_quota_check CHECK (quota_gpus >= 0 AND over_quota_weight >= 0),
    CONSTRAINT department_limit_check CHECK (limit_gpus IS NULL OR limit_gpus >= quota_gpus)
);

CREATE TABLE project (
    id                bigint GENERATED ALWAYS AS IDENTITY,
    name              text NOT NULL,
    department_id     bigint NOT NULL,
    quota_gpus        double precision NOT NULL DEFAULT 0,
    over_quota_weight double precision NOT NULL DEFAULT 1,
    limit_gpus        double precision,
    priority          integer NOT NULL DEFAULT 0,
    revision          bigint NOT NULL DEFAULT 1,
    created_at        timestamptz NOT NULL DEFAULT now(),
    deserved_gpus     double precision NOT NULL DEFAULT 0,
    fair_share_gpus   double precision NOT NULL DEFAULT 0,
    max_pending       bigint NOT NULL DEFAULT 10000,
    pending_jobs      bigint NOT NULL DEFAULT 0,
    job_user          text,
    allow_root        boolean NOT NULL DEFAULT false,
    CONSTRAINT project_pkey PRIMARY KEY (id),
    CONSTRAINT project_name_key UNIQUE (name),
    CONSTRAINT project_name_check CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    CONSTRAINT project_quota_check CHECK (quota_gpus >= 0 AND over_quota_weight >= 0),
    CONSTRAINT project_limit_check CHECK (limit_gpus IS NULL OR limit_gpus >= quota_gpus),
    CONSTRAINT project_department_fkey FOREIGN KEY (department_id)
        REFERENCES department (id) ON DELETE RESTRICT,
    CONSTRAINT project_max_pending_check CHECK (max_pending >= 0),
    CONSTRAINT project_job_user_check CHECK (job_user ~ '^[a-z_][a-z0-9_-]{0,31}$'),
    CONSTRAINT project_job_user_root_check CHECK (job_user IS DISTINCT FROM 'root' OR allow_root)
);
CREATE INDEX project_department_idx ON project (department_id);

-- A project's pending jobs are pending_jobs plus its rows here (0007,
-- 0011): every change of a job to or from pending, a submission included,
-- inserts a row here, without a lock; the scheduler's cycle folds the rows
-- into pending_jobs, and so does a submission that finds its project's
-- rows many (server/store/store_pending.c).
CREATE TABLE project_pending_delta (
    project_id bigint NOT NULL,
    delta      integer NOT NULL
);
CREATE INDEX project_pending_delta_project_idx ON project_pending_delta (project_id);

-- Bearer tokens: only the SHA-256 of the secret is kept.
CREATE TABLE api_token (
    id           bigint GENERATED ALWAYS AS IDENTITY,
    name         text NOT NULL,
    role         text NOT NULL,
    token_sha256 text NOT NULL,
    bootstrap    boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    CONSTRAINT api_token_pkey PRIMARY KEY (id),
    CONSTRAINT api_token_name_key UNIQUE (name),
    CONSTRAINT api_token_sha256_key UNIQUE (token_sha256),
    CONSTRAINT api_token_role_check CHECK (role IN ('admin', 'member', 'viewer', 'agent')),
    CONSTRAINT api_token_sha256_check CHECK (token_sha256 ~ '^[0-9a-f]{64}$')
);

-- The projects a member (or a restricted viewer) token may act on.
CREATE TABLE api_token_project (
    token_id   bigint NOT NULL,
    project_id bigint NOT NULL,
    CONSTRAINT api_token_project_pkey PRIMARY KEY (token_id, project_id),
    CONSTRAINT api_token_project_token_fkey FOREIGN KEY (token_id)
        REFERENCES api_token (id) ON DELETE CASCADE,
    CONSTRAINT api_token_project_project_fkey FOREIGN KEY (project_id)
        REFERENCES project (id) ON DELETE CASCADE
);
CREATE INDEX api_token_project_project_idx ON api_token_project (project_id);

-- The nodes an agent token may act as (0006): a name, a prefix followed by
-- "*", or "*". An agent token without rows acts for any node.
CREATE TABLE api_token_node (
    token_id     bigint NOT NULL,
    node_pattern text NOT NULL,
    CONSTRAINT api_token_node_pkey PRIMARY KEY (token_id, node_pattern),
    CONSTRAINT api_token_node_token_fkey FOREIGN KEY (token_id)
        REFERENCES api_token (id) ON DELETE CASCADE,
    CONSTRAINT api_token_node_pattern_check
        CHECK (node_pattern ~ '^([a-z0-9][a-z0-9-]{0,62}|[a-z0-9][a-z0-9-]{0,61}\*|\*)$')
);

CREATE TABLE node (
    id           bigint GENERATED ALWAYS AS IDENTITY,
    name         text NOT NULL,
    state        text NOT NULL DEFAULT 'not_ready',
    labels       jsonb NOT NULL DEFAULT '{}',
    cpu          double precision NOT NULL DEFAULT 0,
    memory_bytes bigint NOT NULL DEFAULT 0,
    last_seen_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    generation   bigint NOT NULL DEFAULT 1,
    agent_version text,
    swap_bytes   bigint NOT NULL DEFAULT 0,
    gpu_reserve_bytes bigint NOT NULL DEFAULT 0,
    registered_at timestamptz,
    collision    text NOT NULL DEFAULT 'wait',
    CONSTRAINT node_pkey PRIMARY KEY (id),
    CONSTRAINT node_name_key UNIQUE (name),
    CONSTRAINT node_state_check CHECK (state IN ('ready', 'not_ready', 'drained')),
    CONSTRAINT node_resources_check
        CHECK (cpu >= 0 AND memory_bytes >= 0 AND swap_bytes >= 0 AND gpu_reserve_bytes >= 0),
    CONSTRAINT node_collision_check CHECK (collision IN ('wait', 'priority', 'swap'))
);

CREATE TABLE gpu (
    id           bigint GENERATED ALWAYS AS IDENTITY,
    node_id      bigint NOT NULL,
    idx          integer NOT NULL,
    uuid         text NOT NULL,
    model        text NOT NULL,
    memory_bytes bigint NOT NULL,
    utilization  double precision NOT NULL DEFAULT 0,
    memory_used_bytes bigint NOT NULL DEFAULT 0,
    sampled_at   timestamptz,
    CONSTRAINT gpu_pkey PRIMARY KEY (id),
    CONSTRAINT gpu_node_idx_key UNIQUE (node_id, idx),
    CONSTRAINT gpu_uuid_key UNIQUE (uuid),
    CONSTRAINT gpu_node_fkey FOREIGN KEY (node_id) REFERENCES node (id) ON DELETE CASCADE,
    CONSTRAINT gpu_sample_check CHECK (utilization >= 0 AND utilization <= 1
                                       AND memory_used_bytes >= 0)
);

CREATE TABLE job (
    id                  bigint GENERATED ALWAYS AS IDENTITY,
    project_id          bigint NOT NULL,
    name                text NOT NULL,
    kind                text NOT NULL,
    priority            integer NOT NULL,
    preemptible         boolean NOT NULL,
    command             jsonb NOT NULL,
    env                 jsonb NOT NULL DEFAULT '{}',
    working_dir         text,
    gpu_kind            text NOT NULL DEFAULT 'none',
    gpu_count           integer NOT NULL DEFAULT 0,
    gpu_portion         double precision NOT NULL DEFAULT 0,
    gpu_portion_limit   double precision NOT NULL DEFAULT 0,
    gpu_memory_bytes    bigint NOT NULL DEFAULT 0,
    gpu_memory_limit_bytes bigint NOT NULL DEFAULT 0,
    gpu_devices         integer NOT NULL DEFAULT 0,
    -- count, or portion x devices; 0 for a memory request (store_quota.c counts it)
    requested_gpus      double precision NOT NULL DEFAULT 0,
    cpu                 double precision NOT NULL DEFAULT 0,
    memory_bytes        bigint NOT NULL DEFAULT 0,
    gpu_model           jsonb NOT NULL DEFAULT '[]',
    node_selector       jsonb NOT NULL DEFAULT '{}',
    max_runtime_seconds bigint NOT NULL DEFAULT 0,
    state               text NOT NULL DEFAULT 'pending',
    node_id             bigint,
    allocated_gpus      double precision NOT NULL DEFAULT 0,
    exit_code           integer,
    reason_code         text,
    reason_message      text,
    queue_position      bigint NOT NULL DEFAULT 0,
    resume_count        integer NOT NULL DEFAULT 0,
    submitted_by        bigint,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,
    finished_at         timestamptz,
    attempt             integer NOT NULL DEFAULT 0,
    grace_seconds       integer NOT NULL DEFAULT 30,
    checkpoint_dir      text,
    pid                 integer,
    attempt_started_at  timestamptz,
    stop_reason         text,
    gpu_utilization     double precision NOT NULL DEFAULT 0,
    gpu_memory_used_bytes bigint NOT NULL DEFAULT 0,
    sampled_at          timestamptz,
    last_active_at      timestamptz,
    log_bytes           bigint NOT NULL DEFAULT 0,
    swap                boolean NOT NULL DEFAULT true,
    suspended_bytes     bigint NOT NULL DEFAULT 0,
    suspend_held        boolean NOT NULL DEFAULT false,
    suspended_gpu_ids   bigint[],
    suspended_gpu_bytes bigint[],
    swapped_bytes       bigint NOT NULL DEFAULT 0,
    idle_swap_after_seconds integer NOT NULL DEFAULT 0,
    CONSTRAINT job_pkey PRIMARY KEY (id),
    CONSTRAINT job_project_name_key UNIQUE (project_id, name),
    CONSTRAINT job_name_check CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    CONSTRAINT job_kind_check CHECK (kind IN ('train', 'interactive', 'inference')),
    CONSTRAINT job_gpu_kind_check CHECK (gpu_kind IN ('none', 'count', 'portion', 'memory')),
    CONSTRAINT job_state_check CHECK (state IN ('pending', 'scheduled', 'running', 'evicting',
        'cancelling', 'suspending', 'suspended', 'resuming', 'succeeded', 'failed', 'cancelled')),
    CONSTRAINT job_project_fkey FOREIGN KEY (project_id) REFERENCES project (id) ON DELETE CASCADE,
    CONSTRAINT job_node_fkey FOREIGN KEY (node_id) REFERENCES node (id) ON DELETE SET NULL,
    CONSTRAINT job_submitted_by_fkey FOREIGN KEY (submitted_by)
        REFERENCES api_token (id) ON DELETE SET NULL,
    CONSTRAINT job_grace_check CHECK (grace_seconds >= 0 AND grace_seconds <= 86400),
    CONSTRAINT job_suspended_bytes_check CHECK (suspended_bytes >= 0),
    -- host swap a running job's detached GPU memory takes; only running jobs
    CONSTRAINT job_swapped_bytes_check
        CHECK (swapped_bytes >= 0 AND (state = 'running' OR swapped_bytes = 0)),
    CONSTRAINT job_idle_swap_after_check
        CHECK (idle_swap_after_seconds >= 0 AND idle_swap_after_seconds <= 604800)
);
CREATE INDEX job_state_idx ON job (state);
CREATE INDEX job_node_idx ON job (node_id) WHERE node_id IS NOT NULL;
-- the sweep's jobs past their maximum runtime (0014)
CREATE INDEX job_max_runtime_idx ON job (id)
    WHERE max_runtime_seconds > 0 AND state IN ('running', 'suspended');

-- What happened to a job, oldest first.
CREATE TABLE job_event (
    id      bigint GENERATED ALWAYS AS IDENTITY,
    job_id  bigint NOT NULL,
    at      timestamptz NOT NULL DEFAULT now(),
    type    text NOT NULL,
    message text NOT NULL,
    attempt integer,
    seq     integer,
    CONSTRAINT job_event_pkey PRIMARY KEY (id),
    CONSTRAINT job_event_job_fkey FOREIGN KEY (job_id) REFERENCES job (id) ON DELETE CASCADE
);
CREATE INDEX job_event_job_idx ON job_event (job_id, id);
-- an agent's event (attempt, seq) is stored once
CREATE UNIQUE INDEX job_event_seq_key ON job_event (job_id, attempt, seq) WHERE seq IS NOT NULL;

-- Which node ran which attempt of a job (the trigger job_attempt_record
-- writes a row at every bind): an agent's events about an attempt are stored
-- only when that attempt ran on its node, whatever the job's state now.
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

-- Idempotency-Key headers of job submissions, per token; kept at least 24 h.
CREATE TABLE idempotency_key (
    token_id       bigint NOT NULL,
    key            text NOT NULL,
    request_sha256 text NOT NULL,
    job_id         bigint NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT idempotency_key_pkey PRIMARY KEY (token_id, key),
    CONSTRAINT idempotency_key_token_fkey FOREIGN KEY (token_id)
        REFERENCES api_token (id) ON DELETE CASCADE,
    CONSTRAINT idempotency_key_job_fkey FOREIGN KEY (job_id) REFERENCES job (id) ON DELETE CASCADE
);
CREATE INDEX idempotency_key_created_idx ON idempotency_key (created_at);

-- The GPUs a scheduled or running job holds, and the bytes packed on each.
CREATE TABLE job_gpu (
    job_id       bigint NOT NULL,
    gpu_id       bigint NOT NULL,
    memory_bytes bigint NOT NULL,
    -- where it runs on the node, as its agent reported (0010): the
    -- node-level scheduler's physical GPU; NULL until reported
    physical_idx integer,
    CONSTRAINT job_gpu_pkey PRIMARY KEY (job_id, gpu_id),
    CONSTRAINT job_gpu_memory_check CHECK (memory_bytes > 0),
    CONSTRAINT job_gpu_physical_idx_check CHECK (physical_idx >= 0 AND physical_idx < 64),
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
-- finer ones. scope: cluster (key ''), department (name, 0008), project
-- (name), node (name), gpu ("node/index"), job (id of a running job, 0008).
-- capacity: GPUs there (a department or project: its quota; a job: the GPUs
-- it requested). pending_gpus: GPUs requested by pending jobs; idle_gpus:
-- GPUs allocated to running jobs under 1 % utilization of them (0008).
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
    pending_gpus      double precision NOT NULL DEFAULT 0,
    idle_gpus         double precision NOT NULL DEFAULT 0,
    CONSTRAINT metric_point_pkey PRIMARY KEY (resolution_s, scope, key, at),
    CONSTRAINT metric_point_scope_check
        CHECK (scope IN ('cluster', 'department', 'project', 'node', 'gpu', 'job'))
);
CREATE INDEX metric_point_at_idx ON metric_point (resolution_s, at);

-- Every admin write that committed, in the write's transaction (0007): who
-- (token id, and its name and role then), when, what (method, path, target,
-- the body's members without secrets) and the status answered.
CREATE TABLE audit_event (
    id         bigint GENERATED ALWAYS AS IDENTITY,
    at         timestamptz NOT NULL DEFAULT now(),
    token_id   bigint NOT NULL,
    token_name text NOT NULL,
    token_role text NOT NULL,
    method     text NOT NULL,
    path       text NOT NULL,
    target     text,
    changes    jsonb,
    status     integer NOT NULL,
    request_id text NOT NULL,
    CONSTRAINT audit_event_pkey PRIMARY KEY (id)
);
CREATE INDEX audit_event_at_idx ON audit_event (at);

-- Every trigger's NOTIFY goes through tessera_notify: a transaction that
-- sets tessera.notify_later to 'on' sends its wake-ups itself after its
-- commit (0013, server/store/store_report.c); the triggers record them in
-- tessera.later_sched ('on') and tessera.later_nodes (",3,7,").
CREATE FUNCTION tessera_notify(p_channel text, p_payload text) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    nodes text;
BEGIN
    IF coalesce(current_setting('tessera.notify_later', true), '') <> 'on' THEN
        PERFORM pg_notify(p_channel, p_payload);
    ELSIF p_channel = 'tessera_sched' THEN
        PERFORM set_config('tessera.later_sched', 'on', true);
    ELSE
        nodes := coalesce(nullif(current_setting('tessera.later_nodes', true), ''), ',');
        IF position(',' || p_payload || ',' IN nodes) = 0 THEN
            PERFORM set_config('tessera.later_nodes', nodes || p_payload || ',', true);
        END IF;
    END IF;
END $$;

-- Free a job's GPUs when it leaves them; wake the scheduler (channel
-- tessera_sched) on anything that can change its decisions, and the agents (channel tessera_node, payload the node id) when
-- their desired state changes. NOTIFY is delivered at commit, once per
-- distinct payload per transaction.
CREATE FUNCTION tessera_job_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- a job holds GPUs only while scheduled, running, resuming, suspending or
    -- stopping
    IF TG_OP = 'UPDATE'
       AND NEW.state IN ('pending', 'suspended', 'succeeded', 'failed', 'cancelled') THEN
        DELETE FROM job_gpu WHERE job_id = NEW.id;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.node_id IS NOT NULL THEN
        UPDATE node SET generation = generation + 1 WHERE id = OLD.node_id;
        PERFORM tessera_notify('tessera_node', OLD.node_id::text);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.node_id IS NOT NULL
       AND (TG_OP = 'INSERT' OR NEW.node_id IS DISTINCT FROM OLD.node_id) THEN
        UPDATE node SET generation = generation + 1 WHERE id = NEW.node_id;
        PERFORM tessera_notify('tessera_node', NEW.node_id::text);
    END IF;
    PERFORM tessera_notify('tessera_sched', '');
    RETURN NULL;
END $$;

-- A submission (a job inserted pending, on no node) wakes the scheduler
-- after its commit, not from here (0011, server/store/store_jobs.c).
CREATE TRIGGER job_insert_notify AFTER INSERT ON job
    FOR EACH ROW WHEN (NEW.state <> 'pending' OR NEW.node_id IS NOT NULL)
    EXECUTE FUNCTION tessera_job_changed();
CREATE TRIGGER job_delete_notify AFTER DELETE ON job
    FOR EACH ROW EXECUTE FUNCTION tessera_job_changed();
CREATE TRIGGER job_update_notify AFTER UPDATE ON job
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
                       OR OLD.node_id IS DISTINCT FROM NEW.node_id)
    EXECUTE FUNCTION tessera_job_changed();

-- Keep project.pending_jobs + project_pending_delta equal to the count of
-- pending jobs.
CREATE FUNCTION tessera_job_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.state = 'pending' THEN
        INSERT INTO project_pending_delta VALUES (OLD.project_id, -1);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.state = 'pending' THEN
        INSERT INTO project_pending_delta VALUES (NEW.project_id, 1);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER job_pending_insert AFTER INSERT ON job
    FOR EACH ROW WHEN (NEW.state = 'pending') EXECUTE FUNCTION tessera_job_pending();
CREATE TRIGGER job_pending_delete AFTER DELETE ON job
    FOR EACH ROW WHEN (OLD.state = 'pending') EXECUTE FUNCTION tessera_job_pending();
CREATE TRIGGER job_pending_update AFTER UPDATE ON job
    FOR EACH ROW WHEN ((OLD.state = 'pending' OR NEW.state = 'pending')
                       AND (OLD.state IS DISTINCT FROM NEW.state
                            OR OLD.project_id IS DISTINCT FROM NEW.project_id))
    EXECUTE FUNCTION tessera_job_pending();

-- A submission's room (0011; server/store/store_jobs.c): the project, if
-- the caller may use it and its count plus max_connections (p_alone: plus
-- 1) is within max_pending, and its delta rows not yet folded. The row is
-- locked FOR KEY SHARE (p_alone: FOR UPDATE) before the count's statement
-- takes its snapshot. Delta rows are read by a plain index scan, which
-- marks the entries of folded rows dead (0012): a bitmap scan read every
-- row folded since the last VACUUM again at every submission.
CREATE FUNCTION tessera_submit_room(p_name text, p_ids bigint[], p_alone boolean)
    RETURNS TABLE (project_id bigint, deltas bigint) LANGUAGE plpgsql VOLATILE ROWS 1
    SET enable_bitmapscan = off SET enable_seqscan = off AS $$
DECLARE
    pid bigint;
BEGIN
    IF p_alone THEN
        SELECT p.id INTO pid FROM project p
            WHERE p.name = p_name AND (p_ids IS NULL OR p.id = ANY (p_ids)) FOR UPDATE;
    ELSE
        SELECT p.id INTO pid FROM project p
            WHERE p.name = p_name AND (p_ids IS NULL OR p.id = ANY (p_ids)) FOR KEY SHARE;
    END IF;
    IF pid IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT p.id, d.n FROM project p,
            LATERAL (SELECT coalesce(sum(x.delta), 0) AS s, count(*) AS n
                     FROM project_pending_delta x WHERE x.project_id = p.id) d
        WHERE p.id = pid
          AND p.pending_jobs + d.s + CASE WHEN p_alone THEN 1
              ELSE current_setting('max_connections')::bigint END <= p.max_pending;
END $$;

-- Record which node runs which attempt of a job.
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

-- Only a running job holds host swap for detached memory.
CREATE FUNCTION tessera_job_swap_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.swapped_bytes := 0;
    RETURN NEW;
END $$;

CREATE TRIGGER job_swap_clear BEFORE UPDATE ON job
    FOR EACH ROW WHEN (NEW.state <> 'running' AND NEW.swapped_bytes <> 0)
    EXECUTE FUNCTION tessera_job_swap_clear();

CREATE FUNCTION tessera_sched_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM tessera_notify('tessera_sched', '');
    RETURN NULL;
END $$;

-- Wake the scheduler only when a value it reads changes (row triggers;
-- NOTIFY sends one per transaction).
CREATE TRIGGER project_insert_delete_notify AFTER INSERT OR DELETE ON project
    FOR EACH ROW EXECUTE FUNCTION tessera_sched_wake();
CREATE TRIGGER project_quota_notify AFTER UPDATE ON project
    FOR EACH ROW WHEN (OLD.quota_gpus IS DISTINCT FROM NEW.quota_gpus
                       OR OLD.over_quota_weight IS DISTINCT FROM NEW.over_quota_weight
                       OR OLD.limit_gpus IS DISTINCT FROM NEW.limit_gpus
                       OR OLD.priority IS DISTINCT FROM NEW.priority
                       OR OLD.department_id IS DISTINCT FROM NEW.department_id)
    EXECUTE FUNCTION tessera_sched_wake();

CREATE TRIGGER department_insert_delete_notify AFTER INSERT OR DELETE ON department
    FOR EACH ROW EXECUTE FUNCTION tessera_sched_wake();
CREATE TRIGGER department_quota_notify AFTER UPDATE ON department
    FOR EACH ROW WHEN (OLD.quota_gpus IS DISTINCT FROM NEW.quota_gpus
                       OR OLD.over_quota_weight IS DISTINCT FROM NEW.over_quota_weight
                       OR OLD.limit_gpus IS DISTINCT FROM NEW.limit_gpus
                       OR OLD.priority IS DISTINCT FROM NEW.priority)
    EXECUTE FUNCTION tessera_sched_wake();

CREATE TRIGGER node_insert_delete_notify AFTER INSERT OR DELETE ON node
    FOR EACH ROW EXECUTE FUNCTION tessera_sched_wake();
CREATE TRIGGER node_state_notify AFTER UPDATE ON node
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
                       OR OLD.cpu IS DISTINCT FROM NEW.cpu
                       OR OLD.memory_bytes IS DISTINCT FROM NEW.memory_bytes
                       OR OLD.labels IS DISTINCT FROM NEW.labels
                       OR OLD.swap_bytes IS DISTINCT FROM NEW.swap_bytes
                       OR OLD.gpu_reserve_bytes IS DISTINCT FROM NEW.gpu_reserve_bytes
                       OR OLD.collision IS DISTINCT FROM NEW.collision)
    EXECUTE FUNCTION tessera_sched_wake();

CREATE TRIGGER job_hold_notify AFTER UPDATE ON job
    FOR EACH ROW WHEN (OLD.suspend_held IS DISTINCT FROM NEW.suspend_held)
    EXECUTE FUNCTION tessera_sched_wake();

CREATE TRIGGER gpu_insert_delete_notify AFTER INSERT OR DELETE ON gpu
    FOR EACH ROW EXECUTE FUNCTION tessera_sched_wake();
CREATE TRIGGER gpu_notify AFTER UPDATE ON gpu
    FOR EACH ROW WHEN (OLD.memory_bytes IS DISTINCT FROM NEW.memory_bytes
                       OR OLD.model IS DISTINCT FROM NEW.model)
    EXECUTE FUNCTION tessera_sched_wake();

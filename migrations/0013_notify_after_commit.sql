-- 0013_notify_after_commit.sql: a transaction may send its triggers'
-- wake-ups itself, after its commit (issue 15).
--
-- NOTIFY takes PostgreSQL's notify lock (one for the whole cluster) in its
-- transaction's commit and holds it until that commit is done, its WAL
-- flush included. Every report that started or ended a job notified
-- tessera_node and tessera_sched from the job trigger (0002, 0003), so
-- those reports, the scheduler's binds and every other notifying
-- transaction took their commits one at a time, each waiting for the
-- flushes of those before it (0011 did the same for submissions).
--
-- Now a transaction that sets tessera.notify_later to 'on' (set_config(...,
-- true): until its end) sends nothing from the triggers: they record what
-- they would have sent in two transaction-local settings, which the
-- transaction reads before it commits and sends after, in a transaction of
-- its own that needs no flush (server/store/store_report.c):
-- tessera.later_sched 'on' (tessera_sched), tessera.later_nodes the node
-- ids for tessera_node, each between commas (",3,7,"). The other
-- transactions notify from the triggers, as before.
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

CREATE OR REPLACE FUNCTION tessera_sched_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM tessera_notify('tessera_sched', '');
    RETURN NULL;
END $$;

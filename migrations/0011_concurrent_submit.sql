-- 0011_concurrent_submit.sql: submissions to one project no longer queue on
-- its row. 0007 had a submission add 1 to pending_jobs, which held the
-- project's row until the commit, so one project took one submission per
-- WAL flush. Now a submission counts with a delta row, as every other
-- change to or from pending does, and the max_pending check locks the row
-- in one of two ways, both in tessera_submit_room() below, called by the
-- submission's one statement (server/store/store_jobs.c):
--
-- - far from the limit: the row FOR KEY SHARE
--   (what the job's foreign key takes anyway; submissions share it, and the
--   fold's UPDATE of pending_jobs does not wait for them), then the count,
--   by a statement whose snapshot is taken after the lock. The job is taken
--   only if the count plus max_connections (more submissions than can be
--   in flight at once) stays within max_pending;
-- - near it: the row FOR UPDATE, which waits for the submissions that hold
--   it shared and keeps new ones out until the commit, then the count, then
--   the job if the count is below max_pending.
--
-- Nor do their commits queue on PostgreSQL's NOTIFY lock, which a
-- transaction that notifies holds from before its commit record until its
-- WAL flush is done: a job inserted pending and on no node (a submission)
-- no longer notifies tessera_sched in its transaction; the submission
-- wakes the loop after its commit, with a NOTIFY of its own that need not
-- be durable (store_jobs.c).
--
-- A submission's lock is taken before its count's snapshot and held until
-- its commit, so no submission near the limit commits between a far one's
-- count and its commit, and the far ones that do are at most
-- max_connections: the limit is never passed.
CREATE OR REPLACE FUNCTION tessera_job_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.state = 'pending' THEN
        INSERT INTO project_pending_delta VALUES (OLD.project_id, -1);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.state = 'pending' THEN
        INSERT INTO project_pending_delta VALUES (NEW.project_id, 1);
    END IF;
    RETURN NULL;
END $$;

-- The project named p_name, if one of p_ids (NULL: any) and with room (far
-- from its max_pending, or with p_alone below it), with the count of its
-- delta rows not yet folded (the caller folds them when they grow); no row
-- otherwise. VOLATILE: under READ COMMITTED each statement here takes its
-- own snapshot, so the count is read after the lock is held.
CREATE FUNCTION tessera_submit_room(p_name text, p_ids bigint[], p_alone boolean)
    RETURNS TABLE (project_id bigint, deltas bigint) LANGUAGE plpgsql VOLATILE AS $$
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

DROP TRIGGER job_insert_delete_notify ON job;
CREATE TRIGGER job_insert_notify AFTER INSERT ON job
    FOR EACH ROW WHEN (NEW.state <> 'pending' OR NEW.node_id IS NOT NULL)
    EXECUTE FUNCTION tessera_job_changed();
CREATE TRIGGER job_delete_notify AFTER DELETE ON job
    FOR EACH ROW EXECUTE FUNCTION tessera_job_changed();

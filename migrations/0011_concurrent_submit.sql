-- 0011_concurrent_submit.sql: submissions to one project no longer queue on
-- its row. A submission now adds its job to the project's count with a
-- delta row, as every other change does (0007 updated pending_jobs, which
-- held the project's row until the commit, so one project took one
-- submission per WAL flush). The max_pending check that needs that row is
-- in server/store/store_jobs.c: far from the limit (the count plus the
-- database's max_connections, more than can be in flight, still within
-- it) a submission shares the row; near it, it takes the row alone, which
-- waits for those in flight, and counts again.
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

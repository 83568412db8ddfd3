-- 0007_pending_audit.sql: a limit on each project's pending jobs, and the
-- audit log of admin writes.
--
-- project.max_pending (admin-set, default 10000): a submission that would
-- take the project past it is refused (429). The count it is checked
-- against is kept, not counted: project.pending_jobs plus the project's
-- rows in project_pending_delta equals count(*) of its pending jobs.
-- A submission locks its project's row, checks that sum and adds 1 to
-- pending_jobs (the insert trigger below): submissions to one project
-- queue on that row, other projects' do not. Every other change (a job
-- bound, cancelled, requeued, deleted) only inserts a delta row, which
-- never waits for a lock: the scheduler's cycle, which moves thousands of
-- jobs in one transaction, holds no project row while it writes them, and
-- two transactions moving jobs of several projects cannot deadlock on
-- them. The cycle folds the deltas into pending_jobs at the end of its
-- write (server/store/store_sched.c).
ALTER TABLE project
    ADD COLUMN max_pending  bigint NOT NULL DEFAULT 10000,
    ADD COLUMN pending_jobs bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT project_max_pending_check CHECK (max_pending >= 0);

-- No foreign key: a delta must never wait, and rows of a deleted project
-- are dropped at the next fold.
CREATE TABLE project_pending_delta (
    project_id bigint NOT NULL,
    delta      integer NOT NULL
);
CREATE INDEX project_pending_delta_project_idx ON project_pending_delta (project_id);

UPDATE project SET pending_jobs = (SELECT count(*) FROM job j
                                   WHERE j.project_id = project.id AND j.state = 'pending');

CREATE FUNCTION tessera_job_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- a submission: it holds the project's row already
        UPDATE project SET pending_jobs = pending_jobs + 1 WHERE id = NEW.project_id;
        RETURN NULL;
    END IF;
    IF OLD.state = 'pending' THEN
        INSERT INTO project_pending_delta VALUES (OLD.project_id, -1);
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.state = 'pending' THEN
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

-- Every admin write that committed, in the transaction of the write
-- (server/dispatch.c): who (the token's id, and its name and role as they
-- were), when, what (method, path, the target: the path's name or id, or
-- the id a create made; the body's members, secrets left out) and the
-- status answered. A token id is kept without a foreign key: revoking a
-- token keeps what it did.
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

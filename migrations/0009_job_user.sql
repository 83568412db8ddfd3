-- 0009_job_user.sql: the Unix user a project's jobs run as on the nodes.
--
-- project.job_user (admin-set; NULL: the agent's --job-user, nobody by
-- default) and project.allow_root: root only for a project an admin allowed
-- it for. The node checks the user exists there and refuses uid 0 unless
-- allowed (the job fails with the reason, agent/README.md).
ALTER TABLE project
    ADD COLUMN job_user   text,
    ADD COLUMN allow_root boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT project_job_user_check CHECK (job_user ~ '^[a-z_][a-z0-9_-]{0,31}$'),
    ADD CONSTRAINT project_job_user_root_check
        CHECK (job_user IS DISTINCT FROM 'root' OR allow_root);

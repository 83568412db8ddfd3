-- 0005_quiet_wakeups.sql: the scheduler wakes only for changes.
--
-- The statement triggers of 0002 and 0003 woke the scheduler (NOTIFY
-- tessera_sched) for every UPDATE naming one of their columns, even one
-- that changed no row or wrote the values a row had: the loop's own sweep
-- (UPDATE node SET state = 'not_ready' WHERE ..., usually no row) woke the
-- next cycle at once, and every agent report rewrote its node's columns.
-- An idle server ran hundreds of cycles a second. Row triggers fire only
-- when a value the scheduler reads changes; NOTIFY sends one per
-- transaction whatever the number of rows.

DROP TRIGGER project_quota_notify ON project;
CREATE TRIGGER project_insert_delete_notify AFTER INSERT OR DELETE ON project
    FOR EACH ROW EXECUTE FUNCTION tessera_sched_wake();
CREATE TRIGGER project_quota_notify AFTER UPDATE ON project
    FOR EACH ROW WHEN (OLD.quota_gpus IS DISTINCT FROM NEW.quota_gpus
                       OR OLD.over_quota_weight IS DISTINCT FROM NEW.over_quota_weight
                       OR OLD.limit_gpus IS DISTINCT FROM NEW.limit_gpus
                       OR OLD.priority IS DISTINCT FROM NEW.priority
                       OR OLD.department_id IS DISTINCT FROM NEW.department_id)
    EXECUTE FUNCTION tessera_sched_wake();

DROP TRIGGER department_quota_notify ON department;
CREATE TRIGGER department_insert_delete_notify AFTER INSERT OR DELETE ON department
    FOR EACH ROW EXECUTE FUNCTION tessera_sched_wake();
CREATE TRIGGER department_quota_notify AFTER UPDATE ON department
    FOR EACH ROW WHEN (OLD.quota_gpus IS DISTINCT FROM NEW.quota_gpus
                       OR OLD.over_quota_weight IS DISTINCT FROM NEW.over_quota_weight
                       OR OLD.limit_gpus IS DISTINCT FROM NEW.limit_gpus
                       OR OLD.priority IS DISTINCT FROM NEW.priority)
    EXECUTE FUNCTION tessera_sched_wake();

DROP TRIGGER node_state_notify ON node;
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

DROP TRIGGER job_hold_notify ON job;
CREATE TRIGGER job_hold_notify AFTER UPDATE ON job
    FOR EACH ROW WHEN (OLD.suspend_held IS DISTINCT FROM NEW.suspend_held)
    EXECUTE FUNCTION tessera_sched_wake();

DROP TRIGGER gpu_notify ON gpu;
CREATE TRIGGER gpu_insert_delete_notify AFTER INSERT OR DELETE ON gpu
    FOR EACH ROW EXECUTE FUNCTION tessera_sched_wake();
CREATE TRIGGER gpu_notify AFTER UPDATE ON gpu
    FOR EACH ROW WHEN (OLD.memory_bytes IS DISTINCT FROM NEW.memory_bytes
                       OR OLD.model IS DISTINCT FROM NEW.model)
    EXECUTE FUNCTION tessera_sched_wake();

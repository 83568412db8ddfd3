#!/usr/bin/env bash
# tests/install/upgrade_test.sh - an upgrade from the previous release's
# schema (issue 19): a private PostgreSQL gets the migrations up to 0006
# (the schema before 0007, this release's), recorded in schema_migration as
# the old server recorded them, and data written as that release wrote it:
# a department, a project, a member token (SHA-256 only) bound to the
# project, two pending jobs and a finished one. The real server started on
# that database applies 0007 and the later ones and serves the data: the token still
# works, the project and its jobs are there, and 0007's backfill counted the
# two pending jobs (project.pending_jobs, the project's status). Needs
# TS_BUILD_DIR and TS_SOURCE_DIR; PostgreSQL 15's programs.
TS_BIN_DIR=${TS_BUILD_DIR:?TS_BUILD_DIR must name a build folder}/bin
. "$(dirname "$0")/../browser/lib.sh"
SRC=$(cd "${TS_SOURCE_DIR:?}" && pwd)

. "$(dirname "$0")/checks.sh"

PGBIN=${TS_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
[ -x "$PGBIN/initdb" ] || web_fail "no PostgreSQL programs (postgresql-15)"
D=$WEB_TMP/pg
mkdir -p "$D/run"
as_pg=()
if [ "$(id -u)" = 0 ]; then # PostgreSQL refuses to run as root
  chown -R postgres "$D"
  as_pg=(runuser -u postgres --)
fi
pg_stop() { "${as_pg[@]}" "$PGBIN/pg_ctl" -D "$D/data" -m fast -w stop >/dev/null 2>&1 || true; }
stop_all() { # the server before its database, then lib.sh's cleanup
  if [ -n "${web_server_pid:-}" ] && kill -TERM "$web_server_pid" 2>/dev/null; then
    wait "$web_server_pid" 2>/dev/null || true
  fi
  pg_stop
  web_cleanup
}
trap stop_all EXIT
"${as_pg[@]}" "$PGBIN/initdb" -D "$D/data" -U postgres --auth=trust >"$WEB_TMP/initdb.log" 2>&1 ||
  web_fail "initdb failed: $(tail -5 "$WEB_TMP/initdb.log")"
"${as_pg[@]}" "$PGBIN/pg_ctl" -D "$D/data" -w -l "$D/pg.log" \
  -o "-c listen_addresses='' -k $D/run" start >/dev/null || web_fail "PostgreSQL did not start"
psql() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$D/run" -U postgres "$@"; }
psql -d postgres -c 'CREATE DATABASE tessera' || web_fail "could not create the database"

# the previous release: its migrations, recorded as its server recorded them
psql -d tessera -c 'CREATE TABLE schema_migration (version integer NOT NULL, name text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(), CONSTRAINT schema_migration_pkey PRIMARY KEY (version))'
for f in "$SRC"/migrations/000[1-6]_*.sql; do
  n=$(basename "$f")
  psql -d tessera -1 -f "$f" -c "INSERT INTO schema_migration (version, name) VALUES (${n:0:4}, '$n')" ||
    web_fail "could not apply $n"
done
member=member-secret-0123456789abcdef0123456789
sha=$(printf %s "$member" | sha256sum | cut -d' ' -f1)
psql -d tessera -1 <<SQL || web_fail "could not write the old release's data"
INSERT INTO department (name, quota_gpus) VALUES ('research', 4);
INSERT INTO project (name, department_id, quota_gpus, limit_gpus)
  SELECT 'vision', id, 2, 3 FROM department WHERE name = 'research';
INSERT INTO api_token (name, role, token_sha256) VALUES ('alice', 'member', '$sha');
INSERT INTO api_token_project SELECT t.id, p.id FROM api_token t, project p WHERE t.name = 'alice';
INSERT INTO job (project_id, name, kind, priority, preemptible, command, gpu_kind, gpu_count,
                 requested_gpus, state)
  SELECT id, n, 'train', 50, true, '["sleep", "1"]', 'count', 1, 1, s FROM project,
    (VALUES ('old-a', 'pending'), ('old-b', 'pending'), ('old-done', 'succeeded')) AS v(n, s);
SQL
check "the old database is at 0006" test "$(psql -d tessera -tA -c 'SELECT max(version) FROM schema_migration')" = 6

mkdir -p "$WEB_TMP/server"
TESSERA_ADMIN_TOKEN=$WEB_TOKEN "$TS_BIN_DIR/tessera-server" --data-dir "$WEB_TMP/server" \
  --listen 127.0.0.1:0 --database "postgresql:///tessera?host=$D/run&user=postgres" \
  2>"$WEB_TMP/server.log" &
web_server_pid=$!
web_wait 60 "the upgraded server" test -s "$WEB_TMP/server/server.addr"
WEB_URL=$(cat "$WEB_TMP/server/server.addr")
web_wait 60 "/readyz" curl -fsS "$WEB_URL/readyz"

log=$(cat "$WEB_TMP/server.log")
check "the server applied 0007 and nothing before it" has "$log" "applied migration version=7"
check "  (not 0001 again)" bash -c "! grep -q 'applied migration version=1 ' '$WEB_TMP/server.log'"
latest=$(ls "$SRC/migrations" | sed -n 's/^0*\([0-9][0-9]*\)_.*\.sql$/\1/p' | sort -n | tail -n 1)
check "the database is at the latest migration ($latest)" \
  test "$(psql -d tessera -tA -c 'SELECT max(version) FROM schema_migration')" = "$latest"
m() { curl -sS -H "Authorization: Bearer $member" "$@"; }
out=$(m "$WEB_URL/api/v1/projects/vision" | tr -d ' ')
check "the old member token works and sees its project" has "$out" '"name":"vision","department":"research"'
check "  with its quota and limit" has "$out" '"gpus":2.0,"over_quota_weight":1.0,"limit":3.0'
check "  and its two pending jobs counted (0007's backfill)" has "$out" '"pending_jobs":2,'
check "  and the default max_pending 0007 added" has "$out" '"max_pending":10000'
out=$(m "$WEB_URL/api/v1/jobs?project=vision&state=pending,succeeded" | tr -d ' ')
for j in old-a old-b old-done; do check "job $j is kept" has "$out" "\"name\":\"$j\""; done
check "0007 counted the two pending jobs" \
  test "$(psql -d tessera -tA -c "SELECT pending_jobs FROM project WHERE name = 'vision'")" = 2
[ "$fails" = 0 ] || web_fail "$fails checks failed"
web_say "all checks passed"

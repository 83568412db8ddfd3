#!/usr/bin/env bash
# tests/install/agent_umask_test.sh - the agent's data folder does not
# depend on its umask (issue 19; ctest install/agent_umask). A real server
# and two real agents as root, sandboxed, on simulated GPUs: one started
# under umask 0077 (a unit's UMask=0077, or an admin's shell), one under
# 0022. Each runs a job of its own project on half a GPU under the shim,
# tessera-gpuload, as the sandbox's user (nobody): it must succeed and
# write its checkpoint. Then the two data folders and the two projects'
# checkpoint folders must be the same tree, mode for mode and owner for
# owner (ids and pids in names aside), and the folders jobs pass through
# or share have the modes the agent means: the data folder 0700, jobs/
# 0700, a job's folder 0700, its work folder 0700 owned by the job's
# user, the ledgers 0755 with ledgers 0666, the shim's folder 0755 with
# its job file 0644 (and its mount point in the work folder), the checkpoint root and project 0700. The folders
# lie under the build folder, not /tmp, as /var/lib does under the
# packaged unit (every job has a /tmp of its own). Root only (77
# otherwise). Needs TS_BUILD_DIR.
TS_BIN_DIR=${TS_BUILD_DIR:?TS_BUILD_DIR must name a build folder}/bin
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: the job sandbox needs root"
  exit 77
fi
# WEB_TMP under the build folder (lib.sh makes it 0755)
TMPDIR=$(cd "$TS_BUILD_DIR" && pwd)/tests
export TMPDIR
. "$(dirname "$0")/../browser/lib.sh"
. "$(dirname "$0")/checks.sh"

web_start_server --checkpoint-root "$WEB_TMP/ckpt"
api POST /departments '{"name":"research","quota":{"gpus":2}}' >/dev/null

# agent UMASK: node uUMASK, labelled umask=UMASK, its data folder made by
# itself under that umask in agents/uUMASK/data
agent() {
  local u=$1 node=u$1
  api POST /tokens "{\"name\":\"agent-$node\",\"role\":\"agent\",\"nodes\":[\"$node\"]}" |
    sed -n 's/.*"token":"\([^"]*\)".*/\1/p' >"$WEB_TMP/$node.token"
  chmod 600 "$WEB_TMP/$node.token"
  mkdir -p "$WEB_TMP/agents/$node"
  (cd "$WEB_TMP/agents/$node" && umask "$u" && exec "$TS_BIN_DIR/tessera-agent" --server "$WEB_URL" \
    --token-file "$WEB_TMP/$node.token" --node "$node" --data-dir "$WEB_TMP/agents/$node/data" \
    --gpus sim:1x8GiB --gpu-reserve 512MiB --labels "umask=$u" --report-interval 1s \
    2>"$WEB_TMP/agents/$node/agent.log") &
  web_agent_pids+=($!)
}
job_state() { api GET "/jobs?project=$1" | tr -d ' ' | grep -o '"state":"[a-z_]*"' | head -n 1 | cut -d'"' -f4; }
finished() { case $(job_state "$1") in succeeded | failed | cancelled) return 0 ;; esac; return 1; }

for u in 0077 0022; do
  agent $u
  ready() { api GET /nodes | tr -d ' ' | grep -q "\"name\":\"u$u\",[^}]*\"state\":\"ready\""; }
  web_wait 30 "node u$u ready" ready
  api POST /projects "{\"name\":\"p$u\",\"department\":\"research\",\"quota\":{\"gpus\":1}}" >/dev/null
  api POST /jobs "{\"name\":\"j$u\",\"project\":\"p$u\",\"gpu\":{\"portion\":0.5},
    \"node_selector\":{\"umask\":\"$u\"},\"grace_period\":\"1s\",
    \"command\":[\"$TS_BIN_DIR/tessera-gpuload\",\"--memory\",\"256MiB\",\"--steps\",\"2\",\"--step\",\"200ms\"]}" >/dev/null
  web_wait 90 "job j$u to finish" finished "p$u"
  check "under umask $u a sandboxed job under the shim runs and succeeds" test "$(job_state "p$u")" = succeeded
  ck=$(find "$WEB_TMP/ckpt/p$u" -name gpuload.ckpt)
  check "  and writes its checkpoint in the server's checkpoint root" test -s "$ck"
  check "  as the job's user" test "$(stat -c %U "$ck")" = nobody
done

# both agents done with their job: the server has all of it (the
# "reported" mark), so the trees are compared at rest
reported() {
  local u
  for u in 0077 0022; do compgen -G "$WEB_TMP/agents/u$u/data/jobs/*/reported" >/dev/null || return 1; done
}
web_wait 30 "both jobs marked reported" reported

# the tree below DIR: mode, owner and path, one a line, numbers in names
# (job ids, attempts, GPU indexes stay: one GPU each) as N, temporary
# files left out
tree() {
  (cd "$1" && find . -mindepth 1 ! -name '*.tmp*' -printf '%m %u %p\n') | sed -E 's#/[0-9]+(-[0-9]+)?(/|$)#/N\2#g' | sort
}
tree "$WEB_TMP/agents/u0077/data" >"$WEB_TMP/tree077"
tree "$WEB_TMP/agents/u0022/data" >"$WEB_TMP/tree022"
check "the data folders under umask 0077 and 0022 are the same tree, mode for mode" \
  cmp -s "$WEB_TMP/tree077" "$WEB_TMP/tree022"
diff "$WEB_TMP/tree077" "$WEB_TMP/tree022" | sed 's/^/  /' || true
tree "$WEB_TMP/ckpt/p0077" >"$WEB_TMP/ck077"
tree "$WEB_TMP/ckpt/p0022" >"$WEB_TMP/ck022"
check "and so are the two projects' checkpoint folders" cmp -s "$WEB_TMP/ck077" "$WEB_TMP/ck022"
diff "$WEB_TMP/ck077" "$WEB_TMP/ck022" | sed 's/^/  /' || true

# the modes the agent means, whatever the umask (0077's tree)
mode() { # PATH MODE OWNER
  local got
  got=$(stat -c '%a %U' "$1" 2>&1)
  [ "$got" = "$2 $3" ] || { echo "  $1: $got"; return 1; }
}
D=$WEB_TMP/agents/u0077/data
J=$(ls -d "$D"/jobs/*-1 | head -n 1)
check "data folder 0700 root" mode "$D" 700 root
check "jobs/ 0700 root" mode "$D/jobs" 700 root
check "the job's folder 0700 root" mode "$J" 700 root
check "its work folder 0700, the job's user's" mode "$J/work" 700 nobody
check "the ledgers' folder 0755, its ledger 0666 (jobs open it as their user)" \
  bash -c "$(declare -f mode); mode '$D/ledger' 755 root && mode '$D/ledger/gpu0.ledger' 666 root"
check "the shim's folder 0755 and its job file 0644 (read by the job's user)" \
  bash -c "$(declare -f mode); mode '$J/shim' 755 root && mode '$J/shim/job' 644 root"
check "the shim folder's mount point in the work folder 0755" mode "$J/work/shim" 755 root
check "the checkpoint root and the project's folder 0700 root" \
  bash -c "$(declare -f mode); mode '$WEB_TMP/ckpt' 700 root && mode '$WEB_TMP/ckpt/p0077' 700 root"

[ "$fails" = 0 ] || web_fail "$fails checks failed"
web_say "all checks passed"

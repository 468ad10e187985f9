#!/usr/bin/env bash
# `make test-cluster`: the workflow on a real (single-node) Slurm cluster, checked against a local run.
#
#  1. installs what is missing (Debian: slurm-wlm slurmdbd munge mariadb-server; PyPI: dask-jobqueue into a
#     cache dir) and runs the small DAG of tests/cluster/config.yaml locally with --cores 2 (the reference);
#  2. starts Slurm with accounting (munged, mariadbd, slurmdbd, slurmctld, slurmd; tests/cluster/slurm-up.sh)
#     and an MLflow tracking server on this (login) node;
#  3. bertology cluster-check: the profile as shipped (max-threads 8) and a GPU request are reported as
#     unrunnable on this 2-CPU, GPU-less node; with max-threads 2 every job fits; the workflow itself with
#     the shipped profile stops in onstart before submitting anything;
#  4. runs the same DAG through `--profile profiles/slurm --max-threads 2`, tracking to the server;
#     compares stats/ablation/scores/table1 with the local run (exactly) and the MLflow runs with the local ones;
#  5. Dask: a scheduler here with one worker as a Slurm job (bertology cluster-dask, i.e.
#     dask-jobqueue's SLURMCluster); reruns the Dask reductions (store_stats, kovaleva_cosine and
#     what depends on them) with analysis.dask.scheduler pointing at it; compares again;
#  6. stops every daemon it started (also on failure or Ctrl-C).
#
# Needs root (it starts Slurm's daemons), `python` with bertology + snakemake + the slurm executor plugin on
# PATH, 2 CPUs and a few GB of memory. State, logs and both workflow directories: $BERTOLOGY_CLUSTER_DIR
# (default /tmp/bertology-cluster, wiped at the start, kept afterwards for inspection).
# BERTOLOGY_CLUSTER_LOCAL=DIR reuses a finished local run of the same config (development only).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$REPO/tests/cluster
STATE=${BERTOLOGY_CLUSTER_DIR:-/tmp/bertology-cluster}
CACHE=${BERTOLOGY_CLUSTER_CACHE:-/var/cache/bertology-cluster}
CORES=${CORES:-2}
PY=$(command -v python || command -v python3)
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg
# The one read of a store (store_stats: the sieve scores among its kernels) on one thread in every run: the sieve's float32 matrix products sum in an order that depends on the
# BLAS thread count, which Snakemake sets to the job's threads (OMP_NUM_THREADS...) and Dask's workers to
# one; a different count moves sieve means by ~1e-6 relative. Pinned, local, Slurm and Dask agree exactly.
PIN=(--set-threads store_stats=1)
T0=$SECONDS
TIMES=()

say() { printf '\n=== [%4ds] %s\n' "$((SECONDS - T0))" "$*"; }
lap() { TIMES+=("$(printf '%-44s %5ds' "$1" "$(($SECONDS - $2))")"); }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || fail "run as root: the test starts Slurm's daemons (munged, slurmdbd, slurmctld, slurmd)"
"$PY" -c 'import bertology, snakemake, snakemake_executor_plugin_slurm' 2>/dev/null \
    || fail "$PY lacks bertology/snakemake/snakemake-executor-plugin-slurm: run \`make install\` first"

rm -rf "$STATE"
mkdir -p "$STATE"
export SLURM_STATE=$STATE/slurm
# shellcheck source=tests/cluster/slurm-up.sh
source "$HERE/slurm-up.sh"

BG_PIDS=()  # mlflow server, dask scheduler
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    say "stopping what this test started"
    local pid
    for pid in "${BG_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || continue
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    done
    slurm_stop
    local left
    left=$(pgrep -f -- "$STATE" || true)
    [[ -z $left ]] || { echo "still running after the clean-up:"; ps -o pid,args -p "${left//$'\n'/,}" || true; }
    if ((rc == 0)); then echo "all daemons stopped; state and logs kept in $STATE"; fi
    printf '%s\n' "${TIMES[@]}"
    printf '%-44s %5ds\n' "total" "$((SECONDS - T0))"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

smk() {  # the workflow in a directory of its own: smk DIR [snakemake args...]
    local dir=$1
    shift
    mkdir -p "$dir"
    "$PY" -m snakemake --snakefile "$REPO/Snakefile" --directory "$dir" --configfile "$HERE/config.yaml" "$@"
}

say "1. packages"
t=$SECONDS
slurm_install
if ! "$PY" -c 'import dask_jobqueue' 2>/dev/null; then
    [[ -d $CACHE/pydeps/dask_jobqueue ]] \
        || "$PY" -m pip install -q --no-deps --target "$CACHE/pydeps" 'dask-jobqueue==0.9.0'
    export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$CACHE/pydeps
fi
lap "packages" "$t"

say "1. local reference run (--cores $CORES)"
t=$SECONDS
if [[ -n ${BERTOLOGY_CLUSTER_LOCAL:-} ]]; then  # development: reuse a finished local run of this config
    cp -a "$BERTOLOGY_CLUSTER_LOCAL" "$STATE/local"
    echo "reusing the local run in $BERTOLOGY_CLUSTER_LOCAL"
fi
smk "$STATE/local" --cores "$CORES" "${PIN[@]}" --quiet rules >"$STATE/local.log" 2>&1 \
    || { tail -40 "$STATE/local.log"; fail "local run failed (log: $STATE/local.log)"; }
lap "local run, --cores $CORES" "$t"

say "2. Slurm with accounting, MLflow tracking server"
t=$SECONDS
slurm_start
sinfo -o '%P %D %c %m %G %l %T'
MLFLOW_PORT=$(free_port)
MLFLOW_URI=http://127.0.0.1:$MLFLOW_PORT
mkdir -p "$STATE/mlflow"
"$PY" -m mlflow server --backend-store-uri "sqlite:///$STATE/mlflow/mlflow.db" \
    --artifacts-destination "$STATE/mlflow/artifacts" --host 127.0.0.1 --port "$MLFLOW_PORT" --workers 1 \
    >"$STATE/mlflow/server.log" 2>&1 &
BG_PIDS+=($!)
_wait_for 120 "the MLflow server" "$PY" -c "import urllib.request; urllib.request.urlopen('$MLFLOW_URI/health')" \
    || { tail -20 "$STATE/mlflow/server.log"; fail "MLflow server did not start"; }
cat >"$STATE/tracking.yaml" <<EOF
mlflow: {tracking_uri: "$MLFLOW_URI", experiment: bertology-cluster}
EOF
lap "start Slurm + MLflow server" "$t"

say "3. bertology cluster-check against sinfo"
t=$SECONDS
check() { "$PY" -m bertology.workflow.cli cluster-check --profile "$REPO/profiles/slurm" -- --snakefile "$REPO/Snakefile" \
    --directory "$STATE/slurm" --configfile "$HERE/config.yaml" "$STATE/tracking.yaml" "$@"; }
mkdir -p "$STATE/slurm"
set +e
check >"$STATE/check-shipped.txt" 2>&1; rc_shipped=$?
check --set-resources train_model:gpu=1 --max-threads 2 >"$STATE/check-gpu.txt" 2>&1; rc_gpu=$?
check --max-threads 2 "${PIN[@]}" >"$STATE/check-fits.txt" 2>&1; rc_fits=$?
set -e
cat "$STATE/check-shipped.txt" "$STATE/check-gpu.txt" "$STATE/check-fits.txt"
((rc_shipped == 1)) && grep -q "rule train_model (4 jobs) asks for 8 CPUs.*too many CPUs" "$STATE/check-shipped.txt" \
    || fail "the shipped profile (max-threads 8) on a 2-CPU node was not reported"
((rc_gpu == 1)) && grep -q "rule train_model.*1 GPUs.*too many GPUs" "$STATE/check-gpu.txt" \
    || fail "a GPU request on a node without GPUs was not reported"
((rc_fits == 0)) || fail "with max-threads 2 some job does not fit the node"
# The workflow runs the same check in its onstart (bertology.cluster.check_workflow): with the shipped
# profile it must stop before submitting anything, naming the rule, and warn about sqlite tracking.
set +e
timeout 600 "$PY" -m snakemake --snakefile "$REPO/Snakefile" --directory "$STATE/slurm" \
    --configfile "$HERE/config.yaml" --profile "$REPO/profiles/slurm" "${PIN[@]}" >"$STATE/refused.log" 2>&1
rc_refused=$?
set -e
grep -E "Jobs that no node|asks for 8 CPUs|WARNING: mlflow.tracking_uri" "$STATE/refused.log" | cut -c1-200
((rc_refused != 0)) && grep -q "rule train_model (4 jobs) asks for 8 CPUs" "$STATE/refused.log" \
    || { tail -30 "$STATE/refused.log"; fail "the workflow with the shipped profile did not stop at start-up"; }
grep -q "WARNING: mlflow.tracking_uri is sqlite" "$STATE/refused.log" || fail "no warning about sqlite tracking"
! grep -q "submitted with SLURM jobid" "$STATE/refused.log" && [[ -z $(squeue -h -o %i) ]] \
    || fail "the refused workflow submitted jobs"
lap "resource checks (3 dry runs, 1 refused run)" "$t"

say "4. the workflow through --profile profiles/slurm --max-threads 2"
t=$SECONDS
SLURM_ARGS=(--profile "$REPO/profiles/slurm" --max-threads 2 --slurm-init-seconds-before-status-checks 5
            --slurm-keep-successful-logs "${PIN[@]}")
timeout 3600 "$PY" -m snakemake --snakefile "$REPO/Snakefile" --directory "$STATE/slurm" \
    --configfile "$HERE/config.yaml" "$STATE/tracking.yaml" "${SLURM_ARGS[@]}" >"$STATE/slurm.log" 2>&1 \
    || { tail -60 "$STATE/slurm.log"; squeue || true; fail "the Slurm run failed (log: $STATE/slurm.log)"; }
lap "Slurm run" "$t"
jobs_run=$(sacct -X -n -S today -o JobName%60,State | grep -c COMPLETED || true)
echo "sacct: $jobs_run jobs COMPLETED"
grep -q "submitted with SLURM jobid" "$STATE/slurm.log" || fail "no job went through sbatch"

say "4. outputs and MLflow runs"
"$PY" "$HERE/compare.py" outputs "$STATE/local" "$STATE/slurm" || fail "cluster outputs differ from the local ones"
"$PY" "$HERE/compare.py" mlflow --local "$STATE/local" --uri "$MLFLOW_URI" --experiment bertology-cluster \
    || fail "MLflow runs incomplete"

say "5. Dask: scheduler here, a worker as a Slurm job (dask-jobqueue SLURMCluster)"
t=$SECONDS
mkdir -p "$STATE/dask"
# Started from the workflow's directory: the worker jobs run where they were submitted from, and the
# reductions open the stores by the workflow's relative paths.
(cd "$STATE/slurm" && exec "$PY" -m bertology.workflow.cli cluster-dask --workers 1 --cores 1 --memory 2GB --walltime 00:30:00 \
    --host 127.0.0.1 --address-file "$STATE/dask/address" --log-directory "$STATE/dask" --wait 300) \
    >"$STATE/dask/scheduler.log" 2>&1 &
BG_PIDS+=($!)
_wait_for 320 "the Dask worker job" test -s "$STATE/dask/address" \
    || { cat "$STATE/dask/scheduler.log"; squeue; fail "no Dask worker"; }
DASK=$(<"$STATE/dask/address")
squeue -o '%i %j %T %C'
cat >"$STATE/dask.yaml" <<EOF
analysis: {dask: {scheduler: "$DASK"}}
EOF
# One CPU per job now: the Dask worker holds the node's other CPU.
timeout 1800 "$PY" -m snakemake --snakefile "$REPO/Snakefile" --directory "$STATE/slurm" \
    --configfile "$HERE/config.yaml" "$STATE/tracking.yaml" "$STATE/dask.yaml" "${SLURM_ARGS[@]}" --max-threads 1 \
    >"$STATE/slurm-dask.log" 2>&1 || { tail -60 "$STATE/slurm-dask.log"; fail "the Dask run failed"; }
grep -E "^rule (store_stats|kovaleva_cosine):" "$STATE/slurm-dask.log" | sort | uniq -c
"$PY" - "$DASK" <<'EOF'
import sys
from dask.distributed import Client
with Client(sys.argv[1], timeout="20s") as c:
    done = c.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    print(f"dask scheduler: {len(c.scheduler_info()['workers'])} worker(s); task kinds it ran: {', '.join(done)}")
    assert done, "the Dask scheduler never received a task"
EOF
lap "Dask cluster + rerun of the reductions" "$t"
"$PY" "$HERE/compare.py" outputs "$STATE/local" "$STATE/slurm" || fail "outputs computed on Dask differ"
"$PY" "$HERE/compare.py" mlflow --local "$STATE/local" --uri "$MLFLOW_URI" --experiment bertology-cluster \
    --invocations 2 --dask "$DASK" || fail "MLflow runs of the Dask rerun incomplete"

say "PASSED"

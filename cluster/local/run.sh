#!/usr/bin/env bash
# A real Dask cluster on this machine: one `dask scheduler` and N `dask worker` processes on 127.0.0.1, then an
# rffor fit against them (cluster/fit.py), then everything this script started is stopped.
#
#   bash cluster/local/run.sh [N_WORKERS] [-- extra arguments for cluster/fit.py]
#   THREADS=4 bash cluster/local/run.sh 1 -- --partitions-per worker    # the per-node layout: one worker, 4 threads
#
# Environment: PYTHON (default: python3) must have rffor installed; WORKDIR (default: a new temporary directory)
# holds the scheduler file, logs and the Zarr store (kept between runs when WORKDIR is set); THREADS (default 1)
# threads per worker.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
n_workers="${1:-2}"
threads="${THREADS:-1}"
shift || true
[ "${1:-}" = "--" ] && shift
python="${PYTHON:-python3}"
workdir="${WORKDIR:-$(mktemp -d -t rffor-local-XXXXXX)}"
mkdir -p "$workdir"
export DASK_CONFIG="$here/../dask.yaml"   # the recommended configuration (worker environment fix)

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

rm -f "$workdir/scheduler.json"
"$python" -m dask scheduler --host 127.0.0.1 --port 0 --no-dashboard --dashboard-address 127.0.0.1:0 \
  --scheduler-file "$workdir/scheduler.json" >"$workdir/scheduler.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$workdir/scheduler.json" ] && break; sleep 0.1; done
[ -s "$workdir/scheduler.json" ] || { echo "scheduler did not start; see $workdir/scheduler.log" >&2; exit 1; }

for i in $(seq "$n_workers"); do
  "$python" -m dask worker --scheduler-file "$workdir/scheduler.json" --host 127.0.0.1 --nthreads "$threads" \
    --no-dashboard --name "local-$i" >"$workdir/worker-$i.log" 2>&1 &
  pids+=($!)
done
echo "scheduler $(grep -o '"address": "[^"]*"' "$workdir/scheduler.json" | cut -d'"' -f4), $n_workers worker(s) x $threads thread(s); logs in $workdir"

"$python" "$here/../fit.py" --scheduler-file "$workdir/scheduler.json" --data "$workdir/train.zarr" "$@"

#!/usr/bin/env bash
# `make test` N times in a row (default 10) on a fresh clone of this checkout's HEAD, while a
# second process keeps one core busy; stops at the first failure and says which run it was.
# The clone gets its own .venv (the first run installs it). Each run's output and time go to
# the log folder printed at the start. Usage: benchmarks/test_loop.sh [N]
set -euo pipefail
runs=${1:-10}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ktl-test-loop-XXXXXX")
logs="$work/logs"
mkdir -p "$logs"
git clone -q --no-hardlinks "$here" "$work/clone"
echo "clone of $(git -C "$here" rev-parse --short HEAD) in $work/clone; logs in $logs"
python3 -c 'while True: pass' &   # the busy core
busy=$!
trap 'kill "$busy" 2>/dev/null || true' EXIT
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  if make -C "$work/clone" test >"$logs/run-$i.log" 2>&1; then
    echo "run $i/$runs: passed in $(( $(date +%s) - start )) s"
  else
    echo "run $i/$runs: FAILED after $(( $(date +%s) - start )) s; see $logs/run-$i.log"
    tail -30 "$logs/run-$i.log"
    exit 1
  fi
done
echo "make test passed $runs times in a row with one core kept busy"

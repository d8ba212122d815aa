#!/bin/bash
# The GPU device check (issues 24 and 44): run ONCE on a machine with an NVIDIA GPU, from
# the repository root:
#
#   OUT=/some/empty/folder bash benchmarks/gpu_check.sh
#
# Only the verifier runs (benchmarks/bench_gpu_steps.py): no log, no signatures, no
# network, except the last step (`make demo`'s story, `python3 -m demo.run --exit`), which
# needs the log's dependencies and runs only where they import (else: skipped, said so).
# It needs python3 with numpy, torch (CUDA), Triton and nvidia-ml-py, and nvcc for the
# cuda example. attest (imported by the verifier) needs rfc8785 and cryptography for the
# log's canonical JSON and signatures; where they are missing and no wheels are in .whl/,
# a stand-in under /tmp provides their names and raises if the log's code is ever called
# (no verifier step calls it). Each step has its own time limit (`timeout`); the whole
# script stays under 8 minutes. Figures go to $OUT (summary.txt, one JSON per step); the
# summary's lines fill docs/gpu.md's table.
#
# Dry run (any machine, no GPU): KTL_GPU_CHECK_FAKE=1 (or --fake) runs every step on the
# fake device (`fake_bench`: the same timing, judging, report and summary line, no process),
# with PYTHON (default python3) as the interpreter; the steps that need the GPU itself
# (nvcc's build, pytest -m gpu, the demo) say what they would run. tests/test_gpu_check.py
# runs it.
# Exit status: 0 if every step gave what it should (see summary.txt for which did not).
set -u
[ "${1:-}" = --fake ] && export KTL_GPU_CHECK_FAKE=1
FAKE=${KTL_GPU_CHECK_FAKE:-0}
export KTL_GPU_CHECK_FAKE=$FAKE
PY=${PYTHON:-python3}
OUT=${OUT:?set OUT to an empty folder for the results}
mkdir -p "$OUT"
cd "$(dirname "$0")/.." || exit 2
START=$(date +%s)
export PYTHONPATH=$PWD  # absolute: the demo step runs `ktl` from other folders
export PYTHONDONTWRITEBYTECODE=1
summary="$OUT/summary.txt"
: >"$summary"
say() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$summary"; }
DEADLINE=460
# limit CAP: seconds a step may take, at most CAP and never past the script's deadline
limit() {
  local left=$(( DEADLINE - ($(date +%s) - START) ))
  left=$(( left < $1 ? left : $1 ))
  echo $(( left < 1 ? 1 : left ))
}
status=0

{
  nvidia-smi
  echo "--- clocks and throttle reasons"; nvidia-smi -q -d CLOCK,PERFORMANCE 2>&1 | head -80
  echo "--- nvcc"; command -v nvcc; nvcc --version
  echo "--- python"; $PY --version
  $PY -c "import numpy, torch; print('numpy', numpy.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  $PY -c "import triton; print('triton', triton.__version__)"
  $PY -c "import pynvml; print('nvidia-ml-py', getattr(pynvml, '__version__', 'present'))"
} >"$OUT/machine.txt" 2>&1
if [ "$FAKE" = 1 ]; then
  say "machine: the fake device (KTL_GPU_CHECK_FAKE=1: a dry run of every step's plumbing)"
else
  say "machine: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1 | head -1)"
fi

if [ -d .whl ]; then  # the test suite's imports, for `pytest -m gpu` (conftest opens a log)
  PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
  timeout "$(limit 60)" $PY -m pip install -q --no-index --find-links .whl rfc8785 cryptography \
    sqlite-utils flask gunicorn psycopg psycopg-pool >>"$summary" 2>&1 \
    || say "deps: the wheels in .whl/ did not all install (see above)"
fi
if ! $PY -c "import rfc8785, cryptography" 2>/dev/null; then
  if [ -d .whl ]; then
    PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
    timeout "$(limit 45)" $PY -m pip install -q --no-index --find-links .whl rfc8785 cryptography \
      >>"$summary" 2>&1
  fi
fi
LOG_DEPS=1  # the log's own dependencies import (the demo step needs them, not the verifier)
if ! $PY -c "import rfc8785, cryptography" 2>/dev/null; then
  LOG_DEPS=0
  SHIM=/tmp/ktl-verifier-only
  mkdir -p "$SHIM/cryptography/hazmat/primitives/asymmetric"
  cat >"$SHIM/ktl_absent.py" <<'PY'
"""Stand-in names for the log's crypto on a machine without it: using any of them raises."""
class Absent:
    def __init__(self, *a, **k):
        raise RuntimeError("not installed here: gpu_check runs only the verifier")
    def __getattr__(self, name):
        raise RuntimeError("not installed here: gpu_check runs only the verifier")
def module_getattr(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return type(name, (Absent,), {})
PY
  for mod in cryptography cryptography/hazmat cryptography/hazmat/primitives \
             cryptography/hazmat/primitives/asymmetric; do
    echo "from ktl_absent import module_getattr as __getattr__" >"$SHIM/$mod/__init__.py"
  done
  for leaf in exceptions hazmat/primitives/serialization hazmat/primitives/asymmetric/ed25519; do
    echo "from ktl_absent import module_getattr as __getattr__" >"$SHIM/cryptography/$leaf.py"
  done
  $PY -c "import rfc8785" 2>/dev/null || \
    echo "from ktl_absent import module_getattr as __getattr__" >"$SHIM/rfc8785.py"
  export PYTHONPATH=$PWD:$SHIM
  say "deps: rfc8785/cryptography missing and no .whl/: stand-ins that raise if used (verifier only)"
fi
$PY -c "import verifier.benchmark._device_bench" >>"$summary" 2>&1 \
  && say "verifier imports: ok" || { say "verifier imports: FAILED (see above)"; exit 1; }

steps() { timeout "$(limit "$1")" $PY benchmarks/bench_gpu_steps.py "${@:2}" 2>>"$OUT/stderr.txt" \
  | tee -a "$OUT/progress.txt" | grep -E '^(probe|[a-z0-9_-]+): \{' | tail -1; }
run() {  # run LIMIT EXPECT STEP...: one step, its summary line, and whether it gave EXPECT
  local cap=$1 expect=$2; shift 2  # EXPECT: see benchmarks/gpu_table.py's `meets`
  local line; line=$(steps "$cap" "$@")
  say "${line:-$3: no answer: $(tail -1 "$OUT/stderr.txt" | cut -c1-300)}"
  $PY benchmarks/gpu_table.py --expect "$expect" "$line" || { status=1; say "  ^ $3: expected $expect"; }
}

run 60 any probe "$OUT"
if ! grep -q '"error": null' "$OUT/probe.json" 2>/dev/null; then
  say "no usable GPU (see probe.json): the device steps are not run"; status=1
else
# The examples against PyTorch on the same GPU, warm (L2 kept) and cold (flushed before
# every call, twice the probed L2) in the same run; the device's conditions also read while
# the timed batches run (a throttle then: not trusted).
run 70 ok bench "$OUT" triton_rmsnorm examples/triton-rmsnorm 20
run 55 cold bench "$OUT" triton_rmsnorm_cold examples/triton-rmsnorm 12 --cold
run 60 ok bench "$OUT" triton_bias_gelu examples/triton-bias-gelu 15
run 75 ok bench "$OUT" cuda_softmax examples/cuda-softmax 15 --shape R=4096,C=1024
# Attackers (tests/gpu_attackers/README.md): each refused with its typed fault (one L2 mode,
# a 2 s budget: a refusal needs no precision).
run 30 refused:side_stream attack "$OUT" attack_sidestream tests/gpu_attackers/sidestream.py 2
run 30 refused:timer_disagrees attack "$OUT" attack_eventpatch tests/gpu_attackers/eventpatch.py 2
run 30 refused:outputs_wrong attack "$OUT" attack_ptrcache tests/torch_flawed/ptrcache.py 2
run 30 refused:outputs_wrong attack "$OUT" attack_stale tests/gpu_attackers/stale.py 2
run 30 refused:outputs_wrong attack "$OUT" attack_zeroed tests/gpu_attackers/zeroed.py 2
run 30 refused:outputs_wrong attack "$OUT" attack_reuse tests/gpu_attackers/reuse.py 2
run 30 refused:outputs_wrong attack "$OUT" attack_graphreplay tests/gpu_attackers/graphreplay.py 2
run 30 "refused:escaped_work|outputs_wrong|child_failed" attack "$OUT" attack_otherprocess \
  tests/gpu_attackers/otherprocess.py 2
# The verifier's half of `ktl publish` and `ktl reproduce`: a claim of 3 runs, reproduced by
# 3 fresh runs.
run 130 confirmed reproduce "$OUT" reproduce_triton_rmsnorm examples/triton-rmsnorm 24 3
fi  # a usable GPU
# Runtime cuda's own rows, as before, with what time is left (host wrapper, guards).
if [ "$FAKE" = 1 ]; then
  say "check cuda-softmax: dry run: would run verifier.check on examples/cuda-softmax (nvcc)"
elif [ "$(limit 60)" -gt 20 ]; then
  timeout "$(limit 45)" $PY -c 'from verifier import check
r = check("examples/cuda-softmax", budget="quick", seed=1)
print("check cuda-softmax:", "pass" if r.passed else "FAIL", [(c.name, c.outcome) for c in r.checks])' \
    >"$OUT/check_cuda_softmax.txt" 2>&1 || status=1
  say "$(tail -1 "$OUT/check_cuda_softmax.txt" | cut -c1-400)"
else
  say "check cuda-softmax: skipped, the deadline is near"
fi
if [ "$FAKE" = 1 ]; then
  say "pytest -m gpu: dry run: would run tests/test_verifier_cuda.py on the GPU"
elif ! $PY -c "import pytest" 2>/dev/null; then
  say "pytest -m gpu tests/test_verifier_cuda.py: skipped, this python3 has no pytest"
elif [ "$(limit 60)" -gt 30 ]; then
  timeout "$(limit 60)" $PY -m pytest -q -p no:cacheprovider -m gpu -rA tests/test_verifier_cuda.py \
    >"$OUT/pytest_gpu.txt" 2>&1 || status=1
  grep -q " passed" "$OUT/pytest_gpu.txt" || status=1   # all skipped: the GPU was not usable
  say "pytest -m gpu: $(tail -1 "$OUT/pytest_gpu.txt")"
else
  say "pytest -m gpu: skipped, the deadline is near"
fi
# `make demo`'s story on the GPU (the Triton and CUDA examples timed on the device, the lie
# refuted): it signs and serves a log, so it needs the log's dependencies, and minutes.
demo_deps=$($PY -c "import rfc8785, cryptography, click, rich, flask, gunicorn" 2>&1 | tail -1)
if [ "$FAKE" = 1 ]; then
  say "demo: dry run: on a GPU it would publish and time $($PY -c 'from pathlib import Path
from demo.run import demo_kernels
print(" ".join(k.name for k in demo_kernels(Path("examples"), gpu=True)))' 2>&1 | tail -1)"
elif [ "$LOG_DEPS" = 0 ] || [ -n "$demo_deps" ]; then
  say "demo: NOT RUN: this python lacks the log's dependencies (${demo_deps:-rfc8785/cryptography}); run \`make demo\` where they install"
elif [ "$(limit 300)" -ge 240 ]; then
  if timeout "$(limit 300)" $PY -m demo.run --exit --data "$OUT/demo" >"$OUT/demo.txt" 2>&1; then
    say "demo: passed (every verdict as expected; demo.txt)"
  else
    rc=$?; status=1; say "demo: FAILED (exit $rc): $(tail -3 "$OUT/demo.txt" | tr '\n' ' ' | cut -c1-300)"
  fi
else
  say "demo: NOT RUN: under 4 minutes left; run \`make demo\` on its own"
fi
$PY benchmarks/gpu_table.py "$OUT" >"$OUT/table.md" 2>>"$OUT/stderr.txt" \
  && say "table: $OUT/table.md (docs/performance.md's GPU table)" || say "table: FAILED (stderr.txt)"
say "done, status $status (figures: $OUT/*.json; progress: progress.txt; errors: stderr.txt)"
exit $status

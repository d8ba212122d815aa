#!/bin/bash
# The GPU device check (issue 24): run ONCE on a machine with an NVIDIA GPU, from the
# repository root:
#
#   OUT=/some/empty/folder bash benchmarks/gpu_check.sh
#
# Only the verifier runs (benchmarks/bench_gpu_steps.py): no log, no signatures, no
# network. It needs python3 with numpy, torch (CUDA), Triton and nvidia-ml-py, and nvcc
# for the cuda example. attest (imported by the verifier) needs rfc8785 and cryptography
# for the log's canonical JSON and signatures; where they are missing and no wheels are in
# .whl/, a stand-in under /tmp provides their names and raises if the log's code is ever
# called (no step here calls it). Each step has its own time limit; the whole script
# stays under 8 minutes. Figures go to $OUT (summary.txt, one JSON per step).
# Exit status: 0 if every step gave what it should (see summary.txt for which did not).
set -u
OUT=${OUT:?set OUT to an empty folder for the results}
mkdir -p "$OUT"
cd "$(dirname "$0")/.." || exit 2
START=$(date +%s)
export PYTHONPATH=.
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
  echo "--- python"; python3 --version
  python3 -c "import numpy, torch; print('numpy', numpy.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  python3 -c "import triton; print('triton', triton.__version__)"
  python3 -c "import pynvml; print('nvidia-ml-py', getattr(pynvml, '__version__', 'present'))"
} >"$OUT/machine.txt" 2>&1
say "machine: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1 | head -1)"

if [ -d .whl ]; then  # the test suite's imports, for `pytest -m gpu` (conftest opens a log)
  PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
  timeout "$(limit 60)" python3 -m pip install -q --no-index --find-links .whl rfc8785 cryptography \
    sqlite-utils flask gunicorn psycopg psycopg-pool >>"$summary" 2>&1 \
    || say "deps: the wheels in .whl/ did not all install (see above)"
fi
if ! python3 -c "import rfc8785, cryptography" 2>/dev/null; then
  if [ -d .whl ]; then
    PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
    timeout "$(limit 45)" python3 -m pip install -q --no-index --find-links .whl rfc8785 cryptography \
      >>"$summary" 2>&1
  fi
fi
if ! python3 -c "import rfc8785, cryptography" 2>/dev/null; then
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
  python3 -c "import rfc8785" 2>/dev/null || \
    echo "from ktl_absent import module_getattr as __getattr__" >"$SHIM/rfc8785.py"
  export PYTHONPATH=.:$SHIM
  say "deps: rfc8785/cryptography missing and no .whl/: stand-ins that raise if used (verifier only)"
fi
python3 -c "import verifier.benchmark._device_bench" >>"$summary" 2>&1 \
  && say "verifier imports: ok" || { say "verifier imports: FAILED (see above)"; exit 1; }

steps() { timeout "$(limit "$1")" python3 benchmarks/bench_gpu_steps.py "${@:2}" 2>>"$OUT/stderr.txt" \
  | tee -a "$OUT/progress.txt" | grep -E '^(probe|[a-z0-9_-]+): \{' | tail -1; }
run() {  # run LIMIT EXPECT STEP...: one step, its summary line, and whether it gave EXPECT
  local cap=$1 expect=$2; shift 2
  local line; line=$(steps "$cap" "$@")
  say "${line:-$3: no answer: $(tail -1 "$OUT/stderr.txt" | cut -c1-300)}"
  case "$expect" in
    # ok: trusted, and conditions were read while the timed batches ran; cold: ok, in the
    # L2-flush mode, and the statement says so
    ok|cold) { [ -n "$line" ] && echo "$line" | grep -qv '"trusted": false' \
               && echo "$line" | grep -q '"during_samples": [1-9]'; } || status=1
             [ "$expect" != cold ] || echo "$line" | grep -q '"cold": true' || status=1 ;;
    refused) echo "$line" | grep -q '"refused": true' || status=1 ;;
    confirmed) echo "$line" | grep -q '"verdicts": \["confirmed"' || status=1 ;;
    any) ;;
  esac
}

run 90 any probe "$OUT"
if ! grep -q '"error": null' "$OUT/probe.json" 2>/dev/null; then
  say "no usable GPU (see probe.json): the device steps are not run"; status=1
else
# The examples against PyTorch on the same GPU: hot (L2 kept) and cold (L2 flushed), the
# device's conditions also read while the timed batches run (a throttle then: not trusted).
run 80 ok bench "$OUT" triton_rmsnorm examples/triton-rmsnorm 20
run 70 cold bench "$OUT" triton_rmsnorm_cold examples/triton-rmsnorm 15 --cold
run 60 ok bench "$OUT" triton_bias_gelu examples/triton-bias-gelu 15
run 120 ok bench "$OUT" cuda_softmax examples/cuda-softmax 15 --shape R=4096,C=1024
# Attackers: each must be refused (a typed fault, or not trusted).
run 50 refused attack "$OUT" attack_sidestream tests/gpu_attackers/sidestream.py 5
run 50 refused attack "$OUT" attack_eventpatch tests/gpu_attackers/eventpatch.py 5
run 50 refused attack "$OUT" attack_ptrcache tests/torch_flawed/ptrcache.py 5
# The verifier's half of `ktl reproduce`: the first claim re-measured in fresh processes.
if [ -f "$OUT/triton_rmsnorm.json" ]; then
  run 70 confirmed reproduce "$OUT" reproduce_triton_rmsnorm "$OUT/triton_rmsnorm.json" \
    examples/triton-rmsnorm 15
else
  say "reproduce: skipped (no first claim to reproduce)"; status=1
fi
fi  # a usable GPU
# Runtime cuda's own rows, as before, with what time is left (host wrapper, guards).
if [ "$(limit 60)" -gt 20 ]; then
  timeout "$(limit 45)" python3 -c 'from verifier import check
r = check("examples/cuda-softmax", budget="quick", seed=1)
print("check cuda-softmax:", "pass" if r.passed else "FAIL", [(c.name, c.outcome) for c in r.checks])' \
    >"$OUT/check_cuda_softmax.txt" 2>&1 || status=1
  say "$(tail -1 "$OUT/check_cuda_softmax.txt" | cut -c1-400)"
else
  say "check cuda-softmax: skipped, the deadline is near"
fi
if ! python3 -c "import pytest" 2>/dev/null; then
  say "pytest -m gpu tests/test_verifier_cuda.py: skipped, this python3 has no pytest"
elif [ "$(limit 60)" -gt 30 ]; then
  timeout "$(limit 60)" python3 -m pytest -q -p no:cacheprovider -m gpu -rA tests/test_verifier_cuda.py \
    >"$OUT/pytest_gpu.txt" 2>&1 || status=1
  grep -q " passed" "$OUT/pytest_gpu.txt" || status=1   # all skipped: the GPU was not usable
  say "pytest -m gpu: $(tail -1 "$OUT/pytest_gpu.txt")"
else
  say "pytest -m gpu: skipped, the deadline is near"
fi
say "done, status $status (figures: $OUT/*.json; progress: progress.txt; errors: stderr.txt)"
exit $status

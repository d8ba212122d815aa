#!/bin/bash
# Runtime cuda on a machine with an NVIDIA GPU: run ONCE there, from the repository root.
#
#   OUT=/some/empty/folder bash benchmarks/gpu_check.sh
#
# Needs python3 (3.12) with numpy and click, nvcc, and the driver. Missing Python
# packages are installed offline from wheels in .whl/ (see the README section Runtime cuda).
# Writes at most 7 files under $OUT; each step has its own time limit and the
# whole script stays under 4 minutes. Exit status: 0 if every step passed.
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
DEADLINE=225
# limit CAP: seconds a step may take, at most CAP and never past the script's deadline
limit() {
  local left=$(( DEADLINE - ($(date +%s) - START) ))
  left=$(( left < $1 ? left : $1 ))
  echo $(( left < 1 ? 1 : left ))   # timeout 0 would mean no limit at all
}

{
  nvidia-smi
  echo "--- devices"; ls -l /dev/nvidia* 2>&1
  echo "--- driver libraries"; ldconfig -p | grep -E "libcuda\.so|libnvidia-ptxjit" 2>&1
  echo "--- nvcc"; command -v nvcc; nvcc --version
  echo "--- compute-sanitizer"; command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>&1
  echo "--- python"; python3 --version; python3 -c "import numpy, click; print(numpy.__version__, click.__version__)"
} >"$OUT/machine.txt" 2>&1
say "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"

NEEDED="cryptography rfc8785 requests rich pytest hypothesis"
if ! python3 -c "import cryptography, rfc8785, requests, rich, pytest, hypothesis" 2>/dev/null; then
  if [ -d .whl ] && python3 -m pip --version >/dev/null 2>&1; then
    PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
    timeout "$(limit 45)" python3 -m pip install -q --no-index --find-links .whl $NEEDED pytest-timeout \
      >>"$summary" 2>&1
  fi
  if ! python3 -c "import cryptography, rfc8785, requests, rich, pytest, hypothesis" 2>/dev/null \
     && [ -d .whl ]; then
    # No pip: unpack the wheels (pure Python, abi3 and cp312 ones all import from a folder).
    mkdir -p /tmp/ktl-deps
    for w in .whl/*.whl; do python3 -m zipfile -e "$w" /tmp/ktl-deps >/dev/null; done
    export PYTHONPATH=.:/tmp/ktl-deps
  fi
fi
python3 -c "import cryptography, rfc8785, requests, rich, pytest, hypothesis" >>"$summary" 2>&1 \
  && say "python deps: ok" || say "python deps: MISSING (see above); later steps may fail"

status=0
say "probe: $(timeout "$(limit 30)" python3 -c 'from verifier._gpu import probe; print(probe().to_json())' 2>&1 | tail -1)"

say "ktl check examples/cuda-softmax --budget quick --json"
timeout "$(limit 45)" python3 -c 'from client.cli import main; main()' check examples/cuda-softmax \
  --budget quick --seed 1 --json >"$OUT/check.json" 2>"$OUT/check.stderr"
rc=$?; [ $rc -eq 0 ] || status=1
say "check exit $rc: $(python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); print(b["verdict"], [(c["name"], c["outcome"]) for c in b["checks"]])' "$OUT/check.json" 2>&1 | tail -1)"

say "pytest -m gpu tests/test_verifier_cuda.py"
timeout "$(limit 140)" python3 -m pytest -q -p no:cacheprovider -m gpu -rA tests/test_verifier_cuda.py \
  >"$OUT/pytest.txt" 2>&1
rc=$?; [ $rc -eq 0 ] || status=1
grep -q " passed" "$OUT/pytest.txt" || status=1   # all skipped = the GPU was not usable
say "pytest exit $rc: $(tail -1 "$OUT/pytest.txt")"

say "memcheck driver outside the sandbox (diagnostic for sanitizer.asan_ubsan)"
timeout "$(limit 30)" python3 - >"$OUT/memcheck.txt" 2>&1 <<'PY'
import subprocess, tempfile
from pathlib import Path
import numpy as np
from verifier import OPS, KernelSpec
from verifier.runtimes import get_runtime, write_driver_cases
spec = KernelSpec.load("examples/cuda-softmax")
work = Path(tempfile.mkdtemp(prefix="ktl-memcheck-"))
art = get_runtime("cuda").build(spec, "asan", work)
op, rng = OPS["softmax"], np.random.default_rng(1)
cases = [(d, op.random_inputs(d, rng)) for d in ({"R": 3, "C": 300}, {"R": 1, "C": 1})]
write_driver_cases(work / "cases.bin", op, cases)
r = subprocess.run([str(art.path), str(work / "cases.bin")], cwd=art.path.parent,
                   capture_output=True, text=True, timeout=25, check=False)
print("exit", r.returncode, "\n--- stdout\n", r.stdout[-2000:], "\n--- stderr\n", r.stderr[-6000:])
PY
say "memcheck: $(grep -m1 '^exit' "$OUT/memcheck.txt" || tail -1 "$OUT/memcheck.txt")"

left=$(limit 60)
if [ $left -gt 30 ]; then
  say "ktl bench examples/cuda-softmax (time budget 5 s, limit $((left - 5)) s)"
  timeout $((left - 5)) python3 -c 'from client.cli import main; main()' bench examples/cuda-softmax \
    --time-budget 5 --seed 1 --json >"$OUT/bench.json" 2>>"$OUT/check.stderr"
  rc=$?
  say "bench exit $rc (informative only: see the README section Runtime cuda)"
else
  say "bench skipped: only $left s left"
fi
say "done, status $status"
exit $status

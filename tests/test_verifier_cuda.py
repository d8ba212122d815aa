"""Runtime cuda: wrapper generation, nvcc builds, manifest flags, verdicts without a GPU.

The wrapper's copy/guard logic is exercised on the CPU by compiling it with g++
against a small fake `cuda_runtime.h` (host memory standing in for the GPU).
Tests marked `gpu` need an NVIDIA GPU and driver; they are skipped elsewhere.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier import (
    BuildError,
    CheckReport,
    KernelSpec,
    KernelSpecError,
    RuntimeUnavailableError,
    check,
)
from verifier import gpu as _gpu
from verifier.gpu import GpuInfo, parse_probe_output, probe
from verifier.kernel import CUDA_FLAG_ALLOWLIST
from verifier.ops import OPS
from verifier.runtimes import _cuda, get_runtime, write_driver_cases
from verifier.runtimes._cuda import CudaRuntime, arch_flags, find_tool, wrapper_source
from verifier.sandbox import Limits, run_sandboxed
from verifier.worker._arena import (
    GUARD,
    POISON_WORD,
    guard_pattern,
    layout,
    new_arena,
    poison,
    view,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cuda-softmax"
HAVE_NVCC = find_tool("nvcc") is not None
GPU_ERROR = probe().error
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc (the CUDA toolkit) is not installed")
needs_gpu = pytest.mark.skipif(GPU_ERROR is not None, reason=f"no usable NVIDIA GPU: {GPU_ERROR}")
no_gpu = pytest.mark.skipif(GPU_ERROR is None, reason="a GPU is present; this tests its absence")

MANIFEST = """name = "acme/{name}"
version = "1"
op = "{op}"
runtime = "{runtime}"
sources = [{sources}]
entry = "{entry}"
flags = {flags}
[generator]
agent = "a"
agent_version = "1"
model = "m"
[target]
hardware_class = "sm_90"
"""


def _folder(tmp: Path, name: str, source: str, *, op: str = "softmax", entry: str = "launch",
            flags: str = "[]", runtime: str = "cuda", filename: str = "k.cu") -> Path:
    folder = tmp / name
    folder.mkdir()
    (folder / filename).write_text(source)
    (folder / "kernel.toml").write_text(MANIFEST.format(
        name=name, op=op, runtime=runtime, sources=f'"{filename}"', entry=entry, flags=flags))
    return folder


# -- the generated wrapper ------------------------------------------------------------


@pytest.mark.parametrize("op_name", sorted(OPS))
def test_wrapper_has_the_c_host_abi_and_the_op_sizes(op_name: str) -> None:
    op = OPS[op_name]
    src = wrapper_source(op, "my_entry")
    nb = len(op.inputs) + len(op.outputs)
    assert 'extern "C" void ktl_host_my_entry(' in src
    assert 'extern "C" void ktl_host_checked_my_entry(' in src
    header = src.split('extern "C" void ktl_host_my_entry(')[1].split(")")[0]
    assert header.count("const float*") == len(op.inputs)
    assert header.count("float*") == nb and header.count("int64_t") == len(op.dims)
    for operand in (*op.inputs, *op.outputs):
        assert " * ".join(f"d_{d}" for d in operand.shape) in src
    assert f"#define KTL_GUARD {GUARD}" in src


FAKE_CUDA = r"""
#pragma once
#include <stdlib.h>
#include <string.h>
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
static inline const char* cudaGetErrorName(cudaError_t) { return "fake"; }
static inline const char* cudaGetErrorString(cudaError_t) { return "fake"; }
static inline cudaError_t cudaMalloc(void** p, size_t n) { *p = malloc(n); return *p ? 0 : 2; }
static inline cudaError_t cudaFree(void* p) { free(p); return 0; }
static inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, int) {
  memcpy(d, s, n); return 0; }
static inline cudaError_t cudaGetLastError() { return 0; }
static inline cudaError_t cudaDeviceSynchronize() { return 0; }
"""

FAKE_KERNEL = r"""
#include <stdint.h>
extern "C" void launch(const float* x, float* y, int64_t R, int64_t C) {
  for (int64_t i = 0; i < R * C; i++) y[i] = x[i] + 1.0f;
  if (R * C > 3) { ((float*)x)[0] = 42.0f; y[R * C] = 7.0f; ((float*)x)[-1] = 5.0f; }
}
"""


@pytest.fixture(scope="module")
def fake_lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed")
    tmp = tmp_path_factory.mktemp("fakecuda")
    (tmp / "cuda_runtime.h").write_text(FAKE_CUDA)
    (tmp / "w.cpp").write_text(wrapper_source(OPS["softmax"], "launch") + FAKE_KERNEL)
    subprocess.run([gxx, "-shared", "-fPIC", "-I", str(tmp), "-o", str(tmp / "w.so"),
                    str(tmp / "w.cpp")], check=True, capture_output=True, timeout=120)
    return ctypes.CDLL(str(tmp / "w.so"))


def _rows(report: CheckReport) -> str:
    return json.dumps(report.to_json()["predicate"]["checks"], indent=1)[:6000]


def _call(lib: ctypes.CDLL, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    op = OPS["softmax"]
    lay = layout(op, {"R": rows, "C": cols})
    arena = new_arena(lay)
    x = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    view(arena, lay.slots[0])[...] = x
    poison(arena, lay)
    base = arena.ctypes.data
    fn = lib.ktl_host_launch
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    fn(base + lay.slots[0].offset, base + lay.slots[1].offset, rows, cols)
    return arena, lay.guard_mask()


def test_wrapper_copies_outputs_inputs_and_guard_damage_back(fake_lib: ctypes.CDLL) -> None:
    arena, guards = _call(fake_lib, 2, 3)
    lay = layout(OPS["softmax"], {"R": 2, "C": 3})
    x, y = view(arena, lay.slots[0]), view(arena, lay.slots[1])
    assert x.reshape(-1)[0] == 42.0, "a device write to an input must reach the host copy"
    np.testing.assert_array_equal(y.reshape(-1), np.arange(6, dtype=np.float32) + 1.0)
    damaged = np.nonzero(guards & (arena != guard_pattern(lay.total)))[0]
    after_y = lay.slots[1].offset + lay.slots[1].nbytes
    before_x = lay.slots[0].offset - 4
    assert set(damaged.tolist()) <= set(range(after_y, after_y + 4)) | set(range(before_x, before_x + 4))
    assert any(after_y <= d < after_y + 4 for d in damaged)
    assert any(before_x <= d < before_x + 4 for d in damaged)


def test_wrapper_leaves_intact_guards_and_empty_buffers_alone(fake_lib: ctypes.CDLL) -> None:
    for rows, cols in ((1, 1), (0, 5), (3, 1)):
        arena, guards = _call(fake_lib, rows, cols)
        lay = layout(OPS["softmax"], {"R": rows, "C": cols})
        assert np.array_equal(arena[guards], guard_pattern(lay.total)[guards]), (rows, cols)
        out = view(arena, lay.slots[1]).reshape(-1)
        assert not np.any(out.view(np.uint32) == POISON_WORD)


def test_checked_wrapper_aborts_on_guard_damage(fake_lib: ctypes.CDLL, tmp_path: Path) -> None:
    lib_path = fake_lib._name
    code = (
        "import ctypes, numpy as np\n"
        f"lib = ctypes.CDLL({lib_path!r})\n"
        "x = np.ones(8, np.float32); y = np.zeros(8, np.float32)\n"
        "f = lib.ktl_host_checked_launch\n"
        "f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]\n"
        "f(x.ctypes.data, y.ctypes.data, 2, 4)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == -signal.SIGABRT
    assert "KTL-CUDA-GUARD out-of-bounds write on the GPU" in done.stderr
    assert "buffer Y" in done.stderr or "buffer X" in done.stderr


# -- nvcc builds (no GPU needed) --------------------------------------------------------


@pytest.mark.slow
@needs_nvcc
def test_example_builds_with_nvcc(tmp_path: Path) -> None:
    spec = KernelSpec.load(EXAMPLE)
    art = CudaRuntime(require_gpu=False).build(spec, "release", tmp_path)
    assert art.path.is_file() and art.gpu and art.entry_symbol == f"ktl_host_{spec.entry}"
    lib = ctypes.CDLL(str(art.path))  # static cudart: loads without a driver
    assert hasattr(lib, art.entry_symbol) and hasattr(lib, f"ktl_host_checked_{spec.entry}")
    assert CudaRuntime().compiler()[0] == "nvcc"


@pytest.mark.slow
@needs_nvcc
@no_gpu
def test_cuda_error_without_a_gpu_is_a_crash_with_a_message(tmp_path: Path) -> None:
    art = CudaRuntime(require_gpu=False).build(KernelSpec.load(EXAMPLE), "release", tmp_path)
    code = ("import ctypes, numpy as np\n"
            f"f = getattr(ctypes.CDLL({str(art.path)!r}), {art.entry_symbol!r})\n"
            "f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]\n"
            "x = np.zeros(4, np.float32)\nf(x.ctypes.data, x.ctypes.data, 2, 2)\n")
    run = tmp_path / "run"
    run.mkdir()
    result = run_sandboxed([sys.executable, "-c", code], run, Limits(wall_s=60.0),
                           readable=[tmp_path], gpu=True)
    assert result.signal == signal.SIGABRT
    assert "KTL-CUDA-ERROR cudaMalloc" in result.stderr
    assert "crash: killed by SIGABRT" in result.describe(Limits())


@pytest.mark.slow
@needs_nvcc
def test_nvcc_diagnostics_reach_the_build_error(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "broken", "this is not CUDA\n")
    with pytest.raises(BuildError, match=r"nvcc.*failed for release.*error"):
        CudaRuntime(require_gpu=False).build(KernelSpec.load(folder), "release", tmp_path / "b")


@needs_nvcc
def test_nvcc_reads_only_the_kernel_folder_and_the_toolchain(tmp_path: Path) -> None:
    """Issue 22, the cuda path as the C one: a .cu that includes host files fails to build,
    and the build error names file:line: kind without a byte of what was read."""
    host = [p for p in [*Path("/sys/class/net").glob("*/address"), Path("/etc/hostname")]
            if p.is_file()]
    source = "".join(f'#include "{p}"\n' for p in host) + (
        'extern "C" void launch(const float* x, float* y, long r, long c) {}\n')
    folder = _folder(tmp_path, "include_host", source)
    with pytest.raises(BuildError) as caught:
        CudaRuntime(require_gpu=False).build(KernelSpec.load(folder), "release", tmp_path / "b")
    text = str(caught.value)
    assert "k.cu:1: " in text and ("Permission denied" in text or "cannot open" in text), text
    for path in host:
        secret = path.read_text().strip()
        if len(secret) >= 4:
            assert secret not in text and all(
                f"'{part}'" not in text for part in secret.split(":") if len(part) >= 3)


@pytest.mark.slow
@needs_nvcc
def test_a_cuda_builds_log_is_reduced_diagnostics(tmp_path: Path) -> None:
    """What a build logs is `file:line: kind` lines only, as for C: a warning quoting its
    source line keeps no source text."""
    folder = _folder(tmp_path, "warns", '#warning "SECRET-TEXT-1234"\n'
                     'extern "C" void launch(const float* x, float* y, long r, long c) {}\n')
    art = CudaRuntime(require_gpu=False).build(KernelSpec.load(folder), "release", tmp_path / "b")
    assert "SECRET-TEXT-1234" not in art.log
    assert "k.cu:1: warning" in art.log, art.log


@pytest.mark.slow  # 7-11 s, among make test's longest: CI's slow step runs it
@needs_nvcc
def test_a_cuda_kernels_own_code_is_audited_like_c(tmp_path: Path) -> None:
    """Issue 22: the audit reads the kernel's sources built alone against the shared CUDA
    runtime (the static one's imports would hide its own): the example passes; a launcher
    that is honest only where /proc/self/status says `Seccomp: 2` is a typed finding."""
    from verifier.checks._static import audit_row

    spec = KernelSpec.load(EXAMPLE)
    art = CudaRuntime(require_gpu=False).build(spec, "release", tmp_path / "ok")
    assert art.audit_path is not None and art.audit_path != art.path
    row, audit = audit_row(art, spec)
    assert row.outcome == "pass" and audit is not None, row.detail
    assert any(s.startswith("__cudaRegister") for s in audit.imports)
    folder = _folder(tmp_path, "detector", (
        "#include <stdio.h>\n#include <string.h>\n"
        "__global__ void k(const float* x, float* y, long n) {\n"
        "  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }\n"
        'extern "C" void launch(const float* x, float* y, long r, long c) {\n'
        '  char line[256] = ""; FILE* f = fopen("/proc/self/status", "r"); int sandboxed = 0;\n'
        '  while (f && fgets(line, sizeof line, f)) sandboxed |= !strncmp(line, "Seccomp:\\t2", 10);\n'
        "  if (f) fclose(f);\n"
        "  k<<<(unsigned)((r * c + 255) / 256), 256>>>(x, y, sandboxed ? r * c : 0); }\n"))
    bad = KernelSpec.load(folder)
    art = CudaRuntime(require_gpu=False).build(bad, "release", tmp_path / "bad")
    row, audit = audit_row(art, bad)
    assert row.outcome == "fail" and row.fault is not None
    assert row.fault.kind == "forbidden_import" and audit is not None
    names = {f.name for f in audit.undeclared}
    assert {"fopen", "fgets"} <= names and any("/proc/self/status" in n for n in names), names


@needs_nvcc
def test_tsan_does_not_apply_and_memcheck_needs_its_tool(tmp_path: Path) -> None:
    spec = KernelSpec.load(EXAMPLE)
    runtime = CudaRuntime(require_gpu=False)
    with pytest.raises(RuntimeUnavailableError, match="ThreadSanitizer"):
        runtime.build(spec, "tsan", tmp_path)
    if find_tool("compute-sanitizer") is None:
        with pytest.raises(RuntimeUnavailableError, match="compute-sanitizer"):
            runtime.build(spec, "asan", tmp_path)
    elif _cuda._landlock.abi_version() >= 1:
        with pytest.raises(RuntimeUnavailableError, match="cannot run inside the sandbox"):
            runtime.build(spec, "asan", tmp_path)
    else:
        art = runtime.build(spec, "asan", tmp_path)
        assert art.path.name == "driver-asan" and (art.path.parent / "driver-asan-bin").is_file()


@needs_nvcc
def test_memcheck_is_skipped_with_its_reason_under_landlock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On an H200 the memcheck target's CUDA context failed inside Landlock: say so, don't fail."""
    monkeypatch.setattr(_cuda, "find_tool", lambda name: "/usr/bin/true")
    monkeypatch.setattr(_cuda, "landlock_abi", lambda: 7)
    with pytest.raises(RuntimeUnavailableError, match="cannot run inside the sandbox"):
        CudaRuntime(require_gpu=False).build(KernelSpec.load(EXAMPLE), "asan", tmp_path)


def test_gpu_children_may_write_only_their_own_proc_folder() -> None:
    """The CUDA driver writes under /proc/self while it creates a context (seen on an H200)."""
    _dirs, writable = _gpu.sandbox_grants()
    assert _gpu.PROC_SELF in writable
    assert "/proc" not in writable and all(p.startswith("/dev/nvidia") for p in writable
                                           if p != _gpu.PROC_SELF)


@pytest.mark.slow
@needs_nvcc
def test_memcheck_driver_builds_and_runs_the_cases(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "compute-sanitizer"
    fake.write_text('#!/bin/sh\n# fake: drop "--tool memcheck --error-exitcode 66 --log-file cs.log"\n'
                    'shift 6\necho "========= fake memcheck" > cs.log\nexec "$@"\n')
    fake.chmod(0o755)
    real = _cuda.find_tool
    monkeypatch.setattr(_cuda, "find_tool",
                        lambda name: str(fake) if name == "compute-sanitizer" else real(name))
    monkeypatch.setattr(_cuda, "landlock_abi", lambda: 0)  # a machine without Landlock
    spec = KernelSpec.load(EXAMPLE)
    art = CudaRuntime(require_gpu=False).build(spec, "asan", tmp_path / "b")
    op = OPS["softmax"]
    rng = np.random.default_rng(0)
    write_driver_cases(tmp_path / "cases.bin", op,
                       [(d, op.random_inputs(d, rng)) for d in ({"R": 2, "C": 3}, {"R": 1, "C": 1})])
    done = subprocess.run([str(art.path), str(tmp_path / "cases.bin")], cwd=art.path.parent,
                          capture_output=True, text=True, timeout=120, check=False)
    assert "fake memcheck" in done.stderr and "KTL-CASE 0" in done.stdout
    if GPU_ERROR is None:
        assert done.returncode == 0 and "KTL-DONE" in done.stdout, done.stderr
    else:
        assert done.returncode != 0 and "KTL-CUDA-ERROR cudaMalloc" in done.stderr


def test_missing_nvcc_is_named(tmp_path: Path) -> None:
    runtime = CudaRuntime(nvcc=str(tmp_path / "no-nvcc"))
    assert "no CUDA compiler" in (runtime.unavailable_reason() or "")
    with pytest.raises(RuntimeUnavailableError, match="no CUDA compiler"):
        runtime.build(KernelSpec.load(EXAMPLE), "release", tmp_path)


def test_arch_flags_follow_the_probed_gpu() -> None:
    assert arch_flags(["-O3"], "9.0") == ["-O3", "-arch=sm_90"]
    assert arch_flags(["-arch=native", "-O2"], "10.0") == ["-O2", "-arch=sm_100"]
    assert arch_flags(["-arch=sm_80"], "9.0") == ["-arch=sm_80"]
    assert arch_flags(["-arch=native"], "") == []
    assert arch_flags(["-O3"], "") == ["-O3"]


# -- kernel.toml flags ------------------------------------------------------------------


def test_cuda_flags_are_validated_per_runtime(tmp_path: Path) -> None:
    ok = _folder(tmp_path, "ok", "", flags='["-O3", "-arch=sm_90a", "--use_fast_math", "-lineinfo"]')
    spec = KernelSpec.load(ok)
    assert spec.relaxed_math and "-arch=sm_90a" in spec.flags
    assert not KernelSpec.load(_folder(tmp_path, "plain", "", flags='["-arch=native"]')).relaxed_math
    for i, bad in enumerate(["-march=native", "-fopenmp", "-arch=compute_90", "-arch=sm_90 -o x",
                             "-Xcompiler", "--compiler-bindir=/tmp"]):
        folder = _folder(tmp_path, f"bad{i}", "", flags=json.dumps([bad]))
        with pytest.raises(KernelSpecError, match="not allowed for runtime cuda"):
            KernelSpec.load(folder)
    c_folder = _folder(tmp_path, "c", "", runtime="c", filename="k.c", flags='["--use_fast_math"]')
    with pytest.raises(KernelSpecError, match="not allowed"):
        KernelSpec.load(c_folder)
    with pytest.raises(KernelSpecError, match="must end with"):
        KernelSpec.load(_folder(tmp_path, "ext", "", filename="k.c"))


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=30))
def test_only_allowlisted_cuda_flags_parse(flag: str) -> None:
    obj = {"name": "acme/k", "version": "1", "op": "sum", "runtime": "cuda", "sources": ["k.cu"],
           "entry": "k", "flags": [flag], "target": {"hardware_class": "x"},
           "generator": {"agent": "a", "agent_version": "1", "model": "m"}}
    allowed = flag in CUDA_FLAG_ALLOWLIST or (
        flag.startswith("-arch=sm_") and flag[9:].rstrip("af").isdigit()
        and 2 <= len(flag[9:].rstrip("af")) <= 3 and len(flag[9:]) - len(flag[9:].rstrip("af")) <= 1
        and flag.isascii())
    if allowed:
        assert KernelSpec.from_json(obj).flags == (flag,)
    else:
        with pytest.raises(KernelSpecError):
            KernelSpec.from_json(obj)


# -- the GPU probe ----------------------------------------------------------------------


def test_probe_output_parsing() -> None:
    good = GpuInfo(None, 1, "NVIDIA H200", "9.0", 13000, ("/usr/lib/x86_64-linux-gnu",))
    assert GpuInfo.from_json(good.to_json()) == good
    line = json.dumps({"count": 1, "name": "NVIDIA H200", "capability": "9.0", "driver": 13000,
                       "lib_dirs": ["/usr/lib/x86_64-linux-gnu"]})
    assert parse_probe_output(0, "noise\n" + line + "\n") == good
    assert "signal 11" in (parse_probe_output(-11, "").error or "")
    assert "exit status 1" in (parse_probe_output(1, line).error or "")
    assert parse_probe_output(0, "{not json").error == "the GPU probe printed malformed JSON"
    assert parse_probe_output(0, '{"error": "no driver"}').error == "no driver"
    assert "malformed" in (parse_probe_output(0, '{"count": "x"}').error or "")
    assert parse_probe_output(0, "[1]").error == "the GPU probe printed no answer"
    assert "not a JSON object" in (GpuInfo.from_json([1]).error or "")


# -- verdicts without a GPU ---------------------------------------------------------------


@no_gpu
def test_ktl_check_without_a_gpu_is_a_clear_verdict() -> None:
    from client.cli import main

    result = CliRunner().invoke(main, ["check", str(EXAMPLE), "--budget", "quick", "--json"])
    assert result.exit_code == 1, result.output
    body = json.loads(result.output[: result.output.rindex("}") + 1])
    build = body["checks"][0]
    assert body["verdict"] == "fail" and build["name"] == "build" and build["outcome"] == "error"
    assert build["detail"].startswith("runtime 'cuda' unavailable: no GPU")
    assert get_runtime("cuda").unavailable_reason() == build["detail"].split("unavailable: ", 1)[1]


@no_gpu
def test_demo_skips_the_cuda_example_without_a_gpu() -> None:
    from demo.run import _runtime_unavailable

    assert "runtime 'cuda' unavailable here (no GPU" in (_runtime_unavailable(EXAMPLE) or "")
    assert _runtime_unavailable(ROOT / "examples" / "softmax-rows") is None


@no_gpu
def test_reproducing_a_cuda_claim_without_a_gpu_is_inconclusive() -> None:
    from attest import examples as ex
    from attest.predicates import (
        BENCHMARK_V1,
        BenchmarkPredicate,
        ReproductionTarget,
        VerificationPredicate,
    )
    from verifier.reproduce import reproduce_kernel

    claimed = [VerificationPredicate.from_json(ex.verification()),
               BenchmarkPredicate.from_json(ex.benchmark())]
    target = ReproductionTarget(origin="example.test/log", index=7, leaf_hash="ab" * 32,
                                predicate_type=BENCHMARK_V1, subject_sha256="cd" * 32)
    body = reproduce_kernel(EXAMPLE, claimed, target).to_json()
    assert body["verdict"] == "inconclusive" and len(body["claims"]) == 2
    assert all(c["verdict"] == "inconclusive" and "runtime 'cuda' unavailable here: no GPU"
               in c["reason"] for c in body["claims"])


# -- with a GPU -------------------------------------------------------------------------

OOB_WRITE = r"""
#include <stdint.h>
__global__ void k(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i <= n) y[i] = 1.0f / (float)(n > 0 ? n : 1);  /* one past the end */
}
extern "C" void launch(const float* x, float* y, int64_t R, int64_t C) {
  int64_t n = R * C;
  if (n > 0) k<<<(unsigned)((n + 256) / 256), 256>>>(x, y, n);
}
"""

ALIGNED_ONLY = r"""
#include <stdint.h>
#include <math.h>
__global__ void k(const float* x, float* y, int64_t C) {
  const float* r = x + blockIdx.x * C; float* o = y + blockIdx.x * C;
  float m = -INFINITY; double s = 0.0;
  for (int64_t c = 0; c < C; c++) m = fmaxf(m, r[c]);
  for (int64_t c = 0; c < C; c++) s += expf(r[c] - m);
  for (int64_t c = threadIdx.x; c < (C / 32) * 32; c += 32) o[c] = (float)(expf(r[c] - m) / s);
}
extern "C" void launch(const float* x, float* y, int64_t R, int64_t C) {
  if (R > 0 && C > 0) k<<<(unsigned)R, 32>>>(x, y, C);
}
"""

ILLEGAL = r"""
#include <stdint.h>
__global__ void k(float* y) { y[threadIdx.x + (1LL << 40)] = 1.0f; }
extern "C" void launch(const float* x, float* y, int64_t R, int64_t C) { k<<<1, 32>>>(y); }
"""


@pytest.mark.gpu
@needs_gpu
def test_gpu_example_passes_check() -> None:
    report = check(EXAMPLE, budget="quick", seed=7)
    assert report.passed, _rows(report)
    assert report.get("correctness.edge").outcome == "pass"
    assert report.get("guards.canaries").outcome == "pass"
    assert report.get("sanitizer.tsan").outcome == "skip"


@pytest.mark.gpu
@needs_gpu
def test_gpu_out_of_bounds_write_is_caught_by_the_guards(tmp_path: Path) -> None:
    report = check(_folder(tmp_path, "oob", OOB_WRITE), budget="quick", seed=3)
    guards = report.get("guards.canaries")
    assert guards.outcome == "fail", _rows(report)
    assert guards.fault is not None and guards.fault.kind == "oob_write", _rows(report)


@pytest.mark.gpu
@needs_gpu
def test_gpu_kernel_wrong_off_the_block_multiple_is_caught(tmp_path: Path) -> None:
    report = check(_folder(tmp_path, "aligned", ALIGNED_ONLY), budget="quick", seed=5)
    assert report.get("correctness.edge").outcome == "fail", _rows(report)
    assert report.get("outputs.poisoned").outcome == "fail", _rows(report)


@pytest.mark.gpu
@needs_gpu
def test_gpu_illegal_address_is_a_crash_verdict(tmp_path: Path) -> None:
    report = check(_folder(tmp_path, "illegal", ILLEGAL), budget="quick", seed=1)
    detail = report.get("correctness.random").detail
    assert report.get("correctness.random").outcome == "fail", _rows(report)
    assert "crash" in detail and "KTL-CUDA-ERROR" in detail, _rows(report)


@pytest.mark.gpu
@needs_gpu
def test_gpu_driver_works_inside_the_sandbox(tmp_path: Path) -> None:
    from verifier.gpu import _PROBE

    result = run_sandboxed([sys.executable, "-I", "-S", "-c", _PROBE], tmp_path,
                           Limits(wall_s=60.0, open_files=64), gpu=True)
    answer = parse_probe_output(result.returncode or -(result.signal or 0),
                                "\n".join(line for _, line in result.lines))
    assert answer.error is None and answer.count >= 1, (answer, result.stderr[-2000:])


def test_cuda_environment_names_the_gpu_and_driver() -> None:
    from verifier.environment import environment_fingerprint, gpu_fingerprint

    h200 = GpuInfo(None, 1, "NVIDIA H200", "9.0", 13000, ("/usr/local/nvidia/lib64",))
    assert gpu_fingerprint(h200) == ("NVIDIA H200 (sm_90) x1", "CUDA 13.0")
    assert gpu_fingerprint(GpuInfo(None, 2, "NVIDIA H100", "9.0", 12040)) == (
        "NVIDIA H100 (sm_90) x2", "CUDA 12.4")
    assert gpu_fingerprint(GpuInfo("no GPU: libcuda.so.1 cannot be loaded")) == (None, None)
    env_c = environment_fingerprint("c")
    assert env_c["gpu"] is None and env_c["gpu_driver"] is None
    assert environment_fingerprint("cuda")["gpu"] == gpu_fingerprint(probe())[0]

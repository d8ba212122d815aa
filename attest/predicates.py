"""The four predicate types (kernel, benchmark, verification, reproduction), version 1.

Each predicate is a frozen dataclass tree with `to_json()` and a strict `from_json()`:
the body is checked against one declarative rule set (`SPECS`, also rendered as the
JSON Schema files in attest/schemas/), then cross-field rules are applied. Every
error names the offending field, e.g. `predicate.results[2].speedup_ci95: must be
[low, high] with low <= high`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal, Self, get_args

from attest._errors import ValidationError
from attest._spec import Bool, Enum, Int, Interval, List, Map, Nullable, Num, Obj, Spec, Str
from attest.ops import OP_DIMS, op_flops

PREDICATE_NAMESPACE = "https://kerneltransparency.dev/attestation/"
KERNEL_V1 = PREDICATE_NAMESPACE + "kernel/v1"
BENCHMARK_V1 = PREDICATE_NAMESPACE + "benchmark/v1"
VERIFICATION_V1 = PREDICATE_NAMESPACE + "verification/v1"
REPRODUCTION_V1 = PREDICATE_NAMESPACE + "reproduction/v1"

BENCHMARK_SCHEMA_VERSION = 2
REPRODUCTION_SCHEMA_VERSION = 2
MAX_RUNS = 64
"""Most independent runs one benchmark result (or its re-measurement) may hold."""

KERNEL_NAME_PATTERN = r"[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*"
"""A kernel's name, 'vendor/kernel-name': the one pattern attest, verifier, client and ledger use."""
MAX_KERNEL_NAME_CHARS = 128
HEX64_PATTERN = r"[0-9a-f]{64}"
"""A sha256 digest or key id: 64 lowercase hex characters (match with `re.fullmatch`)."""
RUNTIMES = ("c", "cuda", "triton")
"""The runtimes a kernel may name."""

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

ENVIRONMENT = Obj({
    "cpu_model": Str(256, min_len=0),
    "cpu_flags": List(Str(64, pattern=_TOKEN, hint="must be a CPU flag token"), max_items=1024),
    "cores": Int(1, 1 << 20),
    "machine": Str(64),
    "gpu": Nullable(Str(256)),
    "gpu_driver": Nullable(Str(128)),
    "compiler": Str(256, min_len=0),
    "libraries": Map(Str(64, pattern=_TOKEN, hint="must be a library name token"), Str(128),
                     max_items=64),
    "os": Str(256, min_len=0),
    "python": Str(64),
}, doc="where a measurement or check ran")


class _Node:
    """Shared `from_json` for the dataclasses below: rule check, then `_build` (cross-field rules)."""

    _SPEC: ClassVar[Spec]
    _PATH: ClassVar[str] = "predicate"

    @classmethod
    def from_json(cls, obj: object, path: str | None = None) -> Self:
        where = path or cls._PATH
        return cls._build(cls._SPEC.check(obj, where), where)

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        """Make the node from checked fields; nodes with nested parts or cross-field rules
        override this."""
        return cls(**d)

    def to_json(self) -> dict[str, Any]:
        """Every field as it is: right for nodes whose fields are all JSON scalars."""
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class Environment(_Node):
    cpu_model: str
    cpu_flags: tuple[str, ...]
    cores: int
    machine: str
    gpu: str | None
    gpu_driver: str | None
    compiler: str
    libraries: Mapping[str, str]
    os: str
    python: str

    _SPEC = ENVIRONMENT
    _PATH = "environment"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        return cls(cpu_model=d["cpu_model"], cpu_flags=tuple(d["cpu_flags"]), cores=d["cores"],
                   machine=d["machine"], gpu=d["gpu"], gpu_driver=d["gpu_driver"],
                   compiler=d["compiler"], libraries=dict(d["libraries"]), os=d["os"],
                   python=d["python"])

    def to_json(self) -> dict[str, Any]:
        return {"cpu_model": self.cpu_model, "cpu_flags": list(self.cpu_flags), "cores": self.cores,
                "machine": self.machine, "gpu": self.gpu, "gpu_driver": self.gpu_driver,
                "compiler": self.compiler, "libraries": dict(self.libraries), "os": self.os,
                "python": self.python}


# ---- kernel/v1 ------------------------------------------------------------------------------

SOURCE_PATH = Str(
    256, pattern=r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*",
    hint="must be a relative path of plain segments (no leading '/', '.', '..' or backslash)",
)
SOURCE = Obj({"path": SOURCE_PATH, "sha256": HEX64})
BUILD = Obj({
    "compiler": Str(64),
    "compiler_version": Str(64, min_len=0),
    "flags": List(Str(128), max_items=64),
})
GENERATOR = Obj({
    "agent": NAME_128,
    "agent_version": Str(64),
    "model": Str(128, min_len=0),
    "prompt_sha256": Nullable(HEX64),
})
TARGET = Obj({"hardware_class": Str(64, pattern=r"[a-z0-9][a-z0-9._-]*",
                                    hint="must be a hardware class such as 'x86_64-avx2'")})
KERNEL = Obj({
    "name": KERNEL_NAME,
    "version": Str(64, pattern=_TOKEN, hint="must be a version token such as '1.0.0'"),
    "op": OP_NAME,
    "runtime": Enum(*RUNTIMES),
    "entry": Str(128, pattern=_IDENT, hint="must be a C identifier"),
    "abi_version": Int(1, 65535),
    "sources": List(SOURCE, min_items=1, max_items=256),
    "build": BUILD,
    "generator": GENERATOR,
    "target": TARGET,
    "parent": Nullable(HEX64, doc="sha256 subject digest of the kernel this one derives from"),
}, doc="provenance of a kernel release")


@dataclass(frozen=True)
class SourceFile(_Node):
    path: str
    sha256: str

    _SPEC = SOURCE
    _PATH = "source"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        return cls(path=d["path"], sha256=d["sha256"])

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256}


@dataclass(frozen=True)
class BuildRecipe(_Node):
    compiler: str
    compiler_version: str
    flags: tuple[str, ...]

    _SPEC = BUILD
    _PATH = "build"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        return cls(compiler=d["compiler"], compiler_version=d["compiler_version"],
                   flags=tuple(d["flags"]))

    def to_json(self) -> dict[str, Any]:
        return {"compiler": self.compiler, "compiler_version": self.compiler_version,
                "flags": list(self.flags)}


@dataclass(frozen=True)
class Generator(_Node):
    agent: str
    agent_version: str
    model: str
    prompt_sha256: str | None

    _SPEC = GENERATOR
    _PATH = "generator"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        return cls(agent=d["agent"], agent_version=d["agent_version"], model=d["model"],
                   prompt_sha256=d["prompt_sha256"])

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "agent_version": self.agent_version, "model": self.model,
                "prompt_sha256": self.prompt_sha256}


@dataclass(frozen=True)
class Target(_Node):
    hardware_class: str

    _SPEC = TARGET
    _PATH = "target"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        return cls(hardware_class=d["hardware_class"])

    def to_json(self) -> dict[str, Any]:
        return {"hardware_class": self.hardware_class}


@dataclass(frozen=True)
class KernelPredicate(_Node):
    name: str
    version: str
    op: str
    runtime: str
    entry: str
    abi_version: int
    sources: tuple[SourceFile, ...]
    build: BuildRecipe
    generator: Generator
    target: Target
    parent: str | None

    PREDICATE_TYPE: ClassVar[str] = KERNEL_V1
    _SPEC = KERNEL

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        sources = tuple(SourceFile._build(s, f"{path}.sources[{i}]")
                        for i, s in enumerate(d["sources"]))
        seen: set[str] = set()
        for i, source in enumerate(sources):
            if source.path in seen:
                raise ValidationError(f"{path}.sources[{i}].path", f"duplicate path {source.path!r}")
            seen.add(source.path)
        return cls(name=d["name"], version=d["version"], op=d["op"], runtime=d["runtime"],
                   entry=d["entry"], abi_version=d["abi_version"], sources=sources,
                   build=BuildRecipe._build(d["build"], f"{path}.build"),
                   generator=Generator._build(d["generator"], f"{path}.generator"),
                   target=Target._build(d["target"], f"{path}.target"), parent=d["parent"])

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "op": self.op, "runtime": self.runtime,
                "entry": self.entry, "abi_version": self.abi_version,
                "sources": [s.to_json() for s in self.sources], "build": self.build.to_json(),
                "generator": self.generator.to_json(), "target": self.target.to_json(),
                "parent": self.parent}


# ---- benchmark/v1 ---------------------------------------------------------------------------

WORKLOAD = Obj({
    "op": OP_NAME,
    "dtype": Enum("float32", "float16", "bfloat16", "float64"),
    "seed": Int(0, 2**53 - 1),
    "shapes": SHAPES,
})
METHOD = Obj({
    "warmup": Int(0, 1_000_000),
    "repetitions": Int(1, 10_000_000),
    "timer": Enum("perf_counter_ns", "monotonic_ns", "process_time_ns", "cuda_event"),
    "interleaved": Bool(doc="kernel and baseline runs alternate"),
    "baseline": NAME_128,
    "fresh_inputs": Bool(),
    "outputs_rechecked": Bool(),
    "runs": Int(1, MAX_RUNS, doc="independent runs (fresh processes) per shape; absent: 1"),
    "cpu_pinned": Bool(doc="kernel and baseline were pinned to one CPU"),
}, optional=("runs", "cpu_pinned"))
RUN = Obj({
    "speedup": Num(),
    "speedup_ci95": Interval(doc="this run's 95% bootstrap interval"),
    "median_ns": Num(),
    "baseline_median_ns": Num(),
    "n": Int(1, 10_000_000),
}, doc="one independent run of one shape")
RESULT = Obj({
    "shape": SHAPE,
    "n": Int(1, 10_000_000),
    "median_ns": Num(),
    "p5_ns": Num(),
    "p95_ns": Num(),
    "baseline_median_ns": Num(),
    "speedup": Num(),
    "speedup_ci95": Interval(doc="95% bootstrap interval of the speed-up"),
    "gflops": Num(),
    "runs": List(RUN, min_items=1, max_items=MAX_RUNS,
                 doc="each run's own figures; speedup is then their geometric mean"),
}, optional=("runs",), doc=(
    "p5_ns <= median_ns <= p95_ns; speedup_ci95 contains speedup; without runs, speedup is "
    "within 1% of baseline_median_ns / max(median_ns, 1); with runs, each run obeys that rule "
    "and speedup is within 1% of the runs' geometric mean; for an op of the catalogue the "
    "shape has exactly its dimensions and gflops is within 1% of the op's FLOPs at that "
    "shape / median_ns (0 when median_ns is 0)"))
BLOB_REF = Obj({
    "sha256": HEX64,
    "size": Int(0, 2**40),
    "media_type": Str(128, pattern=r"[a-z0-9][a-z0-9.+-]*/[a-z0-9][a-z0-9.+-]*",
                      hint="must be a media type such as 'application/json'"),
}, doc="a content-addressed blob stored beside the log")
BenchFaultKind = Literal["build_failed", "child_failed", "escaped_work", "outputs_wrong",
                        "guard_damage", "roofline"]
BENCH_FAULT_KINDS: tuple[BenchFaultKind, ...] = get_args(BenchFaultKind)
BENCH_FAULT = Obj({
    "kind": Enum(*BENCH_FAULT_KINDS,
                 doc="build_failed / child_failed (crash, hang, memory), escaped_work (a thread, "
                     "process or answer outliving the timed call), outputs_wrong (rechecked "
                     "after timing), guard_damage, roofline (faster than the machine can be)"),
    "shape": Nullable(SHAPE, doc="the shape measured when it showed; null: the whole run"),
    "detail": FREE_TEXT,
}, doc="a fault of the kernel the measurement exposed (typed; a note repeats it in prose)")
BENCHMARK = Obj({
    "schema_version": Int(2, BENCHMARK_SCHEMA_VERSION,
                          doc="2: results carry their runs; absent in version 1 entries"),
    "environment": ENVIRONMENT,
    "workload": WORKLOAD,
    "method": METHOD,
    "results": List(RESULT, max_items=1024),
    "samples": BLOB_REF,
    "trusted": Bool(doc="false when the harness saw something that makes the numbers unreliable"),
    "notes": List(FREE_TEXT, max_items=64),
    "faults": List(BENCH_FAULT, max_items=64),
}, optional=("schema_version", "faults"),
    doc="performance measurements; every results[].shape is one of workload.shapes; a body "
        "with faults is not trusted")


@dataclass(frozen=True)
class Workload(_Node):
    op: str
    dtype: str
    seed: int
    shapes: tuple[Mapping[str, int], ...]

    _SPEC = WORKLOAD
    _PATH = "workload"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        return cls(op=d["op"], dtype=d["dtype"], seed=d["seed"],
                   shapes=tuple(dict(s) for s in d["shapes"]))

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "dtype": self.dtype, "seed": self.seed,
                "shapes": [dict(s) for s in self.shapes]}


@dataclass(frozen=True)
class Method(_Node):
    warmup: int
    repetitions: int
    timer: str
    interleaved: bool
    baseline: str
    fresh_inputs: bool
    outputs_rechecked: bool
    runs: int | None = None
    cpu_pinned: bool | None = None

    _SPEC = METHOD
    _PATH = "method"

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class BenchmarkRun(_Node):
    speedup: float
    speedup_ci95: tuple[float, float]
    median_ns: float
    baseline_median_ns: float
    n: int

    _SPEC = RUN
    _PATH = "run"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        check_speedup(d["speedup"], d["speedup_ci95"], d["median_ns"], d["baseline_median_ns"],
                      path)
        return cls(speedup=d["speedup"], speedup_ci95=d["speedup_ci95"],
                   median_ns=d["median_ns"], baseline_median_ns=d["baseline_median_ns"], n=d["n"])

    def to_json(self) -> dict[str, Any]:
        return {"speedup": self.speedup, "speedup_ci95": list(self.speedup_ci95),
                "median_ns": self.median_ns, "baseline_median_ns": self.baseline_median_ns,
                "n": self.n}


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


def check_gflops(op: str, shape: Mapping[str, int], median_ns: float, gflops: float,
                 path: str) -> None:
    """Refuse a GFLOP/s figure that the op's FLOPs at ``shape`` and the median contradict,
    and a shape that is not the op's (ops outside the catalogue have no FLOP count here)."""
    if op not in OP_DIMS:
        return
    flops = op_flops(op, shape)
    if flops is None:
        raise ValidationError(f"{path}.shape", f"op {op} takes dimensions "
                              f"{', '.join(OP_DIMS[op])}, got {', '.join(shape)}")
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


@dataclass(frozen=True)
class BenchmarkResult(_Node):
    shape: Mapping[str, int]
    n: int
    median_ns: float
    p5_ns: float
    p95_ns: float
    baseline_median_ns: float
    speedup: float
    speedup_ci95: tuple[float, float]
    gflops: float
    runs: tuple[BenchmarkRun, ...] | None = None

    _SPEC = RESULT
    _PATH = "result"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        if not d["p5_ns"] <= d["median_ns"] <= d["p95_ns"]:
            raise ValidationError(f"{path}.median_ns", "must lie within [p5_ns, p95_ns]")
        runs = None if "runs" not in d else tuple(
            BenchmarkRun._build(r, f"{path}.runs[{i}]") for i, r in enumerate(d["runs"]))
        if runs is None:
            check_speedup(d["speedup"], d["speedup_ci95"], d["median_ns"],
                          d["baseline_median_ns"], path)
        else:
            check_aggregate_speedup(d["speedup"], d["speedup_ci95"],
                                    [r.speedup for r in runs], path)
        return cls(shape=dict(d["shape"]), n=d["n"], median_ns=d["median_ns"], p5_ns=d["p5_ns"],
                   p95_ns=d["p95_ns"], baseline_median_ns=d["baseline_median_ns"],
                   speedup=d["speedup"], speedup_ci95=d["speedup_ci95"], gflops=d["gflops"],
                   runs=runs)

    def run_speedups(self) -> tuple[float, ...]:
        """Each run's speed-up; a version 1 result is one run."""
        return (self.speedup,) if self.runs is None else tuple(r.speedup for r in self.runs)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "shape": dict(self.shape), "n": self.n, "median_ns": self.median_ns,
            "p5_ns": self.p5_ns, "p95_ns": self.p95_ns,
            "baseline_median_ns": self.baseline_median_ns, "speedup": self.speedup,
            "speedup_ci95": list(self.speedup_ci95), "gflops": self.gflops}
        if self.runs is not None:
            out["runs"] = [r.to_json() for r in self.runs]
        return out


@dataclass(frozen=True)
class BlobRef(_Node):
    sha256: str
    size: int
    media_type: str

    _SPEC = BLOB_REF
    _PATH = "blob"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        return cls(sha256=d["sha256"], size=d["size"], media_type=d["media_type"])

    def to_json(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "size": self.size, "media_type": self.media_type}


@dataclass(frozen=True)
class BenchmarkPredicate(_Node):
    environment: Environment
    workload: Workload
    method: Method
    results: tuple[BenchmarkResult, ...]
    samples: BlobRef
    trusted: bool
    notes: tuple[str, ...]
    schema_version: int = 1
    faults: tuple[BenchFault, ...] = ()

    PREDICATE_TYPE: ClassVar[str] = BENCHMARK_V1
    _SPEC = BENCHMARK

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        workload = Workload._build(d["workload"], f"{path}.workload")
        method = Method._build(d["method"], f"{path}.method")
        results = tuple(BenchmarkResult._build(r, f"{path}.results[{i}]")
                        for i, r in enumerate(d["results"]))
        version = d.get("schema_version", 1)
        if version >= 2 and method.runs is None:
            raise ValidationError(f"{path}.method.runs", "is required when schema_version is 2")
        for i, result in enumerate(results):
            if result.shape not in workload.shapes:
                raise ValidationError(f"{path}.results[{i}].shape", "is not one of workload.shapes")
            check_gflops(workload.op, result.shape, result.median_ns, result.gflops,
                         f"{path}.results[{i}]")
            _check_runs(result, method, version, f"{path}.results[{i}]")
        faults = tuple(BenchFault._build(f, f"{path}.faults[{i}]")
                       for i, f in enumerate(d.get("faults", ())))
        if faults and d["trusted"]:
            raise ValidationError(f"{path}.trusted", "must be false when the body lists faults")
        return cls(environment=Environment._build(d["environment"], f"{path}.environment"),
                   workload=workload, method=method,
                   results=results, samples=BlobRef._build(d["samples"], f"{path}.samples"),
                   trusted=d["trusted"], notes=tuple(d["notes"]), schema_version=version,
                   faults=faults)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.schema_version == 1 else {
            "schema_version": self.schema_version}
        out.update({"environment": self.environment.to_json(), "workload": self.workload.to_json(),
                    "method": self.method.to_json(), "results": [r.to_json() for r in self.results],
                    "samples": self.samples.to_json(), "trusted": self.trusted,
                    "notes": list(self.notes)})
        if self.faults:
            out["faults"] = [f.to_json() for f in self.faults]
        return out


@dataclass(frozen=True)
class BenchFault(_Node):
    """A kernel fault a benchmark exposed: its kind, the shape it showed on (None: the run)."""

    kind: BenchFaultKind
    shape: Mapping[str, int] | None
    detail: str

    _SPEC = BENCH_FAULT
    _PATH = "fault"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        shape = d["shape"]
        return cls(kind=d["kind"], shape=None if shape is None else dict(shape),
                   detail=d["detail"])

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "shape": None if self.shape is None else dict(self.shape),
                "detail": self.detail}


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

CHECK_INPUTS = Obj({
    "shapes": List(SHAPE, max_items=1024),
    "repeats": Int(0, 1_000_000),
    "threads": Int(1, 4096),
    "flags": List(Str(128), max_items=64),
}, optional=("shapes", "repeats", "threads", "flags"), doc="what the check ran on; each field optional")
CHECK_METRICS = Map(
    Str(64, pattern=r"[a-z][a-z0-9_]*", hint="must be a metric name (lowercase, digits, '_')"),
    Num(), max_items=32,
    doc="metric name -> finite number >= 0; well-known: max_abs_err, max_rel_err, max_ulp, tolerance",
)
CheckOutcome = Literal["pass", "fail", "skip", "error"]
CHECK_OUTCOMES: tuple[CheckOutcome, ...] = get_args(CheckOutcome)
FaultKind = Literal[
    "wrong", "unaligned_remainder", "loose", "overflow", "special_values", "crash", "hang",
    "unbounded_alloc", "load", "not_run", "unwritten", "oob_write", "oob_read", "memory_error",
    "undefined_behaviour", "input_mutated", "nondeterministic", "stateful", "not_reentrant",
    "escaped", "index_overflow", "race", "build", "bad_output", "bad_answer", "non_finite",
]
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)
"""What a failed check found, as a word a program can act on (the detail is for people)."""
FAULT = Obj({
    "kind": Enum(*FAULT_KINDS),
    "shape": SHAPE,
}, optional=("shape",), doc="a failed check's finding: its kind, and the shape it showed on")
CHECK = Obj({
    "name": Str(128, pattern=r"[a-z0-9][a-z0-9._-]*",
                hint="must be a check name such as 'correctness.random'"),
    "outcome": Enum(*CHECK_OUTCOMES),
    "detail": FREE_TEXT,
    "inputs": CHECK_INPUTS,
    "metrics": CHECK_METRICS,
    "fault": FAULT,
}, optional=("fault",))
VERIFICATION = Obj({
    "environment": ENVIRONMENT,
    "budget": Enum("quick", "full"),
    "seed": Int(0, 2**53 - 1),
    "checks": List(CHECK, min_items=1, max_items=256),
    "verdict": Enum("pass", "fail"),
}, doc="checks run on a kernel; verdict 'pass' requires no check with outcome fail or error")


@dataclass(frozen=True)
class CheckInputs(_Node):
    shapes: tuple[Mapping[str, int], ...] | None = None
    repeats: int | None = None
    threads: int | None = None
    flags: tuple[str, ...] | None = None

    _SPEC = CHECK_INPUTS
    _PATH = "inputs"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        shapes = d.get("shapes")
        return cls(shapes=None if shapes is None else tuple(dict(s) for s in shapes),
                   repeats=d.get("repeats"), threads=d.get("threads"),
                   flags=None if "flags" not in d else tuple(d["flags"]))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.shapes is not None:
            out["shapes"] = [dict(s) for s in self.shapes]
        if self.repeats is not None:
            out["repeats"] = self.repeats
        if self.threads is not None:
            out["threads"] = self.threads
        if self.flags is not None:
            out["flags"] = list(self.flags)
        return out


@dataclass(frozen=True)
class Fault(_Node):
    """A failed check's typed finding."""

    kind: FaultKind
    shape: Mapping[str, int] | None = None

    _SPEC = FAULT
    _PATH = "fault"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        shape = d.get("shape")
        return cls(kind=d["kind"], shape=None if shape is None else dict(shape))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.shape is not None:
            out["shape"] = dict(self.shape)
        return out


@dataclass(frozen=True)
class Check(_Node):
    name: str
    outcome: CheckOutcome
    detail: str
    inputs: CheckInputs
    metrics: Mapping[str, float]
    fault: Fault | None = None

    _SPEC = CHECK
    _PATH = "check"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        fault = d.get("fault")
        return cls(name=d["name"], outcome=d["outcome"], detail=d["detail"],
                   inputs=CheckInputs._build(d["inputs"], f"{path}.inputs"),
                   metrics=dict(d["metrics"]),
                   fault=None if fault is None else Fault._build(fault, f"{path}.fault"))

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "outcome": self.outcome, "detail": self.detail,
               "inputs": self.inputs.to_json(), "metrics": dict(self.metrics)}
        if self.fault is not None:
            out["fault"] = self.fault.to_json()
        return out


@dataclass(frozen=True)
class VerificationPredicate(_Node):
    environment: Environment
    budget: str
    seed: int
    checks: tuple[Check, ...]
    verdict: str

    PREDICATE_TYPE: ClassVar[str] = VERIFICATION_V1
    _SPEC = VERIFICATION

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        checks = tuple(Check._build(c, f"{path}.checks[{i}]") for i, c in enumerate(d["checks"]))
        if d["verdict"] == "pass":
            for i, check in enumerate(checks):
                if check.outcome in ("fail", "error"):
                    raise ValidationError(
                        f"{path}.verdict",
                        f"cannot be 'pass' while checks[{i}] ({check.name}) has outcome {check.outcome!r}",
                    )
        return cls(environment=Environment._build(d["environment"], f"{path}.environment"),
                   budget=d["budget"], seed=d["seed"], checks=checks, verdict=d["verdict"])

    def to_json(self) -> dict[str, Any]:
        return {"environment": self.environment.to_json(), "budget": self.budget,
                "seed": self.seed, "checks": [c.to_json() for c in self.checks],
                "verdict": self.verdict}


# ---- reproduction/v1 ------------------------------------------------------------------------

PREDICATE_TYPES = (KERNEL_V1, BENCHMARK_V1, VERIFICATION_V1, REPRODUCTION_V1)
REPRO_TARGET = Obj({
    "origin": Str(256, doc="the log's origin line"),
    "index": Int(0, 2**53 - 1),
    "leaf_hash": HEX64,
    "predicate_type": Enum(*PREDICATE_TYPES),
    "subject_sha256": HEX64,
}, doc="the logged entry that was re-run")
_MEASUREMENT_FIELDS: dict[str, Spec] = {
    "speedup": Num(),
    "speedup_ci95": Interval(),
    "median_ns": Num(),
    "baseline_median_ns": Num(),
    "gflops": Num(),
    "verdict": Enum("pass", "fail"),
}
MEASUREMENT = Obj(_MEASUREMENT_FIELDS, optional=tuple(_MEASUREMENT_FIELDS),
                  doc="the quantities a claim is about; each field optional")
JUDGED = Obj({
    "index": Int(0, 2**53 - 1),
    "leaf_hash": HEX64,
}, doc="the logged claim entry this verdict judges (in the target's log)")
STATISTICS = Obj({
    "claimed_runs": Int(1, MAX_RUNS),
    "measured_runs": Int(1, MAX_RUNS),
    "inflation": Num(doc="claimed / measured speed-up (geometric means over runs)"),
    "inflation_interval": Interval(doc="one-sided bounds at the policy's confidence"),
    "measured_interval": Interval(),
    "sigma": Num(doc="between-run spread of the log speed-up measured here"),
    "more_runs": Nullable(Int(1, 1000), doc="further runs here that would decide, if known"),
}, doc="the speed-up test's typed outcome; the reason text is rendered from it")
ENV_DIFF = Obj({
    "field": Str(64, pattern=r"[a-z_]+(\.[A-Za-z0-9._+-]+)?",
                 hint="must be an environment field such as 'cpu_model' or 'libraries.numpy'"),
    "hardware": Bool(doc="a hardware field (CPU model, flags, cores, machine, GPU)"),
    "claimed": Str(512, min_len=0),
    "measured": Str(512, min_len=0),
})
CLAIM = Obj({
    "claim": Str(256, doc="what was claimed, e.g. 'benchmark.speedup[M=256,N=256,K=256]'"),
    "verdict": Enum("confirmed", "refuted", "inconclusive"),
    "claimed": MEASUREMENT,
    "measured": MEASUREMENT,
    "reason": FREE_TEXT,
    "entry": JUDGED,
    "statistics": STATISTICS,
    "environment_diff": List(ENV_DIFF, max_items=32,
                             doc="how the claim's environment differs from this one"),
}, optional=("entry", "statistics", "environment_diff"),
    doc="one verdict; 'entry' is absent in entries logged before it existed")
POLICY = Obj({
    "tolerance": Num(doc="how much a claim may overstate the re-measured speed-up (0.05 = 5%)"),
    "confidence": Num(doc="confidence needed to refute, in [0.5, 1)"),
    "test": Enum("log-speedup-t", doc="one-sided t test on per-run log speed-ups"),
}, doc="the decision rule the verdicts were given under")
REPRODUCTION = Obj({
    "schema_version": Int(2, REPRODUCTION_SCHEMA_VERSION,
                          doc="2: policy and per-claim statistics; absent in version 1"),
    "target": REPRO_TARGET,
    "environment": ENVIRONMENT,
    "policy": POLICY,
    "claims": List(CLAIM, max_items=1024),
    "verdict": Enum("confirmed", "refuted", "inconclusive"),
}, optional=("schema_version", "policy"), doc=("a third party's re-run of a logged entry; verdict 'confirmed' needs at least one claim "
        "and every claim confirmed; 'refuted' needs at least one refuted claim"))


@dataclass(frozen=True)
class ReproductionTarget(_Node):
    origin: str
    index: int
    leaf_hash: str
    predicate_type: str
    subject_sha256: str

    _SPEC = REPRO_TARGET
    _PATH = "target"


@dataclass(frozen=True)
class Measurement(_Node):
    speedup: float | None = None
    speedup_ci95: tuple[float, float] | None = None
    median_ns: float | None = None
    baseline_median_ns: float | None = None
    gflops: float | None = None
    verdict: str | None = None

    _SPEC = MEASUREMENT
    _PATH = "measurement"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in _MEASUREMENT_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class JudgedEntry(_Node):
    """The logged claim entry a verdict is about: its index and leaf hash."""

    index: int
    leaf_hash: str

    _SPEC = JUDGED
    _PATH = "entry"


@dataclass(frozen=True)
class SpeedupStatistics(_Node):
    claimed_runs: int
    measured_runs: int
    inflation: float
    inflation_interval: tuple[float, float]
    measured_interval: tuple[float, float]
    sigma: float
    more_runs: int | None

    _SPEC = STATISTICS
    _PATH = "statistics"

    def to_json(self) -> dict[str, Any]:
        return {"claimed_runs": self.claimed_runs, "measured_runs": self.measured_runs,
                "inflation": self.inflation, "inflation_interval": list(self.inflation_interval),
                "measured_interval": list(self.measured_interval), "sigma": self.sigma,
                "more_runs": self.more_runs}


@dataclass(frozen=True)
class EnvironmentDiff(_Node):
    field: str
    hardware: bool
    claimed: str
    measured: str

    _SPEC = ENV_DIFF
    _PATH = "environment_diff"


@dataclass(frozen=True)
class ClaimResult(_Node):
    claim: str
    verdict: str
    claimed: Measurement
    measured: Measurement
    reason: str
    entry: JudgedEntry | None = None
    statistics: SpeedupStatistics | None = None
    environment_diff: tuple[EnvironmentDiff, ...] | None = None

    _SPEC = CLAIM
    _PATH = "claim"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        entry = d.get("entry")
        stats = d.get("statistics")
        diff = d.get("environment_diff")
        return cls(claim=d["claim"], verdict=d["verdict"],
                   claimed=Measurement._build(d["claimed"], f"{path}.claimed"),
                   measured=Measurement._build(d["measured"], f"{path}.measured"),
                   reason=d["reason"],
                   entry=None if entry is None else JudgedEntry._build(entry, f"{path}.entry"),
                   statistics=None if stats is None else SpeedupStatistics._build(
                       stats, f"{path}.statistics"),
                   environment_diff=None if diff is None else tuple(
                       EnvironmentDiff._build(x, f"{path}.environment_diff[{i}]")
                       for i, x in enumerate(diff)))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"claim": self.claim, "verdict": self.verdict,
                               "claimed": self.claimed.to_json(),
                               "measured": self.measured.to_json(), "reason": self.reason}
        if self.entry is not None:
            out["entry"] = self.entry.to_json()
        if self.statistics is not None:
            out["statistics"] = self.statistics.to_json()
        if self.environment_diff is not None:
            out["environment_diff"] = [x.to_json() for x in self.environment_diff]
        return out


@dataclass(frozen=True)
class DecisionPolicy(_Node):
    tolerance: float
    confidence: float
    test: str

    _SPEC = POLICY
    _PATH = "policy"

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        if not d["tolerance"] <= 1.0:
            raise ValidationError(f"{path}.tolerance", "must be a fraction between 0 and 1")
        if not 0.5 <= d["confidence"] < 1.0:
            raise ValidationError(f"{path}.confidence", "must be at least 0.5 and below 1")
        return cls(tolerance=d["tolerance"], confidence=d["confidence"], test=d["test"])


@dataclass(frozen=True)
class ReproductionPredicate(_Node):
    target: ReproductionTarget
    environment: Environment
    claims: tuple[ClaimResult, ...]
    verdict: str
    policy: DecisionPolicy | None = None
    schema_version: int = 1

    PREDICATE_TYPE: ClassVar[str] = REPRODUCTION_V1
    _SPEC = REPRODUCTION

    @classmethod
    def _build(cls, d: dict[str, Any], path: str) -> Self:
        claims = tuple(ClaimResult._build(c, f"{path}.claims[{i}]")
                       for i, c in enumerate(d["claims"]))
        verdicts = [c.verdict for c in claims]
        if d["verdict"] == "confirmed" and (not claims or set(verdicts) != {"confirmed"}):
            raise ValidationError(f"{path}.verdict",
                                  "cannot be 'confirmed' unless there are claims and all are confirmed")
        if d["verdict"] == "refuted" and "refuted" not in verdicts:
            raise ValidationError(f"{path}.verdict", "cannot be 'refuted' when no claim is refuted")
        version = d.get("schema_version", 1)
        if (version >= 2) != ("policy" in d):
            raise ValidationError(f"{path}.policy", "is required with schema_version 2 and only "
                                  "allowed with it")
        return cls(target=ReproductionTarget._build(d["target"], f"{path}.target"),
                   environment=Environment._build(d["environment"], f"{path}.environment"),
                   claims=claims, verdict=d["verdict"],
                   policy=None if "policy" not in d else DecisionPolicy._build(
                       d["policy"], f"{path}.policy"),
                   schema_version=version)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.schema_version == 1 else {
            "schema_version": self.schema_version}
        out.update({"target": self.target.to_json(), "environment": self.environment.to_json()})
        if self.policy is not None:
            out["policy"] = self.policy.to_json()
        out.update({"claims": [c.to_json() for c in self.claims], "verdict": self.verdict})
        return out


# ---- dispatch -------------------------------------------------------------------------------

Predicate = KernelPredicate | BenchmarkPredicate | VerificationPredicate | ReproductionPredicate

PREDICATE_CLASSES: Mapping[str, type[Predicate]] = {
    KERNEL_V1: KernelPredicate,
    BENCHMARK_V1: BenchmarkPredicate,
    VERIFICATION_V1: VerificationPredicate,
    REPRODUCTION_V1: ReproductionPredicate,
}
SHORT_NAMES: Mapping[str, str] = {
    "kernel": KERNEL_V1, "benchmark": BENCHMARK_V1,
    "verification": VERIFICATION_V1, "reproduction": REPRODUCTION_V1,
}
SPECS: Mapping[str, Obj] = {
    "kernel": KERNEL, "benchmark": BENCHMARK, "verification": VERIFICATION,
    "reproduction": REPRODUCTION,
}


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

"""The rules of `attest.verdicts` (see its docstring): pure, typed predicates in, findings out."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from attest import JSONRejected, strict_loads
from attest.ops import op_bytes, op_flops, shape_key
from attest.predicates import (
    SPEEDUP_REL_TOLERANCE,
    VERDICTS,
    BenchmarkPredicate,
    BenchmarkResult,
    Verdict,
)

__all__ = [
    "FLOOR_MARGIN",
    "HALFWIDTH_WEAK",
    "KNOWN_HARDWARE",
    "MAX_SAMPLES_BYTES",
    "MIN_RUNS",
    "NOISE_CAVEATS",
    "PINNED_BUSY_WEAK",
    "STEAL_WEAK",
    "VERDICTS",
    "Finding",
    "FindingKind",
    "Hardware",
    "Verdict",
    "Weakness",
    "WeaknessKind",
    "contradictions",
    "evidence_findings",
    "floor_findings",
    "noise_only",
    "overall_verdict",
    "samples_findings",
    "weaknesses",
]

# ---- verdicts -----------------------------------------------------------------------------


def overall_verdict(verdicts: Iterable[str]) -> Verdict:
    """Refuted if any claim is; confirmed if there are claims and all are; unsupported if any
    claim is (and none refuted); else inconclusive."""
    seen = list(verdicts)
    if "refuted" in seen:
        return "refuted"
    if seen and all(v == "confirmed" for v in seen):
        return "confirmed"
    if "unsupported" in seen:
        return "unsupported"
    return "inconclusive"


# ---- weak claims ---------------------------------------------------------------------------

STEAL_WEAK = 0.05
"""Steal time above this share (5 %, the share two sittings may differ by and still be "the
same conditions", `verifier.benchmark` STEAL_APART) makes a claim's measurement disturbed."""
PINNED_BUSY_WEAK = 0.25
"""Other work above this share of the claim's pinned CPU (BUSY_APART there) makes it weak."""
FREQ_WEAK = 0.10
"""A claim whose device clocks moved more than this (FREQ_APART) was throttled."""
HALFWIDTH_WEAK = 0.10
"""A speed-up interval wider than +-10 % does not carry a figure (issue 42's rule)."""
MIN_RUNS = 3
"""Fewer independent runs than this cannot show that the runs agree."""

WeaknessKind = Literal["steal", "throttled", "pinned_cpu_busy", "wide_interval", "few_runs"]
WEAKNESS_KINDS: tuple[WeaknessKind, ...] = get_args(WeaknessKind)


@dataclass(frozen=True)
class Weakness:
    """One way a claim's own record says its measurement was disturbed or too thin."""

    kind: WeaknessKind
    shape: str | None
    """The shape key it concerns (None: the whole body)."""
    detail: str

    def describe(self) -> str:
        return self.detail if self.shape is None else f"{{{self.shape}}}: {self.detail}"


def _body_weaknesses(body: BenchmarkPredicate) -> list[Weakness]:
    out: list[Weakness] = []
    cond = body.conditions
    if cond is not None and cond.steal > STEAL_WEAK:
        out.append(Weakness("steal", None, f"its own record says {100 * cond.steal:.0f} % of "
                            f"the CPU was stolen (above {100 * STEAL_WEAK:.0f} %)"))
    if cond is not None and (cond.pinned_cpu_busy or 0.0) > PINNED_BUSY_WEAK:
        out.append(Weakness("pinned_cpu_busy", None, (
            f"its own record says other work used {100 * (cond.pinned_cpu_busy or 0.0):.0f} % "
            f"of its pinned CPU (above {100 * PINNED_BUSY_WEAK:.0f} %)")))
    dev = body.device_conditions
    if dev is not None and dev.throttle:
        out.append(Weakness("throttled", None, "its own record says the device throttled "
                            f"({', '.join(dev.throttle)})"))
    elif dev is not None and dev.sm_clock_max_mhz > 0 and \
            (dev.sm_clock_max_mhz - dev.sm_clock_min_mhz) / dev.sm_clock_max_mhz > FREQ_WEAK:
        out.append(Weakness("throttled", None, (
            f"its own record says the SM clock moved from {dev.sm_clock_max_mhz:.0f} to "
            f"{dev.sm_clock_min_mhz:.0f} MHz (more than {100 * FREQ_WEAK:.0f} %)")))
    runs = body.method.runs or 1
    if runs < MIN_RUNS:
        out.append(Weakness("few_runs", None, f"{runs} independent run(s), fewer than "
                            f"{MIN_RUNS}: nothing shows that its runs agree"))
    return out


def weaknesses(body: BenchmarkPredicate, shape: Mapping[str, int] | None = None
               ) -> tuple[Weakness, ...]:
    """What `body`'s own record says disturbed or thinned its measurement: the whole body's,
    and each result's too-wide interval (only `shape`'s when given). Pure."""
    op = body.workload.op
    out = _body_weaknesses(body)
    want = None if shape is None else shape_key(op, shape)
    for r in body.results:
        key = shape_key(op, r.shape)
        if want is not None and key != want:
            continue
        if r.halfwidth > HALFWIDTH_WEAK:
            lo, hi = r.speedup_ci95
            out.append(Weakness("wide_interval", key, (
                f"its interval [{lo:.3g}, {hi:.3g}] is +-{100 * r.halfwidth:.0f} % of "
                f"{r.speedup:.3g}x, wider than +-{100 * HALFWIDTH_WEAK:.0f} %")))
    return tuple(out)


NOISE_CAVEATS: frozenset[str] = frozenset({"unstable", "runs_disagree"})
"""Caveat kinds that say a measurement is noisy and nothing else: its intervals are wide, or its
runs disagree. The test over runs counts that spread; the other kinds (incomplete accounting, a
throttled device, a batch below resolution, unproven late work) say the figures themselves may
be wrong, which no interval shows."""


def noise_only(body: BenchmarkPredicate) -> bool:
    """Whether `body` is distrusted for noise alone: not trusted, no fault, and every caveat a
    NOISE_CAVEATS kind (at least one). Such a measurement confirms nothing, and its figure is
    no reproduced one; but the test over its runs, which carries their spread, may still show a
    claim overstated beyond the tolerance, and more runs may narrow it. Pure."""
    return not body.trusted and not body.faults and bool(body.caveats) and \
        all(c.kind in NOISE_CAVEATS for c in body.caveats)


# ---- deterministic evidence ----------------------------------------------------------------

FindingKind = Literal["samples_mismatch", "samples_unreadable", "below_floor", "contradicts"]
FINDING_KINDS: tuple[FindingKind, ...] = get_args(FindingKind)


@dataclass(frozen=True)
class Finding:
    """A claim contradicted by its own evidence, by physics or by another claim of its key."""

    kind: FindingKind
    shape: str | None
    """The shape key it concerns (None: the whole body)."""
    detail: str

    def describe(self) -> str:
        return self.detail if self.shape is None else f"{{{self.shape}}}: {self.detail}"


MAX_SAMPLES_BYTES = 64 << 20
"""Largest raw-samples blob read (the results file limit of `ktl publish`)."""
MAX_SAMPLE_RUNS = 64
MAX_SAMPLES_PER_SHAPE = 1_000_000


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _floats(v: Any, what: str) -> list[float]:
    if not isinstance(v, list) or not v or len(v) > MAX_SAMPLES_PER_SHAPE:
        raise ValueError(f"{what} must be a non-empty list of at most {MAX_SAMPLES_PER_SHAPE}")
    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise ValueError(f"{what} must hold finite numbers")
        out.append(float(x))
    return out


def _sample_runs(blob: bytes) -> list[dict[str, tuple[list[float], list[float]]]]:
    """Each run's {shape key: (kernel_ns, baseline_ns)} of a samples blob (`ktl bench`'s:
    {"runs": [{"op":..., "shapes": [{"shape", "kernel_ns", "baseline_ns", ...}]}]}, or one
    run's body without "runs"). Raises ValueError naming what is malformed."""
    if len(blob) > MAX_SAMPLES_BYTES:
        raise ValueError(f"the samples blob is {len(blob)} bytes, above {MAX_SAMPLES_BYTES}")
    try:
        doc = strict_loads(blob)
    except JSONRejected as exc:
        raise ValueError(f"the samples blob {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("the samples blob must be a JSON object")
    runs = doc.get("runs", [doc])
    if not isinstance(runs, list) or not runs or len(runs) > MAX_SAMPLE_RUNS:
        raise ValueError(f"the samples blob's runs must be a list of 1 to {MAX_SAMPLE_RUNS}")
    out = []
    for i, run in enumerate(runs):
        shapes = run.get("shapes") if isinstance(run, dict) else None
        op = run.get("op") if isinstance(run, dict) else None
        if not isinstance(shapes, list) or not isinstance(op, str):
            raise ValueError(f"the samples blob's run {i} has no op and shapes list")
        got: dict[str, tuple[list[float], list[float]]] = {}
        for s in shapes[:1024]:
            if not isinstance(s, dict) or not isinstance(s.get("shape"), dict):
                raise ValueError(f"the samples blob's run {i} has a shape without dimensions")
            dims = {str(k): v for k, v in s["shape"].items() if isinstance(v, int)}
            got[shape_key(op, dims)] = (_floats(s.get("kernel_ns"), "kernel_ns"),
                                        _floats(s.get("baseline_ns"), "baseline_ns"))
        out.append(got)
    return out


def _close(claimed: float, recomputed: float) -> bool:
    return math.isclose(claimed, recomputed, rel_tol=SPEEDUP_REL_TOLERANCE, abs_tol=1e-9)


def _run_figures(result: BenchmarkResult) -> list[tuple[float, float, int]]:
    """(median_ns, baseline_median_ns, n) of each run a result lists (itself for version 1)."""
    if result.runs is None:
        return [(result.median_ns, result.baseline_median_ns, result.n)]
    return [(r.median_ns, r.baseline_median_ns, r.n) for r in result.runs]


def samples_findings(body: BenchmarkPredicate, blob: bytes) -> tuple[Finding, ...]:
    """Each figure of `body` its own raw samples do not give: every run's median (of the
    kernel and of the baseline, within SPEEDUP_REL_TOLERANCE) and its count of samples. The
    caller checks that `blob` is the one the body names (its sha256). Pure."""
    try:
        runs = _sample_runs(blob)
    except (ValueError, KeyError, TypeError) as exc:
        return (Finding("samples_unreadable", None, f"its raw samples cannot be read: {exc}"),)
    op = body.workload.op
    out: list[Finding] = []
    for r in body.results:
        key = shape_key(op, r.shape)
        figures = _run_figures(r)
        if len(figures) != len(runs):
            out.append(Finding("samples_mismatch", key, f"it lists {len(figures)} run(s), its "
                               f"raw samples hold {len(runs)}"))
            continue
        for i, ((med, base, n), run) in enumerate(zip(figures, runs, strict=True)):
            if key not in run:
                out.append(Finding("samples_mismatch", key,
                                   f"run {i + 1}: its raw samples hold no such shape"))
                break
            ks, bs = run[key]
            km, bm = _median(ks), _median(bs)
            if not (_close(med, km) and _close(base, bm) and n == len(ks)):
                out.append(Finding("samples_mismatch", key, (
                    f"run {i + 1} claims median {med:.4g} ns against a baseline of "
                    f"{base:.4g} ns over {n} samples; its own raw samples give {km:.4g} ns "
                    f"against {bm:.4g} ns over {len(ks)} ({bm / max(km, 1.0):.3g}x, not "
                    f"{base / max(med, 1.0):.3g}x)")))
                break
    return tuple(out[:64])


@dataclass(frozen=True)
class Hardware:
    """A machine class ktl knows the vendor's peak figures of (dense, any precision)."""

    name: str
    match: tuple[str, ...]
    """Lowercase substrings of a device or CPU model naming it."""
    peak_flops: float
    peak_bytes_per_s: float


KNOWN_HARDWARE: tuple[Hardware, ...] = (
    # vendor data sheets, dense, the fastest precision each offers (so the floor is lenient)
    Hardware("NVIDIA H100 SXM", ("h100",), 1.979e15, 3.35e12),
    Hardware("NVIDIA H200", ("h200",), 1.979e15, 4.8e12),
    Hardware("NVIDIA B200", ("b200",), 4.5e15, 8.0e12),
    Hardware("NVIDIA A100", ("a100",), 6.24e14, 2.039e12),
    Hardware("AMD MI300X", ("mi300x",), 2.61e15, 5.3e12),
)
"""The hardware ktl knows; a claim naming none of it is held to the fastest of them."""
FLOOR_MARGIN = 1.5
"""A time is impossible below the floor at this many times the peaks (as attest's
`check_device_floor`: room for peaks a vendor understates)."""
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


CPU_MAX_HZ = 6.5e9
"""Above the fastest clock any CPU core ships with (boost clocks reach about 6.2 GHz)."""
CPU_FLOP_PER_CYCLE = 64
"""fp32 FLOPs per cycle per core at most: two FMA units of 16 lanes (AVX-512), 2 FLOPs each."""
CPU_BYTES_PER_CYCLE = 192
"""Bytes per cycle per core at most: three 64-byte loads from L1 (no memory level is faster)."""


def _hardware_of(body: BenchmarkPredicate) -> tuple[str, float, float]:
    """(what the floor is of, peak FLOP/s, peak bytes/s): the claimed device where ktl knows
    it; a claim on a CPU alone (no device, no GPU named): the most any CPU core does, times
    the threads the kernel was given (at most the claimed cores); else the fastest hardware
    ktl knows."""
    names = [body.environment.cpu_model.lower(), (body.environment.gpu or "").lower()]
    if body.device is not None:
        names.insert(0, body.device.model.lower())
    elif not body.environment.gpu:
        threads = max(1, min(body.method.threads or 1, body.environment.cores))
        return (f"{threads} CPU core(s) ({CPU_MAX_HZ / 1e9:g} GHz, {CPU_FLOP_PER_CYCLE} FLOP "
                f"and {CPU_BYTES_PER_CYCLE} bytes per cycle each, more than any CPU does)",
                threads * CPU_MAX_HZ * CPU_FLOP_PER_CYCLE,
                threads * CPU_MAX_HZ * CPU_BYTES_PER_CYCLE)
    for hw in KNOWN_HARDWARE:
        if any(m in n for m in hw.match for n in names if n):
            return f"the claimed {hw.name}", hw.peak_flops, hw.peak_bytes_per_s
    flops = max(h.peak_flops for h in KNOWN_HARDWARE)
    bw = max(h.peak_bytes_per_s for h in KNOWN_HARDWARE)
    return "any hardware ktl knows", flops, bw


def floor_findings(body: BenchmarkPredicate) -> tuple[Finding, ...]:
    """Each result (and run) whose median is below the physical floor: the op's FLOPs over
    the peak compute or its bytes moved over the peak bandwidth, at FLOOR_MARGIN times the
    peaks of the claimed hardware (or of the fastest ktl knows). Ops outside the catalogue
    have no floor here. Pure."""
    op = body.workload.op
    what, peak_flops, peak_bw = _hardware_of(body)
    size = _DTYPE_BYTES.get(body.workload.dtype, 4)
    out: list[Finding] = []
    for r in body.results:
        flops, nbytes = op_flops(op, r.shape), op_bytes(op, r.shape, size)
        if flops is None or nbytes is None:
            continue
        floor_ns = max(flops / (peak_flops * FLOOR_MARGIN),
                       nbytes / (peak_bw * FLOOR_MARGIN)) * 1e9
        fastest = min(med for med, _, _ in _run_figures(r))
        median = min(r.median_ns, fastest)
        if median < floor_ns:
            out.append(Finding("below_floor", shape_key(op, r.shape), (
                f"a median of {median:.4g} ns is impossible: {nbytes:.4g} bytes and "
                f"{flops:.4g} FLOP take at least {floor_ns:.4g} ns on {what} "
                f"({peak_bw / 1e12:.3g} TB/s, {peak_flops / 1e12:.4g} TFLOP/s, at "
                f"{FLOOR_MARGIN:g}x); it claims {nbytes / median:.3g} GB/s")))
    return tuple(out)


def contradictions(body: BenchmarkPredicate, others: Iterable[BenchmarkPredicate]
                   ) -> tuple[Finding, ...]:
    """Each shape where `body` and another claim (of the same key and digest: the caller
    chooses `others`) give disjoint speed-up intervals for the same op, dtype and threads:
    at most one of them can be true. Pure; at most 64 findings."""
    op = body.workload.op
    mine = {shape_key(op, r.shape): r for r in body.results}
    out: list[Finding] = []
    for other in others:
        if other.workload.op != op or other.workload.dtype != body.workload.dtype or \
                other.method.threads != body.method.threads:
            continue
        for r in other.results:
            key = shape_key(op, r.shape)
            a = mine.get(key)
            if a is None or a is r:
                continue
            (alo, ahi), (blo, bhi) = a.speedup_ci95, r.speedup_ci95
            if ahi < blo or bhi < alo:
                out.append(Finding("contradicts", key, (
                    f"it claims {a.speedup:.3g}x [{alo:.3g}, {ahi:.3g}], another claim of the "
                    f"same key about the same kernel {r.speedup:.3g}x [{blo:.3g}, {bhi:.3g}]: "
                    "the intervals do not overlap, so at most one is true")))
                if len(out) >= 64:
                    return tuple(out)
    return tuple(out)


def evidence_findings(body: BenchmarkPredicate, samples: bytes | None = None,
                      others: Iterable[BenchmarkPredicate] = ()) -> tuple[Finding, ...]:
    """Everything `body`'s own evidence decides: its raw samples (when given), the physical
    floor, and its key's other claims about the same kernel. Pure."""
    found = [*floor_findings(body), *contradictions(body, others)]
    if samples is not None:
        found[:0] = samples_findings(body, samples)
    return tuple(found[:64])


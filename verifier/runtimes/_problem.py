"""A KernelBench problem probed in the sandbox: its sizes, what one call needs, the scale to run at.

`probe_problem(source, budget)` runs `_probe_child.py` (with `_sizes.py` beside it as
`ktl_sizes.py`) in a sandboxed child. The child measures one call at the problem's own
sizes on torch's meta device (nothing allocated), picks smaller values of the problem's
size constants where that call does not fit `budget`, prints that plan, then runs the
model once for real at the values chosen and describes its inputs and outputs. The
parent re-reads the constants itself (pure AST) and accepts only a plan that lowers
those constants. A child that dies says why in numbers: what one call needs, the
limit it ran under and what this machine has (`ProblemTooLarge`), never a bare signal.

Budgets: `CHECK_BUDGET` (what a correctness check runs one call at: about a second of
float64 reference work and tens of MiB) and `bench_budget()` (what this machine can
hold for one call at the problem's own sizes).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import resource
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from verifier.errors import VerifierError
from verifier.runtimes._sizes import (
    Footprint,
    ScalePlan,
    SizeConstant,
    Value,
    published_values,
    size_constants,
)
from verifier.sandbox import Limits, base_env, exception_summary, run_sandboxed

__all__ = [
    "BENCH_ARENA_CALL",
    "CHECK_BUDGET",
    "PROBE_PREFIX",
    "ProbeFailed",
    "ProblemProbe",
    "ProblemTooLarge",
    "SessionMemory",
    "arena_bytes_for",
    "bench_budget",
    "check_budget",
    "machine_memory",
    "matmul_rate",
    "probe_known",
    "probe_problem",
]

PROBE_PREFIX = "KTL-PROBE "
SIZES_PREFIX = "KTL-SIZES "
CHILD = Path(__file__).with_name("_probe_child.py")
SIZES = Path(__file__).with_name("_sizes.py")
MiB = 2**20
CHECK_BUDGET = Footprint(call_bytes=64 * MiB, param_bytes=48 * MiB, flops=2 * 10**9)
"""One call of a correctness check: inputs and outputs within 64 MiB, parameters within
48 MiB (the session's parameter room), at most 2 GFLOP of matmul/convolution (the float64
reference runs at about 1 GFLOP/s per core here)."""
PROBE_MEMORY_FLOOR = 3 * 2**30
MAX_CHECK_PARAMS = 2**30


def check_budget(available: int | None = None) -> Footprint:
    """`CHECK_BUDGET` with the parameters' room following this machine: a sixteenth of the
    memory available (both processes hold the weights, the reference also in float64), at
    least 48 MiB and at most 1 GiB (a whole model's weights are not scaled by its constants)."""
    have = machine_memory() if available is None else available
    return Footprint(CHECK_BUDGET.call_bytes,
                     min(max(have // 16, CHECK_BUDGET.param_bytes), MAX_CHECK_PARAMS),
                     CHECK_BUDGET.flops)


@dataclass(frozen=True)
class SessionMemory:
    """How a torch session is laid out for a problem's footprint, and what its children need."""

    params_room: int
    arena_bytes: int
    extra_address_space: int
    """Beyond a torch child's usual grant: its arena, the weights, the float64 copy."""

    @classmethod
    def of(cls, footprint: Footprint | None, least_arena: int = 256 * MiB) -> SessionMemory:
        if footprint is None:
            return cls(least_arena // 4, least_arena, 0)
        params = (footprint.param_bytes * 9 // 8 + 4 * MiB + 63) // 64 * 64
        calls = max(least_arena * 3 // 4, (3 * footprint.call_bytes + MiB) // MiB * MiB)
        room = max(params, least_arena // 4)
        arena = room + calls
        extra = max(0, arena - least_arena) + 3 * footprint.param_bytes
        return cls(room, arena, extra)


class ProbeFailed(VerifierError):
    """The problem could not be described (it raised, or its process ended without an answer)."""


class ProblemTooLarge(ProbeFailed):
    """One call of the problem does not fit this machine; the message says it in bytes."""

    def __init__(self, message: str, footprint: Footprint | None = None,
                 limit: int = 0) -> None:
        super().__init__(message)
        self.footprint = footprint
        self.limit = limit


def machine_memory() -> int:
    """Bytes of memory available on this machine now (MemAvailable), 0 when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


BENCH_ARENA_CALL = 192 * MiB
"""The most one bench call may hold: its arena (a quarter parameters, the rest a few calls
side by side) then stays within 1 GiB, which a torch child's 4 GiB of address space holds
beside torch's own 1.5 GiB."""


CHECK_KEPT_FACTOR = 128
"""ktl's own process holds up to this many times one call's inputs and outputs during a
quick check: each call's outputs and the reference's, kept in their own width until the
rows are judged, and float64 copies while one is compared (measured: a 3.3 GB peak for a
check of 50 MB calls, 66 times; 6.0 GB, 120 times, when they were kept in float64)."""


def _own_memory(have: int) -> int:
    """What ktl's own process may hold: the memory available, or its RLIMIT_DATA where lower
    (`ktl suite run --memory-limit` sets it on every step)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_DATA)
    return have if soft in (resource.RLIM_INFINITY, -1) or soft <= 0 else min(have, soft)


CEILING_CALL_S = 4.0
"""Seconds of float64 reference work one check call may take where the problem's sizes
cannot be scaled (a check makes 40 to 60 calls, so a few minutes in all)."""


def matmul_rate(dtype: Any, n: int) -> float:
    """One core's FLOP/s at `dtype`, per CPU-second of this process: the best of 3 NumPy
    matmuls of n^2 with BLAS held to one thread. CPU time, not wall time: on a loaded
    machine the wall clock counts time other processes held the cores; one BLAS thread:
    BLAS's threads spin while they wait for each other, and under load that spinning is
    CPU time too (see `verifier.benchmark`'s `machine_peaks`, its other reader)."""
    a = np.random.default_rng(0).standard_normal((n, n)).astype(dtype)
    best = float("inf")
    with threadpool_limits(limits=1, user_api="blas"):
        for _ in range(3):
            t0 = time.process_time()
            np.matmul(a, a)
            best = min(best, max(time.process_time() - t0, 1e-6))
    return 2 * n**3 / best


@lru_cache(maxsize=1)
def float64_rate() -> float:
    """This machine's float64 FLOP/s on one core (`matmul_rate` of 512^2: about 27-39
    GFLOP/s here, as a float64 convolution measures)."""
    return matmul_rate(np.float64, 512)


def check_ceiling(available: int | None = None, rate: float | None = None) -> Footprint:
    """The most one check call may take here where the problem's constants cannot bring it
    within `check_budget`: a sixteenth of the memory available, at most 512 MiB and at most
    what ktl's own process can keep of a check's calls (`CHECK_KEPT_FACTOR`: a larger call
    is refused before the check, in numbers, instead of reaching the memory bound after
    minutes), and the FLOPs this machine's float64 rate (`float64_rate`, or `rate`) does in
    `CEILING_CALL_S` seconds (at least the budget's)."""
    have = machine_memory() if available is None else available
    budget = check_budget(have)
    kept = _own_memory(have) // CHECK_KEPT_FACTOR
    flops = int((float64_rate() if rate is None else rate) * CEILING_CALL_S)
    return Footprint(max(min(have // 16, 512 * MiB, kept), budget.call_bytes),
                     budget.param_bytes, max(flops, budget.flops or 0))


def bench_budget(available: int | None = None) -> Footprint:
    """What one call may need to be run at the problem's own sizes here: inputs and outputs
    within `BENCH_ARENA_CALL` (and a quarter of the memory available: both processes hold
    them), parameters alike (an eighth)."""
    have = machine_memory() if available is None else available
    return Footprint(call_bytes=max(min(have // 4, BENCH_ARENA_CALL), 16 * MiB),
                     param_bytes=max(min(have // 8, BENCH_ARENA_CALL), 16 * MiB))


def _bytes(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / MiB:.1f} MiB"


@dataclass(frozen=True)
class ProblemProbe:
    """What the sandboxed child said, checked: the plan and the description at its values."""

    constants: tuple[SizeConstant, ...]
    plan: ScalePlan
    body: dict[str, Any]
    """The child's description at the plan's values (`ok`, `inputs`, `outputs`, ...), each
    field still to be checked by whoever reads it."""
    estimated: bool
    """The outputs' bytes were estimated (an op without a meta kernel)."""
    past: dict[str, Footprint | None] = field(default_factory=dict)
    """One call's footprint with that size constant alone set to `PAST_BLOCKS` (the others as
    planned); None where the problem does not run there. Only constants the child measured."""


def _footprint(obj: Any) -> Footprint | None:
    if not isinstance(obj, Mapping):
        return None
    vals = [obj.get(k) for k in ("call_bytes", "param_bytes", "flops")]
    ints = [v for v in vals if type(v) is int and 0 <= v < 2**62]
    return Footprint(*ints) if len(ints) == 3 else None


def _value(v: Any) -> Value | None:
    if type(v) is int:
        return v
    if isinstance(v, list) and all(type(x) is int for x in v):
        return tuple(v)
    return None


def _plan(obj: Any, constants: tuple[SizeConstant, ...]) -> ScalePlan:
    """The child's plan, accepted only where it lowers the problem's own scalable constants."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("values"), Mapping):
        raise ProbeFailed("the sandboxed probe's answer is malformed (plan)")
    own = {c.name: c for c in constants}
    values: dict[str, Value] = {}
    for name, raw in obj["values"].items():
        v, c = _value(raw), own.get(name)
        if c is None or v is None or not c.shrinkable or type(v) is not type(c.value):
            raise ProbeFailed(f"the sandboxed probe's plan names {str(name)[:40]!r}, not a "
                              "scalable constant of the problem")
        pairs = zip(v if isinstance(v, tuple) else (v,),
                    c.value if isinstance(c.value, tuple) else (c.value,), strict=False)
        if not all(0 < a <= b for a, b in pairs):
            raise ProbeFailed(f"the sandboxed probe's plan raises {name}")
        values[name] = v
    return ScalePlan(values, published_values(constants), _footprint(obj.get("footprint")),
                     _footprint(obj.get("published_footprint")))


def _too_large(plan: ScalePlan, budget: Footprint, available: int,
               ceiling: Footprint | None = None) -> ProblemTooLarge:
    own = plan.published_footprint
    fp = plan.footprint or own
    need = (f"one call needs {_bytes(own.call_bytes)} of inputs and outputs and "
            f"{_bytes(own.param_bytes)} of parameters"
            + (f" ({own.flops / 1e9:,.1f} GFLOP)" if own.flops else "")) if own else \
        "one call's needs could not be measured"
    smallest = (f"; at the smallest sizes tried ({plan.describe().removeprefix('checked at ')}) "
                f"{_bytes(fp.call_bytes)} and {_bytes(fp.param_bytes)}"
                + (f" ({fp.flops / 1e9:,.1f} GFLOP)" if fp.flops else "")
                if plan.scaled and fp is not None else "")
    return ProblemTooLarge(
        f"{need}{smallest}; the limit is {_bytes(budget.call_bytes)} a call and "
        f"{_bytes(budget.param_bytes)} of parameters"
        + (f", {budget.flops / 1e9:,.1f} GFLOP" if budget.flops else "")
        + (f" (at most {_bytes(ceiling.call_bytes)} and {ceiling.flops / 1e9:,.0f} GFLOP "
           "where the sizes cannot be scaled)" if ceiling and ceiling != budget else "")
        + f"; this machine has {_bytes(available)} available", fp, budget.call_bytes)


def _died(result: Any, limits: Limits, sizes: Mapping[str, Any] | None,
          available: int) -> ProbeFailed:
    """Why the child ended without an answer, in numbers."""
    fp = None
    if sizes is not None and isinstance(sizes.get("plan"), Mapping):
        fp = _footprint(sizes["plan"].get("footprint"))
    need = (f"one call at the sizes run needs about {_bytes(fp.call_bytes)} of inputs and "
            f"outputs and {_bytes(fp.param_bytes)} of parameters" if fp else
            "one call's needs were not measured before it stopped")
    limit = int(getattr(result, "memory_limit", 0) or 0) or (limits.memory_bytes or 0)
    if result.denied_syscall is not None:
        return ProbeFailed(f"the problem called {result.denied_syscall}, which the sandbox "
                           "denies; it was stopped")
    if result.timed_out:
        return ProbeFailed(f"the problem ran past its time limit of {limits.wall_s:.0f} s: {need}")
    if getattr(result, "memory_limited", False) or result.signal == 9:
        return ProblemTooLarge(
            f"the problem's process was killed (signal {result.signal}) after using "
            f"{_bytes(int(result.maxrss_bytes))}: {need}; the memory limit was "
            f"{_bytes(limit)}; this machine has {_bytes(available)} available", fp, limit)
    tail = result.stderr.strip().splitlines()[-1:]
    # the problem is the claimant's code: its last line named by exception class, never quoted
    return ProbeFailed(f"the problem's process exited with status {result.returncode} "
                       f"(signal {result.signal}) without an answer"
                       + (f": {exception_summary(tail[0])}" if tail else ""))


_ProbeKey = tuple[str, Footprint, float, bool]
_PROBED: dict[_ProbeKey, ProblemProbe] = {}
"""The answers of this process's probes, by the exact source and the probe's settings: a
reproduction checks and times one reference again and again (every run of a set, every further
look, both checks), and each probe is a sandboxed child importing torch (5-9 s here) whose
answer depends on nothing else but the ceiling, which only decides whether a call over the
budget is run at all (`_still_fits`). Failures are not kept: they are raised again each time."""
PROBED_MAX = 16


def _probe_key(source: bytes, budget: Footprint, timeout_s: float, scale: bool) -> _ProbeKey:
    return (hashlib.sha256(source).hexdigest(), budget, float(timeout_s), bool(scale))


def _still_fits(probed: ProblemProbe, budget: Footprint, ceiling: Footprint | None) -> bool:
    """Whether a kept answer holds under `ceiling`: its call fits the budget (the ceiling was
    never asked), or fits this ceiling too (the check's ceiling follows the memory free)."""
    fp = probed.plan.footprint
    return fp is None or fp.fits(budget) or (ceiling is not None and fp.fits(ceiling))


def probe_known(source: bytes, budget: Footprint = CHECK_BUDGET, timeout_s: float = 180.0,
                scale: bool = True, ceiling: Footprint | None = None) -> ProblemProbe | None:
    """The answer `probe_problem` would give from this process's memo (a copy), else None."""
    hit = _PROBED.get(_probe_key(source, budget, timeout_s, scale))
    if hit is None or not _still_fits(hit, budget, ceiling):
        return None
    return copy.deepcopy(hit)


def probe_problem(source: bytes, budget: Footprint = CHECK_BUDGET,
                  timeout_s: float = 180.0, scale: bool = True,
                  ceiling: Footprint | None = None) -> ProblemProbe:
    """Describe the problem `source` at sizes whose one call fits `budget` (see the module);
    where its constants cannot get it there (a size written as a literal), the smallest
    sizes tried are taken if they fit `ceiling` (what this machine can run at all);
    `scale=False`: at its own sizes only (a bench), ProblemTooLarge where they do not fit.

    Asked once per exact source and settings in a process (`_PROBED`, at most PROBED_MAX
    answers, the oldest dropped first); a copy is returned, so no caller changes another's."""
    known = probe_known(source, budget, timeout_s, scale, ceiling)
    if known is not None:
        return known
    probed = _probe_now(source, budget, timeout_s, scale, ceiling)
    while len(_PROBED) >= PROBED_MAX:
        del _PROBED[next(iter(_PROBED))]
    _PROBED[_probe_key(source, budget, timeout_s, scale)] = copy.deepcopy(probed)
    return probed


def _probe_now(source: bytes, budget: Footprint = CHECK_BUDGET,
                  timeout_s: float = 180.0, scale: bool = True,
                  ceiling: Footprint | None = None) -> ProblemProbe:
    """`probe_problem` without the memo: one sandboxed child, every time."""
    constants = size_constants(source)
    available = machine_memory()
    memory = max(PROBE_MEMORY_FLOOR, min(available // 2, 2 * budget.call_bytes
                                         + 2 * budget.param_bytes + PROBE_MEMORY_FLOOR))
    limits = Limits(cpu_s=int(timeout_s) + 30, wall_s=timeout_s, address_space=None,
                    open_files=256, stdout_bytes=1024 * 1024, stderr_bytes=1024 * 1024,
                    memory_bytes=memory)
    with tempfile.TemporaryDirectory(prefix="ktl-probe-") as tmp:
        work = Path(tmp)
        (work / "reference.py").write_bytes(source)
        (work / "ktl_probe.py").write_bytes(CHILD.read_bytes())
        (work / "ktl_sizes.py").write_bytes(SIZES.read_bytes())
        # a user name given: glibc's user lookup (torch's flop counter imports reach it) would
        # otherwise ask nscd over a socket, which the sandbox denies
        env = base_env({"OMP_NUM_THREADS": "1", "USER": "ktl-probe", "LOGNAME": "ktl-probe"})
        argv = [sys.executable, "-I", "ktl_probe.py", "reference.py",
                json.dumps({**budget.to_json(), "scale": scale,
                            "hard": (ceiling or budget).to_json()})]
        result = run_sandboxed(argv, work, limits, env)
    sizes = _parse(result.last(SIZES_PREFIX), SIZES_PREFIX)
    line = result.last(PROBE_PREFIX)
    if line is None:
        raise _died(result, limits, sizes, available)
    body = _parse(line, PROBE_PREFIX)
    if body is None or not isinstance(body.get("ok"), bool):
        raise ProbeFailed("the sandboxed probe's answer is malformed")
    plan = _plan(body.get("plan"), constants) if "plan" in body else ScalePlan(
        {}, published_values(constants))
    if body.get("too_large") is True:
        raise _too_large(plan, budget, available, ceiling)
    return ProblemProbe(constants, plan, body, body.get("estimated") is True,
                        _past(body.get("past"), constants))


def _past(obj: Any, constants: tuple[SizeConstant, ...]) -> dict[str, Footprint | None]:
    """The child's footprints past 4,608, kept only for the problem's own constants."""
    if not isinstance(obj, Mapping):
        return {}
    names = {c.name for c in constants}
    return {str(n): _footprint(v) for n, v in list(obj.items())[:64] if n in names}


def _parse(line: str | None, prefix: str) -> dict[str, Any] | None:
    if line is None:
        return None
    try:
        obj = json.loads(line[len(prefix):])
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def arena_bytes_for(footprint: Footprint | None, least: int) -> int:
    """A shared arena that holds the parameters (a quarter of it) and a few calls."""
    if footprint is None:
        return least
    need = max(4 * footprint.param_bytes + 2**20, 4 * footprint.call_bytes * 4 // 3 + 2**20)
    return max(least, 1 << max(20, math.ceil(math.log2(need))))

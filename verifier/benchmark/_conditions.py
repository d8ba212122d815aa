"""The machine's conditions around a benchmark: other load on the pinned CPU, other runnable
tasks, frequency, steal time (the `conditions` of benchmark/v1 and reproduction/v1).

Read by the parent from /proc and /sys, in short probe windows just before and just after
the runs, when nothing of this run is executing, so what the probe sees busy is other
work. Missing files (another OS, a container hiding cpufreq) give None or 0, never an
error: conditions inform a verdict, they are not evidence about the kernel.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MAX_BALLAST", "PROBE_SECONDS", "Apart", "Conditions", "Placement", "conditions_differ",
           "elsewhere", "idlest", "merge", "place_like", "probe", "probe_placed"]

PROBE_SECONDS = 0.25
_STAT = Path("/proc/stat")
_CPUFREQ = Path("/sys/devices/system/cpu")

#: How far two sittings' conditions may be apart and still be "the same conditions".
BUSY_APART = 0.25
RUNNABLE_APART = 0.5
"""Other CPUs kept busy (`elsewhere`): more apart than this, the sittings' conditions differ
(half a CPU: on two cores the whole range is one CPU, busy or not)."""
MAX_BALLAST = 8
"""At most this many spinners a reproducer starts to match a claim's other load."""
FREQ_APART = 0.10
STEAL_APART = 0.05
# What a difference left between two sittings does to a verdict is decided in
# `verifier.reproduce._verdict` (issue 42): it widens the tolerance by the shift measured for
# that kind of difference (`MARGIN_FOR`: a shared pinned CPU moved sum-rows' speed-up 10 to
# 20 %, other CPUs kept busy up to 11 %, docs/performance.md) instead of holding the verdict back.
# A reproducer still measures under the claim's conditions where it can (`place_like`:
# spinners of its own on the pinned CPU and on others), and then no margin is added.


@dataclass(frozen=True)
class Apart:
    """One way two sittings' conditions are further apart than "the same conditions"."""

    key: str
    """The `conditions` field (pinned_cpu_busy, runnable, freq_mhz, steal)."""
    what: str
    claimed: str
    here: str

    def describe(self) -> str:
        return f"{self.what} {self.claimed} claimed, {self.here} here"


@dataclass(frozen=True)
class Conditions:
    pinned_cpu_busy: float | None
    runnable: float
    load_1m: float
    freq_mhz: float | None
    steal: float
    cores: int

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"runnable": round(self.runnable, 3),
                               "load_1m": round(self.load_1m, 3), "steal": round(self.steal, 4),
                               "cores": self.cores}
        if self.pinned_cpu_busy is not None:
            out["pinned_cpu_busy"] = round(self.pinned_cpu_busy, 4)
        if self.freq_mhz is not None:
            out["freq_mhz"] = round(self.freq_mhz, 1)
        return out


def _cpu_times() -> dict[str, list[int]]:
    """cpu line name -> its jiffies (user nice system idle iowait irq softirq steal ...)."""
    out: dict[str, list[int]] = {}
    try:
        text = _STAT.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        if line.startswith("cpu"):
            name, *fields = line.split()
            out[name] = [int(x) for x in fields if x.isdigit()]
    return out


def _procs_running() -> int:
    try:
        for line in _STAT.read_text().splitlines():
            if line.startswith("procs_running"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _freq_mhz() -> float | None:
    freqs = []
    for path in _CPUFREQ.glob("cpu[0-9]*/cpufreq/scaling_cur_freq"):
        try:
            freqs.append(int(path.read_text().strip()) / 1000.0)
        except (OSError, ValueError):
            continue
    return sum(freqs) / len(freqs) if freqs else None


def _busy(before: Sequence[int], after: Sequence[int]) -> tuple[float, float]:
    """(non-idle share, steal share) of one cpu line's time between two reads."""
    delta = [b - a for a, b in zip(before, after, strict=False)]
    total = sum(delta[:8]) if len(delta) >= 8 else sum(delta)
    if total <= 0:
        return 0.0, 0.0
    idle = delta[3] + (delta[4] if len(delta) > 4 else 0)
    steal = delta[7] if len(delta) > 7 else 0
    return max(0.0, (total - idle) / total), max(0.0, steal / total)


def elsewhere(runnable: float, pinned_cpu_busy: float | None, cores: int | None) -> float:
    """How many of the other CPUs other work kept busy: the runnable tasks less the load on
    the pinned CPU, at most every other CPU (more tasks than CPUs queue; they cannot make a
    CPU busier than busy, and a claim cannot have had more CPUs busy than it had; None: no
    core count recorded, no cap). Pure."""
    others = max(0.0, float(runnable) - float(pinned_cpu_busy or 0.0))
    return others if cores is None else min(others, float(max(0, cores - 1)))


def _num(m: Mapping[str, Any], k: str) -> float | None:
    """A `conditions` body's number at `k` (None: absent or not a number)."""
    v = m.get(k)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _elsewhere_in(conditions: Mapping[str, Any]) -> float | None:
    """`elsewhere` of a `conditions` body (None: no runnable count in it)."""
    runnable, cores = _num(conditions, "runnable"), _num(conditions, "cores")
    if runnable is None:
        return None
    return elsewhere(runnable, _num(conditions, "pinned_cpu_busy"),
                     None if cores is None else int(cores))


@dataclass(frozen=True)
class Placement:
    """Where a reproducer runs so that its sitting's conditions are the claim's: the CPU the
    runs are pinned to and the CPUs it keeps busy with spinners of its own (the claim was
    measured while that many other CPUs were busy, this machine has fewer busy now)."""

    cpu: int
    ballast: tuple[int, ...] = ()
    why: str | None = None
    """What was matched, for the reproduction's notes (None: nothing to match)."""


def place_like(claimed: Mapping[str, Any] | None, busy: Mapping[int, float]) -> Placement:
    """The run's CPU (the idlest: a reproducer never moves onto other work's CPU, which would
    change the conditions it is trying to keep) and the spinners that make this machine's load
    like the claim's where it is quieter: one on the run's own CPU if the claim's pinned CPU
    was busy, and one on each of as many idle other CPUs as the claim had more of them busy
    (`elsewhere`; at most MAX_BALLAST in all). Where this machine is busier than the claim's,
    nothing can be taken away: the difference stays, and `conditions_differ` names it.
    `busy` is each allowed CPU's share used by other work in a probe. Pure."""
    if not busy:
        raise ValueError("place_like needs at least one CPU")
    cpu = idlest(busy)
    want = None if not claimed else _elsewhere_in(claimed)
    if claimed is None or want is None:
        return Placement(cpu)
    pinned_c = _num(claimed, "pinned_cpu_busy") or 0.0
    here = sum(b for c, b in busy.items() if c != cpu)
    idle = [c for c in sorted(busy, key=lambda c: (busy[c], -c)) if c != cpu and busy[c] < 0.5]
    others = idle[:max(0, min(round(want - here), MAX_BALLAST))]
    own = pinned_c >= 0.5 and busy[cpu] < 0.5 and len(others) < MAX_BALLAST
    ballast = tuple(sorted([*others, *([cpu] if own else [])]))
    if not ballast:
        return Placement(cpu)
    parts = []
    if own:
        parts.append(f"the runs' CPU {cpu} shared with a spinner (other load on the pinned CPU "
                     f"{100 * pinned_c:.0f} % claimed, {100 * busy[cpu]:.0f} % here)")
    if others:
        parts.append(f"{len(others)} other CPU(s) ({', '.join(map(str, sorted(others)))}) kept "
                     f"busy by spinners ({want:.1f} other CPU(s) busy claimed, {here:.1f} here)")
    return Placement(cpu, ballast, f"spinners of this reproducer's own: {'; '.join(parts)}")


def probe(cpu: int | None, seconds: float = PROBE_SECONDS) -> Conditions:
    """Sample the machine for `seconds` (this process sleeping): what is busy is others."""
    return _probe(cpu, seconds)[1]


def idlest(busy: Mapping[int, float]) -> int:
    """The CPU other work used least (ties: the highest, the old fixed choice). Pure."""
    if not busy:
        raise ValueError("idlest needs at least one CPU")
    return min(busy, key=lambda c: (busy[c], -c))


def probe_placed(cpus: Sequence[int] | frozenset[int] | set[int],
                 like: Mapping[str, Any] | None, seconds: float = PROBE_SECONDS
                 ) -> tuple[Placement, Conditions]:
    """One probe window over every CPU of `cpus`: where to run like the claimed conditions
    `like` (`place_like`; None: the idlest CPU) and the conditions seen from that CPU."""
    allowed = sorted(cpus)
    if not allowed:
        raise ValueError("probe_placed needs at least one CPU")
    busy, seen = _probe(None, seconds, allowed)
    placed = place_like(like, busy) if busy else Placement(allowed[-1])
    return placed, _probe_result(busy.get(placed.cpu), seen)


def _probe(cpu: int | None, seconds: float, every: Sequence[int] = ()
           ) -> tuple[dict[int, float], Conditions]:
    """(busy share of each CPU of `every` [and `cpu`], the conditions seen from `cpu`)."""
    t0 = _cpu_times()
    running = [_procs_running()]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(seconds / 5)
        running.append(_procs_running())
    t1 = _cpu_times()
    busy = {c: _busy(t0[f"cpu{c}"], t1[f"cpu{c}"])[0]
            for c in {*every, *([] if cpu is None else [cpu])}
            if f"cpu{c}" in t0 and f"cpu{c}" in t1}
    steal = _busy(t0["cpu"], t1["cpu"])[1] if "cpu" in t0 and "cpu" in t1 else 0.0
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    # procs_running counts this process while it reads the file
    others = max(0.0, sum(running) / len(running) - 1.0)
    seen = Conditions(None, others, load, _freq_mhz(), steal, os.cpu_count() or 1)
    return busy, _probe_result(None if cpu is None else busy.get(cpu), seen)


def _probe_result(pinned: float | None, seen: Conditions) -> Conditions:
    return dataclasses.replace(seen, pinned_cpu_busy=pinned)


def merge(a: Conditions, b: Conditions) -> Conditions:
    """The conditions over a run from the probes before and after it (their means)."""
    def mean(x: float | None, y: float | None) -> float | None:
        vals = [v for v in (x, y) if v is not None]
        return sum(vals) / len(vals) if vals else None

    return Conditions(mean(a.pinned_cpu_busy, b.pinned_cpu_busy), (a.runnable + b.runnable) / 2,
                      b.load_1m, mean(a.freq_mhz, b.freq_mhz), (a.steal + b.steal) / 2, b.cores)


def conditions_differ(claimed: Mapping[str, Any] | None, here: Mapping[str, Any] | None
                      ) -> list[Apart]:
    """Each way two sittings' conditions are apart past its threshold (empty: comparable,
    or one side did not record them); `verifier.reproduce` widens its tolerance by each."""
    if not claimed or not here:
        return []
    out: list[Apart] = []
    pairs = [("pinned_cpu_busy", BUSY_APART, "other load on the pinned CPU", True),
             ("steal", STEAL_APART, "steal time", True)]
    for key, apart, what, share in pairs:
        a, b = _num(claimed, key), _num(here, key)
        if a is not None and b is not None and abs(a - b) > apart:
            out.append(Apart(key, what, _fmt(a, share), _fmt(b, share)))
    # tasks sharing the pinned CPU are the row above's; what is left kept other CPUs busy
    ea, eb = _elsewhere_in(claimed), _elsewhere_in(here)
    if ea is not None and eb is not None and abs(ea - eb) > RUNNABLE_APART:
        out.append(Apart("runnable", "other CPUs kept busy by other work", _fmt(ea, False),
                         _fmt(eb, False)))
    fa, fb = _num(claimed, "freq_mhz"), _num(here, "freq_mhz")
    if fa and fb and abs(fa - fb) / max(fa, fb) > FREQ_APART:
        out.append(Apart("freq_mhz", "CPU frequency", f"{fa:.0f} MHz", f"{fb:.0f} MHz"))
    return out


def _fmt(value: float, share: bool) -> str:
    return f"{100 * value:.0f} %" if share else f"{value:.1f}"

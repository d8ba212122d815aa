"""Frama-C EVA over every dimension in [0, 2^31-1]: the index arithmetic's integer alarms.

Only EVA's signed and unsigned overflow, division-by-zero and shift alarms are read, and only
in the kernel's own files: its memory alarms at symbolic sizes are false (it cannot relate
`r*C+c` to a buffer of R*C elements). The report is EVA's CSV on stdout, read here once into
typed `Alarm`s. `#pragma omp` lines are blanked before (Frama-C 25 cannot parse
`#pragma omp ... if(...)`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verifier.errors import SandboxError
from verifier.proofs._esbmc import READ_ONLY
from verifier.proofs._tools import Tool
from verifier.sandbox import Limits, run_sandboxed

__all__ = ["ALARM_KINDS", "Alarm", "Analysis", "parse_report", "run_eva"]

ALARM_KINDS = ("signed_overflow", "unsigned_overflow", "division_by_zero", "shift")
"""The EVA property kinds read as findings; every other kind is ignored."""
MAX_ALARMS = 32
_WIDE_LIMITS = ("≤ 9223372036854775807", "≥ -9223372036854775808", "≤ 18446744073709551615")
FRAMA_C_READS = ("/etc/ocamlfind.conf",)


@dataclass(frozen=True)
class Alarm:
    """One possible fault: where, what kind, and the assertion EVA could not prove."""

    file: str
    line: int
    kind: str
    expression: str

    @property
    def wide(self) -> bool:
        """An alarm at a 64-bit limit: with every dimension at most 2^31-1 a loop bounded by
        one cannot reach it; EVA raises it when it widens a loop counter past its bound (it
        does not relate `c` to `C` in `c + 8 <= C`). Listed, not counted."""
        return self.expression.endswith(_WIDE_LIMITS)

    def text(self) -> str:
        what = {"signed_overflow": "overflow", "unsigned_overflow": "unsigned wrap",
                "division_by_zero": "division by zero", "shift": "shift"}[self.kind]
        return f"possible {what} at {self.file}:{self.line}: {self.expression}"


@dataclass(frozen=True)
class Analysis:
    """What one EVA run concluded: alarms (empty: none), or why it concluded nothing."""

    alarms: tuple[Alarm, ...]
    cpu_s: float
    failed: str | None = None

    @property
    def counted(self) -> tuple[Alarm, ...]:
        return tuple(a for a in self.alarms if not a.wide)

    @property
    def wide(self) -> tuple[Alarm, ...]:
        return tuple(a for a in self.alarms if a.wide)


def parse_report(lines: Sequence[str], files: Sequence[str]) -> tuple[Alarm, ...] | None:
    """Alarms from `-report-csv` rows (tab-separated: directory, file, line, function, kind,
    status, property) in `files`; None when no CSV header was printed (no analysis)."""
    header = False
    found: dict[tuple[str, int, str, str], Alarm] = {}
    for raw in lines:
        cells = raw.split("\t")
        if cells[:3] == ["directory", "file", "line"]:
            header = True
            continue
        if len(cells) != 7 or cells[1] not in files or cells[4] not in ALARM_KINDS:
            continue
        if cells[5] in ("Valid", "Considered valid") or not cells[2].isdigit():
            continue
        expression = "".join(ch if ch.isprintable() else " " for ch in cells[6])[:160]
        alarm = Alarm(cells[1], int(cells[2]), cells[4], expression)
        found.setdefault((alarm.file, alarm.line, alarm.kind, alarm.expression), alarm)
    if not header:
        return None
    return tuple(sorted(found.values(), key=lambda a: (a.file, a.line, a.kind)))[:MAX_ALARMS]


def reached_end(lines: Sequence[str], entry: str) -> bool:
    """Whether EVA computed a state at the end of `entry`: an analysis whose every path died
    (say, at a read it judged invalid) proves nothing and reports no alarm after that point."""
    return any(line.strip() == f"[eva:final-states] Values at end of function {entry}:"
               for line in lines)


def run_eva(tool: Tool, workdir: Path, files: Sequence[str], kernel_files: Sequence[str],
            entry: str, cpu_s: int) -> Analysis:
    """EVA on `files` (the harness first) in the compiler's sandbox under a CPU limit."""
    argv = [str(tool.path), "-eva", "-machdep", "x86_64", "-warn-unsigned-overflow",
            "-eva-no-alloc-returns-null", *files, "-then", "-report-csv", "/dev/stdout"]
    limits = Limits(cpu_s=max(1, cpu_s), wall_s=max(1, cpu_s) * 8.0 + 60.0,
                    address_space=3 * 2**30, file_size=64 * 2**20, open_files=128,
                    processes=16, stdout_bytes=8 * 2**20, stderr_bytes=4 * 2**20)
    try:
        result = run_sandboxed(argv, workdir, limits,
                               system=(*READ_ONLY, *FRAMA_C_READS, *tool.reads))
    except SandboxError as exc:
        return Analysis((), 0.0, f"the tool could not start: {exc}"[:300])
    if result.timed_out or result.cpu_s >= limits.cpu_s - 0.5:
        return Analysis((), result.cpu_s, f"out of time: the CPU limit of {cpu_s} s was reached")
    alarms = parse_report([line for _, line in result.lines], kernel_files)
    if result.returncode != 0 or alarms is None:
        said = [line for _, line in result.lines if "error" in line.lower()][:1]
        why = result.describe(limits).split(" (stderr", 1)[0]
        detail = said[0][:200] if said else why
        return Analysis((), result.cpu_s, f"Frama-C could not analyse the source: {detail}")
    if not reached_end([line for _, line in result.lines], entry):
        return Analysis(alarms, result.cpu_s, f"the analysis never reached the end of {entry} "
                        "(every path stopped at a definite fault or does not terminate)")
    return Analysis(alarms, result.cpu_s)

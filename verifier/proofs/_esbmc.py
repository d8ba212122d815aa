"""ESBMC on a generated harness: find a bug first, then prove within the bounds.

`--falsification` (incremental unwinding, base case only) finds a shallow bug in seconds
where a plain check of the full unwinding may not answer in ten minutes; then the full
unwinding to bound + 1 with unwinding assertions proves. malloc is assumed to succeed
(`--force-malloc-success`): a kernel's unchecked scratch allocation is not a finding here. Default checks (bounds, pointers,
division by zero) plus `--ub-shift-check`; never `--overflow-check` (it also asserts IEEE
float overflow: false alarms on float kernels). The tool's text is read here, once, into a
typed `Finding`; nothing outside this module looks at it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from verifier.errors import SandboxError
from verifier.proofs._tools import Tool
from verifier.sandbox import ChildResult, Limits, run_sandboxed

__all__ = ["READ_ONLY", "Finding", "Verdict", "parse", "run_esbmc"]

Verdict = Literal["proved", "refuted", "unknown", "inconclusive", "out_of_time"]
READ_ONLY = ("/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/ld.so.conf",
             "/etc/ld.so.conf.d", "/dev/zero", "/dev/urandom")
"""What a proof tool may read besides its own folder and the kernel's: the system's
toolchain and headers, as the compiler (no /proc, /sys, /home, nor the rest of /etc)."""
MEMORY = 4 * 2**30
_VERDICT = re.compile(r"^VERIFICATION (SUCCESSFUL|FAILED|UNKNOWN)$")
_WHERE = re.compile(r"^\s*file (?P<file>\S{1,256}) line (?P<line>\d{1,7})"
                    r"(?: column \d+)?(?: function (?P<function>\S{1,128}))?")
_ASSIGN = re.compile(r"^\s*ktl_(?P<dim>[A-Za-z_]\w{0,15}) = (?P<value>-?\d{1,20})\b")
_ERROR = re.compile(r"^(?:ERROR|error): ?(?P<message>.{0,200})")


@dataclass(frozen=True)
class Finding:
    """What one ESBMC run concluded: its verdict, why, and for a bug its shape and place."""

    verdict: Verdict
    why: str
    cpu_s: float
    shape: Mapping[str, int] | None = None
    file: str | None = None
    line: int | None = None
    function: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def _violation(lines: Sequence[str]) -> tuple[re.Match[str] | None, str]:
    for i, line in enumerate(lines):
        if line.strip() == "Violated property:":
            where = _WHERE.match(lines[i + 1]) if i + 1 < len(lines) else None
            what = lines[i + 2].strip() if i + 2 < len(lines) else ""
            return where, what[:200]
    return None, ""


def parse(text: str, dims: Sequence[str], cpu_s: float) -> Finding:
    """ESBMC's report (stdout and stderr together) as a Finding."""
    lines = text.splitlines()
    verdict = next((m.group(1) for m in map(_VERDICT.match, reversed(lines)) if m), None)
    if verdict == "SUCCESSFUL":
        return Finding("proved", "no violation within the bounds, every loop fully unwound",
                       cpu_s)
    if verdict == "UNKNOWN":
        return Finding("unknown", "no bug found by incremental unwinding", cpu_s)
    if verdict == "FAILED":
        where, what = _violation(lines)
        shape: dict[str, int] = {}
        for line in lines:
            hit = _ASSIGN.match(line)
            if hit and hit.group("dim") in dims and hit.group("dim") not in shape:
                shape[hit.group("dim")] = int(hit.group("value"))
        if "unwinding assertion" in what:
            return Finding("inconclusive", "a loop runs more often than the bounds + 1 "
                           "unwindings (constant trip counts past the bound are not unrolled)",
                           cpu_s, shape or None)
        return Finding("refuted", what or "a property failed", cpu_s,
                       shape if set(shape) == set(dims) else None,
                       where.group("file") if where else None,
                       int(where.group("line")) if where else None,
                       where.group("function") if where else None)
    errors = [m.group("message") for m in map(_ERROR.match, lines) if m]
    return Finding("inconclusive", "the tool gave no verdict"
                   + (f": {errors[0]}" if errors else ""), cpu_s)


@dataclass(frozen=True)
class Run:
    """One ESBMC run: its files (relative to `workdir`), mode and CPU limit."""

    tool: Tool
    workdir: Path
    files: tuple[str, ...]
    dims: tuple[str, ...]
    bounds: Mapping[str, int]

    def argv(self, mode: Literal["falsify", "prove"]) -> list[str]:
        deepest = max(self.bounds.values(), default=0) + 1
        steps = (["--falsification", "--max-k-step", str(deepest)] if mode == "falsify"
                 else ["--unwind", str(deepest)])
        return [str(self.tool.path), *self.files, "--ub-shift-check", "--force-malloc-success",
                "--bitwuzla", *steps]


def _limits(cpu_s: int) -> Limits:
    return Limits(cpu_s=max(1, cpu_s), wall_s=max(1, cpu_s) * 8.0 + 60.0,
                  address_space=MEMORY, file_size=64 * 2**20, open_files=64, processes=16,
                  stdout_bytes=4 * 2**20, stderr_bytes=8 * 2**20)


def _killed(result: ChildResult, limits: Limits) -> str | None:
    if result.timed_out or result.cpu_s >= limits.cpu_s * 0.9 or result.signal == 24:
        return f"out of time: the CPU limit of {limits.cpu_s} s was reached"
    if result.signal is not None and result.maxrss_bytes > MEMORY // 2:
        return (f"out of memory: the tool reached {result.maxrss_bytes // 2**20} MiB of its "
                f"{MEMORY // 2**20} MiB")
    if result.signal is not None or result.output_excess is not None:
        return result.describe(limits).split(" (stderr", 1)[0]
    return None


def run_esbmc(run: Run, mode: Literal["falsify", "prove"], cpu_s: int) -> Finding:
    """ESBMC in the compiler's sandbox under a CPU limit; a kill is `inconclusive`."""
    limits = _limits(cpu_s)
    try:
        result = run_sandboxed(run.argv(mode), run.workdir, limits,
                               system=(*READ_ONLY, *run.tool.reads))
    except SandboxError as exc:
        return Finding("inconclusive", f"the tool could not start: {exc}"[:300], 0.0)
    killed = _killed(result, limits)
    if killed is not None:
        return Finding("out_of_time", killed, result.cpu_s)
    text = "\n".join(line for _, line in result.lines) + "\n" + result.stderr
    return parse(text, run.dims, result.cpu_s)

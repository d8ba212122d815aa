"""`ktl check`'s sanitizer rows: ASan+UBSan and TSan builds of the kernel, run on driver
cases in the sandbox; their reports become typed rows."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attest.predicates import Check, FaultKind
from attest.text import plural
from verifier.checks._plan import aligned_shape, mid_shape
from verifier.checks._report import F32, Budget, check_row, make_fault, shape_text
from verifier.errors import BuildError, RuntimeUnavailableError
from verifier.kernel import KernelSpec
from verifier.ops import OpSpec
from verifier.progress import Progress
from verifier.runtimes import Audit, get_runtime, write_driver_cases
from verifier.sandbox import (
    ChildResult,
    Limits,
    base_env,
    names_summary,
    run_sandboxed,
    stderr_summary,
    text_summary,
)

__all__ = ["Sanitizing", "asan_check", "sanitizer_cases", "sanitizer_rows", "tsan_check"]


_ASAN_ERR = re.compile(r"ERROR: AddressSanitizer: ([\w-]+)")
_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+)", re.M)
_UBSAN_ERR = re.compile(r"([\w./-]+:\d+:\d+): runtime error: (.*)")
_FRAME = re.compile(r"#\d+ 0x[0-9a-f]+ in (\S+) (\S+)")
_TSAN_FRAME0 = re.compile(r"#0 (\S+) ")


def sanitizer_cases(op: OpSpec, rng: np.random.Generator, count: int) -> list[tuple[dict[str, int], list[F32]]]:
    shapes = [*[dict(s) for s in op.edge_shapes][: max(count - 1, 1)], aligned_shape(op)]
    return [(s, op.random_inputs(s, rng)) for s in shapes[:count]]


def _sanitizer_limits(wall_s: float, step_wall_s: float) -> Limits:
    # no address-space limit (the sanitizers reserve terabytes); the run's cgroup bounds the
    # memory it touches, shared memory included
    return Limits(cpu_s=int(wall_s), wall_s=wall_s, address_space=None, file_size=64 * 2**20,
                  open_files=64, step_wall_s=step_wall_s, memory_bytes=2 * 2**30,
                  private_bytes=2**30)


@dataclass(frozen=True)
class Sanitizing:
    """What both sanitizer rows share: the kernel's manifest (each row builds its own
    variant), its op, the folder they build and run in and the child's wall-clock limits
    (the whole run, one step)."""

    spec: KernelSpec
    op: OpSpec
    workdir: Path
    wall_s: float
    step_wall_s: float

    def limits(self) -> Limits:
        return _sanitizer_limits(self.wall_s, self.step_wall_s)


def _run_sanitizer(
    run: Sanitizing, variant: str, cases: list[tuple[dict[str, int], list[F32]]],
) -> tuple[str, str, ChildResult | None]:
    op, workdir = run.op, run.workdir
    art = get_runtime(run.spec.runtime).build(run.spec, variant, workdir)
    data = workdir / f"{variant}-cases.bin"
    write_driver_cases(data, op, cases)
    env = base_env({
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=66:allocator_may_return_null=1:"
                        "hard_rss_limit_mb=1536:detect_stack_use_after_return=0",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=67",
        "TSAN_OPTIONS": "halt_on_error=0:exitcode=0:report_signal_unsafe=0:history_size=2",
        "OMP_NUM_THREADS": "4",
    })
    limits = run.limits()
    run_dir = workdir / f"{variant}-run"  # its own empty folder: a tmpfs in the sandbox
    run_dir.mkdir(exist_ok=True)
    result = run_sandboxed([str(art.path), str(data)], run_dir, limits, env,
                           readable=[workdir], gpu=art.gpu)
    shown = [line for _, line in result.lines if line.startswith("KTL-CASE ")]
    case_no = int(shown[-1].split()[1]) if shown else 0
    shape = shape_text(cases[min(case_no, len(cases) - 1)][0])
    return shape, result.stderr, result if not result.ok else None


def asan_check(run: Sanitizing, cases: list[tuple[dict[str, int], list[F32]]]) -> Check:
    inputs = {"shapes": [c[0] for c in cases]}
    name = "sanitizer.asan_ubsan"
    try:
        shape, stderr, failed = _run_sanitizer(run, "asan", cases)
    except BuildError as exc:
        return check_row(name, "error", f"sanitizer build failed: {exc}"[:500], inputs)
    except RuntimeUnavailableError as exc:
        return check_row(name, "skip", f"not run: {exc}"[:500], inputs)
    if "rss limit exhausted" in stderr or "out of memory" in stderr:
        return check_row(name, "fail", "unbounded allocation: AddressSanitizer's memory limit "
                           f"(1536 MiB RSS) exhausted on shape {shape}", inputs, {},
                           make_fault("unbounded_alloc"))
    asan = _ASAN_ERR.search(stderr)
    if asan:
        access = _ACCESS.search(stderr)
        frames = _frames(_FRAME.findall(stderr)[:2], run.spec.sources)
        what = f"{access.group(1)} of size {access.group(2)}" if access else ""
        read = bool(access and access.group(1) == "READ")
        found: FaultKind = "oob_read" if read else "oob_write"
        kind = "out-of-bounds read" if read else "out-of-bounds write"
        if "overflow" not in asan.group(1):
            kind, found = "memory error", "memory_error"
        return check_row(name, "fail",
                           f"{kind}: AddressSanitizer {asan.group(1)} {what} in "
                           f"{frames} on shape {shape}", inputs, {}, make_fault(found))
    ub = _UBSAN_ERR.search(stderr)
    if ub:
        return check_row(name, "fail", f"undefined behaviour: UBSan at "
                           f"{_where(ub.group(1), run.spec.sources)}: {_ub_kind(ub.group(2))} "
                           f"on shape {shape}", inputs, {},
                           make_fault("undefined_behaviour"))
    if failed is not None:
        return check_row(name, "fail", f"{failed.describe(run.limits())} "
                           f"under ASan+UBSan on shape {shape}",
                           inputs, {}, make_fault("crash"))
    return check_row(name, "pass", f"no AddressSanitizer or UBSan report on {plural(len(cases), 'shape')}",
                       inputs)


def _where(location: str, sources: tuple[str, ...]) -> str:
    """`k.c:12:5` when the file is one of the kernel's declared sources (named in its
    manifest), else "a location outside its sources" (the rest of a path is the host's)."""
    file, _, line = location.rpartition("/")[2].partition(":")
    numbers = line.split(":")
    ok = file in {Path(s).name for s in sources} and all(n.isdigit() for n in numbers)
    return f"{file}:{line}"[:80] if ok else "a location outside its sources"


def _frames(found: list[tuple[str, str]], sources: tuple[str, ...]) -> str:
    """The top frames of a sanitizer report: where in the kernel's sources, and the
    functions' names only as a count and digest (the kernel's symbols are its words)."""
    if not found:
        return "?"
    places = ", ".join(_where(loc, sources) for _, loc in found)
    return f"{places} ({names_summary([fn for fn, _ in found], 'function names')})"


def _ub_kind(message: str) -> str:
    """UBSan's message as its kind ("signed integer overflow", "shift exponent ..."): the
    text before the first colon or quote, bounded; the rest (types, values) summarised."""
    head = re.split(r"[:'\"]", message, maxsplit=1)[0].strip()
    return f"{head[:80]} ({text_summary(message, 'message')})"


def _tsan_races(stderr: str, openmp: bool) -> list[str]:
    """The functions of the races ThreadSanitizer reports that are real.

    Without OpenMP every report counts (TSan sees pthread create/join). With OpenMP
    only races both of whose accesses are in the same region body count: libgomp is
    not built with ThreadSanitizer, so its barriers are invisible to it and every
    write in a parallel region that the main thread reads after the region is
    reported. Those reports always have one side outside the region body; a real
    race inside a region has both sides in the same `*._omp_fn.N`.
    """
    races = []
    for block in stderr.split("WARNING: ThreadSanitizer: data race")[1:]:
        block = block.split("SUMMARY:")[0]
        tops = _TSAN_FRAME0.findall(block)
        same_region = len(tops) >= 2 and tops[0] == tops[1] and "._omp_fn." in tops[0]
        if tops and (not openmp or same_region):
            races.append(tops[0])
    return races


def tsan_check(run: Sanitizing, cases: list[tuple[dict[str, int], list[F32]]],
               audit: Audit | None = None) -> Check:
    """ThreadSanitizer where the built library starts threads: its imports say so (OpenMP's
    GOMP_/omp_, pthread_create, thrd_create), never a text search of its sources. Without an
    audit (a cuda library), where the manifest asks for OpenMP."""
    name, spec = "sanitizer.tsan", run.spec
    threaded = audit.threaded if audit is not None else "-fopenmp" in spec.flags
    if not threaded:
        return check_row(name, "skip", "the kernel does not start threads: the built library "
                           "imports no OpenMP (GOMP_/omp_), pthread_create or thrd_create")
    openmp = audit.openmp if audit is not None else "-fopenmp" in spec.flags
    inputs = {"shapes": [c[0] for c in cases], "threads": 4}
    try:
        shape, stderr, failed = _run_sanitizer(run, "tsan", cases)
    except BuildError as exc:
        return check_row(name, "error", f"sanitizer build failed: {exc}"[:500], inputs)
    races = _tsan_races(stderr, openmp)
    if races:
        return check_row(name, "fail", f"data race between threads: ThreadSanitizer reports "
                           f"{len(races)} race(s) inside {names_summary(races[:1], 'function')} "
                           f"on shape {shape}", inputs,
                           {"races": float(len(races))}, make_fault("race"))
    if failed is not None:
        if "unexpected memory mapping" in stderr or "FATAL: ThreadSanitizer" in stderr:
            return check_row(name, "skip", "ThreadSanitizer cannot run on this kernel/OS "
                               f"configuration ({stderr_summary(stderr)})", inputs)
        why = failed.describe(run.limits())
        return check_row(name, "fail", f"{why} under TSan on shape {shape}", inputs, {},
                           make_fault("crash"))
    where = "inside parallel regions " if openmp else ""
    return check_row(name, "pass", f"no data race {where}on {plural(len(cases), 'shape')} "
                       "(OMP_NUM_THREADS=4)", inputs)


def sanitizer_rows(run: Sanitizing, plan: Budget, rng: np.random.Generator, progress: Progress,
                   audit: Audit | None = None) -> list[Check]:
    """The ASan+UBSan row, then the TSan row, on the budget's driver cases."""
    op = run.op
    progress("AddressSanitizer + UBSan build")
    san_cases = sanitizer_cases(op, rng, plan.asan_shapes)
    asan = asan_check(run, san_cases)
    progress("ThreadSanitizer build")
    tsan_cases = [(mid_shape(op), op.random_inputs(mid_shape(op), rng))]
    if plan.tsan_shapes > 1:
        tsan_cases.append((aligned_shape(op), op.random_inputs(aligned_shape(op), rng)))
    tsan = tsan_check(run, tsan_cases, audit)
    return [asan, tsan]

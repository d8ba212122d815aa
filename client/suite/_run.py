"""Running a suite: each entry imported, checked and benchmarked by `ktl` subprocesses.

Each step is its own `ktl` process (a crash or a hang of one entry is that entry's row,
never the end of the run), pinned to the one CPU its job owns. An entry's result is
written to `<out>/entries/<level>__<name>.json` (atomically) when it is done; a run that
finds that file skips the entry, so an interrupted run resumes where it stopped. The
kernel folders stay in `<out>/kernels/` for `ktl publish` and `ktl reproduce`.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attest.predicates import row_limits
from client.errors import EXIT_MEMORY, InputError, SuiteInterrupted
from client.suite._entries import (
    REFUSALS,
    Entry,
    EntryResult,
    SuiteSettings,
    discover,
    shard_of,
)

__all__ = ["EVIDENCE", "Event", "entry_path", "evidence_dir", "load_results", "run_entry",
           "run_suite", "usable_cpus"]

KTL = (sys.executable, "-c", "from client.cli import main; main()")
MAX_REASON = 600
RESULTS = "entries"
EVIDENCE = "evidence"
"""`<out>/evidence/<level>__<name>/`: what `ktl check --json` and `ktl bench --json
--samples-out` printed for the entry, as `ktl publish` takes them (`ktl suite publish`)."""


@dataclass(frozen=True)
class Event:
    """Progress: `done` of `total` entries finished; `current` is what the jobs are on now."""

    done: int
    total: int
    current: tuple[str, ...]
    last: EntryResult | None = None


def usable_cpus() -> list[int]:
    """The CPUs this process may run on."""
    return sorted(os.sched_getaffinity(0))


def entry_path(out: Path, entry: Entry) -> Path:
    return out / RESULTS / f"{entry.file_key}.json"


def evidence_dir(out: Path, file_key: str) -> Path:
    return out / EVIDENCE / file_key


def _keep(folder: Path, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")


class _Live:
    """The `ktl` steps running now, so that an interrupted run can stop them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.procs: set[subprocess.Popen[str]] = set()

    def add(self, proc: subprocess.Popen[str]) -> None:
        with self.lock:
            self.procs.add(proc)

    def discard(self, proc: subprocess.Popen[str]) -> None:
        with self.lock:
            self.procs.discard(proc)

    def stop_all(self, grace_s: float = 5.0) -> None:
        """SIGTERM every running step, then SIGKILL what is left after `grace_s`."""
        with self.lock:
            procs = list(self.procs)
        for proc in procs:
            proc.terminate()
        deadline = time.monotonic() + grace_s
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()


LIVE = _Live()


def _ktl(args: Sequence[str], cpu: int | None, timeout_s: float) -> subprocess.CompletedProcess[str]:
    def pin() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

    argv = [*KTL, *args]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=pin, env={**os.environ, "COLUMNS": "400"}) as proc:
        LIVE.add(proc)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        finally:
            LIVE.discard(proc)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _refuse(result: EntryResult, refusal: str, reason: str) -> None:
    """The entry refused for a limit of this machine (a REFUSALS key), with its reason."""
    result.status, result.refusal, result.reason = "refused", refusal, reason


def _import_refusal(stdout: str) -> str:
    """The typed kind of a failed `ktl import kernelbench --json` (`error.kind`; "problem"
    when it printed none)."""
    body = _json(stdout)
    error = body.get("error") if body is not None else None
    kind = error.get("kind") if isinstance(error, dict) else None
    return kind if isinstance(kind, str) else "problem"


def _memory_reason(stage: str) -> str:
    soft = resource.getrlimit(resource.RLIMIT_DATA)[0]
    return (f"{stage}: ktl's own memory bound ({soft:,} bytes, --memory-limit) was reached "
            "(ktl said so and stopped; not a kill)")


def _error_line(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else "no message")[:MAX_REASON]


def _json(stdout: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(stdout)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _check(result: EntryResult, kernel: Path, settings: SuiteSettings, cpu: int | None) -> bool:
    """Run `ktl check`; True when it passed."""
    result.stage = "check"
    done = _ktl(["check", str(kernel), "--budget", settings.budget, "--json"], cpu,
                settings.timeout_s)
    body = _json(done.stdout)
    if done.returncode == EXIT_MEMORY:
        _refuse(result, "memory_bound", _memory_reason("check"))
        return False
    if body is None or not isinstance(body.get("checks"), list):
        result.status, result.reason = "error", f"ktl check: {_error_line(done.stderr)}"
        return False
    _keep(evidence_dir(settings.out, kernel.name), "verification.json", done.stdout)
    rows = [c for c in body["checks"] if isinstance(c, dict)]
    for c in rows:
        if c.get("name") == "reference" and isinstance(c.get("detail"), str):
            result.sizes = c["detail"].split(";")[0][:300]
        metrics = c.get("metrics")
        if not isinstance(metrics, dict):
            continue
        if c.get("name") == "reference":
            result.scaled = metrics.get("scaled") == 1
        result.findings += [str(k).removeprefix("finding_") for k in metrics
                            if str(k).startswith("finding_")][:16]
    errors = [c for c in rows if c.get("outcome") == "error"]
    failed = [c for c in rows if c.get("outcome") == "fail"]
    result.failed_checks = [str(c.get("name"))[:64] for c in failed + errors][:32]
    if errors:
        reason = f"{errors[0].get('name')}: {str(errors[0].get('detail'))[:MAX_REASON]}"
        # a row in error for a limit of this machine says so in a typed metric
        limits = [k for c in errors if isinstance(c.get("metrics"), dict)
                  for k in row_limits(c["metrics"])]
        if limits:
            _refuse(result, limits[0], reason)
        else:
            result.status, result.reason = "error", reason
        return False
    if failed:
        result.status = "incorrect"
        result.reason = f"{failed[0].get('name')}: {str(failed[0].get('detail'))[:MAX_REASON]}"
        return False
    result.status = "correct"
    return True


def _bench(result: EntryResult, kernel: Path, settings: SuiteSettings, cpu: int | None) -> None:
    result.stage = "bench"
    evidence = evidence_dir(settings.out, kernel.name)
    evidence.mkdir(parents=True, exist_ok=True)
    done = _ktl(["bench", str(kernel), "--json", "--runs", str(settings.bench_runs),
                 "--time-budget", f"{settings.bench_seconds:g}",
                 "--samples-out", str(evidence / "samples.json")], cpu, settings.timeout_s)
    body = _json(done.stdout)
    results = body.get("results") if body else None
    if not isinstance(results, list) or not results or not isinstance(results[0], dict):
        result.trusted = False
        result.reason = _memory_reason("bench") if done.returncode == EXIT_MEMORY else \
            f"ktl bench: {_error_line(done.stderr)}"
        return
    _keep(evidence, "benchmark.json", done.stdout)
    first = results[0]
    speedup, ci = first.get("speedup"), first.get("speedup_ci95")
    result.speedup = float(speedup) if isinstance(speedup, int | float) else None
    result.speedup_ci95 = ([float(x) for x in ci] if isinstance(ci, list) and len(ci) == 2
                           and all(isinstance(x, int | float) for x in ci) else None)
    result.trusted = done.returncode == 0
    if not result.trusted:
        result.reason = f"bench not trusted: {_error_line(done.stderr)}"


def run_entry(entry: Entry, settings: SuiteSettings, cpu: int | None) -> EntryResult:
    """Import, check and (if asked) bench one entry; never raises for the entry's faults."""
    start = time.monotonic()
    result = EntryResult(entry.key, entry.level, entry.problem_id, stage="import")
    try:
        if entry.solution is None:
            result.status, result.reason = "incorrect", "no solution was given for this problem"
            return result
        result.solution_sha256 = hashlib.sha256(entry.solution.read_bytes()).hexdigest()
        kernel = settings.out / "kernels" / entry.file_key
        for stale in (kernel, evidence_dir(settings.out, entry.file_key)):
            if stale.exists():
                shutil.rmtree(stale)  # a run interrupted after the import: imported again
        kernel.parent.mkdir(parents=True, exist_ok=True)
        done = _ktl(["import", "kernelbench", str(entry.problem), str(entry.solution),
                     "--out", str(kernel), "--name", entry.kernel_name, "--json"], cpu,
                    settings.timeout_s)
        if done.returncode == EXIT_MEMORY:
            _refuse(result, "memory_bound", _memory_reason("import"))
            return result
        if done.returncode != 0:
            # which side failed is the import's typed `error.kind`, never its message's words
            kind, reason = _import_refusal(done.stdout), f"import: {_error_line(done.stderr)}"
            if kind == "solution":
                result.status, result.reason = "incorrect", reason
            else:
                _refuse(result, kind if kind in REFUSALS else "problem", reason)
            return result
        if _check(result, kernel, settings, cpu) and settings.bench:
            benched = time.monotonic()
            try:
                _bench(result, kernel, settings, cpu)
            finally:
                result.bench_seconds = round(time.monotonic() - benched, 1)
        if result.status == "correct":
            result.stage = "done"
    except subprocess.TimeoutExpired as exc:
        result.status, result.reason = "error", f"{result.stage} ran past {exc.timeout:.0f} s"
    except MemoryError:
        _refuse(result, "memory_bound", _memory_reason(result.stage))
    except OSError as exc:
        result.status, result.reason = "error", f"{result.stage}: {exc}"[:MAX_REASON]
    finally:
        result.seconds = round(time.monotonic() - start, 1)
    return result


def _store(path: Path, result: EntryResult) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    tmp.write_text(json.dumps(result.to_json(), indent=1, sort_keys=True))
    os.replace(tmp, path)


def load_results(folder: Path) -> list[EntryResult]:
    """Every finished entry's result in a suite output folder."""
    root = folder / RESULTS
    if not root.is_dir():
        raise InputError(f"{folder}: not a suite output folder (no {RESULTS}/)")
    out = []
    for path in sorted(root.glob("*.json")):
        try:
            obj = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise InputError(f"{path}: {exc}") from None
        out.append(EntryResult.from_json(obj))
    return out


class _Jobs:
    """The entries running at once: each on a CPU of its own, the count finished and who
    runs now reported to `on_event` as each starts and ends."""

    def __init__(self, settings: SuiteSettings, on_event: Callable[[Event], None],
                 runner: Callable[[Entry, SuiteSettings, int | None], EntryResult],
                 total: int, cpus: Sequence[int]) -> None:
        self.settings, self.on_event, self.runner, self.total = settings, on_event, runner, total
        self.free = list(cpus)
        self.done = 0
        self.current: dict[int, str] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        """Set when the run is interrupted: no entry starts after it, and none in flight is
        recorded (its steps were stopped, so its row would be the interruption's, not its)."""

    def work(self, entry: Entry) -> EntryResult | None:
        with self.lock:
            if self.stop.is_set():
                return None
            cpu = self.free.pop()
            self.current[cpu] = entry.key
            self.on_event(Event(self.done, self.total, tuple(self.current.values())))
        result: EntryResult | None = None
        try:
            got = self.runner(entry, self.settings, cpu if self.settings.jobs > 1 else None)
            with self.lock:
                if self.stop.is_set():
                    return None
                _store(entry_path(self.settings.out, entry), got)
                result = got
            return result
        finally:
            with self.lock:
                self.current.pop(cpu, None)
                self.free.append(cpu)
                self.done += 1 if result is not None else 0
                self.on_event(Event(self.done, self.total, tuple(self.current.values()),
                                    result))


def _wait(future: Future[EntryResult | None]) -> None:
    """Wait for one entry, waking twice a second: a signal the kernel hands to a job's thread
    is handled by the main thread only when it runs, and an entry may take minutes."""
    while True:
        try:
            future.result(timeout=0.5)
            return
        except FutureTimeout:
            continue


def run_suite(settings: SuiteSettings, on_event: Callable[[Event], None],
              runner: Callable[[Entry, SuiteSettings, int | None], EntryResult] = run_entry,
              ) -> list[EntryResult]:
    """Run every entry of this shard not finished before; `on_event` sees the progress.

    `runner` is the per-entry step (tests inject one); --jobs is never more than the CPUs
    this process may use, and each job keeps to its own CPU."""
    cpus = usable_cpus()
    if settings.jobs > len(cpus):
        raise InputError(f"--jobs {settings.jobs}: this process may use {len(cpus)} CPU(s)")
    entries = shard_of(discover(settings), settings.shard)
    if settings.limit:
        entries = entries[:settings.limit]
    todo = [e for e in entries if not entry_path(settings.out, e).is_file()]
    jobs = _Jobs(settings, on_event, runner, len(entries), cpus[:settings.jobs])
    jobs.done = len(entries) - len(todo)
    on_event(Event(jobs.done, len(entries), ()))
    settings.out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=settings.jobs) as pool:
        futures = [pool.submit(jobs.work, e) for e in todo]
        try:
            for f in futures:
                _wait(f)
        except KeyboardInterrupt:
            # Ctrl-C, or SIGTERM as `ktl suite run` raises it: nothing more starts, the steps
            # in flight are stopped and their entries left for the resumed run
            jobs.stop.set()
            for f in futures:
                f.cancel()
            LIVE.stop_all()
            raise SuiteInterrupted(jobs.done, len(entries)) from None
    by_key = {e.key for e in entries}
    return [r for r in load_results(settings.out) if r.key in by_key]

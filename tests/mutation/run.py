"""`make mutation`: do the verification core's tests notice when its code breaks?

For each module in config.toml, every mutant from ``mutants.py`` is run against
that module's own tests only, one mutant per forked process: the child drops
the project's modules, imports the mutated module in their place, and runs
pytest with ``-x``. A mutant is *killed* when the tests fail, *timed out* when
they run past the limit (a few times the unmutated run), and *survived* when
they pass. Mutants listed in equivalent.toml cannot change behaviour; they are
not counted. Results are kept per module in ``.mutation/`` (with hashes of the
module and its tests), so modules can be run one at a time and the table
printed at the end.

    PYTHONPATH=tests .venv/bin/python -m mutation.run [--module ledger/tlog/note.py] [--jobs 1]
    PYTHONPATH=tests .venv/bin/python -m mutation.run --report [--markdown]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import signal
import sys
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from mutation.mutants import Mutant, enumerate_mutants, mutated_tree

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RESULTS = ROOT / ".mutation"
_PROJECT_DIRS = tuple(ROOT / d for d in ("attest", "ledger", "client", "verifier", "tests"))
_CAUGHT = ("killed", "timeout")


class MutationError(Exception):
    """The configuration, the equivalents list or a baseline run is wrong."""


@dataclass(frozen=True)
class ModuleSpec:
    path: str
    tests: tuple[str, ...]
    pending: str = ""

    @property
    def name(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".")


@dataclass(frozen=True)
class Equivalent:
    module: str
    mutant: str
    reason: str


@dataclass
class ModuleResult:
    path: str
    fingerprint: str
    baseline_s: float
    statuses: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    source_sha256: str = ""
    rechecked: bool = False


def load_config(path: Path = HERE / "config.toml") -> tuple[float, list[ModuleSpec]]:
    data = tomllib.loads(path.read_text())
    specs = []
    for m in data.get("module", []):
        spec = ModuleSpec(m["path"], tuple(m["tests"]), m.get("pending", ""))
        for p in (spec.path, *spec.tests):
            if not (ROOT / p).is_file():
                raise MutationError(f"{path.name}: {p} does not exist")
        specs.append(spec)
    if not specs:
        raise MutationError(f"{path.name} names no modules")
    return float(data.get("threshold", 95.0)), specs


def load_equivalents(
    specs: Sequence[ModuleSpec], path: Path = HERE / "equivalent.toml"
) -> list[Equivalent]:
    """The equivalent mutants, each with a reason; unknown modules are an error."""
    known = {s.path for s in specs}
    out = []
    for i, e in enumerate(tomllib.loads(path.read_text()).get("equivalent", []), 1):
        eq = Equivalent(str(e.get("module", "")), str(e.get("mutant", "")), str(e.get("reason", "")))
        if eq.module not in known:
            raise MutationError(f"{path.name} entry {i}: module {eq.module!r} is not configured")
        if not eq.mutant or len(eq.reason.strip()) < 10:
            raise MutationError(f"{path.name} entry {i}: needs the mutant key and a reason")
        out.append(eq)
    return out


def fingerprint(spec: ModuleSpec) -> str:
    """Hash of the module, its tests and the mutation operators: results go stale with them."""
    h = hashlib.sha256()
    for p in (spec.path, *spec.tests, "tests/mutation/mutants.py"):
        h.update(p.encode() + b"\0" + (ROOT / p).read_bytes() + b"\0")
    return h.hexdigest()


def _source_hash(spec: ModuleSpec) -> str:
    return hashlib.sha256((ROOT / spec.path).read_bytes()).hexdigest()


class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports one module from a given code object instead of its file."""

    def __init__(self, name: str, path: Path, code: CodeType) -> None:
        self.name, self.path, self.code = name, path, code

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path, loader=self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        exec(self.code, module.__dict__)


def _is_project_module(mod: ModuleType) -> bool:
    f = getattr(mod, "__file__", None)
    if not f:
        return False
    p = Path(f).resolve()
    return any(p.is_relative_to(d) for d in _PROJECT_DIRS) and not p.is_relative_to(HERE)


def _child(spec: ModuleSpec, code: CodeType | None) -> None:
    """In the forked child: swap in the mutant, run the tests, exit with pytest's code."""
    rc = 3
    try:
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        for name, mod in list(sys.modules.items()):
            if _is_project_module(mod):
                del sys.modules[name]
        if code is not None:
            sys.meta_path.insert(0, _MutantFinder(spec.name, ROOT / spec.path, code))
        import pytest

        args = [*(str(ROOT / t) for t in spec.tests), "-x", "-q", "-p", "no:cacheprovider"]
        rc = int(pytest.main([*args, "-p", "no:xdist", "--rootdir", str(ROOT)]))
    finally:
        os._exit(rc)


def _fork(spec: ModuleSpec, code: CodeType | None) -> int:
    pid = os.fork()
    if pid == 0:
        _child(spec, code)
    with contextlib.suppress(PermissionError, ProcessLookupError):
        os.setpgid(pid, pid)  # unless the child already did it, or is gone
    return pid


def _reap(pid: int) -> int:
    """Kill whatever the child left in its process group, then collect its exit code."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _status(rc: int) -> str:
    if rc == 0:
        return "survived"
    if rc in (4, 5):
        raise MutationError(f"pytest could not run the tests (exit code {rc})")
    return "killed"


def _prepare(spec: ModuleSpec) -> None:
    """Import the module and its tests once here so that every child starts warm."""
    from hypothesis import settings

    settings.register_profile("mutation", database=None, derandomize=True, deadline=None)
    settings.load_profile("mutation")
    tests_dir = str(ROOT / "tests")
    if tests_dir not in sys.path:
        sys.path.insert(0, tests_dir)
    importlib.import_module(spec.name)
    for t in spec.tests:
        # only warming the cache here; pytest reports any real problem in the child
        with contextlib.suppress(Exception):
            importlib.import_module(Path(t).stem)


def baseline(spec: ModuleSpec) -> float:
    """Run the unmutated module's tests; they must pass. Return the time they took."""
    t0 = time.monotonic()
    rc = _reap(_wait_any({_fork(spec, None)}))
    if rc != 0:
        raise MutationError(f"{spec.path}: its tests fail without any mutant (exit code {rc})")
    return time.monotonic() - t0


def _wait_any(pids: set[int], timeout: float | None = None) -> int:
    """The pid of a child that has exited (not yet reaped), or -1 after ``timeout``."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is not None and info.si_pid in pids:
            return info.si_pid
        if end is not None and time.monotonic() >= end:
            return -1
        time.sleep(0.02)


def run_module(
    spec: ModuleSpec, jobs: int, limit: float | None, previous: ModuleResult | None = None
) -> ModuleResult:
    """Every mutant of ``spec`` against its tests, ``jobs`` at a time, with progress.

    With ``previous`` (kept results for the same module source), mutants it records
    as killed or timed out keep that status and only the others run: valid when
    tests were only added since, never when the module changed.
    """
    from rich.progress import Progress

    if previous is not None and previous.source_sha256 != _source_hash(spec):
        raise MutationError(f"{spec.path} changed since its kept results; run it in full")
    _prepare(spec)
    source = (ROOT / spec.path).read_text()
    mutants = enumerate_mutants(source)
    base = baseline(spec)
    timeout = limit if limit is not None else max(20.0, 4 * base + 10)
    result = ModuleResult(spec.path, fingerprint(spec), round(base, 2))
    result.source_sha256 = _source_hash(spec)
    result.lines = {m.key: m.line for m in mutants}
    pending = list(mutants)
    if previous is not None:
        kept = {k: s for k, s in previous.statuses.items() if s in _CAUGHT}
        result.statuses.update({m.key: kept[m.key] for m in mutants if m.key in kept})
        pending = [m for m in mutants if m.key not in kept]
        result.rechecked = True
    running: dict[int, tuple[Mutant, float]] = {}
    with Progress(transient=False) as progress:
        task = progress.add_task(f"{spec.path} ({timeout:.0f} s per mutant)", total=len(mutants))
        while pending or running:
            while pending and len(running) < jobs:
                m = pending.pop(0)
                code = compile(mutated_tree(source, m.index), str(ROOT / spec.path), "exec")
                running[_fork(spec, code)] = (m, time.monotonic())
            pid = _wait_any(set(running), timeout=0.5)
            now = time.monotonic()
            done = [pid] if pid > 0 else []
            done += [p for p, (_, t0) in running.items() if p != pid and now - t0 > timeout]
            for p in done:
                m, t0 = running.pop(p)
                over = now - t0 > timeout
                rc = _reap(p)
                result.statuses[m.key] = "timeout" if over and p != pid else _status(rc)
                if result.statuses[m.key] == "survived" and not sys.stderr.isatty():
                    print(f"survivor  {spec.path}:{m.line}  {m.key}", flush=True)
                progress.advance(task)
                _log_progress(spec, result, len(mutants))
    return result


def _log_progress(spec: ModuleSpec, result: ModuleResult, total: int) -> None:
    """Without a terminal the progress bar is silent: print a line every 25 mutants."""
    done = len(result.statuses)
    if sys.stderr.isatty() or (done % 25 and done != total):
        return
    survived = sum(s == "survived" for s in result.statuses.values())
    print(f"{spec.path}: {done}/{total} mutants run, {survived} survived", flush=True)


def save(result: ModuleResult) -> None:
    RESULTS.mkdir(exist_ok=True)
    name = result.path.replace("/", "__") + ".json"
    (RESULTS / name).write_text(json.dumps(result.__dict__, indent=1, sort_keys=True))


def load(spec: ModuleSpec) -> ModuleResult | None:
    f = RESULTS / (spec.path.replace("/", "__") + ".json")
    if not f.is_file():
        return None
    data: dict[str, Any] = json.loads(f.read_text())
    return ModuleResult(**data)


@dataclass(frozen=True)
class Score:
    spec: ModuleSpec
    mutants: int
    caught: int
    timeout: int
    equivalent: int
    survivors: tuple[tuple[int, str], ...]
    problems: tuple[str, ...]

    @property
    def percent(self) -> float:
        counted = self.mutants - self.equivalent
        return 100.0 * self.caught / counted if counted else 100.0


def score(spec: ModuleSpec, result: ModuleResult, equivalents: Sequence[Equivalent]) -> Score:
    """Count one module's results, leaving out its listed equivalent mutants."""
    mine = {e.mutant for e in equivalents if e.module == spec.path}
    problems = []
    if result.fingerprint != fingerprint(spec):
        problems.append("results are stale: the module or its tests changed; run it again")
    for key in sorted(mine - set(result.statuses)):
        problems.append(f"equivalent.toml names a mutant that does not exist: {key}")
    for key in sorted(k for k in mine & set(result.statuses) if result.statuses[k] in _CAUGHT):
        problems.append(f"equivalent.toml names a mutant the tests catch: {key}")
    counted = {k: s for k, s in result.statuses.items() if k not in mine}
    survivors = sorted(
        (result.lines.get(k, 0), k) for k, s in counted.items() if s == "survived"
    )
    return Score(
        spec,
        len(result.statuses),
        sum(s in _CAUGHT for s in counted.values()),
        sum(s == "timeout" for s in counted.values()),
        len(result.statuses) - len(counted),
        tuple(survivors),
        tuple(problems),
    )


def _table(scores: Sequence[Score | ModuleSpec], markdown: bool) -> str:
    """One row per module; a module without results says so."""
    head = ["module (tests)", "mutants", "equivalent", "caught", "of which timed out", "score"]
    rows = []
    for s in scores:
        spec = s if isinstance(s, ModuleSpec) else s.spec
        name = f"`{spec.path}` ({', '.join(Path(t).stem for t in spec.tests)})"
        if isinstance(s, ModuleSpec):
            rows.append([name, "", "", "", "", "not measured yet"])
            continue
        pct = f"{s.percent:.1f} %" + (f" ({spec.pending})" if spec.pending else "")
        if any(p.startswith("results are stale") for p in s.problems):
            pct += " (stale: tests changed since)"
        rows.append([name, str(s.mutants), str(s.equivalent), str(s.caught), str(s.timeout), pct])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|---|---:|---:|---:|---:|---:|"]
        return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*r) for r in [head, *rows])


def report(
    specs: Sequence[ModuleSpec], chosen: Sequence[ModuleSpec], threshold: float, markdown: bool
) -> int:
    """Print the score table and every survivor of ``chosen``; 1 if any falls short."""
    equivalents = load_equivalents(specs)
    scores: list[Score | ModuleSpec] = []
    failed = False
    for spec in chosen:
        result = load(spec)
        if result is None:
            print(f"{spec.path}: no results yet; run `make mutation MODULE={spec.path}`")
            scores.append(spec)
            failed = True
            continue
        s = score(spec, result, equivalents)
        scores.append(s)
        for line, key in s.survivors:
            print(f"survived  {spec.path}:{line}  {key}")
        for p in s.problems:
            print(f"problem   {spec.path}: {p}")
        short = s.percent < threshold and not spec.pending
        failed = failed or bool(s.problems) or short
    print(_table(scores, markdown))
    print(f"threshold {threshold:.0f} %; pending modules are shown but do not gate")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--module", action="append", help="only this module (repeatable)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    ap.add_argument("--timeout", type=float, help="seconds per mutant (default 4x baseline + 10)")
    ap.add_argument("--report", action="store_true", help="only print the table of kept results")
    ap.add_argument(
        "--survivors",
        action="store_true",
        help="keep caught mutants from kept results of the same source; rerun the rest",
    )
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args(argv)
    try:
        threshold, specs = load_config()
        chosen = [s for s in specs if not args.module or s.path in args.module]
        if args.module and len(chosen) != len(set(args.module)):
            raise MutationError(f"unknown module in {args.module}; see tests/mutation/config.toml")
        if not args.report:
            load_equivalents(specs)  # a broken list should fail before hours of work
            for spec in chosen:
                previous = load(spec) if args.survivors else None
                if args.survivors and previous is None:
                    raise MutationError(f"{spec.path} has no kept results to recheck")
                save(run_module(spec, max(1, args.jobs), args.timeout, previous))
        return report(specs, chosen, threshold, args.markdown)
    except MutationError as e:
        print(f"mutation: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

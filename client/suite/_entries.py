"""The bottom of `client.suite`: the settings, one problem paired with its solution, one
entry's result, and finding the pairs in a KernelBench-layout folder.

Problems: `<problems>/level<L>/<ID>_<Name>.py`. Solutions, one of:
- the same layout: `<solutions>/level<L>/<ID>_<Name>.py` (or `<ID>_<anything>.py`);
- KernelBench's run naming, anywhere under the folder:
  `level_<L>_problem_<ID>_sample_<S>_kernel.py` (sample `SuiteSettings.sample`);
- a JSONL file of generations, one object a line with `level`, `problem_id`, optional
  `sample_id`, and the source under `kernel`, `code` or `solution`.
No I/O here but reading those folders and files; every count is bounded.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attest.predicates import KERNEL_NAME_PATTERN, MAX_KERNEL_NAME_CHARS, SUITE_STATUSES
from client.errors import InputError

__all__ = ["KERNEL_VENDOR", "MAX_ENTRIES", "REFUSALS", "Entry", "EntryResult", "SuiteSettings",
           "dataset_manifest", "discover", "kernel_name_of", "shard_of"]

MAX_ENTRIES = 10_000
MAX_JSONL_BYTES = 512 * 2**20
MAX_SOLUTION_BYTES = 1 << 20
_PROBLEM = re.compile(r"(\d{1,6})_[^/]*\.py")
_RUN_NAME = re.compile(r"level_(\d{1,2})_problem_(\d{1,6})_sample_(\d{1,6})_kernel\.py")
STATUSES = SUITE_STATUSES
KERNEL_VENDOR = "kernelbench"
"""The vendor part of every kernel a suite imports (`kernel_name_of`)."""
MAX_PROBLEM_BYTES = 4 << 20


@dataclass(frozen=True)
class SuiteSettings:
    """Everything `ktl suite run` was asked for (the command's options, checked)."""

    problems: Path
    solutions: Path
    out: Path
    levels: tuple[int, ...] = ()
    """Only these levels (empty: every level folder found)."""
    budget: str = "quick"
    bench: bool = True
    bench_runs: int = 2
    bench_seconds: float = 10.0
    """`ktl bench --time-budget` of each entry (shorter than a claim's: a suite measures many)."""
    jobs: int = 1
    shard: tuple[int, int] = (1, 1)
    """(K, N): this process runs the K-th of N shares of the entries (1-based)."""
    sample: int = 0
    timeout_s: float = 1800.0
    """Per step (import, check, bench) of one entry."""
    limit: int = 0
    """At most this many entries after sharding (0: all), for a stated sample."""

    def __post_init__(self) -> None:
        k, n = self.shard
        if not 1 <= k <= n <= MAX_ENTRIES:
            raise InputError(f"--shard {k}/{n}: K must be between 1 and N")
        if self.jobs < 1:
            raise InputError("--jobs must be at least 1")
        if self.budget not in ("quick", "full"):
            raise InputError("--budget: quick or full")


@dataclass(frozen=True)
class Entry:
    """One problem and the solution judged on it."""

    level: int
    problem_id: int
    problem: Path
    solution: Path | None
    """None: no solution was given for this problem (a row of its own, never skipped)."""

    @property
    def key(self) -> str:
        return f"level{self.level}/{self.problem.stem}"

    @property
    def file_key(self) -> str:
        return self.key.replace("/", "__")

    @property
    def kernel_name(self) -> str:
        return kernel_name_of(self.key)


def kernel_name_of(key: str) -> str:
    """The kernel name a suite gives the problem `key` ('level1/19_ReLU' ->
    'kernelbench/level1-19_relu'): `ktl suite run` imports under it and `ktl suite verify`
    expects it as the subject of the row's entries (the binding of a row to its problem)."""
    tail = re.sub(r"[^a-z0-9._-]+", "-", key.lower().replace("/", "-")).strip("-._")
    name = f"{KERNEL_VENDOR}/{tail or 'problem'}"[:MAX_KERNEL_NAME_CHARS].rstrip("-._")
    if not re.fullmatch(KERNEL_NAME_PATTERN, name):
        raise InputError(f"{key[:80]!r}: no kernel name can be made of it")
    return name


REFUSALS: dict[str, str] = {
    "memory_bound": "ktl's own memory bound",
    "does_not_fit": "one call does not fit this machine",
    "needs_gpu": "needs a GPU",
    "runtime_unavailable": "its runtime is not installed here",
    "problem": "the problem cannot be run here",
}
"""Each kind of refusal and how a summary (and a suite/v1 row's `refused`) names it."""


@dataclass
class EntryResult:
    """What happened to one entry (written as JSON when it is done; `from_json` reads it)."""

    key: str
    level: int
    problem_id: int
    status: str = "error"
    """correct (passed the check), incorrect (a check failed: the kernel's fault), refused
    (ktl could not run it here: the reason says which limit), error (the harness's fault)."""
    stage: str = ""
    """Where it ended: import, check, bench or done."""
    reason: str = ""
    sizes: str = ""
    failed_checks: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    speedup: float | None = None
    speedup_ci95: list[float] | None = None
    trusted: bool | None = None
    seconds: float = 0.0
    bench_seconds: float = 0.0
    """Of `seconds`, the bench's (the rest is the import and the check)."""
    solution_sha256: str = ""
    scaled: bool = False
    """Checked at sizes scaled down from the problem's (the reference row's `scaled` metric)."""
    refusal: str = ""
    """Which limit a refused entry met (a REFUSALS key), set where it was decided from a typed
    signal (an exit code, `error.kind`, a check row's `limit_` metric), never from words."""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, obj: Any) -> EntryResult:
        if not isinstance(obj, dict) or not isinstance(obj.get("key"), str):
            raise InputError("a suite result file is malformed")
        known = {k: obj[k] for k in cls.__dataclass_fields__ if k in obj}
        try:
            result = cls(**known)
        except TypeError as exc:
            raise InputError(f"a suite result file is malformed: {exc}") from None
        if result.status not in STATUSES or type(result.level) is not int:
            raise InputError(f"suite result {result.key[:80]!r}: malformed status or level")
        if result.refusal and result.refusal not in REFUSALS:
            raise InputError(f"suite result {result.key[:80]!r}: unknown refusal "
                             f"{str(result.refusal)[:40]!r}")
        return result


def _levels(root: Path, wanted: tuple[int, ...]) -> list[tuple[int, Path]]:
    if not root.is_dir():
        raise InputError(f"{root}: not a folder of levels (level1/, level2/, ...)")
    found = []
    for d in sorted(root.iterdir()):
        m = re.fullmatch(r"level(\d{1,2})", d.name)
        if m and d.is_dir() and (not wanted or int(m.group(1)) in wanted):
            found.append((int(m.group(1)), d))
    if not found:
        raise InputError(f"{root}: no level<N>/ folder" + (f" for levels {list(wanted)}"
                                                            if wanted else ""))
    return found


def _solutions_by_name(root: Path, sample: int) -> dict[tuple[int, int], Path]:
    out: dict[tuple[int, int], Path] = {}
    for path in sorted(root.rglob("level_*_problem_*_sample_*_kernel.py"))[:MAX_ENTRIES * 4]:
        m = _RUN_NAME.fullmatch(path.name)
        if m and int(m.group(3)) == sample:
            out[(int(m.group(1)), int(m.group(2)))] = path
    return out


def _solutions_from_jsonl(path: Path, sample: int, into: Path) -> dict[tuple[int, int], Path]:
    if path.stat().st_size > MAX_JSONL_BYTES:
        raise InputError(f"{path}: larger than {MAX_JSONL_BYTES >> 20} MiB")
    into.mkdir(parents=True, exist_ok=True)
    out: dict[tuple[int, int], Path] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{path}:{n}: not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{n}: not an object")
        level, pid, sid = obj.get("level"), obj.get("problem_id"), obj.get("sample_id", 0)
        code = next((obj[k] for k in ("kernel", "code", "solution") if isinstance(obj.get(k), str)),
                    None)
        if type(level) is not int or type(pid) is not int or type(sid) is not int or code is None:
            raise InputError(f"{path}:{n}: needs integer level, problem_id (sample_id) and the "
                             "source under kernel, code or solution")
        if len(code.encode()) > MAX_SOLUTION_BYTES:
            raise InputError(f"{path}:{n}: the solution is larger than 1 MiB")
        if sid != sample:
            continue
        if (level, pid) in out:
            raise InputError(f"{path}:{n}: level {level} problem {pid} sample {sid} given twice")
        target = into / f"level_{level}_problem_{pid}_sample_{sid}_kernel.py"
        target.write_text(code, encoding="utf-8")
        out[(level, pid)] = target
    return out


def discover(settings: SuiteSettings) -> list[Entry]:
    """Every problem of the chosen levels with its solution (None where none was given),
    in (level, problem id) order."""
    levels = _levels(settings.problems, settings.levels)
    sols = settings.solutions
    if sols.is_file():
        by_id = _solutions_from_jsonl(sols, settings.sample, settings.out / "solutions")
    elif sols.is_dir():
        by_id = _solutions_by_name(sols, settings.sample)
    else:
        raise InputError(f"{sols}: neither a folder of solutions nor a JSONL file")
    entries: list[Entry] = []
    for level, folder in levels:
        for path in sorted(folder.glob("*.py")):
            m = _PROBLEM.fullmatch(path.name)
            if not m:
                continue
            pid = int(m.group(1))
            same = sols / folder.name / path.name if sols.is_dir() else None
            if same is not None and not same.is_file():
                same = next(iter(sorted((sols / folder.name).glob(f"{pid}_*.py"))), None) \
                    if (sols / folder.name).is_dir() else None
            entries.append(Entry(level, pid, path, by_id.get((level, pid)) or same))
            if len(entries) > MAX_ENTRIES:
                raise InputError(f"more than {MAX_ENTRIES} problems")
    entries.sort(key=lambda e: (e.level, e.problem_id, e.problem.name))
    return entries


def dataset_manifest(problems: Path) -> bytes:
    """The dataset's identity: canonical JSON listing every problem file of every level<N>/
    folder (path and sha256), sorted. Its sha256 is the suite statement's subject; it is
    uploaded beside the log, so anyone holding the problems can check they are the same."""
    files = []
    for _level, folder in _levels(problems, ()):
        for path in sorted(folder.glob("*.py")):
            if not _PROBLEM.fullmatch(path.name) or not path.is_file():
                continue
            if path.stat().st_size > MAX_PROBLEM_BYTES:
                raise InputError(f"{path}: a problem larger than {MAX_PROBLEM_BYTES >> 20} MiB")
            files.append({"path": f"{folder.name}/{path.name}",
                          "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
            if len(files) > MAX_ENTRIES:
                raise InputError(f"{problems}: more than {MAX_ENTRIES} problems")
    return json.dumps({"kind": "kernelbench-problems", "files": files}, sort_keys=True,
                      separators=(",", ":")).encode()


def shard_of(entries: list[Entry], shard: tuple[int, int]) -> list[Entry]:
    """The K-th of N shares: every N-th entry from the (K-1)-th, in the discovered order (the
    same on every machine given the same folders)."""
    k, n = shard
    return entries[k - 1::n]

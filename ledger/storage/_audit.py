"""The deep audit (`ktl serve --deep-check`) and `ktl repair`: find every problem, name it.

`check_log` stops at the first disagreement; `audit_log` looks at everything and lists
each damaged object, classified:

- ``lost``: not derivable from anything else the log holds (an entry that does not hash
  to its leaf, a checkpoint row that does not verify, stored hashes that do not give a
  signed root, a database that fails SQLite's integrity check). Only a backup helps;
  `repair_log` refuses to touch a log with one.
- ``damaged``: a tile or bundle file (or the checkpoint file) with other bytes than the
  verified entries and hashes give. Derivable: `repair_log` rewrites it.
- ``incomplete``: such a file missing or short, what a crash between the database commit
  and the file writes leaves. Derivable; the ordinary start-up check completes it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ledger.storage._check import bundle_file_bytes, checkpoint_row_problem, tile_file_bytes
from ledger.storage._hashes import StoredHashReader
from ledger.storage._sqlite import SqliteStorage
from ledger.storage._types import LogStorage, StorageError, StoredCheckpoint
from ledger.tlog.merkle import MissingHashError, leaf_hash, tree_root
from ledger.tlog.note import NoteVerifier
from ledger.tlog.tiles import entries_path, entry_bundles_for_size, tile_path, tiles_for_size

ProblemKind = Literal["lost", "damaged", "incomplete"]
_KINDS: tuple[str, ...] = get_args(ProblemKind)
MAX_LISTED = 1000  # problems kept in one audit; beyond that only counted
_CHUNK = 1000


@dataclass(frozen=True)
class Problem:
    """One damaged object: what it is (``entry 12``, ``tile/0/000``), what is wrong."""

    kind: ProblemKind
    obj: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "object": self.obj, "message": self.message}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Problem:
        kind, name, message = obj.get("kind"), obj.get("object"), obj.get("message")
        if kind not in _KINDS or not isinstance(name, str) or not isinstance(message, str):
            raise StorageError("a problem is {kind: lost|damaged|incomplete, object, message}")
        return cls(kind, name, message)

    def __str__(self) -> str:
        return f"{self.obj}: {self.message} ({self.kind})"


@dataclass(frozen=True)
class LogAudit:
    """Everything `audit_log` found in a log of ``size`` entries (``more``: not listed)."""

    size: int
    problems: tuple[Problem, ...]
    more: int = 0

    @property
    def lost(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.kind == "lost")

    @property
    def damaged(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.kind == "damaged")

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "problems": [p.to_json() for p in self.problems],
                "more": self.more}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LogAudit:
        size, problems, more = obj.get("size"), obj.get("problems"), obj.get("more", 0)
        if not isinstance(size, int) or not isinstance(problems, list) or not isinstance(more, int):
            raise StorageError("an audit is {size, problems: [...], more}")
        return cls(size, tuple(Problem.from_json(p) for p in problems), more)


def _database_problems(storage: LogStorage) -> Iterator[Problem]:
    if not isinstance(storage, SqliteStorage):
        return
    try:
        conn = sqlite3.connect(f"file:{storage.db_path}?mode=ro", uri=True, timeout=60.0)
        try:
            rows = conn.execute("PRAGMA integrity_check(100)").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        yield Problem("lost", f"database {storage.db_path.name}", f"cannot be read: {e}")
        return
    for (line,) in rows:
        if line != "ok":
            yield Problem("lost", f"database {storage.db_path.name}", f"integrity check: {line}")


def _all_checkpoints(storage: LogStorage) -> Iterator[StoredCheckpoint]:
    before: int | None = None
    while page := storage.checkpoints(500, before):
        yield from page
        before = page[-1].size


def _checkpoint_problems(storage: LogStorage, verifier: NoteVerifier, origin: str | None,
                         reader: StoredHashReader) -> Iterator[Problem]:
    for row in _all_checkpoints(storage):
        name = f"checkpoint at size {row.size}"
        why = checkpoint_row_problem(row, verifier, origin)
        if why is not None:
            yield Problem("lost", name, why)
        elif row.size and row.size <= reader.size:
            try:
                root = tree_root(row.size, reader)
            except MissingHashError as e:
                yield Problem("lost", name, f"stored hashes are missing: {e}")
                continue
            if root != row.root_hash:
                yield Problem("lost", name, "the stored hashes give another root")


def _entry_problems(storage: LogStorage, reader: StoredHashReader) -> Iterator[Problem]:
    for lo in range(0, reader.size, _CHUNK):
        hi = min(reader.size, lo + _CHUNK)
        try:
            level0 = reader.read_hashes([(0, i) for i in range(lo, hi)])
        except MissingHashError as e:
            yield Problem("lost", f"entries {lo}..{hi - 1}", f"leaf hashes are missing: {e}")
            continue
        entries = storage.get_entries(lo, hi)
        if len(entries) != hi - lo:
            yield Problem("lost", f"entries {lo}..{hi - 1}", f"only {len(entries)} are stored")
            continue
        for ent, stored in zip(entries, level0, strict=True):
            if leaf_hash(ent.data) != ent.leaf_hash or ent.leaf_hash != stored:
                yield Problem("lost", f"entry {ent.index}", "does not hash to its stored leaf hash")


def _file_problem(path: str, have: bytes | None, want: bytes) -> Problem | None:
    if have is None:
        return Problem("incomplete", path, "missing")
    if len(have) < len(want):
        return Problem("incomplete", path, f"short: {len(have)} of {len(want)} bytes")
    if have != want:
        return Problem("damaged", path, "differs from what the verified log gives")
    return None


def derived_files(storage: LogStorage, size: int) -> Iterator[tuple[str, bytes]]:
    """Every file the log serves, with the bytes its verified entries and hashes give."""
    for ref in tiles_for_size(size):
        yield tile_path(ref.level, ref.index, ref.width), tile_file_bytes(storage, ref)
    for ref in entry_bundles_for_size(size):
        yield entries_path(ref.index, ref.width), bundle_file_bytes(storage, ref)
    latest = storage.latest_checkpoint()
    if latest is not None:
        yield "checkpoint", latest.note


def _file_problems(storage: LogStorage, size: int) -> Iterator[Problem]:
    for path, want in derived_files(storage, size):
        problem = _file_problem(path, storage.read_file(path), want)
        if problem is not None:
            yield problem


def _problems(storage: LogStorage, verifier: NoteVerifier, origin: str | None,
              size: int) -> Iterator[Problem]:
    db = list(_database_problems(storage))
    yield from db
    if db:
        return  # the rows cannot be trusted to read back; nothing else is meaningful
    count = storage.entry_count()
    if count != size:
        yield Problem("lost", "entries", f"{count} are stored but the last checkpoint is for {size}")
        size = min(size, count)
    reader = StoredHashReader(storage, size)
    lost = list(_checkpoint_problems(storage, verifier, origin, reader))
    lost += _entry_problems(storage, reader)
    yield from lost
    if not lost:  # files are only derivable from a verified log
        yield from _file_problems(storage, size)


def audit_log(storage: LogStorage, verifier: NoteVerifier, origin: str | None = None) -> LogAudit:
    """Check everything the log stores and list every problem (hold the integration lock)."""
    try:
        latest = storage.latest_checkpoint()
    except (sqlite3.DatabaseError, StorageError) as e:
        return LogAudit(0, (Problem("lost", "database", f"cannot be read: {e}"),))
    size = 0 if latest is None else latest.size
    listed: list[Problem] = []
    more = 0
    try:
        for problem in _problems(storage, verifier, origin, size):
            if len(listed) < MAX_LISTED:
                listed.append(problem)
            else:
                more += 1
    except sqlite3.DatabaseError as e:
        listed.append(Problem("lost", "database", f"a read failed: {e}"))
    return LogAudit(size, tuple(listed), more)


def repair_log(storage: LogStorage, verifier: NoteVerifier, origin: str | None = None
               ) -> tuple[str, ...]:
    """Rewrite every damaged or incomplete derived file; refuse if anything is lost.

    Returns the paths rewritten. Entries, checkpoints and hashes are never touched: a log
    with a lost object raises `StorageError` naming each one and writes nothing.
    """
    audit = audit_log(storage, verifier, origin)
    if audit.lost:
        named = "; ".join(str(p) for p in audit.lost[:20])
        raise StorageError(
            f"refusing to repair: {len(audit.lost) + audit.more} objects are not derivable from "
            f"the verified log (restore them from a backup): {named}"
        )
    broken = {p.obj for p in audit.problems}
    if not broken:
        return ()
    files = {path: want for path, want in derived_files(storage, audit.size) if path in broken}
    storage.write_files(files)
    return tuple(sorted(files))

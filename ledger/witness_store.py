"""The witness's durable state: the logs it knows and the latest checkpoint per origin.

One SQLite database (WAL, ``synchronous=FULL``) in the witness's data folder. The
check of the old size and the write of the new checkpoint happen in one
``BEGIN IMMEDIATE`` transaction (`WitnessStore.add_checkpoint`), so two requests
can never both pass against the same held size, across threads and processes;
the commit is on disk before the cosignature is returned, so after a crash
(SIGKILL included) the witness still holds everything it ever cosigned.
Removing a log keeps its latest checkpoint, so a log removed and added back is
still held to the history the witness cosigned.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.tlog import LedgerError
from ledger.tlog.checkpoint import Checkpoint, check_origin
from ledger.tlog.note import NoteError, NoteVerifier
from ledger.tlog.witness import AddCheckpoint, Cosign, Decision, decide

DB_NAME = "witness.db"
#: Most logs one witness keeps, and most keys per log.
MAX_LOGS = 10_000
MAX_KEYS_PER_LOG = 8

_SCHEMA = """
CREATE TABLE IF NOT EXISTS logs (
    origin TEXT PRIMARY KEY,
    keys   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS held (
    origin  TEXT PRIMARY KEY,
    size    INTEGER NOT NULL,
    root    BLOB NOT NULL,
    note    BLOB NOT NULL,
    updated REAL NOT NULL
);
"""


class WitnessStoreError(LedgerError):
    """The witness database cannot be opened, or a log registration is invalid."""


@dataclass(frozen=True)
class KnownLog:
    """A log the witness cosigns for: its origin and verifier key strings."""

    origin: str
    keys: tuple[str, ...]

    def verifiers(self) -> list[NoteVerifier]:
        return [NoteVerifier.from_key_string(k) for k in self.keys]

    def to_json(self) -> dict[str, Any]:
        return {"origin": self.origin, "keys": list(self.keys)}

    @classmethod
    def from_json(cls, obj: object) -> KnownLog:
        if not isinstance(obj, dict) or set(obj) != {"origin", "keys"}:
            raise WitnessStoreError("log JSON needs exactly origin and keys")
        keys = obj["keys"]
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise WitnessStoreError("log JSON keys must be a list of key strings")
        return make_log(obj["origin"], keys)


def make_log(origin: object, keys: Sequence[str]) -> KnownLog:
    """Validate an origin and its verifier key strings (strict Ed25519 keys)."""
    try:
        origin = check_origin(origin)
    except NoteError as exc:
        raise WitnessStoreError(f"log origin: {exc}") from None
    if not keys or len(keys) > MAX_KEYS_PER_LOG:
        raise WitnessStoreError(f"a log needs 1 to {MAX_KEYS_PER_LOG} verifier keys")
    clean = tuple(k.strip() for k in keys)
    for k in clean:
        try:
            NoteVerifier.from_key_string(k)
        except NoteError as exc:
            raise WitnessStoreError(f"log key {k!r}: {exc}") from None
    if len(set(clean)) != len(clean):
        raise WitnessStoreError("the same log key is given twice")
    return KnownLog(origin, clean)


@dataclass(frozen=True)
class HeldCheckpoint:
    """The latest checkpoint cosigned for an origin, with the note as returned (cosigned)."""

    checkpoint: Checkpoint
    note: bytes
    updated: float


class WitnessStore:
    """SQLite state of one witness; safe to share between threads."""

    def __init__(self, data_dir: str | Path) -> None:
        self.path = Path(data_dir) / DB_NAME
        self._local = threading.local()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn().executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise WitnessStoreError(f"cannot open the witness database {self.path}: {exc}"
                                    ) from None

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ---- registered logs ------------------------------------------------------------------

    def add_log(self, log: KnownLog) -> None:
        """Register (or replace the keys of) a log."""
        with self._write() as conn:
            count = conn.execute("SELECT COUNT(*) FROM logs").fetchone()[0]
            exists = conn.execute("SELECT 1 FROM logs WHERE origin = ?", (log.origin,)).fetchone()
            if exists is None and count >= MAX_LOGS:
                raise WitnessStoreError(f"this witness already knows {MAX_LOGS} logs")
            conn.execute("INSERT OR REPLACE INTO logs (origin, keys) VALUES (?, ?)",
                         (log.origin, "\n".join(log.keys)))

    def remove_log(self, origin: str) -> bool:
        """Forget a log's keys (its held checkpoint stays); False if it was unknown."""
        with self._write() as conn:
            cur = conn.execute("DELETE FROM logs WHERE origin = ?", (origin,))
            return cur.rowcount > 0

    def logs(self) -> list[KnownLog]:
        rows = self._conn().execute("SELECT origin, keys FROM logs ORDER BY origin").fetchall()
        return [KnownLog(o, tuple(k.split("\n"))) for o, k in rows]

    def log(self, origin: str) -> KnownLog | None:
        row = self._conn().execute("SELECT keys FROM logs WHERE origin = ?",
                                   (origin,)).fetchone()
        return None if row is None else KnownLog(origin, tuple(row[0].split("\n")))

    # ---- held checkpoints -----------------------------------------------------------------

    def held(self, origin: str) -> HeldCheckpoint | None:
        row = self._conn().execute("SELECT size, root, note, updated FROM held WHERE origin = ?",
                                   (origin,)).fetchone()
        return None if row is None else _held(origin, row)

    def add_checkpoint(
        self, request: AddCheckpoint, cosign: Callable[[Cosign], bytes]
    ) -> tuple[Decision, bytes]:
        """Decide on ``request`` and, if it may be cosigned, record it atomically.

        ``cosign`` returns the witness's signature line(s) for an accepted checkpoint;
        the checkpoint with those lines is committed (fsynced) before this returns them.
        """
        origin = request.checkpoint.origin
        with self._write() as conn:
            row = conn.execute("SELECT keys FROM logs WHERE origin = ?", (origin,)).fetchone()
            keys = None if row is None else KnownLog(origin, tuple(row[0].split("\n"))
                                                     ).verifiers()
            held_row = conn.execute("SELECT size, root, note, updated FROM held WHERE origin = ?",
                                    (origin,)).fetchone()
            held = None if held_row is None else _held(origin, held_row).checkpoint
            decision = decide(request, keys, held)
            if not isinstance(decision, Cosign):
                return decision, b""
            lines = cosign(decision)
            cp = decision.signed.checkpoint
            conn.execute(
                "INSERT OR REPLACE INTO held (origin, size, root, note, updated) "
                "VALUES (?, ?, ?, ?, ?)",
                (origin, cp.size, cp.root_hash, request.note + lines, time.time()),
            )
        return decision, lines


def _held(origin: str, row: tuple[int, bytes, bytes, float]) -> HeldCheckpoint:
    size, root, note, updated = row
    return HeldCheckpoint(Checkpoint(origin, size, bytes(root)), bytes(note), updated)

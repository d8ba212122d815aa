"""The monitor's audit of the index: recompute it from the entries read, compare roots.

The index at size N is a function of entries [0, N) (docs/vindex.md), so a monitor
that reads every entry in order recomputes it, in a SQLite file beside its state
(`<state>.vindex.db`), and compares the root with the one the log's checkpoint of
that size commits to. A difference is a violation with evidence: the signed
checkpoint, the committed root and the recomputed one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from client.errors import LogMisbehaviour
from client.state import TrustedState
from client.trust import refuse
from ledger.tlog.checkpoint import SignedCheckpoint
from ledger.vindex import IndexProofError, SqliteIndexRows, StoredIndex, committed_root

__all__ = ["IndexMismatch", "RecomputedIndex"]


class IndexMismatch(LogMisbehaviour):
    """A checkpoint commits to an index root that is not the one its entries give."""


class RecomputedIndex:
    """The index of entries [0, size) recomputed by this client, kept in `path`."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._conn = sqlite3.connect(path, isolation_level=None)
        self.index = StoredIndex(SqliteIndexRows(lambda: self._conn))

    @property
    def size(self) -> int:
        return self.index.size

    def close(self) -> None:
        self._conn.close()

    def reset(self) -> None:
        """Forget everything (to recompute from entry 0)."""
        for table in ("vindex_tiles", "vindex_postings"):
            self._conn.execute(f"DELETE FROM {table}")
        self._conn.execute("UPDATE vindex_size SET size = 0")

    def add(self, start: int, entries: Sequence[bytes]) -> None:
        """Entries start, start+1, ... as read (and verified) from the log, in order."""
        self.index.commit(self.index.prepare(start, entries))

    def check(self, trusted: TrustedState, origin: str, cp: SignedCheckpoint, note: bytes
              ) -> bool:
        """Compare the root `cp` commits to with the recomputed one (this index must be at
        `cp`'s size). False when `cp` commits to no index; raises IndexMismatch, with the
        evidence saved, when the roots differ or the commitment line is malformed."""
        if self.size != cp.checkpoint.size:
            raise ValueError(f"the recomputed index is at {self.size}, the checkpoint at "
                             f"{cp.checkpoint.size}")
        mine = self.index.root()
        try:
            theirs = committed_root(cp.checkpoint)
        except IndexProofError as exc:
            theirs, problem = b"", str(exc)
        else:
            if theirs is None:
                return False
            problem = f"commits to index root {theirs.hex()}"
        if theirs == mine:
            return True
        err = refuse(trusted, origin, "index-mismatch", note,
                     f"the checkpoint of size {cp.checkpoint.size} {problem}, but its entries "
                     f"give index root {mine.hex()}")
        raise IndexMismatch(str(err), err.evidence_path)

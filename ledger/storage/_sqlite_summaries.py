"""`SqliteStorage.summary_batch`: one batch of the summary check or rebuild (see `_summaries`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ledger.storage._schema import SUMMARY_RECOMPUTE
from ledger.storage._summaries import (
    SummaryBatch,
    SummaryCursor,
    SummaryDrift,
    SummaryRow,
    summary_drift,
)


def summary_batch(conn: sqlite3.Connection, cursor: SummaryCursor, limit: int, fix: bool
                  ) -> SummaryBatch:
    """One batch in one transaction (written only when `fix` and something drifted)."""
    nxt: SummaryCursor | None
    conn.execute("BEGIN IMMEDIATE" if fix else "BEGIN")
    try:
        if cursor.digest is None:
            digests, nxt = _first_seen(conn, cursor.index, limit)
        else:
            digests, nxt = _unnamed(conn, cursor.digest, limit)
        drift = summary_drift(_recomputed(conn, digests), _stored(conn, digests))
        if fix and drift:
            _rewrite(conn, drift)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return SummaryBatch(len(digests), drift, nxt)


def _first_seen(conn: sqlite3.Connection, start: int, limit: int
                ) -> tuple[list[tuple[int, str]], SummaryCursor]:
    """The (index key, digest) of the digests whose first entry is in [start, start+limit)."""
    named = conn.execute(
        "SELECT DISTINCT sha_key, sha256 FROM subjects WHERE idx >= ? AND idx < ?",
        (start, start + limit)).fetchall()
    first = [(int(k), str(d)) for k, d in named if conn.execute(
        "SELECT 1 FROM subjects WHERE sha_key = ? AND sha256 = ? AND idx < ? LIMIT 1",
        (k, d, start)).fetchone() is None]
    more = conn.execute("SELECT 1 FROM entries WHERE idx >= ? LIMIT 1",
                        (start + limit,)).fetchone() is not None
    return first, SummaryCursor(start + limit) if more else SummaryCursor(digest="")


def _unnamed(conn: sqlite3.Connection, after: str, limit: int
             ) -> tuple[list[tuple[int, str]], SummaryCursor | None]:
    """The summary digests above `after` (the next `limit`) that no entry names."""
    from ledger.storage._sqlite import _sha_key

    digests = [str(r[0]) for r in conn.execute(
        "SELECT DISTINCT sha256 FROM digest_summaries WHERE sha256 > ? ORDER BY sha256 LIMIT ?",
        (after, limit))]
    unnamed = [(_sha_key(d), d) for d in digests if conn.execute(
        "SELECT 1 FROM subjects WHERE sha_key = ? AND sha256 = ? LIMIT 1",
        (_sha_key(d), d)).fetchone() is None]
    return unnamed, SummaryCursor(digest=digests[-1]) if len(digests) == limit else None


def _recomputed(conn: sqlite3.Connection, digests: Sequence[tuple[int, str]]) -> list[SummaryRow]:
    out: list[SummaryRow] = []
    for key, digest in digests:
        out += [(str(d), str(t), int(n), int(b), int(last)) for d, t, n, b, last in conn.execute(
            SUMMARY_RECOMPUTE.format(where="WHERE sha_key = ? AND sha256 = ?"), (key, digest))]
    return out


def _stored(conn: sqlite3.Connection, digests: Sequence[tuple[int, str]]) -> list[SummaryRow]:
    out: list[SummaryRow] = []
    for _, digest in digests:
        out += [(str(d), str(t), int(n), int(b), int(last)) for d, t, n, b, last in conn.execute(
            "SELECT sha256, predicate_type, entries, bytes, last_idx FROM digest_summaries "
            "WHERE sha256 = ?", (digest,))]
    return out


def _rewrite(conn: sqlite3.Connection, drift: Sequence[SummaryDrift]) -> None:
    for d in drift:
        if d.expected is None:
            conn.execute("DELETE FROM digest_summaries WHERE sha256 = ? AND predicate_type = ?",
                         (d.digest, d.predicate_type))
        else:
            conn.execute(
                "INSERT OR REPLACE INTO digest_summaries (sha256, predicate_type, entries, "
                "bytes, last_idx) VALUES (?, ?, ?, ?, ?)", (d.digest, d.predicate_type, *d.expected))

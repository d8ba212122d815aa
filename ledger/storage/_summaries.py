"""Rebuilding the per-digest summaries from the entries (`ktl repair --summaries`).

The summaries (entries, bytes and newest index per predicate type and digest) are kept at
integration; they are derived data, and a restore, a bug or a hand with write access can
leave them wrong. A page trusts them to say what it did not read, and the verdict reading
skips a digest whose summary names no reproduction: a summary row deleted or zeroed hides
a refutation. So they can be checked against a recomputation from the entries, and
rewritten, in batches of digests, each batch its own transaction:

- the first pass walks the entries in index order and recomputes the rows of each digest
  in the batch whose first entry it holds (so every digest once): a missing, wrong or
  extra row is drift;
- the second walks the summaries' own digests and finds those no entry names.

Only rows in drift are written, so a second run changes nothing. A batch reads its
entries' subjects and the entries naming its new digests: the whole walk reads each entry
about twice, whatever the log holds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ledger.storage._schema import SUMMARY_RECOMPUTE, sha_key

#: Entries (first pass) or summary digests (second pass) per batch, one transaction
#: each: by default and at most.
SUMMARY_BATCH = 1000
MAX_SUMMARY_BATCH = 10_000
#: Rows in drift a check lists (it counts them all).
MAX_LISTED = 100

#: (digest, predicate type, entries, bytes, last index): one summary row.
SummaryRow = tuple[str, str, int, int, int]
#: (entries, bytes, last index) of one (digest, predicate type).
Counts = tuple[int, int, int]


@dataclass(frozen=True)
class SummaryCursor:
    """Where a rebuild resumes: the first pass at entry `index`; the second (once `digest`
    is set) at the summary digests above `digest` ("" for all)."""

    index: int = 0
    digest: str | None = None


@dataclass(frozen=True)
class SummaryDrift:
    """One (digest, predicate type) whose stored row disagrees with the entries; None
    stands for no row."""

    digest: str
    predicate_type: str
    stored: Counts | None
    expected: Counts | None

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "predicate_type": self.predicate_type,
                "stored": None if self.stored is None else list(self.stored),
                "expected": None if self.expected is None else list(self.expected)}


@dataclass(frozen=True)
class SummaryBatch:
    """One batch's outcome: digests recomputed, the drift found (written when fixing) and
    where the next batch starts (None: done)."""

    digests: int
    drift: tuple[SummaryDrift, ...]
    next_cursor: SummaryCursor | None


@dataclass(frozen=True)
class SummaryCheck:
    """A whole check or rebuild: digests recomputed, rows in drift (the first `MAX_LISTED`
    listed), and whether they were rewritten."""

    digests: int
    wrong: int
    drift: tuple[SummaryDrift, ...]
    fixed: bool

    def to_json(self) -> dict[str, Any]:
        return {"digests": self.digests, "wrong": self.wrong, "fixed": self.fixed,
                "drift": [d.to_json() for d in self.drift]}


@runtime_checkable
class SummarySource(Protocol):
    """A storage whose summaries can be recomputed one batch at a time."""

    def summary_batch(self, cursor: SummaryCursor, limit: int, fix: bool) -> SummaryBatch:
        """Recompute the summaries the next `limit` entries (or summary digests) from
        `cursor` decide, in one transaction, rewriting the rows in drift when `fix`."""
        ...


def summary_drift(expected: Sequence[SummaryRow], stored: Sequence[SummaryRow]
                  ) -> tuple[SummaryDrift, ...]:
    """The rows of `stored` that disagree with `expected` (both about the same digests),
    ordered by digest and predicate type."""
    want = {(d, t): (n, b, last) for d, t, n, b, last in expected}
    have = {(d, t): (n, b, last) for d, t, n, b, last in stored}
    return tuple(SummaryDrift(d, t, have.get((d, t)), want.get((d, t)))
                 for d, t in sorted(want.keys() | have.keys())
                 if have.get((d, t)) != want.get((d, t)))


def check_summaries(storage: SummarySource, fix: bool, batch: int = SUMMARY_BATCH,
                    progress: Callable[[SummaryCheck, SummaryCursor | None], None] | None = None
                    ) -> SummaryCheck:
    """Check every digest summary against the entries (rewriting those in drift when
    `fix`), `batch` entries per transaction; `progress` hears the totals and the next
    cursor after each."""
    if not 1 <= batch <= MAX_SUMMARY_BATCH:
        raise ValueError(f"a batch is 1 to {MAX_SUMMARY_BATCH} entries, not {batch}")
    cursor: SummaryCursor | None = SummaryCursor()
    digests = wrong = 0
    listed: list[SummaryDrift] = []
    while cursor is not None:
        step = storage.summary_batch(cursor, batch, fix)
        digests += step.digests
        wrong += len(step.drift)
        listed += step.drift[: MAX_LISTED - len(listed)]
        cursor = step.next_cursor
        if progress is not None:
            progress(SummaryCheck(digests, wrong, tuple(listed), fix), cursor)
    return SummaryCheck(digests, wrong, tuple(listed), fix)


# ---- one batch, in either dialect (statements written with `?` marks)


@dataclass(frozen=True)
class SummarySql:
    """What differs between the dialects: the parameter mark, and how `subjects` is
    searched for one digest (a WHERE clause and its arguments)."""

    mark: str
    one_digest: str
    digest_args: Callable[[str], tuple[object, ...]]


#: Runs one statement with its arguments; the rows it returns ([] for none).
Query = Callable[[str, tuple[object, ...]], Sequence[tuple[Any, ...]]]

SQLITE_SQL = SummarySql("?", "sha_key = ? AND sha256 = ?", lambda d: (sha_key(d), d))
POSTGRES_SQL = SummarySql("%s", "sha256 = ?", lambda d: (d,))

_UPSERT = ("INSERT INTO digest_summaries (sha256, predicate_type, entries, bytes, last_idx) "
           "VALUES (?, ?, ?, ?, ?) ON CONFLICT (sha256, predicate_type) DO UPDATE SET "
           "entries = excluded.entries, bytes = excluded.bytes, last_idx = excluded.last_idx")


def run_batch(query: Query, sql: SummarySql, cursor: SummaryCursor, limit: int, fix: bool
              ) -> SummaryBatch:
    """One batch (the caller holds the transaction): rows in drift are rewritten when `fix`."""
    def q(statement: str, *args: object) -> Sequence[tuple[Any, ...]]:
        return query(statement.replace("?", sql.mark), args)

    nxt: SummaryCursor | None
    if cursor.digest is None:
        named = [str(r[0]) for r in q(
            "SELECT DISTINCT sha256 FROM subjects WHERE idx >= ? AND idx < ?",
            cursor.index, cursor.index + limit)]
        digests = [d for d in named if not q(
            f"SELECT 1 FROM subjects WHERE {sql.one_digest} AND idx < ? LIMIT 1",
            *sql.digest_args(d), cursor.index)]
        more = q("SELECT 1 FROM entries WHERE idx >= ? LIMIT 1", cursor.index + limit)
        nxt = SummaryCursor(cursor.index + limit) if more else SummaryCursor(digest="")
    else:
        listed = [str(r[0]) for r in q(
            "SELECT DISTINCT sha256 FROM digest_summaries WHERE sha256 > ? ORDER BY sha256 "
            "LIMIT ?", cursor.digest, limit)]
        digests = [d for d in listed if not q(
            f"SELECT 1 FROM subjects WHERE {sql.one_digest} LIMIT 1", *sql.digest_args(d))]
        nxt = SummaryCursor(digest=listed[-1]) if len(listed) == limit else None
    expected: list[SummaryRow] = []
    stored: list[SummaryRow] = []
    for d in digests:
        expected += _rows(q(SUMMARY_RECOMPUTE.format(where=f"WHERE {sql.one_digest}"),
                            *sql.digest_args(d)))
        stored += _rows(q("SELECT sha256, predicate_type, entries, bytes, last_idx "
                          "FROM digest_summaries WHERE sha256 = ?", d))
    drift = summary_drift(expected, stored)
    for row in drift if fix else ():
        if row.expected is None:
            q("DELETE FROM digest_summaries WHERE sha256 = ? AND predicate_type = ?",
              row.digest, row.predicate_type)
        else:
            q(_UPSERT, row.digest, row.predicate_type, *row.expected)
    return SummaryBatch(len(digests), drift, nxt)


def _rows(rows: Sequence[tuple[Any, ...]]) -> list[SummaryRow]:
    return [(str(d), str(t), int(n), int(b), int(last)) for d, t, n, b, last in rows]


def sqlite_batch(conn: sqlite3.Connection, cursor: SummaryCursor, limit: int, fix: bool
                 ) -> SummaryBatch:
    """`run_batch` in one SQLite transaction."""
    conn.execute("BEGIN IMMEDIATE" if fix else "BEGIN")
    try:
        got = run_batch(lambda s, a: conn.execute(s, a).fetchall(), SQLITE_SQL, cursor,
                        limit, fix)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return got

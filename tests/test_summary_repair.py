"""`ktl repair --summaries`: the per-digest summaries are checked against and rebuilt from
the entries, batch by batch, touching nothing else (issue 26 row 3's leftover).

Attack: a hand with write access to the database deletes the reproduction row of a
kernel's summary (the verdict reading then skips the digest, so a stranger's refutation
of its claim disappears and the kernel shows no red), zeroes another row and adds one for
a digest no entry names. The check lists exactly those rows and changes nothing; the
rebuild restores the summaries the entries give, the refutation is read again, every
other table is as it was, and a second run finds nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_pages_helpers import (
    NAME,
    benchmark_body,
    digest_of,
    kernel_body,
    named_reproduction,
    signed,
)

from attest import BENCHMARK_V1, KERNEL_V1, REPRODUCTION_V1, generate_private_key
from client.cli import main
from ledger.sequencer import Sequencer, Submission
from ledger.server import load_or_create_signer
from ledger.server._admit import admit_bytes
from ledger.storage import (
    DB_NAME,
    EntryFacts,
    LogStorage,
    SqliteStorage,
    SummaryCheck,
    SummaryCursor,
    SummaryDrift,
    check_summaries,
)
from ledger.tlog.merkle import leaf_hash
from ledger.tlog.note import NoteSigner
from ledger.web._verdict_reading import read_verdicts

ORIGIN = "summaries.example/log"
KERNEL = digest_of("k")
UNNAMED = "ee" * 32


def _fill(storage: LogStorage, signer: NoteSigner) -> dict[int, str]:
    """A kernel, its claim, a stranger's refutation, and 60 entries about 30 other digests
    (several batches of 7); returns the claim's {index: leaf hex}."""
    seq = Sequencer(storage, signer, signer.name)
    kernel = signed(NAME, KERNEL, KERNEL_V1, kernel_body())
    claim = signed(NAME, KERNEL, BENCHMARK_V1, benchmark_body([4.0]))
    seq.integrate([admit_bytes(kernel), admit_bytes(claim)])
    refutation = signed(NAME, KERNEL, REPRODUCTION_V1, named_reproduction(
        (0, leaf_hash(kernel).hex()), KERNEL, [(1, leaf_hash(claim).hex(), 4.0, 1.0)]))
    seq.integrate([admit_bytes(refutation)])
    other = [Submission(f"entry {i}".encode(), EntryFacts(
        KERNEL_V1 if i % 2 else BENCHMARK_V1, (("x", digest_of(f"d{i % 30}")),), ("cd" * 32,)))
        for i in range(60)]
    seq.integrate(other)
    return {1: leaf_hash(claim).hex()}


def _make_log(data: Path) -> dict[int, str]:
    storage = SqliteStorage(data)
    try:
        return _fill(storage, load_or_create_signer(data, ORIGIN))
    finally:
        storage.close()


def _db(data: Path) -> sqlite3.Connection:
    return sqlite3.connect(data / DB_NAME, isolation_level=None)


def _dump(data: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows (what "nothing else changed" compares)."""
    conn = _db(data)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
                for t in tables}
    finally:
        conn.close()


def _tamper(data: Path) -> None:
    conn = _db(data)
    try:
        _tamper_with(lambda sql, args: conn.execute(sql, args))
    finally:
        conn.close()


def _tamper_with(execute: Callable[[str, tuple[object, ...]], object]) -> None:
    """Delete the kernel's reproduction row, zero another, add one no entry names."""
    execute("DELETE FROM digest_summaries WHERE sha256 = ? AND predicate_type = ?",
            (KERNEL, REPRODUCTION_V1))
    execute("UPDATE digest_summaries SET entries = 0 WHERE sha256 = ? AND predicate_type = ?",
            (digest_of("d3"), KERNEL_V1))
    execute("INSERT INTO digest_summaries VALUES (?, ?, 5, 500, 2)", (UNNAMED, REPRODUCTION_V1))


def _refutations(data: Path, claims: dict[int, str]) -> list[str]:
    storage = SqliteStorage(data)
    try:
        reading = read_verdicts(storage, storage.entry_count(), claims, [KERNEL], {})
        return [v.verdict for v in reading.verdicts.get(1, [])]
    finally:
        storage.close()


def _check(data: Path, fix: bool, batch: int = 7) -> tuple[SummaryCheck, list[SummaryCursor | None]]:
    storage = SqliteStorage(data)
    seen: list[SummaryCursor | None] = []
    try:
        got = check_summaries(storage, fix, batch, lambda _c, cursor: seen.append(cursor))
    finally:
        storage.close()
    return got, seen


@pytest.fixture
def log(tmp_path: Path) -> tuple[Path, dict[int, str]]:
    data = tmp_path / "log"
    return data, _make_log(data)


def test_a_sound_log_checks_clean_in_batches(log: tuple[Path, dict[int, str]]) -> None:
    data, _ = log
    before = _dump(data)
    got, seen = _check(data, fix=True)
    assert (got.digests, got.wrong, got.drift) == (31, 0, ())
    # 63 entries in batches of 7, then the 31 summary digests in batches of 7 (5)
    assert seen[:9] == [SummaryCursor(7 * i) for i in range(1, 9)] + [SummaryCursor(digest="")]
    assert seen[-1] is None and len(seen) == 9 + 5
    assert _dump(data) == before


def test_a_tampered_summary_is_found_then_rebuilt_and_nothing_else_changes(
        log: tuple[Path, dict[int, str]]) -> None:
    data, claims = log
    sound = _dump(data)
    assert _refutations(data, claims) == ["refuted"]
    _tamper(data)
    assert _refutations(data, claims) == []  # the attack: the refutation is not read
    tampered = _dump(data)
    got, _ = _check(data, fix=False)
    assert got.wrong == 3 and not got.fixed
    rows = {(d, t): (n, b, last) for d, t, n, b, last in sound["digest_summaries"]}
    assert got.drift == (
        SummaryDrift(KERNEL, REPRODUCTION_V1, None, rows[KERNEL, REPRODUCTION_V1]),
        SummaryDrift(digest_of("d3"), KERNEL_V1, (0, 15, 36), (2, 15, 36)),
        SummaryDrift(UNNAMED, REPRODUCTION_V1, (5, 500, 2), None),
    )
    assert _dump(data) == tampered  # the check changed nothing
    got, _ = _check(data, fix=True)
    assert got.wrong == 3 and got.fixed
    assert _dump(data) == sound
    assert _refutations(data, claims) == ["refuted"]
    again, _ = _check(data, fix=True, batch=1000)
    assert again.wrong == 0 and _dump(data) == sound


def test_ktl_repair_summaries_checks_then_rebuilds(log: tuple[Path, dict[int, str]]) -> None:
    data, _ = log
    sound = _dump(data)
    _tamper(data)
    runner = CliRunner()
    res = runner.invoke(main, ["repair", "--data", str(data), "--summaries", "--check-only"])
    assert res.exit_code == 1, res.output
    assert f"summary {UNNAMED} {REPRODUCTION_V1}: stored (5, 500, 2)" in res.stdout
    assert "found 3 summary rows that disagree" in res.stdout
    assert "summaries: 63 of 63 entries, then the digests no entry names: 31 digests, 2 rows" \
        in res.stderr
    assert "summaries: done: 32 digests, 3 rows disagree" in res.stderr
    res = runner.invoke(main, ["repair", "--data", str(data), "--summaries", "--json"])
    assert res.exit_code == 0, res.output
    assert _dump(data) == sound
    res = runner.invoke(main, ["repair", "--data", str(data), "--summaries", "--check-only"])
    assert res.exit_code == 0 and "found 0 summary rows" in res.stdout
    res = runner.invoke(main, ["repair", "--database", "postgresql://h/db"])
    assert res.exit_code == 2 and "--database works with --summaries only" in res.output


def test_a_batch_outside_the_bounds_is_refused(log: tuple[Path, dict[int, str]]) -> None:
    with pytest.raises(ValueError, match="1 to 10000"):
        _check(log[0], fix=False, batch=0)


@pytest.mark.postgresql
def test_on_postgresql_the_same_tamper_is_found_then_rebuilt(pg_url: str) -> None:
    import psycopg

    from ledger.storage._postgres import PostgresStorage

    def dump() -> dict[str, list[tuple[object, ...]]]:
        with psycopg.connect(pg_url) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' ORDER BY table_name")]
            return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
                    for t in tables}

    storage = PostgresStorage(pg_url, pool_size=2)
    try:
        claims = _fill(storage, NoteSigner(ORIGIN, generate_private_key()))
        sound = dump()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            _tamper_with(lambda sql, args: conn.execute(sql.replace("?", "%s"), args))
        tampered = dump()
        res = CliRunner().invoke(main, ["repair", "--database", pg_url, "--summaries",
                                        "--check-only"])
        assert res.exit_code == 1 and "found 3 summary rows" in res.stdout, res.output
        assert read_verdicts(storage, 63, claims, [KERNEL], {}).verdicts == {}
        got = check_summaries(storage, fix=False, batch=7)
        assert (got.digests, got.wrong) == (31 + 1, 3) and dump() == tampered
        assert [d.digest for d in got.drift] == [KERNEL, digest_of("d3"), UNNAMED]
        with storage.integration_lock():
            assert check_summaries(storage, fix=True, batch=7).wrong == 3
            assert check_summaries(storage, fix=True).wrong == 0
        assert dump() == sound
        assert [v.verdict for v in read_verdicts(storage, 63, claims, [KERNEL], {}).verdicts[1]
                ] == ["refuted"]
    finally:
        storage.close()

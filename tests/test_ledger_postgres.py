"""The PostgreSQL backend: schema, one integrator across storages, no forks, start-up check.

The storage contract itself runs against every backend in test_ledger_storage.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.sequencer import Sequencer, Submission
from ledger.server import ServerConfig
from ledger.storage import (
    EntryFacts,
    IntegratedBatch,
    StorageError,
    StoredCheckpoint,
    StoredEntry,
    check_database_url,
    check_log,
    open_storage,
    redact_url,
)
from ledger.storage._pg_schema import INTEGRATE_LOCK, SCHEMA_VERSION
from ledger.storage._postgres import PostgresStorage
from ledger.tlog.merkle import leaf_hash
from ledger.tlog.note import NoteSigner

pytestmark = pytest.mark.postgresql

FACTS = EntryFacts("https://p/kernel/v1", (("acme/k", "ab" * 32),), ("cd" * 32,))
SIGNER = NoteSigner("pg.example/log", Ed25519PrivateKey.from_private_bytes(bytes(range(32))))


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresStorage]:
    s = PostgresStorage(pg_url, pool_size=3)
    yield s
    s.close()


def _subs(lo: int, hi: int) -> list[Submission]:
    return [Submission(f"entry {i}".encode(), FACTS) for i in range(lo, hi)]


def test_database_urls_are_checked_and_never_shown_with_a_password() -> None:
    for good in ("postgresql://u@h/db", "postgres:///db?host=/run/pg"):
        assert check_database_url(good) == good
    for bad in ("mysql://u@h/db", "postgresql://u@h/db with space", "", "x" * 3000, 42,
                "sqlite:///etc/passwd"):
        with pytest.raises(StorageError, match="postgresql:// URL"):
            check_database_url(bad)
    assert redact_url("postgresql://ktl:s3cret@db.example/log") == "postgresql://ktl:***@db.example/log"
    assert "s3cret" not in redact_url("postgresql://db/log?user=ktl&password=s3cret")
    config = ServerConfig(data_dir="/x", database="postgresql://ktl:s3cret@db/log")
    assert "s3cret" not in str(config.to_json())
    with pytest.raises(ValueError, match="postgresql:// URL"):
        ServerConfig(data_dir="/x", database="file:///etc/passwd")


def test_unreachable_database_is_a_clear_error(tmp_path: object) -> None:
    with pytest.raises(StorageError, match=r"cannot connect to the database postgresql://ktl:\*\*\*@"):
        PostgresStorage(f"postgresql://ktl:pw@/nodb?host={tmp_path}", connect_timeout=2)


def test_schema_version_recorded_and_newer_refused(pg_url: str) -> None:
    s = open_storage(None, pg_url)
    s.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)
        conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(StorageError, match="newer than this ktl"):
        PostgresStorage(pg_url)


def test_migration_to_version_4_summarizes_the_stored_entries(pg_url: str) -> None:
    s = PostgresStorage(pg_url, pool_size=2)
    try:
        Sequencer(s, SIGNER, SIGNER.name).integrate(_subs(0, 30))
        want = s.digest_summary("ab" * 32)
    finally:
        s.close()
    assert [(k.entries, k.last_index) for k in want.kinds] == [(30, 29)]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE digest_summaries")
        conn.execute("UPDATE schema_version SET version = 3")
    s = PostgresStorage(pg_url, pool_size=2)
    try:
        assert s.digest_summary("ab" * 32) == want  # rebuilt from the entries
    finally:
        s.close()


def test_sequencer_on_postgres_passes_the_startup_check(pg: PostgresStorage, pg_url: str) -> None:
    seq = Sequencer(pg, SIGNER, SIGNER.name)
    for lo in range(0, 700, 233):
        seq.integrate(_subs(lo, min(lo + 233, 700)))
    # A second frontend on the same database sees the same log, and carries on.
    other = PostgresStorage(pg_url, pool_size=2)
    try:
        result = check_log(other, SIGNER.verifier(), SIGNER.name, deep=True, repair=False)
        assert result.size == 700 and result.checkpoints == 4
        receipts = Sequencer(other, SIGNER, SIGNER.name).integrate(_subs(690, 710))
        assert [r.duplicate for r in receipts] == [True] * 10 + [False] * 10
        assert receipts[-1].index == 709
    finally:
        other.close()
    # The old integrator notices the tree moved and reloads its right edge.
    assert seq.integrate(_subs(710, 711))[0].index == 710
    assert check_log(pg, SIGNER.verifier(), SIGNER.name, deep=True, repair=False).size == 711
    assert pg.read_file("tile/entries/001") is not None
    assert pg.read_file("tile/entries/002.p/199") is not None


def test_startup_check_refuses_a_tampered_bundle_row(pg: PostgresStorage, pg_url: str) -> None:
    Sequencer(pg, SIGNER, SIGNER.name).integrate(_subs(0, 5))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute("SELECT data FROM files WHERE path = 'tile/entries/000.p/5'").fetchone()
        conn.execute("UPDATE files SET data = %s WHERE path = 'tile/entries/000.p/5'",
                     (bytes(row[0]).replace(b"entry 3", b"entry 9"),))
    with pytest.raises(StorageError, match=r"refusing to serve: entry bundle file tile/entries/000.p/5"):
        check_log(pg, SIGNER.verifier(), SIGNER.name, deep=True)


def _batch(first: int, count: int, tag: str) -> IntegratedBatch:
    entries = tuple(
        StoredEntry(first + i, leaf_hash(f"{tag} {i}".encode()), f"{tag} {i}".encode(), "p",
                    (("a/b", "00" * 32),), (), 1.0)
        for i in range(count)
    )
    size = first + count
    return IntegratedBatch(entries, {}, StoredCheckpoint(size, bytes(32), tag.encode(), 1.0))


def test_a_stale_integrator_cannot_fork_the_tree(pg: PostgresStorage, pg_url: str) -> None:
    """Two frontends both believe the log has 2 entries; only the first commit lands."""
    other = PostgresStorage(pg_url, pool_size=2)
    try:
        pg.commit_batch(_batch(0, 2, "base"))
        with pg.integration_lock():
            pg.commit_batch(_batch(2, 3, "mine"))
        with pytest.raises(StorageError, match="starts at 2 but the log holds 5"):
            other.commit_batch(_batch(2, 4, "theirs"))
        # Same size, another root: refused whatever the entries say.
        with pytest.raises(StorageError):
            other.commit_batch(_batch(5, 1, "base"))  # leaf "base 0" is already logged
        assert [c.note for c in pg.checkpoints(10)] == [b"mine", b"base"]
        assert pg.entry_count() == 5
    finally:
        other.close()


def _wait_for_a_lock_waiter(pg_url: str, timeout: float = 10.0) -> None:
    """Until a session waits (not granted) on the integration lock: a positive signal that
    the other frontend asked, not a sleep that passes when it never got that far."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(pg_url, autocommit=True) as admin:
        while admin.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                            "AND NOT granted AND objid = %s", (INTEGRATE_LOCK,)).fetchone() == (0,):
            assert time.monotonic() < deadline, "the other frontend never asked for the lock"
            time.sleep(0.01)


def test_integration_lock_is_one_across_frontends_and_freed_by_a_dead_session(
    pg: PostgresStorage, pg_url: str,
) -> None:
    other = PostgresStorage(pg_url, pool_size=2)
    got = threading.Event()

    def wait_for_lock() -> None:
        with other.integration_lock():
            got.set()
            other.commit_batch(_batch(0, 1, "taken over"))

    try:
        with pg.integration_lock():
            waiter = threading.Thread(target=wait_for_lock)
            waiter.start()
            _wait_for_a_lock_waiter(pg_url)  # the other frontend is asking for the lock now
            assert not got.is_set(), "two integrators held the lock at once"
            # The holder's session dies (SIGKILL, lost network): the server frees the lock.
            with psycopg.connect(pg_url, autocommit=True) as admin:
                holder = admin.execute(
                    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND objid = %s", (INTEGRATE_LOCK,),
                ).fetchone()
                assert holder is not None
                admin.execute("SELECT pg_terminate_backend(%s)", (holder[0],))
            assert got.wait(10), "no frontend took over the integration"
            waiter.join(10)
            # The old holder's commit cannot land: its session is gone.
            with pytest.raises(StorageError):
                pg.commit_batch(_batch(1, 1, "too late"))
        assert [c.note for c in pg.checkpoints(10)] == [b"taken over"]
        # And the old frontend integrates again once it reconnects.
        with pg.integration_lock():
            pg.commit_batch(_batch(1, 1, "back"))
        assert pg.entry_count() == 2
    finally:
        other.close()

"""`copy_log` / `ktl migrate`: a log copied between backends proves the same checkpoints."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from ledger_support import KTL

from ledger.sequencer import Sequencer, Submission
from ledger.server import load_or_create_signer
from ledger.storage import (
    EntryFacts,
    LogStorage,
    MemoryStorage,
    SqliteStorage,
    StorageError,
    check_log,
    copy_log,
)
from ledger.tlog.note import NoteSigner

FACTS = EntryFacts("https://p/kernel/v1", (("acme/k", "ab" * 32),), ("cd" * 32,))
SIGNER = NoteSigner("migrate.example/log", Ed25519PrivateKey.from_private_bytes(bytes(range(32))))


def _fill(storage: LogStorage, signer: NoteSigner, sizes: list[int]) -> None:
    seq = Sequencer(storage, signer, signer.name)
    done = storage.entry_count()
    for n in sizes:
        seq.integrate([Submission(f"entry {i}".encode(), FACTS) for i in range(done, done + n)])
        done += n
    for i in range(3):
        blob = f"blob {i}".encode()
        storage.put_blob(hashlib.sha256(blob).hexdigest(), blob)


def _same_log(a: LogStorage, b: LogStorage) -> None:
    assert a.checkpoints(500) == b.checkpoints(500)
    size = a.entry_count()
    assert size == b.entry_count()
    for lo in range(0, size, 1000):
        assert a.get_entries(lo, min(size, lo + 1000)) == b.get_entries(lo, min(size, lo + 1000))
    assert a.blob_digests() == b.blob_digests()


def test_copy_keeps_every_checkpoint_and_proves_the_root(tmp_path: Path) -> None:
    src = MemoryStorage()
    # Batches that end inside, exactly on and across tile boundaries.
    _fill(src, SIGNER, [1, 254, 1, 300, 256, 70_000 // 100])
    check_log(src, SIGNER.verifier(), SIGNER.name)
    dst = SqliteStorage(tmp_path / "copy")
    seen: list[tuple[str, int]] = []
    result = copy_log(src, dst, SIGNER.verifier(), SIGNER.name,
                      lambda what, done, total: seen.append((what, done)))
    assert result.size == src.entry_count() == 1512 and result.checkpoints == 6 and result.blobs == 3
    assert result.checkpoint == src.latest_checkpoint()
    assert seen[-2:] == [("entries", 1512), ("blobs", 3)], "long copies show progress"
    _same_log(src, dst)
    # The current tiles, bundles and checkpoint are written (partials of earlier sizes are
    # not: the read path serves those from the tile rows).
    copied = set(dst.list_files())
    assert {"checkpoint", "tile/entries/005.p/232", "tile/1/000.p/5"} <= copied <= set(src.list_files())
    for path in copied:
        assert dst.read_file(path) == src.read_file(path), path
    # The copy goes on growing like the original.
    Sequencer(dst, SIGNER, SIGNER.name).integrate([Submission(b"after the copy", FACTS)])
    assert check_log(dst, SIGNER.verifier(), SIGNER.name, deep=True).size == 1513
    dst.close()


def test_copy_refuses_a_non_empty_destination() -> None:
    src, dst = MemoryStorage(), MemoryStorage()
    _fill(src, SIGNER, [3])
    _fill(dst, SIGNER, [1])
    with pytest.raises(StorageError, match="already holds a log"):
        copy_log(src, dst, SIGNER.verifier())


def test_copy_refuses_a_tampered_source_entry() -> None:
    src = MemoryStorage()
    _fill(src, SIGNER, [5, 5])
    forged = dataclasses.replace(src._entries[7], data=b"entry 99")
    src._entries[7] = forged
    with pytest.raises(StorageError, match="entry 7 does not hash to its stored leaf hash"):
        copy_log(src, MemoryStorage(), SIGNER.verifier())


def test_copy_refuses_a_source_signed_by_another_key() -> None:
    src = MemoryStorage()
    _fill(src, SIGNER, [4])
    other = NoteSigner("migrate.example/log", Ed25519PrivateKey.from_private_bytes(bytes(32)))
    with pytest.raises(StorageError, match="does not verify with the log key"):
        copy_log(src, MemoryStorage(), other.verifier())


def test_copy_refuses_a_blob_that_is_not_its_hash() -> None:
    src = MemoryStorage()
    _fill(src, SIGNER, [2])
    name = src.blob_digests()[0]
    src._blobs[name] = (b"swapped bytes", 0.0)
    with pytest.raises(StorageError, match=f"blob sha256:{name} does not hash"):
        copy_log(src, MemoryStorage(), SIGNER.verifier())


@pytest.mark.slow
@pytest.mark.postgresql
def test_ktl_migrate_to_postgresql_and_back(tmp_path: Path, pg_url: str) -> None:
    data = tmp_path / "log"
    signer = load_or_create_signer(data, "migrate.example/log")
    src = SqliteStorage(data)
    _fill(src, signer, [10, 300])
    want = src.latest_checkpoint()
    src.close()
    out = subprocess.run([*KTL, "migrate", "--data", str(data), "--database", pg_url],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert want is not None and f"root {want.root_hash.hex()} at size 310" in out.stdout
    assert "copied 310 of 310 entries" in out.stderr
    # Again: the database is no longer empty, and nothing is touched.
    again = subprocess.run([*KTL, "migrate", "--data", str(data), "--database", pg_url],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 1 and "already holds a log" in again.stderr
    # The reverse, for backups: into a new data folder holding only the key.
    backup = tmp_path / "backup"
    back = subprocess.run([*KTL, "migrate", "--data", str(backup), "--database", pg_url,
                           "--key", str(data / "log.key"), "--to", "sqlite"],
                          capture_output=True, text=True, timeout=120)
    assert back.returncode == 0, back.stderr
    a, b = SqliteStorage(data), SqliteStorage(backup)
    try:
        _same_log(a, b)
        assert b.latest_checkpoint() == want
    finally:
        a.close()
        b.close()


@pytest.mark.slow
def test_ktl_migrate_says_what_is_missing(tmp_path: Path) -> None:
    out = subprocess.run([*KTL, "migrate", "--data", str(tmp_path), "--database",
                          "postgresql:///nowhere"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "no SQLite log" in out.stderr
    bad = subprocess.run([*KTL, "migrate", "--data", str(tmp_path), "--database", "mysql://x/y",
                          "--to", "sqlite", "--key", "/dev/null"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "error:" in bad.stderr
    # $KTL_DATABASE stands in for --database (a password stays out of the process list).
    load_or_create_signer(tmp_path / "keys", "x.example/log")
    (tmp_path / "log.db").write_bytes(b"")
    env = {**os.environ, "KTL_DATABASE": "mysql://ktl:s3cret@db/log"}
    viaenv = subprocess.run([*KTL, "migrate", "--data", str(tmp_path), "--key",
                             str(tmp_path / "keys" / "log.key")],
                            capture_output=True, text=True, timeout=60, env=env)
    assert viaenv.returncode == 1 and "must be a postgresql:// URL" in viaenv.stderr
    assert "s3cret" not in viaenv.stderr

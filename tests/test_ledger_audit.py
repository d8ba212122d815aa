"""Corruption is found, named and contained: the start-up check, the deep audit, `ktl repair`.

Each test damages a stopped log the way a disk or an attacker would (a flipped byte in
the SQLite file, a checkpoint row whose signature fails, a tile file with other bytes, a
truncated bundle) and checks that serving is refused naming the object, that the deep
audit lists every one, and that repair rewrites only what is derivable.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from client.cli import main
from ledger.sequencer import Sequencer, Submission
from ledger.serve import prepare
from ledger.server import ServerConfig, load_or_create_signer
from ledger.storage import (
    DB_NAME,
    EntryFacts,
    LogAudit,
    Problem,
    SqliteStorage,
    StorageError,
    audit_log,
    repair_log,
)

ORIGIN = "audit.example/log"
FACTS = EntryFacts("https://p/kernel/v1", (("acme/k", "ab" * 32),), ("cd" * 32,))
TILE = Path("tiles") / "tile"


def _make_log(data: Path, sizes: tuple[int, ...] = (260, 40)) -> None:
    """A stopped log with one checkpoint per batch: a full tile and a partial one."""
    signer = load_or_create_signer(data, ORIGIN)
    storage = SqliteStorage(data)
    seq = Sequencer(storage, signer, signer.name)
    n = 0
    for size in sizes:
        seq.integrate([Submission(f"entry {i:05d}".encode(), FACTS) for i in range(n, n + size)])
        n += size
    storage.close()


def _audit(data: Path) -> LogAudit:
    signer = load_or_create_signer(data, ORIGIN)
    storage = SqliteStorage(data)
    try:
        return audit_log(storage, signer.verifier(), ORIGIN)
    finally:
        storage.close()


def _repair(data: Path) -> tuple[str, ...]:
    signer = load_or_create_signer(data, ORIGIN)
    storage = SqliteStorage(data)
    try:
        return repair_log(storage, signer.verifier(), ORIGIN)
    finally:
        storage.close()


def _prepare(data: Path, deep: bool = False) -> int:
    return prepare(ServerConfig(data_dir=str(data), origin=ORIGIN), deep=deep)[1]


def _snapshot(data: Path) -> dict[str, str]:
    """Every file's hash but the lock (what "nothing was touched" compares)."""
    return {str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(data.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def _flip_in_db(data: Path, needle: bytes) -> None:
    db = data / DB_NAME
    raw = bytearray(db.read_bytes())
    at = raw.find(needle)
    assert at >= 0, "the entry is not in the main database file"
    raw[at + len(needle) - 1] ^= 0x01
    db.write_bytes(bytes(raw))


@pytest.fixture
def log(tmp_path: Path) -> Path:
    data = tmp_path / "log"
    _make_log(data)
    return data


def test_a_sound_log_audits_clean_and_repair_changes_nothing(log: Path) -> None:
    before = _snapshot(log)
    audit = _audit(log)
    assert audit.size == 300 and audit.problems == () and audit.more == 0
    assert _repair(log) == ()
    assert _snapshot(log) == before
    assert _prepare(log, deep=True) == 300


def test_audit_and_problem_round_trip_through_json() -> None:
    audit = LogAudit(7, (Problem("lost", "entry 3", "does not hash"),
                         Problem("damaged", "tile/0/000", "differs")), more=2)
    assert LogAudit.from_json(json.loads(json.dumps(audit.to_json()))) == audit
    with pytest.raises(StorageError, match=r"lost\|damaged\|incomplete"):
        Problem.from_json({"kind": "fine", "object": "x", "message": "y"})


def test_a_flipped_byte_in_the_database_is_named_and_repair_refuses(log: Path) -> None:
    _flip_in_db(log, b"entry 00123")
    with pytest.raises(StorageError, match="entry 123 does not hash"):
        _prepare(log)
    audit = _audit(log)
    assert [p.obj for p in audit.lost] == ["entry 123"]
    before = _snapshot(log)
    with pytest.raises(StorageError, match=r"refusing to repair: .*entry 123"):
        _repair(log)
    assert _snapshot(log) == before  # nothing touched


def test_a_checkpoint_row_that_does_not_verify_stops_the_log(log: Path) -> None:
    conn = sqlite3.connect(log / DB_NAME)
    (note,) = conn.execute("SELECT note FROM checkpoints WHERE size = 260").fetchone()
    forged = note[:-10] + bytes([note[-10] ^ 0x20]) + note[-9:]  # inside the signature line
    conn.execute("UPDATE checkpoints SET note = ? WHERE size = 260", (forged,))
    conn.commit()
    conn.close()
    with pytest.raises(StorageError, match="checkpoint at size 260 does not verify"):
        _prepare(log)
    assert [p.obj for p in _audit(log).lost] == ["checkpoint at size 260"]
    with pytest.raises(StorageError, match="checkpoint at size 260"):
        _repair(log)


def test_the_deep_check_names_every_damaged_file_and_repair_rewrites_them(log: Path) -> None:
    tile = log / TILE / "0" / "000"
    tile.write_bytes(bytes(32) + tile.read_bytes()[32:])  # right length, other bytes
    bundle = log / TILE / "entries" / "001.p" / "44"
    bundle.write_bytes(bundle.read_bytes()[:-5])  # truncated
    cp_file = log / "tiles" / "checkpoint"
    cp_file.write_bytes(cp_file.read_bytes().replace(b"\n", b"\n\n", 1))
    audit = _audit(log)
    assert {(p.kind, p.obj) for p in audit.problems} == {
        ("damaged", "tile/0/000"), ("incomplete", "tile/entries/001.p/44"),
        ("damaged", "checkpoint"),
    }
    with pytest.raises(StorageError) as err:
        _prepare(log, deep=True)
    assert "tile/0/000" in str(err.value) and "checkpoint" in str(err.value)
    assert "ktl repair" in str(err.value)
    assert set(_repair(log)) == {"tile/0/000", "tile/entries/001.p/44", "checkpoint"}
    assert _audit(log).problems == ()
    assert _prepare(log, deep=True) == 300


def test_repair_will_not_bless_a_forged_entry_with_matching_files(log: Path) -> None:
    """Attack: change an entry and make its bundle agree; repair must not rewrite anything."""
    _flip_in_db(log, b"entry 00007")
    bundle = log / TILE / "entries" / "000"
    bundle.write_bytes(bundle.read_bytes().replace(b"entry 00007", b"entry 00006", 1))
    before = _snapshot(log)
    with pytest.raises(StorageError, match="entry 7"):
        _repair(log)
    assert _snapshot(log) == before


def test_ktl_repair_lists_then_repairs(log: Path) -> None:
    tile = log / TILE / "1" / "000.p" / "1"
    tile.write_bytes(bytes(reversed(tile.read_bytes())))
    runner = CliRunner()
    res = runner.invoke(main, ["repair", "--data", str(log), "--check-only", "--json"])
    assert res.exit_code == 1, res.output
    audit = LogAudit.from_json(json.loads(res.stdout))
    assert [(p.kind, p.obj) for p in audit.problems] == [("damaged", "tile/1/000.p/1")]
    res = runner.invoke(main, ["repair", "--data", str(log)])
    assert res.exit_code == 0, res.output
    assert "rewrote tile/1/000.p/1" in res.output
    res = runner.invoke(main, ["repair", "--data", str(log), "--check-only"])
    assert res.exit_code == 0 and "0 problems" in res.output


def test_ktl_repair_prints_stored_text_inert(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A problem quotes what was stored, which an attacker may have written: its terminal
    escapes and control characters never reach the terminal."""
    import client.cli.repair as repair

    planted = Problem("damaged", "entry 7", "bytes \x1b]0;owned\x07 and \x1b[2J cleared")
    monkeypatch.setattr(repair, "audit_log", lambda *_a: LogAudit(8, (planted,)))
    res = CliRunner().invoke(main, ["repair", "--data", str(log), "--check-only"])
    assert res.exit_code == 1 and "entry 7" in res.output, res.output
    assert "\x1b" not in res.output and "\x07" not in res.output


def test_ktl_repair_refuses_a_folder_without_a_log(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["repair", "--data", str(tmp_path)])
    assert res.exit_code != 0 and "no log database" in res.output


def test_start_up_removes_a_killed_writers_temporary_files(log: Path) -> None:
    leftover = log / TILE / "0" / ".000.4242.7.tmp"
    leftover.write_bytes(b"half a tile")
    other = log / TILE / "0" / ".keep"  # not a temporary file of ours: left alone
    other.write_bytes(b"x")
    assert _prepare(log) == 300
    assert not leftover.exists() and other.exists()
    assert _audit(log).problems == ()

"""docs/operating.md, "Running a log on PostgreSQL": its commands run literally against a real PostgreSQL.

The doc's database URL becomes a fresh database on the throwaway cluster, its ports
become free ones, and its folders live in a temporary directory.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import threading
from contextlib import ExitStack
from pathlib import Path

import pytest
import requests
from ledger_support import JSON, KTL, check_receipt, entry_bytes, read_serve_banner

from ledger.sequencer import Sequencer, Submission
from ledger.server import load_or_create_signer
from ledger.storage import EntryFacts, SqliteStorage
from ledger.tlog.note import NoteVerifier

pytestmark = [pytest.mark.postgresql, pytest.mark.slow]

README = Path(__file__).resolve().parent.parent / "docs" / "operating.md"
SECTION = "## Running a log on PostgreSQL"
DOC_URL = "postgresql://ktl@db.example/kernels"


def _sh_blocks() -> list[list[list[str]]]:
    text = README.read_text()
    start = text.index(SECTION)
    section = text[start : text.index("\n## ", start + len(SECTION))]
    blocks = []
    for m in re.finditer(r"```sh\n(.*?)```", section, re.S):
        lines = [shlex.split(line.split("#", 1)[0]) for line in m.group(1).splitlines()]
        blocks.append([argv for argv in lines if argv])
    return blocks


def _argv(argv: list[str], url: str) -> list[str]:
    assert argv[0] == "ktl"
    out = [url if a == DOC_URL else a for a in argv[1:]]
    if "--port" in out:
        out[out.index("--port") + 1] = "0"
    return [*KTL, *out]


def _start(stack: ExitStack, argv: list[str], cwd: Path) -> tuple[str, str]:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            start_new_session=True)
    stack.callback(lambda: (os.killpg(proc.pid, signal.SIGKILL), proc.wait(10)))
    base, vkey = read_serve_banner(proc, [], 60.0)
    assert proc.stdout is not None
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    return base, vkey


def test_section_has_the_commands() -> None:
    frontends, migrate = _sh_blocks()
    assert [a[1] for a in frontends] == ["serve", "serve", "log-key"]
    assert [a[1] for a in migrate] == ["migrate", "migrate"]


def test_frontends_from_the_readme_serve_one_log(pg_cluster: object, tmp_path: Path) -> None:
    from pg_support import PgCluster

    assert isinstance(pg_cluster, PgCluster)
    url = pg_cluster.new_database()
    frontends, _ = _sh_blocks()
    with ExitStack() as stack:
        bases = []
        keys = set()
        for argv in frontends[:2]:
            base, vkey = _start(stack, _argv(argv, url), tmp_path)
            bases.append(base)
            keys.add(vkey)
        (vkey,) = keys
        out = subprocess.run(_argv(frontends[2], url), cwd=tmp_path, capture_output=True,
                             text=True, timeout=60, check=True)
        assert out.stdout.strip() == vkey
        verifier = NoteVerifier.from_key_string(vkey)
        for i, base in enumerate(bases):
            body = entry_bytes(i)
            r = requests.post(f"{base}/api/v1/entries", data=body, headers=JSON, timeout=30)
            assert r.status_code == 201, r.text
            check_receipt(r.json(), body, verifier)
        # Both serve the same checkpoint and the same full tiles, from the database.
        notes = {requests.get(f"{b}/checkpoint", timeout=10).content for b in bases}
        assert len(notes) == 1
        # A frontend with another key refuses to serve this log.
        other = subprocess.run(
            [*KTL, "serve", "--data", str(tmp_path / "stranger"), "--database", url,
             "--origin", "example.org/kernels", "--port", "0"],
            capture_output=True, text=True, timeout=60,
        )
        assert other.returncode == 1 and "does not verify with the log key" in other.stderr


def test_migrate_commands_from_the_readme(pg_url: str, tmp_path: Path) -> None:
    _, migrate = _sh_blocks()
    signer = load_or_create_signer(tmp_path / "logdata", "example.org/kernels")
    storage = SqliteStorage(tmp_path / "logdata")
    facts = EntryFacts("https://p/kernel/v1", (("acme/k", "ab" * 32),), ("cd" * 32,))
    Sequencer(storage, signer, signer.name).integrate(
        [Submission(f"entry {i}".encode(), facts) for i in range(300)]
    )
    want = storage.latest_checkpoint()
    storage.close()
    for argv in migrate:
        out = subprocess.run(_argv(argv, pg_url), cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert want is not None and want.root_hash.hex() in out.stdout
    backup = SqliteStorage(tmp_path / "backup")
    try:
        assert backup.latest_checkpoint() == want
    finally:
        backup.close()

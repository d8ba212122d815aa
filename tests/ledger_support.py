"""Shared helpers for the ledger tests: signed entries, servers on 127.0.0.1, proof checks."""

from __future__ import annotations

import base64
import hashlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from werkzeug.serving import make_server

from attest.dsse import sign_envelope
from attest.entry import LogEntry, encode_entry, make_entry
from attest.keys import keyid, public_key_b64
from attest.predicates import KernelPredicate
from attest.statement import PAYLOAD_TYPE, make_statement
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.merkle import leaf_hash, verify_consistency, verify_inclusion
from ledger.tlog.note import NoteVerifier

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


def kernel_predicate(name: str, version: str = "1.0.0") -> KernelPredicate:
    return KernelPredicate.from_json({
        "name": name, "version": version, "op": "matmul", "runtime": "c",
        "entry": "matmul_blocked", "abi_version": 1,
        "sources": [{"path": "matmul.c", "sha256": "ab" * 32}],
        "build": {"compiler": "gcc", "compiler_version": "12.2.0", "flags": ["-O3"]},
        "generator": {"agent": "kernelsmith", "agent_version": "0.3", "model": "m-2026",
                      "prompt_sha256": None},
        "target": {"hardware_class": "x86_64-avx2"},
        "parent": None,
    })


def entry_for(i: int, name: str = "acme/matmul", key: Ed25519PrivateKey = KEY) -> LogEntry:
    """A distinct signed kernel entry for each ``i``."""
    digest = hashlib.sha256(f"kernel source {i}".encode()).hexdigest()
    stmt = make_statement(name, digest, kernel_predicate(name, f"1.0.{i}"))
    return make_entry(stmt, [key])


def signed_payload_entry(payload: bytes, key: Ed25519PrivateKey = KEY) -> dict[str, Any]:
    """A correctly signed entry around arbitrary payload bytes (for bad-statement tests)."""
    env = sign_envelope(payload, PAYLOAD_TYPE, [key])
    return LogEntry(envelope=env, keys={keyid(key.public_key()): public_key_b64(key.public_key())}).to_json()


def entry_json(i: int, name: str = "acme/matmul") -> dict[str, Any]:
    return entry_for(i, name).to_json()


def entry_bytes(i: int, name: str = "acme/matmul") -> bytes:
    return encode_entry(entry_for(i, name))


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """Serve a WSGI app on a free 127.0.0.1 port in a thread; yields the base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


def b64list(items: list[str]) -> list[bytes]:
    return [base64.b64decode(x) for x in items]


def check_receipt(receipt: dict[str, Any], data: bytes, verifier: NoteVerifier) -> tuple[int, bytes]:
    """Verify a submission answer: checkpoint signature and inclusion proof. Returns (size, root)."""
    signed = open_checkpoint(receipt["checkpoint"].encode(), verifier)
    cp = signed.checkpoint
    assert cp.size == receipt["tree_size"]
    assert receipt["leaf_hash"] == leaf_hash(data).hex()
    verify_inclusion(leaf_hash(data), receipt["index"], cp.size,
                     b64list(receipt["inclusion_proof"]), cp.root_hash)
    return cp.size, cp.root_hash


def check_all_consistent(base: str, seen: dict[int, bytes],
                         pairs: Iterable[tuple[int, int]] | None = None) -> None:
    """Every checkpoint seen is consistent with every later one (through the server's proofs).

    Each size is checked against the next (consistency is transitive), or just `pairs`."""
    for a, b in itertools.pairwise(sorted(seen)) if pairs is None else pairs:
        r = requests.get(f"{base}/api/v1/proof/consistency",
                         params={"old_size": a, "new_size": b}, timeout=10)
        assert r.status_code == 200, r.text
        verify_consistency(a, b, seen[a], seen[b], b64list(r.json()["proof"]))


KTL = [sys.executable, "-c", "from client.cli import main; main()"]
JSON = {"Content-Type": "application/json"}


SERVE_WORKERS = 2  # gunicorn workers that `ktl_serve` starts


def read_serve_banner(proc: subprocess.Popen[str], lines: list[str],
                      timeout: float) -> tuple[str, str]:
    """Read `ktl serve`'s lines (kept in `lines`) until it serves: (base URL, verifier key)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    base = vkey = ""
    while time.monotonic() < deadline and not base:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("verifier key:"):
            vkey = line.split(":", 1)[1].strip()
        if line.startswith("serving on "):
            base = line.split()[-1]
    assert base, "".join(lines)
    return base, vkey


@contextmanager
def ktl_serve(data: Path, *extra: str, lines: list[str] | None = None,
              env_extra: dict[str, str] | None = None,
              ) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """Run `ktl serve` on a free port; yields (process, base URL, verifier key).

    Everything it prints is appended to `lines` when given (the rest as it comes)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env_extra or {})}
    proc = subprocess.Popen(
        [*KTL, "serve", "--data", str(data), "--port", "0", "--workers", str(SERVE_WORKERS), "--threads", "8",
         "--batch-delay-ms", "2", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        start_new_session=True,
    )
    try:
        lines = [] if lines is None else lines
        base, vkey = read_serve_banner(proc, lines, 30.0)
        out = proc.stdout
        assert out is not None
        threading.Thread(target=lambda: lines.extend(out), daemon=True).start()  # keep draining
        yield proc, base, vkey
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

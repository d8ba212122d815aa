"""Helpers for the witness tests: a log that grows in memory, and `ktl witness serve` as a process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.tlog.checkpoint import Checkpoint, sign_checkpoint
from ledger.tlog.merkle import MemoryHashStore, consistency_proof, leaf_hash, tree_root
from ledger.tlog.note import NoteSigner
from ledger.tlog.witness import encode_add_checkpoint

KTL = [sys.executable, "-c", "from client.cli import main; main()"]


@dataclass
class FakeLog:
    """A log in memory: append entries, sign checkpoints, prove consistency."""

    origin: str = "example.org/witnessed"
    seed: int = 7
    tag: bytes = b"e"
    hashes: MemoryHashStore = field(default_factory=MemoryHashStore)

    @property
    def signer(self) -> NoteSigner:
        return NoteSigner(self.origin, Ed25519PrivateKey.from_private_bytes(bytes([self.seed]) * 32))

    @property
    def vkey(self) -> str:
        return self.signer.verifier_key_string()

    def grow(self, n: int) -> FakeLog:
        for _ in range(n):
            self.hashes.append(leaf_hash(self.tag + str(self.hashes.size).encode()))
        return self

    def fork(self, tag: bytes) -> FakeLog:
        """A copy with the same history so far that will grow differently."""
        other = FakeLog(self.origin, self.seed, tag)
        for i in range(self.hashes.size):
            other.hashes.append(leaf_hash(self.tag + str(i).encode()))
        return other

    def checkpoint(self, size: int | None = None) -> Checkpoint:
        size = self.hashes.size if size is None else size
        return Checkpoint(self.origin, size, tree_root(size, self.hashes))

    def note(self, size: int | None = None, signer: NoteSigner | None = None) -> bytes:
        return sign_checkpoint(self.checkpoint(size), signer or self.signer)

    def request(self, old: int, size: int | None = None, signer: NoteSigner | None = None
                ) -> bytes:
        size = self.hashes.size if size is None else size
        proof = consistency_proof(old, size, self.hashes) if 0 < old < size else []
        return encode_add_checkpoint(old, proof, self.note(size, signer))


def free_port() -> int:
    """A port free on 127.0.0.1 now (witnesses restart on the same one: policies name URLs)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def ktl_process(args: list[str], key_prefix: str) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """Run a serving `ktl` command; yield (process, base URL, the key printed after `key_prefix`)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([*KTL, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True)
    try:
        lines: list[str] = []
        base = key = ""
        deadline = time.monotonic() + 30
        assert proc.stdout is not None
        while time.monotonic() < deadline and not base:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith(key_prefix):
                key = line.split(":", 1)[1].strip()
            if line.startswith("serving on "):
                base = line.split()[-1]
        assert base, "".join(lines)
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        yield proc, base, key
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def witness_process(data: Path, name: str = "test/witness", port: int = 0
                    ) -> AbstractContextManager[tuple[subprocess.Popen[str], str, str]]:
    """`ktl witness serve` on 127.0.0.1; yields (process, base URL, witness key)."""
    return ktl_process(["witness", "serve", "--data", str(data), "--name", name,
                        "--port", str(port)], "witness key:")


def log_process(data: Path, *extra: str
                ) -> AbstractContextManager[tuple[subprocess.Popen[str], str, str]]:
    """`ktl serve` on a free port; yields (process, base URL, log verifier key)."""
    return ktl_process(["serve", "--data", str(data), "--port", "0", "--workers", "2",
                        "--threads", "8", "--batch-delay-ms", "2", *extra], "verifier key:")

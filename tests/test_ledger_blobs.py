"""Blob abuse (attack 4 of issue 11): unreferenced blobs are collected, uploads have a byte budget.

Through the real server (SQLite, HTTP on 127.0.0.1): a blob no logged entry
references is deleted once older than the grace period; a kernel's source archive
(a subject) and a benchmark's raw samples (a blob reference in the predicate) are
kept; an address that used its byte budget for the hour gets 429.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from ledger_support import serve_app

from attest import BENCHMARK_V1, examples, generate_private_key, make_entry, parse_predicate
from attest.entry import encode_entry
from attest.statement import make_statement, referenced_blobs
from ledger.server import ServerConfig, create_app
from ledger.server._blobgc import BlobCollector

OCTET = {"Content-Type": "application/octet-stream"}


class Server:
    def __init__(self, base: str, app: object) -> None:
        self.base = base
        self.svc = app.extensions["ktl"]  # type: ignore[attr-defined]

    def put(self, blob: bytes) -> requests.Response:
        return requests.put(self.url(blob), data=blob, headers=OCTET, timeout=10)

    def url(self, blob: bytes) -> str:
        return f"{self.base}/api/v1/blobs/sha256:{hashlib.sha256(blob).hexdigest()}"

    def has(self, blob: bytes) -> bool:
        return requests.get(self.url(blob), timeout=10).status_code == 200

    def log_benchmark(self, source: bytes, samples: bytes) -> None:
        body = examples.benchmark(1)
        body["samples"] = {"sha256": hashlib.sha256(samples).hexdigest(), "size": len(samples),
                           "media_type": "application/json"}
        stmt = make_statement("acme/k", hashlib.sha256(source).hexdigest(),
                              parse_predicate(BENCHMARK_V1, body))
        r = requests.post(f"{self.base}/api/v1/entries",
                          data=encode_entry(make_entry(stmt, [generate_private_key()])),
                          headers={"Content-Type": "application/json"}, timeout=30)
        assert r.status_code == 201, r.text


def _server(tmp_path: Path, **cfg: object) -> Iterator[Server]:
    app = create_app(ServerConfig(data_dir=str(tmp_path / "data"), batch_delay_ms=1.0,
                                  max_blob_bytes=4096, **cfg))  # type: ignore[arg-type]
    try:
        with serve_app(app) as base:
            yield Server(base, app)
    finally:
        app.extensions["ktl"].close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    yield from _server(tmp_path)


def test_referenced_blobs_names_subjects_and_blob_references() -> None:
    body = examples.benchmark(1)
    stmt = make_statement("acme/k", "aa" * 32, parse_predicate(BENCHMARK_V1, body))
    assert referenced_blobs(stmt) == {"aa" * 32, body["samples"]["sha256"]}


def test_unreferenced_blobs_are_deleted_after_the_grace_period(server: Server) -> None:
    source, samples, junk, young = b"source archive", b"[1, 2, 3]", b"junk" * 100, b"fresh"
    for blob in (source, samples, junk):
        assert server.put(blob).status_code == 201
    server.log_benchmark(source, samples)
    now = [time.time() + 5.0]  # the three blobs are just over 5 s old
    time.sleep(0.05)
    gc = BlobCollector(server.svc.storage, 5.0, clock=lambda: now[0])
    report = gc.collect()
    assert (report.examined, report.kept, report.deleted) == (3, 2, 1)
    assert report.entries_scanned == 1
    assert server.has(source) and server.has(samples) and not server.has(junk)
    # a blob uploaded later is examined once it is old enough, not before
    assert server.put(young).status_code == 201
    assert gc.collect().examined == 0 and server.has(young)
    now[0] += 3600
    again = gc.collect()
    assert (again.examined, again.deleted) == (1, 1) and not server.has(young)
    assert gc.collect().examined == 0  # each blob is examined once
    # re-uploading a collected blob stores it anew
    assert server.put(junk).status_code == 201 and server.has(junk)


def test_the_server_collects_by_itself(tmp_path: Path) -> None:
    for srv in _server(tmp_path, blob_grace_seconds=1.0):
        keep, junk = b"kept source", b"unreferenced"
        assert srv.put(keep).status_code == 201 and srv.put(junk).status_code == 201
        srv.log_benchmark(keep, b"samples never uploaded")
        deadline = time.monotonic() + 20
        while srv.has(junk) and time.monotonic() < deadline:
            time.sleep(0.25)
        assert not srv.has(junk) and srv.has(keep)


def test_each_address_has_a_byte_budget_per_hour(tmp_path: Path) -> None:
    for srv in _server(tmp_path, blob_bytes_per_hour=10_000):
        assert srv.put(b"a" * 4096).status_code == 201
        assert srv.put(b"b" * 4096).status_code == 201
        r = srv.put(b"c" * 4096)
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
        assert "budget of 10000 bytes per hour" in r.json()["error"]["message"]
        assert 800 <= int(r.headers["Retry-After"]) <= 900  # 2288 bytes short at 2.78 B/s
        assert not srv.has(b"c" * 4096)
        assert srv.put(b"d" * 100).status_code == 201  # what is left of the budget


def test_blob_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="at least max_blob_bytes"):
        ServerConfig(max_blob_bytes=4096, blob_bytes_per_hour=4095)
    with pytest.raises(ValueError, match="blob_grace_seconds"):
        ServerConfig(blob_grace_seconds=0)
    cfg = ServerConfig()
    assert (cfg.blob_grace_seconds, cfg.blob_bytes_per_hour) == (24 * 3600, 1024**3)  # docs/operating.md
    assert cfg.blob_gc_interval == 600.0
    assert ServerConfig.from_json(cfg.to_json()) == cfg

"""The log's HTTP API end to end: a real server on 127.0.0.1 (werkzeug, threads), real storage."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from ledger_support import (
    b64list,
    check_all_consistent,
    check_receipt,
    entry_bytes,
    entry_json,
    serve_app,
    signed_payload_entry,
)

from attest import BENCHMARK_V1, EntryError, NonCanonicalEntryError, examples
from ledger.server import ServerConfig, create_app
from ledger.server._admit import _api_error
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.merkle import EMPTY_ROOT, leaf_hash, verify_inclusion
from ledger.tlog.note import NoteVerifier
from ledger.tlog.tiles import TILE_WIDTH, decode_bundle

JSON = {"Content-Type": "application/json"}


class Log:
    def __init__(self, base: str, app: Any) -> None:
        self.base = base
        self.app = app
        svc = app.extensions["ktl"]
        self.verifier: NoteVerifier = svc.signer.verifier()

    def post(self, data: bytes, headers: dict[str, str] | None = None) -> requests.Response:
        return requests.post(f"{self.base}/api/v1/entries", data=data, headers=JSON if headers is None else headers, timeout=30)

    def get(self, path: str, **params: Any) -> requests.Response:
        return requests.get(f"{self.base}{path}", params=params, timeout=30)

    def size_root(self) -> tuple[int, bytes]:
        r = self.get("/checkpoint")
        cp = open_checkpoint(r.content, self.verifier).checkpoint
        return cp.size, cp.root_hash


def _start(tmp_path: Path, **cfg: Any) -> Iterator[Log]:
    config = ServerConfig(data_dir=str(tmp_path / "data"), batch_delay_ms=2.0, **cfg)
    app = create_app(config)
    try:
        with serve_app(app) as base:
            yield Log(base, app)
    finally:
        app.extensions["ktl"].close()


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    yield from _start(tmp_path, max_batch=50, max_blob_bytes=4096)


def test_submit_fetch_prove_search(log: Log) -> None:
    seen: dict[int, bytes] = {}
    receipts = []
    for i in range(4):
        data = entry_bytes(i, "acme/matmul" if i % 2 else "acme/softmax")
        r = log.post(data)
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["index"] == i and body["duplicate"] is False
        size, root = check_receipt(body, data, log.verifier)
        seen[size] = root
        receipts.append((data, body))
    # Duplicate: same index, 200.
    r = log.post(receipts[1][0])
    assert r.status_code == 200 and r.json()["duplicate"] is True and r.json()["index"] == 1
    # Non-canonical formatting of the same entry is the same entry.
    pretty = json.dumps(json.loads(receipts[2][0]), indent=2).encode()
    r = log.post(pretty)
    assert r.status_code == 200 and r.json()["index"] == 2
    # Fetch by index with proof against the latest checkpoint.
    r = log.get("/api/v1/entries/3")
    got = r.json()
    assert base64.b64decode(got["entry_b64"]) == receipts[3][0]
    cp = open_checkpoint(got["checkpoint"].encode(), log.verifier).checkpoint
    verify_inclusion(leaf_hash(receipts[3][0]), 3, cp.size, b64list(got["inclusion_proof"]), cp.root_hash)
    # Proof endpoints.
    r = log.get("/api/v1/proof/inclusion", index=0, tree_size=4)
    verify_inclusion(leaf_hash(receipts[0][0]), 0, 4, b64list(r.json()["proof"]), seen[4])
    assert r.json()["leaf_hash"] == leaf_hash(receipts[0][0]).hex()
    assert "immutable" in r.headers["Cache-Control"]
    r = log.get("/api/v1/proof/inclusion", leaf_hash=leaf_hash(receipts[2][0]).hex(), tree_size=3)
    assert r.json()["index"] == 2
    check_all_consistent(log.base, seen)
    # Search by name, digest, keyid, predicate type, with a cursor.
    page = log.get("/api/v1/search", name="acme/matmul", limit=1).json()
    assert [x["index"] for x in page["results"]] == [1] and page["next_cursor"] == 2
    page = log.get("/api/v1/search", name="acme/matmul", cursor=page["next_cursor"]).json()
    assert [x["index"] for x in page["results"]] == [3] and page["next_cursor"] is None
    digest = page["results"][0]["subject_sha256"]
    assert [x["index"] for x in log.get("/api/v1/search", digest=digest).json()["results"]] == [3]
    keyid = page["results"][0]["keyids"][0]
    assert len(log.get("/api/v1/search", keyid=keyid).json()["results"]) == 4
    # By digest and signer together: that signer's entries about the digest only.
    both = log.get("/api/v1/search", digest=digest, keyid=keyid).json()
    assert [x["index"] for x in both["results"]] == [3] and both["next_cursor"] is None
    assert log.get("/api/v1/search", digest=digest, keyid="ee" * 32).json()["results"] == []
    ptype = page["results"][0]["predicate_type"]
    assert len(log.get("/api/v1/search", predicate_type=ptype).json()["results"]) == 4
    # Log info.
    info = log.get("/api/v1/log").json()
    assert info["tree_size"] == 4 and info["verifier_key"] == log.verifier.key_string()
    assert info["max_batch"] == 50


def test_read_path_tiles_and_bundles(log: Log) -> None:
    # a new log serves its size-0 checkpoint (RFC 9162 empty root) from creation
    assert log.size_root() == (0, EMPTY_ROOT)
    entries = [entry_bytes(i) for i in range(TILE_WIDTH + 3)]
    for lo in range(0, len(entries), 50):
        r = requests.post(f"{log.base}/api/v1/entries:batch", timeout=30,
                          json={"entries": [json.loads(e) for e in entries[lo:lo + 50]]})
        assert r.status_code == 200 and all("index" in x for x in r.json()["results"])
    r = log.get("/checkpoint")
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert r.headers["Cache-Control"] == "no-cache"
    size, _root = log.size_root()
    assert size == TILE_WIDTH + 3
    full = log.get("/tile/0/000")
    assert full.status_code == 200 and "immutable" in full.headers["Cache-Control"]
    assert full.content == b"".join(leaf_hash(e) for e in entries[:TILE_WIDTH])
    part = log.get("/tile/0/001.p/3")
    assert part.content == b"".join(leaf_hash(e) for e in entries[TILE_WIDTH:])
    assert "immutable" not in part.headers["Cache-Control"]
    bundle = log.get("/tile/entries/000")
    assert bundle.headers["Content-Encoding"] == "gzip", "requests asks for gzip"
    assert decode_bundle(bundle.content, TILE_WIDTH) == entries[:TILE_WIDTH]
    plain = requests.get(f"{log.base}/tile/entries/000", headers={"Accept-Encoding": "identity"},
                         timeout=10)
    assert "Content-Encoding" not in plain.headers and plain.content == bundle.content
    assert decode_bundle(log.get("/tile/entries/001.p/3").content, 3) == entries[TILE_WIDTH:]
    level1 = log.get("/tile/1/000.p/1")
    assert level1.status_code == 200 and len(level1.content) == 32
    # A tile the tree does not have yet.
    assert log.get("/tile/0/001.p/4").json()["error"]["code"] == "tile_not_found"
    assert log.get("/tile/0/002").status_code == 404


def test_blobs(log: Log) -> None:
    data = b"raw benchmark samples\x00\x01"
    digest = hashlib.sha256(data).hexdigest()
    url = f"{log.base}/api/v1/blobs/sha256:{digest}"
    octet = {"Content-Type": "application/octet-stream"}
    r = requests.put(url, data=data, headers=octet, timeout=10)
    assert r.status_code == 201 and r.json()["size"] == len(data)
    assert requests.put(url, data=data, headers=octet, timeout=10).status_code == 200
    r = requests.get(url, timeout=10)
    assert r.content == data and "immutable" in r.headers["Cache-Control"]
    other = hashlib.sha256(b"x").hexdigest()
    r = requests.get(f"{log.base}/api/v1/blobs/sha256:{other}", timeout=10)
    assert r.status_code == 404 and r.json()["error"]["code"] == "blob_not_found"


def test_concurrent_submitters_get_distinct_indexes(log: Log) -> None:
    results: list[tuple[bytes, dict[str, Any]]] = []
    lock = threading.Lock()

    def worker(t: int) -> None:
        with requests.Session() as s:
            for i in range(12):
                data = entry_bytes(1000 + t * 100 + i)
                r = s.post(f"{log.base}/api/v1/entries", data=data, headers=JSON, timeout=30)
                assert r.status_code == 201, r.text
                with lock:
                    results.append((data, r.json()))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 96
    assert sorted(body["index"] for _, body in results) == list(range(96))
    seen: dict[int, bytes] = {}
    for data, body in results:
        size, root = check_receipt(body, data, log.verifier)
        assert seen.setdefault(size, root) == root
    check_all_consistent(log.base, seen)
    # Group commit: fewer checkpoints than entries.
    assert len(seen) < 96


def test_batch_endpoint_answers_each_entry(log: Log) -> None:
    good = [entry_json(i) for i in range(3)]
    bad_sig = entry_json(9)
    sig = bad_sig["envelope"]["signatures"][0]["sig"]
    bad_sig["envelope"]["signatures"][0]["sig"] = ("A" if sig[0] != "A" else "B") + sig[1:]
    r = requests.post(f"{log.base}/api/v1/entries:batch", json={"entries": [*good, bad_sig, good[0]]},
                      timeout=30)
    assert r.status_code == 200
    res = r.json()["results"]
    assert [x.get("index") for x in res] == [0, 1, 2, None, 0]
    assert res[3]["error"]["code"] == "invalid_signature"
    assert res[4]["duplicate"] is True
    r = requests.post(f"{log.base}/api/v1/entries:batch", json={"entries": [good[0]] * 51}, timeout=30)
    assert r.status_code == 413 and r.json()["error"]["code"] == "batch_too_large"


def test_a_batch_holding_something_that_is_not_a_log_entry_is_refused_whole(log: Log) -> None:
    # Issue 26 row 13: a body whose item breaks the document's schema (keys a string, a key
    # that is not base64 of 32 bytes) was answered 200 with an error in place.
    size = log.size_root()[0]
    good = entry_json(40)
    for bad in ({**entry_json(41), "keys": "AAAA"},
                {**entry_json(42), "keys": {k: v + "*" for k, v in entry_json(42)["keys"].items()}},
                {"envelope": entry_json(43)["envelope"]},
                # what the contract test found: a signature's keyid that no key can have
                _with_sig_keyid(entry_json(44), lambda k: k + "*")):
        r = requests.post(f"{log.base}/api/v1/entries:batch", json={"entries": [good, bad]},
                          timeout=30)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "invalid_batch" and "entries[1]" in r.text
    assert log.size_root()[0] == size  # nothing of a refused batch is logged


def _with_sig_keyid(obj: dict[str, Any], change: Any) -> dict[str, Any]:
    sig = obj["envelope"]["signatures"][0]
    sig["keyid"] = change(sig["keyid"])
    return obj


def _tamper_sig(obj: dict[str, Any]) -> dict[str, Any]:
    sig = base64.b64decode(obj["envelope"]["signatures"][0]["sig"])
    obj["envelope"]["signatures"][0]["sig"] = base64.b64encode(bytes([sig[0] ^ 1]) + sig[1:]).decode()
    return obj


def _unknown_predicate() -> dict[str, Any]:
    obj = entry_json(7)
    stmt = json.loads(base64.b64decode(obj["envelope"]["payload"]))
    stmt["predicateType"] = "https://example.com/unknown/v1"
    return signed_payload_entry(json.dumps(stmt).encode())


def _inflated_gflops() -> dict[str, Any]:
    """A correctly signed benchmark claiming 10x the GFLOP/s its shape and median give."""
    stmt = json.loads(base64.b64decode(entry_json(9)["envelope"]["payload"]))
    body = examples.benchmark()
    body["results"][0]["gflops"] *= 10
    stmt["predicateType"], stmt["predicate"] = BENCHMARK_V1, body
    return signed_payload_entry(json.dumps(stmt).encode())


def _noncanonical_b64() -> dict[str, Any]:
    obj = entry_json(8)
    obj["envelope"]["payload"] = obj["envelope"]["payload"].rstrip("=") + "%"
    return obj


BAD_POSTS: list[tuple[str, bytes, dict[str, str], int, str]] = [
    ("malformed json", b'{"envelope": ', JSON, 400, "malformed_json"),
    ("not utf-8", b'{"a": "\xff"}', JSON, 400, "malformed_json"),
    ("duplicate keys", b'{"envelope": {}, "envelope": {}}', JSON, 400, "malformed_json"),
    ("NaN", b'{"envelope": NaN}', JSON, 400, "malformed_json"),
    ("wrong content type", entry_bytes(1), {"Content-Type": "text/plain"}, 415, "unsupported_media_type"),
    ("no content type", entry_bytes(1), {}, 415, "unsupported_media_type"),
    ("array body", b"[1, 2]", JSON, 400, "invalid_entry"),
    ("missing keys", b'{"envelope": {}}', JSON, 400, "invalid_entry"),
    ("invalid signature", json.dumps(_tamper_sig(entry_json(3))).encode(), JSON, 422, "invalid_signature"),
    ("unknown predicate", json.dumps(_unknown_predicate()).encode(), JSON, 422, "unknown_predicate"),
    ("bad base64", json.dumps(_noncanonical_b64()).encode(), JSON, 400, "invalid_entry"),
    ("inflated GFLOP/s", json.dumps(_inflated_gflops()).encode(), JSON, 422, "invalid_statement"),
    ("truncated", entry_bytes(4)[:-7], JSON, 400, "malformed_json"),
    ("huge number", b'{"envelope": 1e999999, "keys": {}}', JSON, 400, "non_canonical"),
    ("oversized", b'{"envelope": "' + b"a" * 300_000 + b'"}', JSON, 413, "payload_too_large"),
    ("entry too large", json.dumps({"envelope": {"payload": "a" * 70000}, "keys": {}}).encode(), JSON,
     413, "entry_too_large"),
]

BAD_GETS: list[tuple[str, int, str]] = [
    ("/tile/0/../../log.db", 404, "not_found"),
    ("/tile/0/x001", 404, "bad_tile_path"),
    ("/tile/0/01", 404, "bad_tile_path"),
    ("/tile/64/000", 404, "bad_tile_path"),
    ("/tile/0/000.p/0", 404, "bad_tile_path"),
    ("/tile/0/000.p/256", 404, "bad_tile_path"),
    ("/tile/0/000.p/007", 404, "bad_tile_path"),
    ("/tile/entries/%2e%2e/000", 404, "bad_tile_path"),
    ("/tile/00/000", 404, "bad_tile_path"),
    ("/api/v1/entries/-1", 400, "invalid_parameter"),
    ("/api/v1/entries/99999999999999999999999", 400, "invalid_parameter"),
    ("/api/v1/entries/5", 404, "entry_not_found"),
    ("/api/v1/proof/inclusion?index=0&tree_size=999999999999", 404, "tree_size_too_large"),
    ("/api/v1/proof/inclusion?index=1e3&tree_size=1", 400, "invalid_parameter"),
    ("/api/v1/proof/inclusion?tree_size=1", 400, "missing_parameter"),
    ("/api/v1/proof/inclusion?index=1&tree_size=1", 422, "index_out_of_range"),
    ("/api/v1/proof/inclusion?leaf_hash=zz&tree_size=1", 400, "invalid_parameter"),
    ("/api/v1/proof/consistency?old_size=2&new_size=1", 422, "bad_sizes"),
    ("/api/v1/proof/consistency?old_size=0x1", 400, "invalid_parameter"),
    ("/api/v1/search", 400, "invalid_query"),
    ("/api/v1/search?name=a/b&digest=" + "0" * 64, 400, "invalid_query"),
    ("/api/v1/search?name=a/b&keyid=" + "0" * 64, 400, "invalid_query"),
    ("/api/v1/search?keyid=" + "0" * 64 + "&digest=" + "0" * 64 + "&name=a/b", 400,
     "invalid_query"),
    ("/api/v1/search?keyid=" + "0" * 64 + "&digest=abc", 400, "invalid_parameter"),
    ("/api/v1/search?name=a/b&limit=100000", 400, "invalid_parameter"),
    ("/api/v1/search?name=a/b&limit=0", 400, "invalid_parameter"),
    ("/api/v1/search?name=a/b&cursor=-5", 400, "invalid_parameter"),
    ("/api/v1/search?digest=abc", 400, "invalid_parameter"),
    ("/api/v1/blobs/md5:abc", 400, "invalid_digest"),
    ("/api/v1/blobs/sha256:" + "G" * 64, 400, "invalid_parameter"),
    ("/api/v1/nothing", 404, "not_found"),
]


def test_bad_input_gets_json_errors_and_changes_nothing(log: Log) -> None:
    first = entry_bytes(0)
    assert log.post(first).status_code == 201
    before = log.size_root()
    for name, body, headers, status, code in BAD_POSTS:
        r = log.post(body, headers)
        assert r.status_code == status, (name, r.status_code, r.text)
        err = r.json()["error"]
        assert err["code"] == code, (name, err)
        assert err["message"], name
    for path, status, code in BAD_GETS:
        r = requests.get(f"{log.base}{path}", timeout=10)
        assert r.status_code == status, (path, r.status_code, r.text)
        assert r.json()["error"]["code"] == code, (path, r.text)
    # Blob with the wrong digest; blob too large; blob with the wrong type.
    url = f"{log.base}/api/v1/blobs/sha256:{'0' * 64}"
    octet = {"Content-Type": "application/octet-stream"}
    r = requests.put(url, data=b"abc", headers=octet, timeout=10)
    assert r.status_code == 422 and r.json()["error"]["code"] == "digest_mismatch"
    big = b"z" * 5000
    r = requests.put(f"{log.base}/api/v1/blobs/sha256:{hashlib.sha256(big).hexdigest()}",
                     data=big, headers=octet, timeout=10)
    assert r.status_code == 413
    r = requests.put(url, data=b"abc", headers=JSON, timeout=10)
    assert r.status_code == 415
    r = requests.delete(url, timeout=10)
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
    # Still serving, and the tree did not change.
    assert log.size_root() == before
    assert log.post(entry_bytes(1)).status_code == 201


def test_rate_limit_and_token(tmp_path: Path) -> None:
    for log in _start(tmp_path, rate_per_second=0.5, rate_burst=2.0, write_token="s3cret"):
        auth = {**JSON, "Authorization": "Bearer s3cret"}
        r = log.post(entry_bytes(0))
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        r = log.post(entry_bytes(0), {**JSON, "Authorization": "Bearer wrong"})
        assert r.status_code == 401
        assert log.post(entry_bytes(0), auth).status_code == 201
        assert log.post(entry_bytes(1), auth).status_code == 201
        r = log.post(entry_bytes(2), auth)
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
        assert int(r.headers["Retry-After"]) >= 1
        # Reads need no token and are not rate limited.
        assert log.get("/api/v1/entries/1").status_code == 200


def test_openapi_is_served_and_documents_every_route(log: Log) -> None:
    served = log.get("/api/v1/openapi.json").json()
    on_disk = json.loads((Path(__file__).parent.parent / "ledger" / "openapi.json").read_text())
    assert served == on_disk
    documented = set(served["paths"])
    for rule in log.app.url_map.iter_rules():
        path = str(rule.rule)
        if not (path.startswith("/api/") or path.startswith("/tile") or path == "/checkpoint"):
            continue
        path = (path.replace("<raw_index>", "{index}").replace("<raw>", "sha256:{digest}")
                .replace("<path:rest>", "{level}/{index}"))
        assert path in documented, path


def test_a_bare_envelope_with_keys_is_logged_as_a_log_entry(log: Log) -> None:
    entry = entry_json(11)
    bare = {**entry["envelope"], "keys": entry["keys"]}
    r = log.post(json.dumps(bare).encode())
    assert r.status_code == 201, r.text
    check_receipt(r.json(), entry_bytes(11), log.verifier)  # the canonical log entry was logged
    r = log.post(json.dumps(entry).encode())
    assert r.status_code == 200 and r.json()["duplicate"] is True
    size = log.size_root()
    without_keys = dict(entry["envelope"])
    r = log.post(json.dumps(without_keys).encode())
    assert r.status_code == 400 and "needs 'keys'" in r.json()["error"]["message"]
    r = log.post(json.dumps({**bare, "note": "x"}).encode())
    assert r.status_code == 400 and "unexpected: note" in r.json()["error"]["message"]
    assert log.size_root() == size


def test_server_error_codes_follow_the_error_type_not_its_text() -> None:
    """`non_canonical` comes from the typed error; an entry error whose text merely says
    "canonical" (a kernel name can) is an ordinary `invalid_entry`."""
    assert _api_error(NonCanonicalEntryError("x")).code == "non_canonical"
    assert _api_error(EntryError("key 'canonical' is not in keys")).code == "invalid_entry"

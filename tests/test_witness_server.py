"""The witness (C2SP tlog-witness add-checkpoint): every status code from hand-made requests,
atomic persistence, restarts and SIGKILL through the real `ktl witness serve`."""

from __future__ import annotations

import base64
import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest
import requests
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from flask.testing import FlaskClient
from hypothesis import given, settings
from hypothesis import strategies as st
from witness_support import KTL, FakeLog, witness_process

from ledger.tlog.cosignature import CosignatureSigner, CosignatureVerifier, verify_cosignatures
from ledger.tlog.merkle import EMPTY_ROOT
from ledger.tlog.note import NoteSigner, NoteVerifier
from ledger.tlog.witness import (
    MAX_PROOF_LINES,
    MAX_REQUEST_BYTES,
    AddCheckpoint,
    Cosign,
    Reject,
    RequestError,
    decide,
    encode_add_checkpoint,
)
from ledger.witness_server import create_witness_app, origin_hash
from ledger.witness_store import WitnessStore, WitnessStoreError, make_log

W_SIGNER = CosignatureSigner("test/witness", Ed25519PrivateKey.from_private_bytes(b"\x09" * 32),
                             clock=lambda: 1_700_000_000)


def _client(tmp: Path, log: FakeLog) -> tuple[FlaskClient, WitnessStore]:
    store = WitnessStore(tmp)
    store.add_log(make_log(log.origin, [log.vkey]))
    return create_witness_app(store, W_SIGNER).test_client(), store


def _post(client: FlaskClient, body: bytes) -> tuple[int, str, str]:
    res = client.post("/add-checkpoint", data=body)
    return res.status_code, res.get_data(as_text=True), res.mimetype


def _cosigned(log: FakeLog, size: int, lines: str) -> None:
    """The answer's lines verify as a cosignature of the checkpoint at `size`."""
    note = log.note(size) + lines.encode()
    _, cosigs = verify_cosignatures(note, log.signer.verifier(), [W_SIGNER.verifier()], 1)
    assert cosigs[0].timestamp == 1_700_000_000


def test_grows_from_zero_and_every_step_is_cosigned(tmp_path: Path) -> None:
    log = FakeLog()
    client, store = _client(tmp_path, log)
    status, body, _ = _post(client, log.request(0, 0))  # the size-0 checkpoint
    assert status == 200 and body.startswith("\u2014 test/witness ") and body.endswith("\n")
    _cosigned(log, 0, body)
    log.grow(5)
    status, body, _ = _post(client, log.request(0))
    assert status == 200, body
    log.grow(8)
    status, body, _ = _post(client, log.request(5))
    assert status == 200, body
    _cosigned(log, 13, body)
    held = store.held(log.origin)
    assert held is not None and held.checkpoint == log.checkpoint()
    # the monitoring path serves it with the log's and the witness's signatures
    res = client.get(f"/{origin_hash(log.origin)}/checkpoint")
    assert res.status_code == 200
    verify_cosignatures(res.get_data(), log.signer.verifier(), [W_SIGNER.verifier()], 1)
    # the same checkpoint again (old == size, same root, no proof) is cosigned again
    assert _post(client, log.request(13))[0] == 200


def test_wrong_old_size_is_409_with_the_held_size(tmp_path: Path) -> None:
    log = FakeLog().grow(4)
    client, _ = _client(tmp_path, log)
    assert _post(client, log.request(0))[0] == 200
    log.grow(3)
    status, body, mime = _post(client, log.request(2))
    assert (status, body, mime) == (409, "4\n", "text/x.tlog.size")
    status, body, mime = _post(client, log.request(0))
    assert (status, body, mime) == (409, "4\n", "text/x.tlog.size")


def test_rollback_to_an_older_checkpoint_is_refused(tmp_path: Path) -> None:
    log = FakeLog().grow(6)
    client, _ = _client(tmp_path, log)
    assert _post(client, log.request(0))[0] == 200
    # old size = held size but a smaller checkpoint: old > checkpoint size, 400
    status, body, _ = _post(client, encode_add_checkpoint(6, [], log.note(3)))
    assert status == 400 and "larger than the checkpoint size" in body
    # honest old size for the smaller checkpoint: not what it holds, 409
    assert _post(client, log.request(0, 3))[:2] == (409, "6\n")


def test_bad_consistency_proofs_are_422(tmp_path: Path) -> None:
    log = FakeLog().grow(5)
    client, _ = _client(tmp_path, log)
    assert _post(client, log.request(0))[0] == 200
    log.grow(6)
    good = log.request(5)
    head, _, note = good.partition(b"\n\n")
    lines = head.split(b"\n")
    truncated = b"\n".join(lines[:-1]) + b"\n\n" + note
    assert _post(client, truncated)[0] == 422
    flipped = bytearray(base64.b64decode(lines[1]))
    flipped[0] ^= 1
    lines[1] = base64.b64encode(bytes(flipped))
    assert _post(client, b"\n".join(lines) + b"\n\n" + note)[0] == 422
    # same size as held with a different root: a fork
    fork = FakeLog(tag=b"x").grow(5)
    assert _post(client, encode_add_checkpoint(5, [], fork.note()))[0] == 422
    # old size 0 with a proof
    assert _post(client, encode_add_checkpoint(0, [b"\x00" * 32], log.note()))[0] in (409, 422)
    assert _post(client, good)[0] == 200


def test_size_zero_needs_the_empty_root_and_no_proof(tmp_path: Path) -> None:
    log = FakeLog().grow(2)
    client, _ = _client(tmp_path, log)
    from ledger.tlog.checkpoint import Checkpoint, sign_checkpoint

    bad = sign_checkpoint(Checkpoint(log.origin, 0, b"\x01" * 32), log.signer)
    assert _post(client, encode_add_checkpoint(0, [], bad))[0] == 422
    assert _post(client, encode_add_checkpoint(0, [EMPTY_ROOT], log.note()))[0] == 422


def test_unknown_origin_is_404_and_other_keys_are_403(tmp_path: Path) -> None:
    log = FakeLog().grow(3)
    client, _ = _client(tmp_path, log)
    stranger = FakeLog(origin="example.org/unknown").grow(3)
    assert _post(client, stranger.request(0))[0] == 404
    # signed by another key only (same origin name): 403
    impostor = NoteSigner(log.origin, Ed25519PrivateKey.from_private_bytes(b"\x55" * 32))
    status, body, _ = _post(client, log.request(0, signer=impostor))
    assert status == 403 and "not validly signed" in body
    # the trusted key's line with a broken signature: 403 even beside a good one
    note = bytearray(log.note())
    note[-10] = ord("A") if note[-10] != ord("A") else ord("B")
    assert _post(client, encode_add_checkpoint(0, [], bytes(note)))[0] == 403
    assert _post(client, log.request(0))[0] == 200


@pytest.mark.parametrize("body", [
    b"", b"old 0\n", b"new 0\n\n", b"old 01\n\n", b"old -1\n\n", b"old 0 \n\n",
    b"old 0\nnot base64!\n\n", b"old 0\nAAAA\n\n", b"old 99999999999999999999\n\n",
])
def test_malformed_requests_are_400(tmp_path: Path, body: bytes) -> None:
    log = FakeLog().grow(3)
    client, _ = _client(tmp_path, log)
    status, text, _ = _post(client, body + (log.note() if body.endswith(b"\n\n") else b""))
    assert status == 400, text
    unsigned = log.checkpoint().to_text().encode()
    assert _post(client, b"old 0\n\n" + unsigned)[0] == 400  # no signature block


def test_too_many_proof_lines_is_400_and_oversized_is_413(tmp_path: Path) -> None:
    log = FakeLog().grow(3)
    client, _ = _client(tmp_path, log)
    line = base64.b64encode(b"\x00" * 32) + b"\n"
    body = b"old 1\n" + line * (MAX_PROOF_LINES + 1) + b"\n" + log.note()
    status, text, _ = _post(client, body)
    assert status == 400 and "proof lines" in text
    assert _post(client, b"old 0\n" + b"A" * MAX_REQUEST_BYTES)[0] == 413
    assert client.get("/add-checkpoint").status_code == 405


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_the_parser_never_fails_other_than_with_request_error(data: bytes) -> None:
    try:
        req = AddCheckpoint.parse(data)
    except RequestError:
        return
    assert AddCheckpoint.parse(req.encode()) == req


def test_request_round_trip_and_decide_is_pure() -> None:
    log = FakeLog().grow(9)
    req = AddCheckpoint.parse(log.request(0))
    assert req.encode() == log.request(0)
    keys = [log.signer.verifier()]
    assert isinstance(decide(req, keys, None), Cosign)
    assert decide(req, None, None) == Reject(404, f"unknown log origin {log.origin!r}")
    wrong = decide(req, keys, log.checkpoint(4))
    assert isinstance(wrong, Reject) and wrong.status == 409 and wrong.held_size == 4


def test_log_registration_is_strict(tmp_path: Path) -> None:
    log = FakeLog()
    with pytest.raises(WitnessStoreError, match="log key"):
        make_log(log.origin, ["not-a-key"])
    with pytest.raises(WitnessStoreError, match="origin"):
        make_log("bad\norigin", [log.vkey])
    with pytest.raises(WitnessStoreError, match="twice"):
        make_log(log.origin, [log.vkey, log.vkey])
    store = WitnessStore(tmp_path)
    store.add_log(make_log(log.origin, [log.vkey]))
    assert [x.origin for x in store.logs()] == [log.origin]


def test_removed_and_re_added_log_is_still_held_to_its_history(tmp_path: Path) -> None:
    log = FakeLog().grow(4)
    client, store = _client(tmp_path, log)
    assert _post(client, log.request(0))[0] == 200
    assert store.remove_log(log.origin)
    assert _post(client, log.request(4))[0] == 404
    store.add_log(make_log(log.origin, [log.vkey]))
    fork = FakeLog(tag=b"f").grow(7)
    assert _post(client, fork.request(0))[:2] == (409, "4\n")


def _ktl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KTL, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow  # 7-11 s, among make test's longest: CI's slow step runs it
def test_ktl_witness_commands_and_sigkill_keep_the_fork_refused(tmp_path: Path) -> None:
    data = tmp_path / "w"
    log = FakeLog().grow(5)
    fork = log.fork(b"other").grow(4)  # same first 5 entries, then different ones
    log.grow(4)
    with witness_process(data) as (proc, base, key):
        mode = stat.S_IMODE(os.stat(data / "witness.key").st_mode)
        assert mode == 0o600
        out = _ktl("witness", "add-log", "--data", str(data), "--origin", log.origin,
                   "--log-key", log.vkey)
        assert out.returncode == 0, out.stderr
        s = requests.Session()
        r = s.post(f"{base}/add-checkpoint", data=log.request(0, 5), timeout=10)
        assert r.status_code == 200
        r = s.post(f"{base}/add-checkpoint", data=log.request(5), timeout=10)
        assert r.status_code == 200, r.text
        CosignatureVerifier.from_key_string(key)
        verify_cosignatures(log.note() + r.content, NoteVerifier.from_key_string(log.vkey),
                            [CosignatureVerifier.from_key_string(key)], 1)
        os.killpg(proc.pid, signal.SIGKILL)  # no chance to flush anything more
        proc.wait(10)
    printed = _ktl("witness", "key", "--data", str(data))
    assert printed.stdout.strip().splitlines()[-1] == key
    listed = _ktl("witness", "list-logs", "--data", str(data))
    assert "held size 9" in listed.stdout
    with witness_process(data) as (_, base, key2):
        assert key2 == key
        r = requests.post(f"{base}/add-checkpoint", data=fork.request(5), timeout=10)
        assert (r.status_code, r.text) == (409, "9\n")
        r = requests.post(f"{base}/add-checkpoint", data=encode_add_checkpoint(
            9, [], fork.note()), timeout=10)
        assert r.status_code == 422
        removed = _ktl("witness", "remove-log", "--data", str(data), "--origin", log.origin)
        assert removed.returncode == 0
        assert requests.post(f"{base}/add-checkpoint", data=log.request(9),
                             timeout=10).status_code == 404
    again = _ktl("witness", "remove-log", "--data", str(data), "--origin", log.origin)
    assert again.returncode == 2 and "no log" in again.stderr


def test_racing_requests_from_one_old_size_get_one_cosignature(tmp_path: Path) -> None:
    """The spec's race: checks and the update are atomic, so a rollback cannot slip in."""
    import threading

    log = FakeLog().grow(2)
    store = WitnessStore(tmp_path)
    store.add_log(make_log(log.origin, [log.vkey]))
    app = create_witness_app(store, W_SIGNER)
    assert app.test_client().post("/add-checkpoint", data=log.request(0)).status_code == 200
    bodies = []
    for _ in range(8):
        log.grow(1)
        bodies.append(log.request(2))  # all claim the witness holds 2
    statuses: list[int] = []
    barrier = threading.Barrier(len(bodies))

    def go(body: bytes) -> None:
        client = app.test_client()
        barrier.wait()
        statuses.append(client.post("/add-checkpoint", data=body).status_code)

    threads = [threading.Thread(target=go, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200] + [409] * 7
    held = store.held(log.origin)
    assert held is not None and held.checkpoint.size > 2


_WITNESS_WORKER_FAULT = """
import ledger.witness_server

def unreadable(store, signer):  # only the worker's app factory calls this
    raise PermissionError(13, "Permission denied", "witness.db")

ledger.witness_server.create_witness_app = unreadable
from client.cli import main
main()
"""


def test_a_witness_whose_worker_cannot_boot_gives_an_error_not_serving_on(tmp_path: Path
                                                                         ) -> None:
    import sys

    res = subprocess.run(
        [sys.executable, "-c", _WITNESS_WORKER_FAULT, "witness", "serve", "--data",
         str(tmp_path / "w"), "--port", "0"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "serving on" not in out and "Permission denied" in out
    assert "error: the server's workers did not start" in res.stderr

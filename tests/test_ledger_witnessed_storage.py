"""The storage methods for witnessing: the size-0 checkpoint and published cosigned checkpoints
(both storages), and the log's witness client (`ledger.server._witnessing`) against fake
witnesses that lie, lag behind or refuse."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from witness_support import FakeLog

from ledger.sequencer import Sequencer, Submission
from ledger.server._witnessing import Witnessing, WitnessingSettings
from ledger.storage import (
    EntryFacts,
    LogStorage,
    MemoryStorage,
    StorageError,
    StoredCheckpoint,
    TileCache,
)
from ledger.tlog.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from ledger.tlog.cosignature import CosignatureSigner
from ledger.tlog.merkle import EMPTY_ROOT
from ledger.tlog.note import NoteSignature, NoteSigner
from ledger.tlog.witness import AddCheckpoint, Cosign, decide
from ledger.tlog.witness_policy import WitnessPolicy, check_quorum
from ledger.witness_server import create_witness_app
from ledger.witness_store import WitnessStore, make_log

SIGNER = NoteSigner("example.org/log", Ed25519PrivateKey.from_private_bytes(b"\x03" * 32))



def _empty(signer: NoteSigner = SIGNER) -> StoredCheckpoint:
    note = sign_checkpoint(Checkpoint(signer.name, 0, EMPTY_ROOT), signer)
    return StoredCheckpoint(0, EMPTY_ROOT, note, time.time())


FACTS = EntryFacts("https://p/kernel/v1", (("acme/k", "ab" * 32),), ("cd" * 32,))


def _submission(i: int) -> Submission:
    return Submission(f"entry number {i}".encode(), FACTS)


def test_a_new_log_signs_size_zero_once(storage: LogStorage) -> None:
    seq = Sequencer(storage, SIGNER, SIGNER.name)
    cp = seq.ensure_checkpoint()
    assert (cp.size, cp.root_hash) == (0, EMPTY_ROOT)
    assert storage.latest_checkpoint() == cp
    assert seq.ensure_checkpoint() == cp  # not twice
    with pytest.raises(StorageError, match="already has a checkpoint"):
        storage.commit_empty_checkpoint(_empty())
    seq.integrate([_submission(0)])
    latest = storage.latest_checkpoint()
    assert latest is not None and latest.size == 1


def test_only_an_empty_root_at_size_zero(storage: LogStorage) -> None:
    bad = StoredCheckpoint(0, b"\x01" * 32, b"x", 0.0)
    with pytest.raises(StorageError, match="empty tree"):
        storage.commit_empty_checkpoint(bad)
    assert storage.latest_checkpoint() is None


def test_publish_cosigned_only_what_the_log_signed_and_only_forward(storage: LogStorage) -> None:
    seq = Sequencer(storage, SIGNER, SIGNER.name)
    zero = seq.ensure_checkpoint()
    assert storage.latest_cosigned() is None
    assert storage.publish_cosigned(zero)
    seq.integrate([_submission(0), _submission(1)])
    two = storage.latest_checkpoint()
    assert two is not None
    # a root this log never signed at that size is refused (a forged "cosigned" note)
    with pytest.raises(StorageError, match="was signed by this log"):
        storage.publish_cosigned(StoredCheckpoint(2, b"\x07" * 32, two.note, 0.0))
    assert storage.publish_cosigned(two)
    assert not storage.publish_cosigned(zero)  # never backwards
    assert storage.latest_cosigned() == two


def _witness(tmp: Path, log_vkey: str, origin: str, seed: int, name: str):  # type: ignore[no-untyped-def]
    signer = CosignatureSigner(name, Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32))
    store = WitnessStore(tmp / name.replace("/", "_"))
    store.add_log(make_log(origin, [log_vkey]))
    return signer, create_witness_app(store, signer).test_client()


def test_the_log_publishes_at_quorum_and_ignores_lying_witnesses(tmp_path: Path) -> None:
    storage = MemoryStorage()
    seq = Sequencer(storage, SIGNER, SIGNER.name)
    seq.ensure_checkpoint()
    seq.integrate([_submission(i) for i in range(3)])
    a, ca = _witness(tmp_path, SIGNER.verifier_key_string(), SIGNER.name, 11, "w/a")
    b, cb = _witness(tmp_path, SIGNER.verifier_key_string(), SIGNER.name, 12, "w/b")
    liar = CosignatureSigner("w/c", Ed25519PrivateKey.from_private_bytes(b"\x0d" * 32))
    policy = WitnessPolicy.parse(
        f"witness A {a.verifier_key_string()} http://a\nwitness B {b.verifier_key_string()} "
        f"http://b\nwitness C {liar.verifier_key_string()} http://c\n"
        "group two 2 A B C\nquorum two\n")
    calls: list[tuple[str, int]] = []

    def post(url: str, body: bytes, timeout: float) -> tuple[int, str, bytes]:
        req = AddCheckpoint.parse(body)
        calls.append((url, req.old_size))
        if url.startswith("http://c"):  # answers with a cosignature of another checkpoint
            other = Checkpoint(req.checkpoint.origin, req.checkpoint.size + 1, EMPTY_ROOT)
            sig = liar.sign(other.to_text().encode())
            return 200, "text/plain", NoteSignature(liar.name, liar.key_id, sig).line().encode()
        client = ca if url.startswith("http://a") else cb
        r = client.post("/add-checkpoint", data=body)
        return r.status_code, r.mimetype, r.get_data()

    w = Witnessing(storage, policy, SIGNER.verifier(), TileCache(), WitnessingSettings(1, 0.2),
                   post=post)
    latest = storage.latest_checkpoint()
    assert latest is not None
    lines: dict[str, bytes] = {}
    assert w._round(latest, lines)  # A and B cosign; C's lie does not count
    assert set(lines) == {"A", "B"}
    published = storage.latest_cosigned()
    assert published is not None and published.size == 3
    signed = open_checkpoint(published.note, SIGNER.verifier())
    assert check_quorum(signed, SIGNER.verifier(), policy).signed == ("A", "B")


def test_a_409_is_answered_by_proving_from_the_witness_size(tmp_path: Path) -> None:
    storage = MemoryStorage()
    seq = Sequencer(storage, SIGNER, SIGNER.name)
    seq.ensure_checkpoint()
    seq.integrate([_submission(i) for i in range(5)])
    a, ca = _witness(tmp_path, SIGNER.verifier_key_string(), SIGNER.name, 11, "w/a")
    # the witness already holds size 5 from another process of the same log
    five = storage.latest_checkpoint()
    assert five is not None
    assert ca.post("/add-checkpoint", data=b"old 0\n\n" + five.note).status_code == 200
    seq.integrate([_submission(i) for i in range(5, 9)])
    olds: list[int] = []

    def post(url: str, body: bytes, timeout: float) -> tuple[int, str, bytes]:
        olds.append(AddCheckpoint.parse(body).old_size)
        r = ca.post("/add-checkpoint", data=body)
        return r.status_code, r.mimetype, r.get_data()

    policy = WitnessPolicy.parse(f"witness A {a.verifier_key_string()} http://a\nquorum A\n")
    w = Witnessing(storage, policy, SIGNER.verifier(), TileCache(), post=post)
    nine = storage.latest_checkpoint()
    assert nine is not None and nine.size == 9
    assert w._round(nine, {})
    assert olds == [0, 5]


def test_a_fork_never_gets_a_cosignature() -> None:
    log = FakeLog().grow(4)
    fork = log.fork(b"z").grow(2)
    log.grow(2)
    held = log.checkpoint()
    d = decide(AddCheckpoint.parse(fork.request(6)), [log.signer.verifier()], held)
    assert not isinstance(d, Cosign) and d.status == 422


def test_the_witnessing_thread_publishes_then_sleeps(tmp_path: Path) -> None:
    """After publishing it waits for the next checkpoint (it once spun on a taken offer)."""

    class Counting(MemoryStorage):
        looks = 0

        def latest_cosigned(self) -> StoredCheckpoint | None:
            Counting.looks += 1
            return super().latest_cosigned()

    storage = Counting()
    seq = Sequencer(storage, SIGNER, SIGNER.name)
    seq.ensure_checkpoint()
    seq.integrate([_submission(0)])
    a, ca = _witness(tmp_path, SIGNER.verifier_key_string(), SIGNER.name, 11, "w/a")

    def post(url: str, body: bytes, timeout: float) -> tuple[int, str, bytes]:
        r = ca.post("/add-checkpoint", data=body)
        return r.status_code, r.mimetype, r.get_data()

    policy = WitnessPolicy.parse(f"witness A {a.verifier_key_string()} http://a\nquorum A\n")
    w = Witnessing(storage, policy, SIGNER.verifier(), TileCache(), post=post)
    w.start()
    try:
        latest = storage.latest_checkpoint()
        assert latest is not None
        w.offer(latest)
        deadline = time.monotonic() + 10
        while storage.latest_cosigned() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        published = storage.latest_cosigned()
        assert published is not None and published.size == 1
        before = Counting.looks
        time.sleep(0.3)
        assert Counting.looks - before < 5
        # ... and the thread was alive and waiting all along: the next checkpoint is published
        seq.integrate([_submission(1)])
        grown = storage.latest_checkpoint()
        assert grown is not None and grown.size == 2
        w.offer(grown)
        deadline = time.monotonic() + 10
        while (storage.latest_cosigned() or published).size < 2:
            assert time.monotonic() < deadline, "the witnessing thread never woke for the offer"
            time.sleep(0.01)
    finally:
        w.close()


def test_unreachable_witnesses_mean_503_and_nothing_lost(tmp_path: Path) -> None:
    """A log whose only witness is down: nothing is published, a submission gets a 503 that
    names its index, and the entry is stored (sequenced) all the same."""
    from witness_support import free_port

    from ledger.server import ServerConfig, create_app

    w = CosignatureSigner("w/down", Ed25519PrivateKey.from_private_bytes(b"\x0e" * 32))
    policy = tmp_path / "p"
    policy.write_text(f"witness W {w.verifier_key_string()} http://127.0.0.1:{free_port()}\n"
                      "quorum W\n")
    storage = MemoryStorage()
    app = create_app(ServerConfig(origin=SIGNER.name, witness_policy=str(policy),
                                  witness_wait=0.3, batch_delay_ms=1.0),
                     storage=storage, signer=SIGNER, check=False)
    try:
        client = app.test_client()
        r = client.get("/checkpoint")
        assert r.status_code == 404 and "witness quorum" in r.get_json()["error"]["message"]
        from ledger_support import entry_bytes

        r = client.post("/api/v1/entries", data=entry_bytes(1),
                        headers={"Content-Type": "application/json"})
        assert r.status_code == 503, r.get_data(as_text=True)
        err = r.get_json()["error"]
        assert err["code"] == "not_witnessed" and "sequenced at index 0" in err["message"]
        assert storage.entry_count() == 1 and storage.latest_cosigned() is None
        assert client.get("/api/v1/log").get_json()["tree_size"] == 0
    finally:
        app.extensions["ktl"].close()


def test_a_witness_that_does_not_answer_in_time_is_skipped_for_the_round(tmp_path: Path) -> None:
    """Issue 26 row 2: a stalled witness held every round (and so every submission)."""
    import threading

    storage = MemoryStorage()
    seq = Sequencer(storage, SIGNER, SIGNER.name)
    seq.ensure_checkpoint()
    seq.integrate([_submission(i) for i in range(2)])
    a, ca = _witness(tmp_path, SIGNER.verifier_key_string(), SIGNER.name, 11, "w/a")
    b, _cb = _witness(tmp_path, SIGNER.verifier_key_string(), SIGNER.name, 12, "w/b")
    release = threading.Event()
    slow_calls: list[float] = []

    def post(url: str, body: bytes, timeout: float) -> tuple[int, str, bytes]:
        if url.startswith("http://b"):  # stalls (bounded: released at the end)
            slow_calls.append(time.monotonic())
            release.wait(10)
            return 503, "text/plain", b"late"
        r = ca.post("/add-checkpoint", data=body)
        return r.status_code, r.mimetype, r.get_data()

    policy = WitnessPolicy.parse(
        f"witness A {a.verifier_key_string()} http://a\nwitness B {b.verifier_key_string()} "
        "http://b\ngroup any1 any A B\nquorum any1\n")
    w = Witnessing(storage, policy, SIGNER.verifier(), TileCache(),
                   WitnessingSettings(request_timeout=5, round_timeout=0.3), post=post)
    try:
        latest = storage.latest_checkpoint()
        assert latest is not None
        start = time.monotonic()
        assert w._round(latest, {})  # A alone meets the quorum; B is not waited for
        assert time.monotonic() - start < 2
        seq.integrate([_submission(2)])
        newer = storage.latest_checkpoint()
        assert newer is not None
        assert w._round(newer, {})
        assert len(slow_calls) == 1, "B, still stuck, was asked again"
    finally:
        release.set()
        w._pool.shutdown(wait=True)

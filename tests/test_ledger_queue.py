"""The shared queue on PostgreSQL: its contract, and frontends answered whoever integrates.

Frontends here are `LogService`s in this process, each with its own `PostgresStorage`
(connections, lock session, listener) on one database, as separate processes would be.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from ledger_support import entry_bytes

from ledger.queued import (
    QueuedSequencer,
    QueueRowError,
    _mac,
    queue_key,
    seal,
    unseal,
)
from ledger.sequencer import Receipt, Sequencer, SequencerBusy, _Waiter
from ledger.server import LogService, ServerConfig
from ledger.server._admit import admit_bytes
from ledger.server._api import _failure
from ledger.storage import (
    Outcome,
    QueueFull,
    QueueRow,
    StorageError,
    StoredHashReader,
    open_queue,
)
from ledger.storage._pg_queue import PgQueue
from ledger.storage._pg_schema import INTEGRATE_LOCK
from ledger.storage._postgres import PostgresStorage
from ledger.tlog.merkle import leaf_hash, verify_inclusion
from ledger.tlog.note import NoteSigner
from ledger.vindex import IndexKey, PendingIndex

pytestmark = pytest.mark.postgresql

SIGNER = NoteSigner("queue.example/log", Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
KEY = queue_key(SIGNER)


def _rows(*data: bytes) -> list[QueueRow]:
    return [QueueRow(d, "{}", b"") for d in data]


def _frontend(url: str, tmp: Path, **over: object) -> LogService:
    config = ServerConfig(data_dir=str(tmp), database=url, **over)  # type: ignore[arg-type]
    return LogService(PostgresStorage(url, pool_size=4), SIGNER, config)


def _queued(svc: LogService) -> QueuedSequencer:
    assert isinstance(svc.integrator, QueuedSequencer)
    return svc.integrator


@pytest.fixture
def two(pg_url: str, tmp_path: Path) -> Iterator[tuple[LogService, LogService]]:
    """Frontend a holds the integration lock; frontend b never gets it while a runs."""
    with ExitStack() as stack:
        a = _frontend(pg_url, tmp_path)
        stack.callback(a.close)
        deadline = time.monotonic() + 10
        while not _queued(a).is_integrator:
            assert time.monotonic() < deadline, "the first frontend never became integrator"
            time.sleep(0.01)
        b = _frontend(pg_url, tmp_path)
        stack.callback(b.close)
        yield a, b


def _check(svc: LogService, r: Receipt | BaseException, data: bytes) -> Receipt:
    assert isinstance(r, Receipt), r
    assert r.leaf_hash == leaf_hash(data)
    proof = svc.receipt_proof(r)
    verify_inclusion(r.leaf_hash, r.index, r.checkpoint.size, proof, r.checkpoint.root_hash)
    entry = svc.storage.get_entry(r.index)
    assert entry is not None and entry.data == data
    return r


def test_queue_contract_enqueue_take_settle_collect_sweep_limits(pg_url: str) -> None:
    storage = PostgresStorage(pg_url, pool_size=2)
    q = PgQueue(storage, max_queued=5)
    other = PgQueue(PostgresStorage(pg_url, pool_size=1))
    try:
        assert isinstance(open_queue(storage), PgQueue)
        with pytest.raises(StorageError, match="max_queued"):
            PgQueue(storage, max_queued=0)
        with pytest.raises(StorageError, match="enqueue takes 1 to"):
            q.enqueue([])
        with pytest.raises(StorageError, match="only the integrator"):
            q.take(1)
        first = q.enqueue(_rows(b"a", b"b", b"c"))
        assert first == sorted(first) and len(set(first)) == 3
        assert q.depth() == 3
        with pytest.raises(QueueFull, match=r"holds 3 submissions \(at most 5\)"):
            q.enqueue(_rows(b"d", b"e", b"f"))
        more = q.enqueue(_rows(b"d", b"e"))
        with q.hold() as held, other.hold() as other_held:
            assert held and not other_held, "one integrator at a time"
            with pytest.raises(StorageError, match="take limit"):
                q.take(0)
            got = q.take(4)
            assert [g.ticket for g in got] == first + more[:1]
            assert [g.row for g in got] == _rows(b"a", b"b", b"c", b"d")
            q.settle(None, [Outcome(first[0], None, False, 0, "refused: test"),
                            Outcome(first[1], None, False, 0, "refused: test 2")])
            assert [g.ticket for g in q.take(10)] == [first[2], *more]
        assert q.collect([first[1], 999_999]) == [Outcome(first[1], None, False, 0, "refused: test 2")]
        assert q.collect([first[1]]) == [], "an outcome is handed out once"
        with q.hold() as held:
            assert held
            assert q.sweep(time.time() - 60) == 0, "recent outcomes stay"
            assert q.sweep(time.time() + 1) == 1, "an uncollected outcome is swept"
        assert q.collect([first[0]]) == []
    finally:
        for x in (q, other):
            x.close()
            x.storage.close()


def test_queue_full_is_a_busy_answer(pg_url: str) -> None:
    storage = PostgresStorage(pg_url, pool_size=2)
    blocker = PgQueue(PostgresStorage(pg_url, pool_size=1))
    qs = QueuedSequencer(Sequencer(storage, SIGNER, SIGNER.name), PgQueue(storage, max_queued=2),
                         KEY, lock_poll=0.05)
    try:
        with blocker.hold() as held:
            assert held, "the blocker integrates (and does nothing): the queue fills"
            qs.start()
            blocker.enqueue(_rows(b"1", b"2"))
            with pytest.raises(SequencerBusy, match=r"holds 2 submissions \(at most 2\)"):
                qs.submit([admit_bytes(entry_bytes(1))], 5)
            assert not qs.is_integrator
            qs.close(0)
    finally:
        blocker.close()
        blocker.storage.close()
        storage.close()
    err = _failure(SequencerBusy("the log's queue is full"))
    assert (err.status, err.code, err.headers) == (503, "busy", {"Retry-After": "1"})


def test_a_frontend_that_never_integrates_is_answered_by_the_one_that_does(
    two: tuple[LogService, LogService],
) -> None:
    a, b = two
    datas = [entry_bytes(i) for i in range(12)]
    results: list[list[Receipt | BaseException]] = []

    def post(lo: int, hi: int) -> None:
        results.append(b.submit([admit_bytes(d) for d in datas[lo:hi]]))

    threads = [threading.Thread(target=post, args=(i, i + 1)) for i in range(8)]
    threads.append(threading.Thread(target=post, args=(8, 12)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    got = sorted((r for rs in results for r in rs), key=lambda r: getattr(r, "index", -1))
    assert len(got) == 12
    by_leaf = {leaf_hash(d): d for d in datas}
    for r in got:
        assert isinstance(r, Receipt) and not r.duplicate
        _check(b, r, by_leaf[r.leaf_hash])
    assert sorted(r.index for r in got if isinstance(r, Receipt)) == list(range(12))
    qa, qb = _queued(a), _queued(b)
    deadline = time.monotonic() + 10  # counted after the outcomes were answered
    while qa.settled < 12:
        assert time.monotonic() < deadline, f"a settled {qa.settled} of 12"
        time.sleep(0.01)
    assert qa.is_integrator
    assert not qb.is_integrator and qb.batches == 0, "b never integrated: a answered it"


def test_the_integrator_holds_index_rows_while_its_takes_are_full_and_writes_them_after(
    two: tuple[LogService, LogService],
) -> None:
    """The long-lived integrator holds index rows (`ledger.vindex.WriteBack`) while each
    take fills a batch (the queue is not empty), and writes them when a take comes back
    short, before the next: a publish answered when the queue ran empty is found."""
    a, b = two
    qa = _queued(a)
    qa.max_batch = 2  # takes of 2: a submission of 5 is settled in three batches
    writes: list[tuple[int, int]] = []
    real = a.index.rows.write

    def write(pending: PendingIndex) -> None:
        writes.append((pending.start, pending.size))
        real(pending)

    a.index.rows.write = write  # type: ignore[method-assign]
    datas = [entry_bytes(i, "acme/held") for i in range(5)]
    got = b.submit([admit_bytes(d) for d in datas])
    assert all(isinstance(r, Receipt) for r in got)
    key = IndexKey("name", "acme/held")
    deadline = time.monotonic() + 10  # the write follows the last outcomes' transaction
    while b.index.lookup(key).size < 5:
        assert time.monotonic() < deadline, "the integrator never wrote the held index rows"
        time.sleep(0.01)
    assert b.index.lookup(key).indices == list(range(5))
    assert a.index.written_size == 5
    assert writes == [(0, 5)], "three batches, their index rows written once"


def test_duplicates_through_two_frontends_at_once_end_at_one_index(
    two: tuple[LogService, LogService],
) -> None:
    a, b = two
    data = entry_bytes(777)
    out: list[Receipt | BaseException] = []
    barrier = threading.Barrier(6)

    def post(svc: LogService) -> None:
        barrier.wait()
        out.extend(svc.submit([admit_bytes(data), admit_bytes(data)]))

    threads = [threading.Thread(target=post, args=(svc,)) for svc in (a, b, a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(out) == 12
    receipts = [_check(a, r, data) for r in out]
    assert {r.index for r in receipts} == {0}
    assert sum(not r.duplicate for r in receipts) == 1
    assert a.storage.entry_count() == 1


def test_queued_rows_that_do_not_verify_are_refused_not_logged(
    two: tuple[LogService, LogService],
) -> None:
    """Someone with write access to the database (or a bug) queues rows no frontend sealed."""
    a, b = two
    good = admit_bytes(entry_bytes(1))
    sealed = seal(KEY, good)
    other = seal(queue_key(NoteSigner("queue.example/log", Ed25519PrivateKey.generate())), good)
    lying = json.dumps({**good.facts.to_json(), "subjects": [["evil/k", "00" * 32]]})
    bad_facts = ["not json", "{}", json.dumps({**good.facts.to_json(), "subjects": []}),
                 json.dumps({**good.facts.to_json(), "keyids": [1]}), "[" * 100_000]
    rows = [
        QueueRow(good.data, sealed.facts, b""),  # no MAC
        QueueRow(good.data, sealed.facts, b"\0" * 32),  # a made-up MAC
        other,  # sealed with another log's key
        QueueRow(good.data + b" ", sealed.facts, sealed.mac),  # bytes changed after sealing
        QueueRow(good.data, lying, sealed.mac),  # facts changed after sealing
        # Sealed with the right key but facts that do not decode (a frontend bug):
        *(QueueRow(good.data, f, _mac(KEY, good.data, f)) for f in bad_facts),
    ]
    for row in rows:
        with pytest.raises(QueueRowError, match=r"MAC does not verify|facts do not decode"):
            unseal(KEY, row)
    assert unseal(KEY, sealed) == good
    tickets = _queued(b).queue.enqueue(rows)
    waiting = {t: _wait_ticket_on(_queued(b), t) for t in tickets}
    (ok,) = b.submit([good])
    _check(b, ok, good.data)
    for t, w in waiting.items():
        assert w.event.wait(10), f"ticket {t} was never settled"
        assert w.receipt is None
        assert "the integrator refused the queued entry" in str(w.error)
    assert a.storage.entry_count() == 1, "nothing but the sealed entry was logged"
    assert not a.storage.search("name", "evil/k", 0, 10).results
    (again,) = a.submit([admit_bytes(entry_bytes(2))])
    assert isinstance(again, Receipt) and again.index == 1, "the integrator goes on"
    reader = StoredHashReader(a.storage, 2)
    assert reader.read_hashes([(0, 0)]) == [leaf_hash(good.data)]


def test_lost_notifications_fall_back_to_polling_and_old_outcomes_are_swept(pg_url: str) -> None:
    storage = PostgresStorage(pg_url, pool_size=3)
    seq = Sequencer(storage, SIGNER, SIGNER.name)
    seq.ensure_checkpoint()
    qs = QueuedSequencer(seq, PgQueue(storage), KEY, poll=0.1, sweep_after=2)
    qs.start()
    try:
        w = _wait_ticket_on(qs, 10**9)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            # Settled without a NOTIFY (as if the notification was lost with a connection),
            # and an outcome nobody will collect (its frontend died long ago).
            conn.execute("INSERT INTO outcomes VALUES (%s, NULL, false, 0, 'refused', %s)",
                         (10**9, time.time()))
            conn.execute("INSERT INTO outcomes VALUES (%s, NULL, false, 0, 'old', %s)",
                         (10**9 + 1, time.time() - 60))
            assert w.event.wait(5), "the collector never polled"
            assert "refused" in str(w.error)
            deadline = time.monotonic() + 10
            while conn.execute("SELECT count(*) FROM outcomes").fetchone() != (0,):
                assert time.monotonic() < deadline, "the old outcome was never swept"
                time.sleep(0.05)
    finally:
        qs.close(0)
        storage.close()


def test_the_integrator_hands_the_lock_to_a_waiting_startup_check(
    two: tuple[LogService, LogService], pg_url: str,
) -> None:
    a, _b = two
    check = PostgresStorage(pg_url, pool_size=1)
    try:
        start = time.monotonic()
        with check.integration_lock():  # what a starting `ktl serve` takes for its check
            took = time.monotonic() - start
            assert took < 5, f"a start-up check waited {took:.1f} s for the lock"
            deadline = time.monotonic() + 2
            while _queued(a).is_integrator:
                assert time.monotonic() < deadline
                time.sleep(0.01)
        data = entry_bytes(5)
        (r,) = a.submit([admit_bytes(data)])  # an integrator takes the lock back
        _check(a, r, data)
    finally:
        check.close()


def _wait_ticket_on(qs: QueuedSequencer, ticket: int) -> _Waiter:
    """Wait on a ticket whose row is not ours (forged or never queued): a stand-in
    submission, since no receipt is ever built for it."""
    w = _Waiter(admit_bytes(entry_bytes(999)))
    with qs._lock:
        qs._pending[ticket] = w
    return w


def test_a_row_the_database_cannot_store_is_refused_and_the_queue_goes_on(
    two: tuple[LogService, LogService],
) -> None:
    """A sealed row (a frontend bug) whose facts PostgreSQL refuses (a NUL in a text column)
    must not stall the queue: its batch is retried one row at a time, and only it is refused."""
    a, b = two
    subs = [admit_bytes(entry_bytes(i)) for i in (10, 11, 12)]
    poison = json.dumps({**subs[1].facts.to_json(), "subjects": [["acme/\u0000k", "ab" * 32]]})
    rows = [seal(KEY, subs[0]), QueueRow(subs[1].data, poison, _mac(KEY, subs[1].data, poison)),
            seal(KEY, subs[2])]
    qb = _queued(b)
    with qb._lock:  # registered together (an outcome that comes first waits for the poll)
        tickets = qb.queue.enqueue(rows)
        waiting = [_Waiter(s) for s in subs]
        qb._pending.update(zip(tickets, waiting, strict=True))
    for w in waiting:
        assert w.event.wait(10), "a ticket was never settled"
    first, bad, last = waiting
    assert "the log could not store it" in str(bad.error) and bad.receipt is None
    assert first.receipt is not None and last.receipt is not None
    _check(a, first.receipt, subs[0].data)
    _check(a, last.receipt, subs[2].data)
    assert a.storage.entry_count() == 2


def test_an_integrator_whose_session_is_killed_is_replaced(
    two: tuple[LogService, LogService], pg_url: str,
) -> None:
    a, b = two
    first = admit_bytes(entry_bytes(20))
    _check(b, b.submit([first])[0], first.data)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (holder,) = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = %s",
            (INTEGRATE_LOCK,)).fetchall()
        conn.execute("SELECT pg_terminate_backend(%s)", holder)  # a lost connection
    subs = [admit_bytes(entry_bytes(i)) for i in range(21, 26)]
    got = b.submit(subs)
    assert sorted(_check(b, r, s.data).index for r, s in zip(got, subs, strict=True)) == [1, 2, 3, 4, 5]
    sizes = [cp.size for cp in a.storage.checkpoints(100)]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)


def test_a_planted_outcome_gets_no_one_a_receipt_and_cannot_stall_the_queue(
    two: tuple[LogService, LogService], pg_url: str,
) -> None:
    """Issue 26 row 6, database write access without the log key: (1) an outcome row that
    claims a victim's ticket was logged at index 0; (2) a bad-MAC queue row together with
    an outcome row for its ticket, whose refusal once collided and rolled every batch back."""
    a, b = two
    first = entry_bytes(60)
    (r0,) = a.submit([admit_bytes(first)])
    _check(a, r0, first)
    victim = _Waiter(admit_bytes(entry_bytes(61)))  # waiting for a ticket never queued
    with _queued(b)._lock:
        _queued(b)._pending[10**9] = victim
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO outcomes VALUES (%s, 0, false, 1, NULL, %s)",
                     (10**9, time.time()))
        conn.execute("SELECT pg_notify('ktl_done', '')")
        assert victim.event.wait(10), "the planted outcome was never collected"
        assert victim.receipt is None, "a planted outcome became a receipt"
        assert "does not verify against the log" in str(victim.error)
        # (2) In one transaction, so the integrator sees both at once.
        with conn.transaction():
            (ticket,) = conn.execute(
                "INSERT INTO queue (data, facts, mac, queued_at) VALUES (%s, '{}', %s, %s) "
                "RETURNING ticket", (b"junk", b"\0" * 32, time.time())).fetchone() or (0,)
            conn.execute("INSERT INTO outcomes VALUES (%s, 0, false, 1, NULL, %s)",
                         (ticket, time.time() + 3600))
        conn.execute("SELECT pg_notify('ktl_queued', '')")
    start = time.monotonic()
    for i in range(3):  # bounded: the queue goes on within seconds, not 30 s of 503s
        data = entry_bytes(62 + i)
        (r,) = b.submit([admit_bytes(data)])
        _check(b, r, data)
    assert time.monotonic() - start < 20
    assert a.storage.entry_count() == 4
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM queue").fetchone() == (0,)


def test_a_row_whose_refusal_cannot_be_stored_is_skipped_and_reported(pg_url: str) -> None:
    """Never a livelock: a row that cannot be settled nor refused is dropped unanswered."""
    storage = PostgresStorage(pg_url, pool_size=3)
    seq = Sequencer(storage, SIGNER, SIGNER.name)
    seq.ensure_checkpoint()
    queue = PgQueue(storage)
    qs = QueuedSequencer(seq, queue, KEY, poll=0.05)
    real_settle = queue.settle

    def settle(batch: object, outcomes: list[Outcome]) -> None:
        if any(o.ticket == bad for o in outcomes):
            raise StorageError("simulated: this row's outcome cannot be stored")
        real_settle(batch, outcomes)  # type: ignore[arg-type]

    queue.settle = settle  # type: ignore[method-assign]
    qs.start()
    try:
        (bad,) = queue.enqueue([seal(KEY, admit_bytes(entry_bytes(70)))])
        good = entry_bytes(71)
        (r,) = qs.submit([admit_bytes(good)], timeout=10)
        assert isinstance(r, Receipt) and r.index == 0
        assert qs.skipped == 1
    finally:
        qs.close(0)
        storage.close()

"""The shared queue's records without a database: outcomes, entry facts, sealed rows."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from ledger.queued import QueueRowError, queue_key, seal, unseal
from ledger.sequencer import Submission
from ledger.storage import EntryFacts, Outcome, QueueRow, StorageError
from ledger.tlog.note import NoteSigner

SIGNER = NoteSigner("queue.example/log", Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
KEY = queue_key(SIGNER)
FACTS = EntryFacts("https://p/kernel/v1", (("acme/k", "ab" * 32), ("ü/k", "cd" * 32)), ("ef" * 32,))

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner,
                                                                 max_size=4),
    max_leaves=12,
)


def test_outcome_round_trips_and_refuses_nonsense() -> None:
    for o in (Outcome(1, 0, False, 1), Outcome(7, 3, True, 9), Outcome(2, None, False, 0, "bad")):
        assert Outcome.from_json(o.to_json()) == o
    for bad in (dict(index=None, error=None), dict(index=1, error="x"), dict(index=5, size=5),
                dict(ticket=0), dict(size=-1, index=None, error="x")):
        args: dict[str, object] = {"ticket": 1, "index": 0, "duplicate": False, "size": 1,
                                   "error": None, **bad}
        with pytest.raises(StorageError):
            Outcome(**args)  # type: ignore[arg-type]
    assert len(Outcome(1, None, False, 0, "x" * 10_000).error or "") == 500


def test_entry_facts_round_trip() -> None:
    assert EntryFacts.from_json(json.loads(json.dumps(FACTS.to_json()))) == FACTS


@given(_json)
def test_entry_facts_parser_takes_only_facts(obj: object) -> None:
    try:
        facts = EntryFacts.from_json(obj)
    except StorageError:
        return
    assert facts.to_json() == obj


def test_a_sealed_row_unseals_to_the_same_submission() -> None:
    sub = Submission(b'{"entry":1}', FACTS)
    row = seal(KEY, sub)
    assert unseal(KEY, row) == sub
    other = queue_key(NoteSigner("queue.example/log", Ed25519PrivateKey.generate()))
    assert other != KEY and len(KEY) == 32
    for bad in (QueueRow(row.data, row.facts, row.mac[:-1] + bytes([row.mac[-1] ^ 1])),
                QueueRow(row.data + b" ", row.facts, row.mac),
                QueueRow(row.data, row.facts.replace("acme", "evil"), row.mac),
                seal(other, sub)):
        with pytest.raises(QueueRowError, match="MAC does not verify"):
            unseal(KEY, bad)


def test_queued_sequencer_refuses_bad_settings() -> None:
    from ledger.queued import QueuedSequencer
    from ledger.sequencer import Sequencer, SequencerError
    from ledger.storage import MemoryStorage

    seq = Sequencer(MemoryStorage(), SIGNER, SIGNER.name)
    queue: Any = object()  # never reached: the settings are refused first
    for kwargs, key in (({}, b"short"), ({"poll": 0}, KEY), ({"lock_poll": 11}, KEY),
                        ({"sweep_after": 0.5}, KEY)):
        with pytest.raises(SequencerError):
            QueuedSequencer(seq, queue, key, **kwargs)
    qs = QueuedSequencer(seq, queue, KEY)
    with pytest.raises(SequencerError, match="not running"):
        qs.submit([Submission(b"x", FACTS)])
    assert qs.submit([]) == []

"""A verified connection to one log: its key, its latest checkpoint, entries with proofs.

`connect` learns the log's origin and chooses its verifier key (`--log-key`, a
pinned key, or trust on first use, reported as such). `latest_checkpoint`
verifies and reconciles the log's current checkpoint with the trusted state.
`fetch_entry` returns an entry only after its checkpoint signature, leaf hash,
inclusion proof and envelope signature all verified.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attest.entry import VerifiedEntry
from client._errors import InputError, LogMisbehaviour, ServerError, VerificationFailed
from client.api import LogAPI, LogClient
from client.models import LogInfo
from client.receipts import check_entry, check_inclusion
from client.state import TrustedState
from client.trust import (
    KeyChoice,
    Reconciled,
    choose_log_key,
    load_verifier,
    open_signed,
    prove_consistent,
    reconcile,
)
from ledger.checkpoint import SignedCheckpoint
from ledger.merkle import leaf_hash
from ledger.note import NoteVerifier


class EmptyLog(InputError):
    """The log has no checkpoint yet (nothing was ever logged)."""


@dataclass
class Session:
    """A log, its identity, the key its checkpoints must verify under, and the trusted state."""

    log: LogAPI
    info: LogInfo
    origin: str
    verifier: NoteVerifier
    key: KeyChoice
    trusted: TrustedState

    def close(self) -> None:
        if isinstance(self.log, LogClient):
            self.log.close()


def connect(
    log: LogAPI | str, trusted: TrustedState, given_key: str | None = None
) -> Session:
    """Open a session with a log (a URL or any `LogAPI`)."""
    api: LogAPI = LogClient(log) if isinstance(log, str) else log
    info = api.info()
    choice = choose_log_key(trusted, info.origin, given_key, info.verifier_key)
    verifier = load_verifier(choice.key)
    return Session(api, info, info.origin, verifier, choice, trusted)


def require_url(url: str | None) -> str:
    if not url:
        raise InputError("no log given: pass --log URL or set KTL_LOG")
    return url


def latest_checkpoint(sess: Session) -> tuple[SignedCheckpoint, Reconciled]:
    """The log's current checkpoint, signature-checked and proven consistent with trusted state."""
    try:
        note = sess.log.checkpoint()
    except ServerError as exc:
        if exc.code == "empty_log":
            raise EmptyLog(f"the log {sess.origin!r} has no entries yet") from exc
        raise
    cp = open_signed(note, sess.verifier, sess.origin)
    return cp, reconcile(sess.trusted, sess.verifier, cp, sess.log.consistency_proof)


@dataclass(frozen=True)
class FetchedEntry:
    """An entry fetched from the log and fully verified."""

    index: int
    entry_bytes: bytes
    proof: tuple[bytes, ...]
    checkpoint: SignedCheckpoint
    verified: VerifiedEntry

    def summary(self) -> dict[str, Any]:
        stmt = self.verified.statement
        return {
            "index": self.index,
            "leaf_hash": leaf_hash(self.entry_bytes).hex(),
            "subject_name": stmt.subjects[0].name,
            "subject_sha256": stmt.subjects[0].sha256,
            "predicate_type": stmt.predicate_type,
            "signer_keyids": list(self.verified.signer_keyids),
            "tree_size": self.checkpoint.checkpoint.size,
            "root_hash": self.checkpoint.checkpoint.root_hash.hex(),
        }


def fetch_entry(sess: Session, index: int) -> FetchedEntry:
    """GET an entry with its proof and verify it all before returning it."""
    rec = sess.log.entry(index)
    if rec.index != index:
        raise VerificationFailed(f"asked the log for entry {index}, it answered entry {rec.index}")
    cp = open_signed(rec.checkpoint, sess.verifier, sess.origin)
    if rec.tree_size != cp.checkpoint.size:
        raise VerificationFailed(f"entry {index}: the log's answer says tree size {rec.tree_size} "
                                 f"but its checkpoint is size {cp.checkpoint.size}")
    if rec.leaf_hash != leaf_hash(rec.entry_bytes):
        raise VerificationFailed(f"entry {index}: the log's leaf hash does not match the entry bytes")
    check_inclusion(rec.entry_bytes, index, rec.inclusion_proof, cp)
    reconcile(sess.trusted, sess.verifier, cp, sess.log.consistency_proof)
    verified = check_entry(rec.entry_bytes)
    return FetchedEntry(index, rec.entry_bytes, rec.inclusion_proof, cp, verified)


def prove_receipt_current(sess: Session, receipt_cp: SignedCheckpoint) -> SignedCheckpoint:
    """Prove a receipt's checkpoint is a prefix of the log's latest (rollback/fork = evidence).

    The latest checkpoint is reconciled with (and stored in) the trusted state only
    after it proved consistent with the receipt, so a failed check trusts nothing new.
    """
    try:
        note = sess.log.checkpoint()
    except ServerError as exc:
        if exc.code != "empty_log":
            raise
        note = None
    if note is None:
        detail = (f"the receipt's checkpoint is size {receipt_cp.checkpoint.size}, but the log "
                  "now shows no checkpoint at all")
        path = sess.trusted.save_evidence(sess.origin, "rollback", receipt_cp.note_bytes, b"",
                                          detail)
        raise LogMisbehaviour(f"ROLLBACK of log {sess.origin!r}: {detail}. Evidence: {path}", path)
    latest = open_signed(note, sess.verifier, sess.origin)
    old, new = receipt_cp.checkpoint, latest.checkpoint
    if new.size < old.size:
        detail = (f"the receipt's checkpoint is size {old.size}, but the log now shows only "
                  f"size {new.size}")
        path = sess.trusted.save_evidence(sess.origin, "rollback", receipt_cp.note_bytes,
                                          latest.note_bytes, detail)
        raise LogMisbehaviour(f"ROLLBACK of log {sess.origin!r}: {detail}. Evidence: {path}", path)
    try:
        prove_consistent(receipt_cp, latest, sess.log.consistency_proof)
    except VerificationFailed as exc:
        path = sess.trusted.save_evidence(sess.origin, "fork", receipt_cp.note_bytes,
                                          latest.note_bytes, str(exc))
        raise LogMisbehaviour(f"FORK of log {sess.origin!r}: {exc}. Evidence: {path}",
                              path) from exc
    reconcile(sess.trusted, sess.verifier, latest, sess.log.consistency_proof)
    return latest

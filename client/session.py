"""A verified connection to one log: its key, its latest checkpoint, entries with proofs.

`connect` learns the log's origin and chooses its verifier key for the URL (the
key pinned for that URL, `--log-key`, or trust on first use, reported as such).
A `Session` holds the trust state, like python-tuf's `Updater`; its methods take only
what varies. `latest_checkpoint` verifies the log's current checkpoint and extends trust
to it through `client.trust.extend_trust`, the one path that does. `fetch_entry` returns
an entry only after its checkpoint signature, leaf hash, inclusion proof and envelope
signature all verified; `submit` returns a submission only after the log's answer did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attest.entry import VerifiedEntry
from client.api import LogAPI, LogClient
from client.errors import InputError, ServerError, VerificationFailed
from client.models import LogInfo
from client.state import TrustedState
from client.trust import (
    Accepted,
    Announced,
    KeyChoice,
    LogTrust,
    ProveConsistency,
    QuorumCheck,
    check_entry,
    check_inclusion,
    choose_log_key,
    extend_trust,
    load_verifier,
    open_signed,
)
from client.witnesses import cosigners, quorum_check
from ledger.tlog.checkpoint import SignedCheckpoint
from ledger.tlog.merkle import leaf_hash
from ledger.tlog.note import NoteVerifier
from ledger.tlog.proof_bundle import TlogProof
from ledger.tlog.witness_policy import WitnessPolicy


class EmptyLog(InputError):
    """The log has no checkpoint yet (nothing was ever logged)."""


@dataclass(frozen=True)
class Logged:
    """An entry the log took, its answer verified: where it is and the proof it is there."""

    index: int
    proof: tuple[bytes, ...]
    checkpoint: bytes
    """The signed checkpoint note the inclusion proof is against."""
    tree_size: int
    duplicate: bool

    def tlog_proof(self) -> TlogProof:
        return TlogProof(self.index, self.proof, self.checkpoint, None)


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


@dataclass
class Session:
    """A log, its identity, the key its checkpoints must verify under, and the trusted state."""

    log: LogAPI
    info: LogInfo
    origin: str
    verifier: NoteVerifier
    key: KeyChoice
    trusted: TrustedState
    url: str = ""
    quorum: QuorumCheck | None = None  # witness cosignatures required; None: none
    witness_policy: WitnessPolicy | None = None

    @property
    def trust(self) -> LogTrust:
        return LogTrust(self.trusted, self.verifier, self.origin, self.quorum)

    def open(self, note: bytes) -> SignedCheckpoint:
        """A checkpoint note of this log, its signature checked (not yet trusted)."""
        return open_signed(note, self.verifier, self.origin)

    def extend(self, new: SignedCheckpoint | None,
               also: tuple[tuple[SignedCheckpoint, str], ...] = (),
               prove: ProveConsistency | None = None) -> Accepted:
        """Extend trust to `new` (signature checked) through the one trust-extension path;
        consistency proven by the log's proofs unless `prove` says otherwise."""
        return extend_trust(self.trust, new, prove or self.log.consistency_proof, also=also)

    def close(self) -> None:
        if isinstance(self.log, LogClient):
            self.log.close()

    def latest_checkpoint(self) -> tuple[SignedCheckpoint, Accepted]:
        """The log's current checkpoint, signature-checked and proven consistent with the
        trusted state."""
        try:
            note = self.log.checkpoint()
        except ServerError as exc:
            if exc.code == "empty_log":
                raise EmptyLog(f"the log {self.origin!r} has no entries yet") from exc
            raise
        cp = self.open(note)
        return cp, self.extend(cp)

    def fetch_entry(self, index: int) -> FetchedEntry:
        """GET an entry with its proof and verify it all before returning it."""
        rec = self.log.entry(index)
        if rec.index != index:
            raise VerificationFailed(f"asked the log for entry {index}, it answered entry "
                                     f"{rec.index}")
        cp = self.open(rec.checkpoint)
        if rec.tree_size != cp.checkpoint.size:
            raise VerificationFailed(f"entry {index}: the log's answer says tree size "
                                     f"{rec.tree_size} but its checkpoint is size "
                                     f"{cp.checkpoint.size}")
        if rec.leaf_hash != leaf_hash(rec.entry_bytes):
            raise VerificationFailed(f"entry {index}: the log's leaf hash does not match the "
                                     "entry bytes")
        check_inclusion(rec.entry_bytes, index, rec.inclusion_proof, cp)
        self.extend(cp)
        verified = check_entry(rec.entry_bytes)
        return FetchedEntry(index, rec.entry_bytes, rec.inclusion_proof, cp, verified)

    def submit(self, entry_bytes: bytes) -> Logged:
        """Submit one entry and verify the answer: checkpoint signature, leaf hash, inclusion
        proof, and the checkpoint's consistency with the trusted state."""
        res = self.log.submit(entry_bytes)
        cp = self.open(res.checkpoint)
        if res.leaf_hash != leaf_hash(entry_bytes):
            raise VerificationFailed(
                f"the log answered leaf hash {res.leaf_hash.hex()} for an entry that hashes to "
                f"{leaf_hash(entry_bytes).hex()}"
            )
        if res.tree_size != cp.checkpoint.size:
            raise VerificationFailed(
                f"the log's answer says tree size {res.tree_size} but its checkpoint is size "
                f"{cp.checkpoint.size}"
            )
        check_inclusion(entry_bytes, res.index, res.inclusion_proof, cp)
        self.extend(cp)
        return Logged(res.index, tuple(res.inclusion_proof), res.checkpoint, cp.checkpoint.size,
                      res.duplicate)

    def prove_receipt_current(self, receipt_cp: SignedCheckpoint) -> SignedCheckpoint:
        """Prove a receipt's checkpoint is a prefix of the log's latest (rollback/fork =
        evidence).

        The latest checkpoint is judged against the receipt's first, then the trusted
        state, in the one trust-extension path; a failed check trusts nothing new.
        """
        try:
            note: bytes | None = self.log.checkpoint()
        except ServerError as exc:
            if exc.code != "empty_log":
                raise
            note = None
        latest = None if note is None else self.open(note)
        self.extend(latest, also=((receipt_cp, "the receipt's checkpoint of size"),))
        if latest is None:  # only an empty receipt checkpoint gets here
            raise EmptyLog(f"the log {self.origin!r} has no entries yet")
        return latest


def connect(
    log: LogAPI | str, trusted: TrustedState, given_key: str | None = None,
    *, url: str | None = None, witness_policy: WitnessPolicy | None = None,
) -> Session:
    """Open a session with a log (a URL, or any `LogAPI` with the `url` its key is pinned for).

    With `witness_policy`, every checkpoint trusted in the session must carry
    cosignatures that meet its quorum.
    """
    if given_key:
        load_verifier(given_key)  # a bad --log-key is a usage error, before any network
    api: LogAPI = LogClient(log) if isinstance(log, str) else log
    where = url or (log if isinstance(log, str) else getattr(api, "base_url", None))
    if not isinstance(where, str) or not where:
        raise InputError("connect: give the log's URL (pins are kept per URL)")
    info = api.info()
    announced = Announced(info.origin, info.verifier_key, info.checkpoint)
    choice = choose_log_key(trusted, where, announced, given_key)
    verifier = load_verifier(choice.key)
    return Session(api, info, info.origin, verifier, choice, trusted, where,
                   quorum_check(witness_policy, verifier), witness_policy)


def require_url(url: str | None) -> str:
    if not url:
        raise InputError("no log given: pass --log URL or set KTL_LOG")
    return url


def log_summary(sess: Session) -> dict[str, Any]:
    """`ktl log-info`: the log's identity and limits, and its current checkpoint verified
    and proven consistent with the trusted state (an empty log has none)."""
    data: dict[str, Any] = {
        "origin": sess.origin,
        "verifier_key": sess.key.key,
        "key_source": sess.key.how,
        "tree_size": 0,
        "root_hash": None,
        "trusted_before": None,
        "consistency": "empty log",
        "max_entry_bytes": sess.info.max_entry_bytes,
        "max_blob_bytes": sess.info.max_blob_bytes,
        "max_batch": sess.info.max_batch,
        "reproduce": None if sess.info.reproduce is None else dict(sess.info.reproduce),
        "checkpoint": None,
    }
    try:
        cp, rec = sess.latest_checkpoint()
    except EmptyLog:
        return data
    data.update(tree_size=cp.checkpoint.size, root_hash=cp.checkpoint.root_hash.hex(),
                trusted_before=rec.trusted_size, consistency=rec.outcome,
                checkpoint=cp.note_bytes.decode("utf-8"))
    data["witnesses"] = cosigners(cp, sess.verifier, sess.witness_policy)
    return data

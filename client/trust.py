"""Trust decisions about a log: which key signs it, and whether it only ever grew.

`open_signed` checks a checkpoint's signature; `reconcile` compares a freshly
verified checkpoint with the largest one remembered for its origin and demands
a consistency proof between them. A smaller checkpoint is a rollback, an
equal-size one with another root or a failed consistency proof is a fork:
both raise `LogMisbehaviour` after saving the two signed checkpoints as evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from client._errors import InputError, LogMisbehaviour, VerificationFailed
from client.state import TrustedState
from ledger import LedgerError
from ledger.checkpoint import SignedCheckpoint, open_checkpoint
from ledger.merkle import verify_consistency
from ledger.note import NoteVerifier

ProveConsistency = Callable[[int, int], Sequence[bytes]]


def load_verifier(key_string: str) -> NoteVerifier:
    """Parse a log verifier key string (`name+keyid+base64`), or say why it is unusable."""
    try:
        return NoteVerifier.from_key_string(key_string.strip())
    except LedgerError as exc:
        raise InputError(f"log key {key_string.strip()!r} is not a valid verifier key: {exc}") from exc


def open_signed(note: bytes, verifier: NoteVerifier, origin: str | None = None) -> SignedCheckpoint:
    """Verify a checkpoint's signature (and origin when given) before anything reads it."""
    try:
        return open_checkpoint(note, verifier, origin)
    except LedgerError as exc:
        raise VerificationFailed(
            f"checkpoint signature: the checkpoint is not validly signed by the log key "
            f"{verifier_name(verifier)!r}: {exc}"
        ) from exc


def verifier_name(verifier: NoteVerifier) -> str:
    return str(getattr(verifier, "name", "?"))


@dataclass(frozen=True)
class KeyChoice:
    """The log key used and how it came to be trusted (`given`, `pinned`, `tofu`)."""

    key: str
    how: str

    def describe(self) -> str:
        return {
            "given": "log key given with --log-key",
            "pinned": "log key pinned earlier in the trusted-state store",
            "tofu": "log key trusted on FIRST USE (TOFU) and pinned; pass --log-key to pin it yourself",
        }[self.how]


def choose_log_key(
    state: TrustedState, origin: str, given: str | None, advertised: str | None
) -> KeyChoice:
    """Pick the log's verifier key: --log-key, else the pinned one, else TOFU on `advertised`."""
    if given:
        if state.log_key(origin) is None:
            state.pin_log_key(origin, given.strip())
        return KeyChoice(given.strip(), "given")
    pinned = state.log_key(origin)
    if pinned:
        return KeyChoice(pinned, "pinned")
    if not advertised:
        raise InputError(f"no log key known for {origin!r}; pass --log-key")
    state.pin_log_key(origin, advertised.strip())
    return KeyChoice(advertised.strip(), "tofu")


@dataclass(frozen=True)
class Reconciled:
    """What `reconcile` concluded: `first` (nothing stored), `same`, `grew` or `older`."""

    outcome: str
    trusted_size: int
    new_size: int


def prove_consistent(
    old: SignedCheckpoint, new: SignedCheckpoint, prove: ProveConsistency
) -> None:
    """Raise `VerificationFailed` unless `new` extends `old` (sizes old <= new)."""
    o, n = old.checkpoint, new.checkpoint
    if o.size == n.size:
        if o.root_hash != n.root_hash:
            raise VerificationFailed(
                f"consistency: two checkpoints of size {o.size} with different roots"
            )
        return
    if o.size == 0:
        return
    try:
        proof = list(prove(o.size, n.size))
        verify_consistency(o.size, n.size, o.root_hash, n.root_hash, proof)
    except LedgerError as exc:
        raise VerificationFailed(
            f"consistency: tree {n.size} does not extend tree {o.size}: {exc}"
        ) from exc


def reconcile(
    state: TrustedState,
    verifier: NoteVerifier,
    new: SignedCheckpoint,
    prove: ProveConsistency,
    *,
    store: bool = True,
) -> Reconciled:
    """Check `new` against the stored checkpoint of its origin and keep the larger one."""
    with state.lock(new.checkpoint.origin):
        return _reconcile(state, verifier, new, prove, store=store)


def _reconcile(
    state: TrustedState,
    verifier: NoteVerifier,
    new: SignedCheckpoint,
    prove: ProveConsistency,
    *,
    store: bool,
) -> Reconciled:
    origin = new.checkpoint.origin
    old_note = state.checkpoint(origin)
    if old_note is None:
        if store:
            state.store_checkpoint(origin, new.note_bytes)
        return Reconciled("first", 0, new.checkpoint.size)
    try:
        old = open_checkpoint(old_note, verifier, origin)
    except LedgerError as exc:
        raise VerificationFailed(
            f"the trusted checkpoint stored for {origin!r} does not verify under the log key "
            f"in use ({exc}); the log may have changed keys. Check the key out of band."
        ) from exc
    osz, nsz = old.checkpoint.size, new.checkpoint.size
    if nsz < osz:
        detail = f"the log now shows tree size {nsz}, but size {osz} was verified earlier"
        path = state.save_evidence(origin, "rollback", old.note_bytes, new.note_bytes, detail)
        raise LogMisbehaviour(f"ROLLBACK of log {origin!r}: {detail}. Evidence: {path}", path)
    try:
        prove_consistent(old, new, prove)
    except VerificationFailed as exc:
        path = state.save_evidence(origin, "fork", old.note_bytes, new.note_bytes, str(exc))
        raise LogMisbehaviour(f"FORK of log {origin!r}: {exc}. Evidence: {path}", path) from exc
    if nsz > osz and store:
        state.store_checkpoint(origin, new.note_bytes)
    return Reconciled("same" if nsz == osz else "grew", osz, nsz)

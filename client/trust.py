"""Trust decisions about a log: which key signs it, and whether it only ever grew.

There is one path by which a checkpoint comes to be trusted: `extend_trust`. Like
python-tuf's `TrustedMetadataSet`, the decision itself (`judge`) is pure — signed
checkpoints and proof hashes in, a typed verdict out — and the caller does the I/O:
`extend_trust` fetches the one consistency proof `judge` needs, saves the evidence
of a refusal (`refuse`, the only place evidence is written) and stores the new
checkpoint. Every command reaches it: `connect`/`Session.fetch_entry`/receipts in
`client.session` (`Session.extend`, `Session.submit`) and `client.monitor`.

Verdicts: `Accepted` (`first`, `same`, `grew`) or `Refused` (`rollback`, `fork`).
A refusal raises `LogMisbehaviour` (exit 1) naming the evidence file.

Keys are chosen by `choose_log_key`: pins are keyed by the log URL the user chose;
a different origin or key announced at a pinned URL is refused like a fork.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from attest import AttestError
from attest.entry import VerifiedEntry, decode_entry, verify_entry
from client.errors import InputError, LogMisbehaviour, VerificationFailed
from client.state import EvidenceKind, LogRef, Pin, TrustedState, normalize_log_url
from ledger import LedgerError
from ledger.tlog.checkpoint import Checkpoint, SignedCheckpoint, open_checkpoint
from ledger.tlog.merkle import leaf_hash, verify_consistency, verify_inclusion
from ledger.tlog.note import NoteVerifier
from ledger.vindex import commitment_lines

ProveConsistency = Callable[[int, int], Sequence[bytes]]
QuorumCheck = Callable[[SignedCheckpoint], None]
"""Raises `VerificationFailed` unless enough witnesses cosigned the checkpoint (issue 12)."""


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


# ---- which key: pins by URL ---------------------------------------------------------------

KeyHow = Literal["given", "pinned", "tofu"]


@dataclass(frozen=True)
class KeyChoice:
    """The log key used and how it came to be trusted (`given`, `pinned`, `tofu`)."""

    key: str
    how: KeyHow

    def describe(self) -> str:
        return {
            "given": "log key given with --log-key",
            "pinned": "log key pinned earlier for this URL in the trusted-state store",
            "tofu": "log key trusted on FIRST USE (TOFU) and pinned for this URL; pass --log-key "
                    "to pin it yourself",
        }[self.how]


@dataclass(frozen=True)
class Announced:
    """What the server at a URL says it is (not evidence): origin, key, latest checkpoint."""

    origin: str
    verifier_key: str | None
    checkpoint: bytes | None


def choose_log_key(
    state: TrustedState, url: str, announced: Announced, given: str | None
) -> KeyChoice:
    """Pick the log's verifier key for `url`: the pin, else --log-key, else TOFU (then pin it).

    At a pinned URL the announced origin must be the pinned one, and the key (given,
    or else announced) the pinned one: a log that changed either is refused with
    evidence (`LogMisbehaviour`); a --log-key that contradicts the pin is refused and
    never replaces it (`ktl trust forget URL` drops a pin after an out-of-band check).
    """
    url = normalize_log_url(url)
    given_key = given.strip() if given else None
    with state.pins_lock():
        pin = state.pin(url)
        if pin is None:
            key = given_key or (announced.verifier_key or "").strip()
            if not key:
                raise InputError(f"no log key known for {url}; pass --log-key")
            load_verifier(key)
            how: Literal["given", "tofu"] = "given" if given_key else "tofu"
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            state.set_pin(Pin(url, announced.origin, key, how, stamp))
            return KeyChoice(key, how)
    if pin.origin != announced.origin:
        raise refuse(state, pin.origin, "pin-mismatch", announced.checkpoint,
                     f"the log at {url} now announces origin {announced.origin!r}, but origin "
                     f"{pin.origin!r} was pinned there", _pinned_checkpoint(state, pin))
    if given_key is not None:
        if given_key != pin.log_key:
            raise VerificationFailed(
                f"the log key given with --log-key ({given_key!r}) is not the key pinned for "
                f"{url} ({pin.log_key!r}); if the log really changed keys, check that out of "
                f"band, then run `ktl trust forget {url}`"
            )
        return KeyChoice(given_key, "given")
    advertised = (announced.verifier_key or "").strip()
    if advertised and advertised != pin.log_key:
        raise refuse(state, pin.origin, "pin-mismatch", announced.checkpoint,
                     f"the log at {url} now announces key {advertised!r}, but key "
                     f"{pin.log_key!r} was pinned there", _pinned_checkpoint(state, pin))
    return KeyChoice(pin.log_key, "pinned")


def _pinned_checkpoint(state: TrustedState, pin: Pin) -> bytes | None:
    """The checkpoint trusted for a pin's origin under its key (the trusted side of the
    evidence when the log at a pinned URL changed), or None."""
    try:
        return state.checkpoint(LogRef(pin.origin, load_verifier(pin.log_key).key_string()))
    except (InputError, VerificationFailed):
        return None


# ---- what the log answers about one entry ------------------------------------------------


def check_inclusion(
    entry_bytes: bytes, index: int, proof: tuple[bytes, ...] | list[bytes], cp: SignedCheckpoint
) -> bytes:
    """Prove `entry_bytes` is leaf `index` under the verified checkpoint; return its leaf hash."""
    leaf = leaf_hash(entry_bytes)
    size = cp.checkpoint.size
    try:
        verify_inclusion(leaf, index, size, list(proof), cp.checkpoint.root_hash)
    except LedgerError as exc:
        raise VerificationFailed(
            f"inclusion proof: the entry (leaf hash {leaf.hex()}) is not proven to be entry "
            f"{index} of the tree of size {size}: {exc}"
        ) from exc
    return leaf


def check_entry(entry_bytes: bytes) -> VerifiedEntry:
    """Decode the canonical entry and verify its envelope signature and statement."""
    try:
        entry = decode_entry(entry_bytes)
    except AttestError as exc:
        raise VerificationFailed(f"entry: not a valid canonical log entry: {exc}") from exc
    try:
        return verify_entry(entry)
    except AttestError as exc:
        raise VerificationFailed(f"envelope signature: {exc}") from exc


# ---- whether a checkpoint may replace the trusted one ---------------------------------------

Outcome = Literal["first", "same", "grew"]
RefusalKind = Literal["rollback", "fork"]


@dataclass(frozen=True)
class Accepted:
    """`new` may be trusted: nothing was trusted before (`first`), `same` tree, or it `grew`."""

    outcome: Outcome
    trusted_size: int
    new_size: int


@dataclass(frozen=True)
class Refused:
    """`new` contradicts `trusted`: a `rollback` (smaller, or gone) or a `fork`."""

    kind: RefusalKind
    detail: str


Verdict = Accepted | Refused


def proof_needed(trusted: SignedCheckpoint | None, new: SignedCheckpoint | None
                 ) -> tuple[int, int] | None:
    """The (old, new) sizes of the consistency proof `judge` needs, if it needs one."""
    if trusted is None or new is None:
        return None
    o, n = trusted.checkpoint.size, new.checkpoint.size
    return (o, n) if 0 < o < n else None


def judge(
    trusted: SignedCheckpoint | None,
    new: SignedCheckpoint | None,
    proof: Sequence[bytes] | None,
    what: str = "size",
) -> Verdict:
    """Pure: may `new` replace `trusted`? (`new` None: the log shows no checkpoint at all.)

    `proof` is the consistency proof for `proof_needed(trusted, new)`, else ignored;
    `what` names the trusted checkpoint in messages ("size", "the receipt's size").
    Both checkpoints' signatures were verified by the caller under one log key.
    """
    if trusted is None:
        return Accepted("first", 0, 0 if new is None else new.checkpoint.size)
    o = trusted.checkpoint
    if new is None:
        if o.size == 0:
            return Accepted("same", 0, 0)
        return Refused("rollback", f"the log now shows no checkpoint at all, but {what} "
                                   f"{o.size} was verified earlier")
    n = new.checkpoint
    if n.size < o.size:
        return Refused("rollback", f"the log now shows tree size {n.size}, but {what} {o.size} "
                                   "was verified earlier")
    if n.size == o.size:
        if n.root_hash != o.root_hash:
            return Refused("fork", f"consistency: two checkpoints of size {o.size} with "
                                   "different roots")
        if _index_roots_differ(o, n):
            return Refused("fork", f"two checkpoints of size {o.size} commit to different "
                                   "index roots (docs/vindex.md): two answers to one search")
        return Accepted("same", o.size, n.size)
    if o.size > 0:
        if proof is None:
            return Refused("fork", f"consistency: no proof that tree {n.size} extends tree "
                                   f"{o.size}")
        try:
            verify_consistency(o.size, n.size, o.root_hash, n.root_hash, list(proof))
        except LedgerError as exc:
            return Refused("fork", f"consistency: tree {n.size} does not extend tree "
                                   f"{o.size}: {exc}")
    return Accepted("grew", o.size, n.size)


def _index_roots_differ(old: Checkpoint, new: Checkpoint) -> bool:
    """Both checkpoints commit to an index (or carry a malformed commitment line) and the
    lines differ: the log signed two index roots for one size."""
    lines = [commitment_lines(cp) for cp in (old, new)]
    return bool(lines[0]) and bool(lines[1]) and lines[0] != lines[1]


def refuse(state: TrustedState, origin: str, kind: EvidenceKind, new_note: bytes | None,
           detail: str, old_note: bytes | None = None) -> LogMisbehaviour:
    """Save the evidence of a refusal (the one place that writes it) and return the error;
    `old_note` is the trusted side, when there is one."""
    path = state.save_evidence(origin, kind, old_note or b"", new_note or b"", detail)
    label = {"rollback": "ROLLBACK", "fork": "FORK", "pin-mismatch": "PIN MISMATCH",
             "index-mismatch": "INDEX MISMATCH"}[kind]
    return LogMisbehaviour(f"{label} of log {origin!r}: {detail}. Evidence: {path}", path)


@dataclass(frozen=True)
class LogTrust:
    """What trust in one log is held by: the trusted state, the log's origin and the key its
    checkpoints verify under, and the witness quorum they must meet (None: none)."""

    state: TrustedState
    verifier: NoteVerifier
    origin: str
    quorum: QuorumCheck | None = None


def extend_trust(
    trust: LogTrust,
    new: SignedCheckpoint | None,
    prove: ProveConsistency,
    *,
    also: Sequence[tuple[SignedCheckpoint, str]] = (),
    store: bool = True,
) -> Accepted:
    """THE trust-extension path: may `new` (signature already checked) become trusted?

    `new` is judged first against each checkpoint in `also` (a receipt's, the
    monitor's last; each with the words naming it), then against the trusted
    checkpoint stored for `origin`. A refusal saves evidence and raises
    `LogMisbehaviour`. `trust.quorum`, when given, must pass before anything is stored
    (witness cosignatures, issue 12). With `store`, a larger checkpoint replaces the
    stored one; nothing is stored unless every check passed.
    """
    state, verifier, origin, quorum = trust.state, trust.verifier, trust.origin, trust.quorum
    log = LogRef(origin, verifier.key_string())
    with state.lock(log):
        for ref, what in also:
            _accept_or_raise(state, origin, ref, new, prove, what)
        old = _trusted(state, log, verifier)
        verdict = _accept_or_raise(state, origin, old, new, prove, "size")
        if new is not None and quorum is not None:
            quorum(new)
        if store and new is not None and verdict.outcome in ("first", "grew"):
            state.store_checkpoint(log, new.note_bytes)
        return verdict


def _trusted(state: TrustedState, log: LogRef, verifier: NoteVerifier) -> SignedCheckpoint | None:
    """The checkpoint trusted for `log`: its own, else a legacy per-origin one that verifies."""
    note = state.checkpoint(log)
    if note is not None:
        try:
            return open_checkpoint(note, verifier, log.origin)
        except LedgerError as exc:
            raise VerificationFailed(
                f"the trusted checkpoint stored for {log.origin!r} under its key does not "
                f"verify under that key ({exc}); the state was changed outside ktl. Remove "
                f"{state.home / 'logs'} for this origin after checking the key out of band."
            ) from exc
    legacy = state.legacy_checkpoint(log.origin)
    if legacy is None:
        return None
    try:
        old = open_checkpoint(legacy, verifier, log.origin)
    except LedgerError:
        return None  # another key's (e.g. an impostor's): not evidence about this log
    state.store_checkpoint(log, legacy)  # taken over: this log's own from now on
    return old


def _accept_or_raise(
    state: TrustedState, origin: str, old: SignedCheckpoint | None, new: SignedCheckpoint | None,
    prove: ProveConsistency, what: str,
) -> Accepted:
    sizes = proof_needed(old, new)
    verdict: Verdict
    if sizes is None:
        verdict = judge(old, new, None, what)
    else:
        try:
            proof = list(prove(*sizes))
        except LedgerError as exc:
            verdict = Refused("fork", f"consistency: no valid proof that tree {sizes[1]} "
                                      f"extends tree {sizes[0]}: {exc}")
        else:
            verdict = judge(old, new, proof, what)
    if isinstance(verdict, Refused):
        raise refuse(state, origin, verdict.kind, None if new is None else new.note_bytes,
                     verdict.detail, None if old is None else old.note_bytes)
    return verdict

"""Verify one index lookup answer, and hold a search listing against it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from client._errors import InputError, VerificationFailed
from client.session import Session
from client.trust import open_signed
from ledger.checkpoint import SignedCheckpoint
from ledger.vindex import (
    MAX_ANSWER,
    IndexKey,
    IndexProofError,
    LookupProof,
    committed_root,
    verify_lookup,
)

__all__ = ["CompleteList", "IncompleteAnswer", "IndexNotCommitted", "SearchOmitted",
           "check_listing", "index_key_for", "verified_lookup"]

#: `LogAPI.search` field -> index key kind.
_KINDS = {"digest": "digest", "name": "name", "keyid": "signer", "predicate_type": "type"}


class IncompleteAnswer(VerificationFailed):
    """The log's index answer does not prove its list complete (a bad or tampered proof)."""


class IndexNotCommitted(VerificationFailed):
    """The log's checkpoint commits to no index, so no answer of it can be proven complete."""


class SearchOmitted(VerificationFailed):
    """The log's search listing disagrees with the list its own committed index proves."""

    def __init__(self, message: str, missing: tuple[int, ...], extra: tuple[int, ...]) -> None:
        super().__init__(message)
        self.missing = missing
        self.extra = extra


@dataclass(frozen=True)
class CompleteList:
    """Every entry below `size` that names `key`, proven against `checkpoint`."""

    key: IndexKey
    size: int
    indices: tuple[int, ...]
    checkpoint: SignedCheckpoint

    def summary(self) -> str:
        return (f"complete up to index {self.size}: {len(self.indices)} entries name "
                f"{self.key.text()} (proven against the log's checkpoint of size {self.size})")

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key.text(), "size": self.size, "indices": list(self.indices)}


def index_key_for(field: str, value: str) -> IndexKey:
    """The index key a `search` by `field` = `value` asks about."""
    if field not in _KINDS:
        raise InputError(f"no index key for search field {field!r}")
    try:
        return IndexKey(_KINDS[field], value)
    except ValueError as exc:
        raise InputError(f"{field}: {exc}") from exc


def _parse(obj: Any, key: IndexKey) -> tuple[int, list[int], LookupProof, bytes]:
    if not isinstance(obj, dict) or set(obj) != {"key", "size", "indices", "proof", "checkpoint"}:
        raise IncompleteAnswer("index lookup: the answer must be an object with key, size, "
                               "indices, proof and checkpoint")
    size, indices, note = obj["size"], obj["indices"], obj["checkpoint"]
    if obj["key"] != key.text():
        raise IncompleteAnswer(f"index lookup: asked about {key.text()!r}, the log answered "
                               f"about {str(obj['key'])[:300]!r}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise IncompleteAnswer("index lookup: size must be a non-negative integer")
    if (not isinstance(indices, list) or len(indices) > MAX_ANSWER
            or any(isinstance(i, bool) or not isinstance(i, int) for i in indices)):
        raise IncompleteAnswer(f"index lookup: indices must be at most {MAX_ANSWER} integers")
    if not isinstance(note, str):
        raise IncompleteAnswer("index lookup: checkpoint must be a signed note")
    try:
        proof = LookupProof.from_json(obj["proof"])
    except IndexProofError as exc:
        raise IncompleteAnswer(f"index lookup: {exc}") from exc
    return size, indices, proof, note.encode("utf-8")


def verified_lookup(sess: Session, key: IndexKey) -> CompleteList:
    """Ask the log for `key`'s list and verify it all; typed errors say what failed.

    Preconditions, then the checkpoint's signature and size, its commitment line, the
    lookup proof against that root, and last the trust extension to the checkpoint
    (consistency with what this client trusts; a fork or rollback is `LogMisbehaviour`).
    """
    ask = getattr(sess.log, "index_lookup", None)
    if ask is None:
        raise InputError("this log client cannot ask for index proofs")
    size, indices, proof, note = _parse(ask(key.text()), key)
    cp = open_signed(note, sess.verifier, sess.origin)
    if cp.checkpoint.size != size:
        raise IncompleteAnswer(f"index lookup: the answer is for size {size} but its "
                               f"checkpoint is of size {cp.checkpoint.size}")
    try:
        root = committed_root(cp.checkpoint)
    except IndexProofError as exc:
        raise IncompleteAnswer(f"index lookup: {exc}") from exc
    if root is None:
        raise IndexNotCommitted(f"the log's checkpoint of size {size} commits to no index: "
                                "its search answers cannot be proven complete")
    if any(i >= size for i in indices):
        raise IncompleteAnswer(f"index lookup: an index at or past the size {size}")
    try:
        verify_lookup(root, key.hash, indices or None, proof)
    except IndexProofError as exc:
        raise IncompleteAnswer(f"the log's list for {key.text()} is not the one its index "
                               f"of size {size} commits to: {exc}") from exc
    sess.extend(cp)
    return CompleteList(key, size, tuple(indices), cp)


def check_listing(proved: CompleteList, listed: Iterable[int], *, up_to: int | None = None
                  ) -> None:
    """Refuse a search listing that leaves out, or adds, an entry below the proven size.

    `up_to`: the listing was read only this far (entries at or past it are not judged).
    """
    bound = proved.size if up_to is None else min(up_to, proved.size)
    seen = {i for i in listed if i < bound}
    want = {i for i in proved.indices if i < bound}
    missing, extra = tuple(sorted(want - seen)), tuple(sorted(seen - want))
    if missing or extra:
        what = []
        if missing:
            what.append(f"left out entries {', '.join(map(str, missing[:10]))}")
        if extra:
            what.append(f"listed entries {', '.join(map(str, extra[:10]))} that do not name it")
        raise SearchOmitted(f"the log's search for {proved.key.text()} {' and '.join(what)}, "
                            f"against the list its index of size {proved.size} proves",
                            missing, extra)

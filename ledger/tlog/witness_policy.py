"""Witness policies in the Sigsum policy grammar, and the quorum check on a checkpoint (pure).

A policy file has one statement a line (``#`` starts a comment):

    witness NAME VKEY [URL]        a witness: our cosignature verifier key string, its URL
    group NAME K|all|any MEMBER... met when K of its members (witnesses or groups) are
    quorum NAME                    exactly one: the witness or group that must be met
                                   (``quorum none`` needs no cosignature)

As in Sigsum, names are defined before they are used, once each, and share one
namespace with the predefined ``none``. The log needs the URLs (it asks those
witnesses to cosign); clients need only the keys. `check_quorum` opens a
checkpoint, verifies every cosignature from a policy witness and says which
witnesses signed and which are missing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ledger.tlog.checkpoint import SignedCheckpoint
from ledger.tlog.cosignature import (
    Cosignature,
    CosignatureError,
    CosignatureVerifier,
    verify_cosignatures,
)
from ledger.tlog.note import NoteError, Verifier

#: Largest policy file accepted (bytes), most witnesses and groups in one policy.
MAX_POLICY_BYTES = 64 * 1024
MAX_WITNESSES = 64
MAX_GROUPS = 64

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}")
_URL = re.compile(r"https?://[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]{1,2000}")


class PolicyError(CosignatureError):
    """A witness policy is malformed, or a checkpoint does not meet its quorum."""


@dataclass(frozen=True)
class PolicyWitness:
    """One witness: the policy's name for it, its cosignature key string and URL."""

    name: str
    key: str
    url: str | None = None

    @property
    def verifier(self) -> CosignatureVerifier:
        return CosignatureVerifier.from_key_string(self.key)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "url": self.url}


@dataclass(frozen=True)
class PolicyGroup:
    """A group met when at least `k` of its `members` are."""

    name: str
    k: int
    members: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "k": self.k, "members": list(self.members)}


@dataclass(frozen=True)
class QuorumResult:
    """Which policy witnesses validly cosigned, which did not, and whether the quorum is met."""

    met: bool
    quorum: str
    signed: tuple[str, ...]
    missing: tuple[str, ...]
    cosignatures: tuple[Cosignature, ...]

    def describe(self) -> str:
        return (f"quorum {self.quorum!r} {'met' if self.met else 'NOT met'}: signed by "
                f"{', '.join(self.signed) or 'no witness'}; missing "
                f"{', '.join(self.missing) or 'none'}")

    def to_json(self) -> dict[str, Any]:
        return {"met": self.met, "quorum": self.quorum, "signed": list(self.signed),
                "missing": list(self.missing),
                "cosignatures": [c.to_json() for c in self.cosignatures]}


@dataclass(frozen=True)
class WitnessPolicy:
    """A parsed policy: witnesses, groups (in definition order) and the quorum's name."""

    witnesses: tuple[PolicyWitness, ...]
    groups: tuple[PolicyGroup, ...]
    quorum: str

    @classmethod
    def parse(cls, text: str | bytes) -> WitnessPolicy:
        """Parse a policy file strictly; each error names its line."""
        if isinstance(text, bytes):
            if len(text) > MAX_POLICY_BYTES:
                raise PolicyError(f"witness policy is larger than {MAX_POLICY_BYTES} bytes")
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise PolicyError("witness policy is not UTF-8") from None
        if len(text.encode()) > MAX_POLICY_BYTES:
            raise PolicyError(f"witness policy is larger than {MAX_POLICY_BYTES} bytes")
        b = _Builder()
        for n, raw in enumerate(text.split("\n"), 1):
            words = raw.split("#", 1)[0].split()
            if words:
                try:
                    b.statement(words)
                except PolicyError as exc:
                    raise PolicyError(f"witness policy line {n}: {exc}") from None
        if b.quorum is None:
            raise PolicyError("witness policy has no 'quorum NAME' line")
        return cls(tuple(b.witnesses), tuple(b.groups), b.quorum)

    def to_text(self) -> str:
        lines = [" ".join(x for x in ("witness", w.name, w.key, w.url) if x)
                 for w in self.witnesses]
        lines += [f"group {g.name} {g.k} {' '.join(g.members)}" for g in self.groups]
        return "\n".join([*lines, f"quorum {self.quorum}"]) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {"witnesses": [w.to_json() for w in self.witnesses],
                "groups": [g.to_json() for g in self.groups], "quorum": self.quorum}

    @classmethod
    def from_json(cls, obj: object) -> WitnessPolicy:
        """From `to_json`'s shape, through the same checks as `parse`."""
        if not isinstance(obj, dict) or set(obj) != {"witnesses", "groups", "quorum"}:
            raise PolicyError("policy JSON needs exactly witnesses, groups, quorum")
        try:
            return cls.parse(cls._text_of(obj))
        except (KeyError, TypeError):
            raise PolicyError("policy JSON has the wrong shape") from None

    @staticmethod
    def _text_of(obj: dict[str, Any]) -> str:
        lines = [" ".join(["witness", w["name"], w["key"], *([w["url"]] if w["url"] else [])])
                 for w in obj["witnesses"]]
        lines += [" ".join(["group", g["name"], str(g["k"]), *g["members"]]) for g in obj["groups"]]
        return "\n".join([*lines, f"quorum {obj['quorum']}"]) + "\n"

    def verifiers(self) -> list[CosignatureVerifier]:
        return [w.verifier for w in self.witnesses]

    def evaluate(self, cosigned: Iterable[tuple[str, bytes]]) -> tuple[bool, tuple[str, ...],
                                                                       tuple[str, ...]]:
        """(met, signed, missing) given the (key name, key ID) pairs that validly cosigned."""
        have = set(cosigned)
        met: dict[str, bool] = {"none": True}
        for w in self.witnesses:
            v = w.verifier
            met[w.name] = (v.name, v.key_id) in have
        for g in self.groups:
            met[g.name] = sum(met[m] for m in g.members) >= g.k
        signed = tuple(w.name for w in self.witnesses if met[w.name])
        missing = tuple(w.name for w in self.witnesses if not met[w.name])
        return met[self.quorum], signed, missing


class _Builder:
    def __init__(self) -> None:
        self.witnesses: list[PolicyWitness] = []
        self.groups: list[PolicyGroup] = []
        self.quorum: str | None = None
        self.names: set[str] = {"none"}
        self.keys: set[bytes] = set()

    def _new_name(self, name: str) -> str:
        if not _NAME.fullmatch(name):
            raise PolicyError(f"name {name[:60]!r} must be letters, digits and ._:/@- "
                              "(at most 128)")
        if name in self.names:
            raise PolicyError(f"name {name!r} is already defined")
        return name

    def statement(self, words: list[str]) -> None:
        kind, args = words[0], words[1:]
        if kind == "witness":
            self.witness(args)
        elif kind == "group":
            self.group(args)
        elif kind == "quorum":
            if len(args) != 1:
                raise PolicyError("expected 'quorum NAME'")
            if self.quorum is not None:
                raise PolicyError("a policy has exactly one quorum line")
            if args[0] not in self.names:
                raise PolicyError(f"quorum {args[0]!r} names no witness or group defined above")
            self.quorum = args[0]
        elif kind == "log":
            raise PolicyError("'log' lines are not used here: the log's key is pinned per URL "
                              "(--log-key); list only witnesses, groups and the quorum")
        else:
            raise PolicyError(f"unknown statement {kind[:40]!r} (witness, group, quorum)")

    def witness(self, args: list[str]) -> None:
        if len(args) not in (2, 3):
            raise PolicyError("expected 'witness NAME VKEY [URL]'")
        if len(self.witnesses) >= MAX_WITNESSES:
            raise PolicyError(f"more than {MAX_WITNESSES} witnesses")
        name = self._new_name(args[0])
        try:
            v = CosignatureVerifier.from_key_string(args[1])
        except NoteError as exc:
            raise PolicyError(f"witness {name}: {exc}") from None
        if v.public_key_bytes in self.keys:
            # A cosignature does not cover the key's name: one signature, copied under a
            # second name for the same public key, would count twice towards a group.
            raise PolicyError(f"witness {name}: that public key is already listed "
                              "(under this or another key name)")
        url = args[2] if len(args) == 3 else None
        if url is not None and not _URL.fullmatch(url):
            raise PolicyError(f"witness {name}: URL {url[:80]!r} must be http(s)://...")
        self.keys.add(v.public_key_bytes)
        self.names.add(name)
        self.witnesses.append(PolicyWitness(name, args[1], url.rstrip("/") if url else None))

    def group(self, args: list[str]) -> None:
        if len(args) < 3:
            raise PolicyError("expected 'group NAME K|all|any MEMBER...'")
        if len(self.groups) >= MAX_GROUPS:
            raise PolicyError(f"more than {MAX_GROUPS} groups")
        name, spec, members = self._new_name(args[0]), args[1], args[2:]
        for m in members:
            if m not in self.names or m == "none":
                raise PolicyError(f"group {name}: member {m!r} is not a witness or group "
                                  "defined above")
        if len(set(members)) != len(members):
            raise PolicyError(f"group {name}: a member is listed twice")
        if spec == "all":
            k = len(members)
        elif spec == "any":
            k = 1
        elif re.fullmatch(r"[1-9][0-9]{0,2}", spec) and int(spec) <= len(members):
            k = int(spec)
        else:
            raise PolicyError(f"group {name}: threshold {spec[:20]!r} must be all, any or "
                              f"1..{len(members)}")
        self.names.add(name)
        self.groups.append(PolicyGroup(name, k, tuple(members)))


def check_quorum(
    signed: SignedCheckpoint, log_verifier: Verifier, policy: WitnessPolicy
) -> QuorumResult:
    """Verify the policy witnesses' cosignatures on ``signed``; raise unless the quorum is met.

    Cosignatures from keys outside the policy are ignored; one from a policy key
    that does not verify is an error (the note is malformed).
    """
    try:
        _, cosigs = verify_cosignatures(signed.note_bytes, log_verifier, policy.verifiers(), 0)
    except NoteError as exc:
        raise PolicyError(f"witness cosignatures: {exc}") from None
    met, who, missing = policy.evaluate((c.name, c.key_id) for c in cosigs)
    result = QuorumResult(met, policy.quorum, who, missing, tuple(cosigs))
    if not met:
        raise PolicyError(f"witness {result.describe()}")
    return result

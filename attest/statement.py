"""in-toto Statement v1 about kernels: subjects (kernel name + sha256) and one typed predicate.

JSON form: `{"_type": "https://in-toto.io/Statement/v1", "subject": [{"name": ...,
"digest": {"sha256": ...}}], "predicateType": <uri>, "predicate": {...}}`. The signed
payload is its RFC 8785 canonical JSON (`statement_payload`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import rfc8785

from attest._errors import ValidationError
from attest._json import JSONRejected, strict_loads
from attest._spec import List, Obj, Str
from attest.predicates import (
    HEX64,
    KERNEL_NAME,
    KernelPredicate,
    Predicate,
    ReproductionPredicate,
    SuitePredicate,
    parse_predicate,
)

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
MAX_SUBJECTS = 16

_SUBJECT = Obj({"name": KERNEL_NAME, "digest": Obj({"sha256": HEX64})})
_HEAD = {
    "_type": Str(64),
    "subject": List(_SUBJECT, min_items=1, max_items=MAX_SUBJECTS),
    "predicateType": Str(256),
}


@dataclass(frozen=True)
class Subject:
    """What a statement is about: a kernel name and the sha256 of its source archive."""

    name: str
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "digest": {"sha256": self.sha256}}

    @classmethod
    def from_json(cls, obj: object, path: str = "subject") -> Subject:
        d = _SUBJECT.check(obj, path)
        return cls(name=d["name"], sha256=d["digest"]["sha256"])


@dataclass(frozen=True)
class Statement:
    """An in-toto Statement v1 with one of the five predicate types."""

    subjects: tuple[Subject, ...]
    predicate_type: str
    predicate: Predicate

    def to_json(self) -> dict[str, Any]:
        return {
            "_type": STATEMENT_TYPE,
            "subject": [s.to_json() for s in self.subjects],
            "predicateType": self.predicate_type,
            "predicate": self.predicate.to_json(),
        }

    @classmethod
    def from_json(cls, obj: object) -> Statement:
        """Strictly parse a statement, its subjects and its predicate."""
        if not isinstance(obj, dict):
            raise ValidationError("statement", "must be a JSON object")
        for key in obj:
            if key not in (*_HEAD, "predicate"):
                raise ValidationError(str(key), "unknown statement field "
                                      "(allowed: _type, subject, predicateType, predicate)")
        head: dict[str, Any] = {}
        for key, rule in _HEAD.items():
            if key not in obj:
                raise ValidationError(key, "required field is missing")
            head[key] = rule.check(obj[key], key)
        if obj["_type"] != STATEMENT_TYPE:
            raise ValidationError("_type", f"must be {STATEMENT_TYPE!r}, got {obj['_type']!r}")
        if "predicate" not in obj:
            raise ValidationError("predicate", "required field is missing")
        # The subjects were checked with _SUBJECT just above: build them, once.
        subjects = tuple(Subject(name=d["name"], sha256=d["digest"]["sha256"]) for d in head["subject"])
        predicate = parse_predicate(obj["predicateType"], obj["predicate"])
        stmt = cls(subjects=subjects, predicate_type=obj["predicateType"], predicate=predicate)
        stmt.check()
        return stmt

    def check(self) -> None:
        """Cross-checks between subjects and predicate (raises ValidationError)."""
        if not self.subjects:
            raise ValidationError("subject", "must have at least 1 item(s)")
        if self.predicate_type != type(self.predicate).PREDICATE_TYPE:
            raise ValidationError("predicateType",
                                  f"does not match the predicate body ({type(self.predicate).__name__})")
        seen: set[tuple[str, str]] = set()
        for i, subject in enumerate(self.subjects):
            if (subject.name, subject.sha256) in seen:
                raise ValidationError(f"subject[{i}]", "duplicates an earlier subject")
            seen.add((subject.name, subject.sha256))
        if isinstance(self.predicate, KernelPredicate) and (
            len(self.subjects) != 1 or self.subjects[0].name != self.predicate.name
        ):
            raise ValidationError("predicate.name", "must equal the name of the single subject")
        if isinstance(self.predicate, ReproductionPredicate):
            digests = {s.sha256 for s in self.subjects}
            if self.predicate.target.subject_sha256 not in digests:
                raise ValidationError("predicate.target.subject_sha256",
                                      "must be the sha256 digest of a subject of this statement")
        if isinstance(self.predicate, SuitePredicate) and (
            len(self.subjects) != 1 or self.subjects[0].sha256 != self.predicate.dataset_sha256
        ):
            raise ValidationError("predicate.dataset_sha256",
                                  "must be the sha256 digest of the single subject")

    @property
    def subject_name(self) -> str:
        """The first subject's kernel name (statements here are about one kernel)."""
        return self.subjects[0].name

    @property
    def subject_sha256(self) -> str:
        return self.subjects[0].sha256


_BLOB_REF_FIELDS = frozenset({"sha256", "size", "media_type"})  # the BLOB_REF object


def referenced_blobs(stmt: Statement) -> frozenset[str]:
    """The sha256 digests of every blob a statement refers to: its subjects (source
    archives) and every blob reference (`{sha256, size, media_type}`) in its predicate."""
    found = {s.sha256 for s in stmt.subjects}
    stack: list[Any] = [stmt.predicate.to_json()]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if set(node) == _BLOB_REF_FIELDS and isinstance(node["sha256"], str):
                found.add(node["sha256"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return frozenset(found)


def make_statement(name: str, sha256: str, predicate: Predicate) -> Statement:
    """A validated one-subject statement about kernel `name` with source digest `sha256`."""
    stmt = Statement(subjects=(Subject(name=name, sha256=sha256),),
                     predicate_type=type(predicate).PREDICATE_TYPE, predicate=predicate)
    return Statement.from_json(stmt.to_json())


def statement_payload(stmt: Statement) -> bytes:
    """The RFC 8785 canonical JSON bytes of a statement, after validating it in full."""
    obj = stmt.to_json()
    Statement.from_json(obj)
    return rfc8785.dumps(obj)


def parse_statement_payload(payload: bytes) -> Statement:
    """Parse DSSE payload bytes as a statement (UTF-8 JSON, no duplicate keys, no NaN)."""
    try:
        obj = strict_loads(payload)
    except JSONRejected as exc:
        raise ValidationError("payload", str(exc)) from None
    return Statement.from_json(obj)

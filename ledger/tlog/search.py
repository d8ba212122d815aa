"""The search wire types the server answers `GET /api/v1/search` with and the client reads.

`SearchHit` is one row (an index to fetch and verify, not evidence itself); `SearchPage` a
page of rows and the cursor of the next page (None at the end). The page is generic in its
row: the server's storage pages carry its own richer rows (`ledger.storage.EntrySummary`),
the client parses plain `SearchHit`s. `SearchHit.from_json` and `SearchPage.from_json` are
strict: the answer comes off the network, and a missing field, a wrong type, a keyid or
digest that is not 64 hex digits, or more rows than `MAX_SEARCH_RESULTS` is a
`SearchAnswerError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from attest import HEX64_PATTERN
from ledger.tlog._errors import LedgerError

MAX_SEARCH_RESULTS = 1000
MAX_KEYIDS = 64
_HEX64 = re.compile(HEX64_PATTERN)


class SearchAnswerError(LedgerError):
    """A search answer that is not what the API promises."""


def _field(obj: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    value = obj.get(key)
    if key not in obj or not isinstance(value, kind) or (isinstance(value, bool) \
            and kind is not bool):
        raise SearchAnswerError(f"{what}: {key!r} is missing or not a {kind.__name__}")
    return value


def _hex64(value: str, key: str, what: str) -> str:
    if not _HEX64.fullmatch(value):
        raise SearchAnswerError(f"{what}: {key} {value[:80]!r} is not 64 hex digits")
    return value


@dataclass(frozen=True)
class SearchHit:
    """One row of a search answer: an entry's index, leaf hash, first subject, predicate
    type and signers, as the log's index lists them."""

    index: int
    leaf_hash: bytes
    subject_name: str
    subject_sha256: str
    predicate_type: str
    keyids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "leaf_hash": self.leaf_hash.hex(),
            "subject_name": self.subject_name,
            "subject_sha256": self.subject_sha256,
            "predicate_type": self.predicate_type,
            "keyids": list(self.keyids),
        }

    @classmethod
    def from_json(cls, value: Any) -> SearchHit:
        w = "search result"
        if not isinstance(value, dict):
            raise SearchAnswerError(f"{w} is not a JSON object")
        index = _field(value, "index", int, w)
        if index < 0:
            raise SearchAnswerError(f"{w}: 'index' must be an integer >= 0")
        keyids = _field(value, "keyids", list, w)
        if len(keyids) > MAX_KEYIDS or not all(isinstance(k, str) for k in keyids):
            raise SearchAnswerError(f"{w}: 'keyids' must be a list of <= {MAX_KEYIDS} strings")
        texts = {k: _field(value, k, str, w)
                 for k in ("leaf_hash", "subject_name", "subject_sha256", "predicate_type")}
        if len(texts["subject_name"]) > 256 or len(texts["predicate_type"]) > 512:
            raise SearchAnswerError(f"{w}: a subject name or predicate type is too long")
        return cls(index, bytes.fromhex(_hex64(texts["leaf_hash"], "leaf_hash", w)),
                   texts["subject_name"], _hex64(texts["subject_sha256"], "subject_sha256", w),
                   texts["predicate_type"], tuple(_hex64(k, "keyid", w) for k in keyids))


class _Row(Protocol):
    @property
    def index(self) -> int: ...

    def to_json(self) -> dict[str, Any]: ...


RowT = TypeVar("RowT", bound=_Row)


@dataclass(frozen=True)
class SearchPage(Generic[RowT]):
    """A page of search rows and the cursor for the next page (None at the end)."""

    results: tuple[RowT, ...]
    next_cursor: int | None

    def to_json(self) -> dict[str, Any]:
        return {"results": [r.to_json() for r in self.results], "next_cursor": self.next_cursor}

    @classmethod
    def from_json(cls, value: Any, row: Callable[[Any], RowT]) -> SearchPage[RowT]:
        """A page whose rows `row` parses (`SearchHit.from_json` for an API answer)."""
        w = "search"
        if not isinstance(value, dict):
            raise SearchAnswerError(f"{w} answer is not a JSON object")
        results = _field(value, "results", list, w)
        if len(results) > MAX_SEARCH_RESULTS:
            raise SearchAnswerError(f"{w}: 'results' must be a list of <= "
                                    f"{MAX_SEARCH_RESULTS} rows")
        cursor = value.get("next_cursor")
        if cursor is not None:
            cursor = _field(value, "next_cursor", int, w)
            if cursor < 0:
                raise SearchAnswerError(f"{w}: 'next_cursor' must be an integer >= 0")
        return cls(tuple(row(r) for r in results), cursor)

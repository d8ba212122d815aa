"""Strict JSON decoding shared by the parsers: UTF-8 only, no duplicate keys, no NaN/Infinity."""

from __future__ import annotations

import json
from typing import Any


class JSONRejected(ValueError):
    """The bytes are not strict JSON; the message says why."""


def strict_loads(data: bytes) -> Any:
    """Decode `data` as strict UTF-8 JSON, raising JSONRejected with a short reason."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise JSONRejected("is not UTF-8") from None
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise JSONRejected("is nested too deeply") from None
    except ValueError as exc:
        raise JSONRejected(f"is not valid JSON: {exc}") from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # built in C; a key seen twice makes it shorter than the pairs
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key[:80]!r}")
            seen.add(key)
    return out


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
"""Built once (`json.loads` with hooks builds a decoder per call); stateless between calls,
shared as the standard library shares its default one."""

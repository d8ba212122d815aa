"""attest._canonical: the fast RFC 8785 encoder gives the definition's bytes, and the
fast decoding path of `decode_entry` accepts exactly what the strict path accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest
import rfc8785
from hypothesis import example, given, settings
from hypothesis import strategies as st

from attest import (
    EntryError,
    decode_entry,
    encode_entry,
    generate_private_key,
    make_entry,
    make_statement,
    parse_predicate,
)
from attest import examples as ex
from attest._canonical import _strings_only, canonical_json
from attest.predicates import KERNEL_V1

# Every code point, surrogates included (a JSON "\ud800" escape decodes to one).
ANY_TEXT = st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF,
                                 categories=None), max_size=12)
KEYS = st.one_of(ANY_TEXT, st.text(st.characters(min_codepoint=0, max_codepoint=0x7F), max_size=6))
JSONISH = st.recursive(
    st.one_of(ANY_TEXT, st.integers(-(2**60), 2**60), st.floats(allow_nan=False),
              st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=20,
)


def _definition(value: Any) -> bytes | str:
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, ValueError, TypeError) as exc:
        return type(exc).__name__


def _fast(value: Any) -> bytes | str:
    try:
        return canonical_json(value)
    except (rfc8785.CanonicalizationError, ValueError, TypeError) as exc:
        return type(exc).__name__


@settings(max_examples=400, deadline=None)
@given(JSONISH)
@example({"\uffff": "a", "\U00010000": "b"})  # code-point and UTF-16 orders differ
@example({"k": "\ud800"})                      # a lone surrogate has no UTF-8 encoding
@example(["\x00\x1f\x7f\"\\\u2028\b\f\n\r\t/"])
def test_fast_encoder_gives_the_definitions_bytes(value: Any) -> None:
    assert _fast(value) == _definition(value)


def test_only_string_only_json_takes_the_fast_path() -> None:
    assert _strings_only({"a": ["b", {"c": "d"}], "e": []})
    for value in (1, 1.5, True, None, {"é": "x"}, {1: "x"}, ["x", 2], ("x",)):
        assert not _strings_only(value), value


KEY = generate_private_key()
DATA = encode_entry(make_entry(
    make_statement(ex.KERNEL_NAME, ex.SOURCE_SHA256, parse_predicate(KERNEL_V1, ex.kernel())), [KEY]))


def _respell(mutate: Any) -> bytes:
    doc = json.loads(DATA)
    mutate(doc)
    return json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.parametrize(("what", "data", "message"), [
    # The same members twice, each spelled canonically: the plain parser keeps the last.
    ("duplicate member", DATA[:-1] + b',"keys":' + json.dumps(json.loads(DATA)["keys"],
                                                               separators=(",", ":")).encode() + b"}",
     "duplicate key"),
    ("NaN", DATA.replace(b'"envelope":', b'"a":NaN,"envelope":'), "NaN is not allowed"),
    ("Infinity", DATA.replace(b'"envelope":', b'"a":-Infinity,"envelope":'), "Infinity is not allowed"),
    # Sorted by code point (as the stdlib sorts) but not by UTF-16 code units (as RFC 8785 does).
    ("code-point key order", _respell(lambda d: d.update({"\uffff": "x", "\U00010000": "y"})),
     "not RFC 8785 canonical"),
    ("lone surrogate", DATA.replace(b'"envelope":', b'"\\ud800":"x","envelope":'),
     "cannot be canonicalized"),
    ("integer", _respell(lambda d: d.update({"a": 10**30})), "cannot be canonicalized"),
    ("UTF-16 body", DATA.decode().encode("utf-16"), "not UTF-8"),
])
def test_entries_that_look_canonical_to_the_stdlib_are_refused(what: str, data: bytes,
                                                               message: str) -> None:
    with pytest.raises(EntryError, match=message):
        decode_entry(data)


def test_canonical_entry_round_trips_on_the_fast_path() -> None:
    entry = decode_entry(DATA)
    assert encode_entry(entry) == DATA == rfc8785.dumps(json.loads(DATA))

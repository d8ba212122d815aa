"""RFC 8785 canonical JSON bytes, with a fast path for the string-only JSON of log entries.

`rfc8785.dumps` is the definition (pure Python, ~25 µs for a 1.3 KB log entry). A log
entry's JSON holds only objects, arrays and strings, and its object keys are ASCII; for
such a value the C encoder of the standard library gives the same bytes:

* keys: RFC 8785 sorts them by UTF-16 code units, Python by code points; the two
  orders agree on ASCII;
* strings: both escape exactly ``"``, ``\\`` and U+0000..U+001F (``\\b \\t \\n \\f \\r``
  short, the rest as lowercase ``\\u00xx``) and write everything else as UTF-8;
* no numbers, booleans or nulls, where the two differ (or might).

Anything else (a number anywhere, a non-ASCII key, a lone surrogate) goes to
`rfc8785.dumps`, which stays the one definition; a property test checks that both agree.
"""

from __future__ import annotations

import json
from typing import Any

import rfc8785

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True,
                           allow_nan=False, check_circular=False).encode


def _strings_only(value: Any) -> bool:
    """True when ``value`` is made only of dicts with ASCII str keys, lists and strs."""
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is str:
            continue
        if kind is dict:
            for key, item in node.items():
                if type(key) is not str or not key.isascii():
                    return False
                stack.append(item)
        elif kind is list:
            stack.extend(node)
        else:
            return False
    return True


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 bytes of ``value`` (errors as `rfc8785.dumps` raises them)."""
    if _strings_only(value):
        try:
            return _encode(value).encode("utf-8")
        except (UnicodeEncodeError, RecursionError):
            pass  # a lone surrogate or deep nesting: let the definition say what is wrong
    return rfc8785.dumps(value)

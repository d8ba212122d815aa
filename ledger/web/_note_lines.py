"""List the signature lines of a signed note for display (pure; verifies nothing).

The log's own signature is checked elsewhere with ``ledger.tlog.checkpoint``; this
only names each signer so the home page can show witness cosignatures (and
their timestamps, for ``tlog-cosignature/v1``: key ID || u64 time || Ed25519).
"""

from __future__ import annotations

import base64
import binascii
from typing import NamedTuple

MAX_SIGNATURE_LINES = 32
_DASH = "\u2014 "


class SignatureLine(NamedTuple):
    name: str
    keyid_hex: str
    timestamp: int | None


def signature_lines(note: bytes) -> list[SignatureLine]:
    """The ``— name base64`` lines after the blank line; malformed lines are skipped."""
    text = note.decode("utf-8", errors="replace")
    _, sep, sigs = text.rpartition("\n\n")
    if not sep:
        return []
    out: list[SignatureLine] = []
    for line in sigs.split("\n")[:MAX_SIGNATURE_LINES]:
        if not line.startswith(_DASH):
            continue
        name, _, b64 = line[len(_DASH):].rpartition(" ")
        try:
            raw = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            continue
        if len(raw) < 4 or not name:
            continue
        timestamp = int.from_bytes(raw[4:12], "big") if len(raw) == 4 + 8 + 64 else None
        out.append(SignatureLine(name, raw[:4].hex(), timestamp))
    return out

"""Hostile Ed25519 public-key encodings, and a log entry "signed" under one of them.

The eight encodings of the points of order dividing 8 are the list in Go's
filippo.io/edwards25519 tests (libsodium's `has_small_order` blocklist holds the
same points). A signature R = identity, S = 0 verifies every message under any
of them in a verifier that accepts such keys.
"""

from __future__ import annotations

import base64
import hashlib

import rfc8785

from attest import BENCHMARK_V1, PAYLOAD_TYPE, make_statement, parse_predicate
from attest import examples as ex

P = 2**255 - 19


def _le(n: int) -> bytes:
    return n.to_bytes(32, "little")


_Y8 = bytes.fromhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a")
_Y8N = bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05")


def _signed(raw: bytes) -> bytes:
    return raw[:31] + bytes([raw[31] | 0x80])


SMALL_ORDER: dict[str, bytes] = {
    "order 1 (identity, y=1)": _le(1),
    "order 2 (y=p-1)": _le(P - 1),
    "order 4 (y=0)": _le(0),
    "order 4 (y=0, x negative)": _signed(_le(0)),
    "order 8 (y=0x7a03…)": _Y8,
    "order 8 (y=0x7a03…, x negative)": _signed(_Y8),
    "order 8 (y=0x05fc…)": _Y8N,
    "order 8 (y=0x05fc…, x negative)": _signed(_Y8N),
}

NON_CANONICAL: dict[str, bytes] = {
    "identity with the sign bit (x=0)": _signed(_le(1)),
    "y=p-1 with the sign bit (x=0)": _signed(_le(P - 1)),
    **{f"y=p+{k}": _le(P + k) for k in range(19)},
    **{f"y=p+{k} with the sign bit": _signed(_le(P + k)) for k in range(19)},
}

IDENTITY_SIGNATURE = _le(1) + bytes(32)  # R = identity, S = 0


def forged_entry(raw_key: bytes, name: str = ex.KERNEL_NAME, sha256: str = ex.SOURCE_SHA256,
                 ) -> bytes:
    """Canonical entry bytes whose only key is `raw_key` and whose signature is (identity, 0)."""
    from attest.statement import statement_payload

    stmt = make_statement(name, sha256, parse_predicate(BENCHMARK_V1, ex.benchmark(2)))
    payload = statement_payload(stmt)
    kid = hashlib.sha256(raw_key).hexdigest()
    doc = {
        "envelope": {
            "payload": base64.b64encode(payload).decode(),
            "payloadType": PAYLOAD_TYPE,
            "signatures": [{"keyid": kid, "sig": base64.b64encode(IDENTITY_SIGNATURE).decode()}],
        },
        "keys": {kid: base64.b64encode(raw_key).decode()},
    }
    return rfc8785.dumps(doc)

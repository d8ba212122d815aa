"""attest.entry: canonical log entries, the size cap, and verification of every part."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from attest import (
    BENCHMARK_V1,
    MAX_ENTRY_BYTES,
    PAYLOAD_TYPE,
    AttestError,
    EntryError,
    EntryKeysError,
    EntryTooLargeError,
    LogEntry,
    NonCanonicalEntryError,
    SignatureError,
    ValidationError,
    decode_entry,
    encode_entry,
    generate_private_key,
    keyid,
    make_entry,
    make_statement,
    parse_predicate,
    public_key_b64,
    sign_envelope,
    verify_entry,
)
from attest import examples as ex

K1, K2 = generate_private_key(), generate_private_key()
STATEMENT = make_statement(ex.KERNEL_NAME, ex.SOURCE_SHA256,
                           parse_predicate(BENCHMARK_V1, ex.benchmark(10)))
ENTRY = make_entry(STATEMENT, [K1, K2])
DATA = encode_entry(ENTRY)


def test_round_trip_and_verify() -> None:
    assert decode_entry(DATA) == ENTRY
    assert LogEntry.from_json(json.loads(DATA)) == ENTRY
    verified = verify_entry(decode_entry(DATA))
    assert verified.statement == STATEMENT
    assert verified.signer_keyids == tuple(sorted(keyid(k.public_key()) for k in (K1, K2)))
    doc = json.loads(DATA)
    assert set(doc) == {"envelope", "keys"}
    assert doc["envelope"]["payloadType"] == PAYLOAD_TYPE
    assert doc["keys"] == {keyid(k.public_key()): public_key_b64(k.public_key()) for k in (K1, K2)}
    assert rfc8785.dumps(doc) == DATA


def test_non_canonical_bytes_are_rejected() -> None:
    pretty = json.dumps(json.loads(DATA), indent=1).encode()
    with pytest.raises(NonCanonicalEntryError, match="not RFC 8785 canonical"):
        decode_entry(pretty)
    with pytest.raises(NonCanonicalEntryError, match="not RFC 8785 canonical"):
        decode_entry(DATA + b"\n")
    with pytest.raises(NonCanonicalEntryError, match="cannot be canonicalized"):
        decode_entry(b'{"envelope":1e999999,"keys":{}}')
    reordered = json.dumps({"keys": json.loads(DATA)["keys"], "envelope": json.loads(DATA)["envelope"]},
                           separators=(",", ":")).encode()
    with pytest.raises(EntryError, match="not RFC 8785 canonical"):
        decode_entry(reordered)


@pytest.mark.parametrize(("data", "message"), [
    (b"\xff\xfe", "not UTF-8"),
    (b"[1,", "not valid JSON"),
    (b'{"keys":{},"keys":{}}', "duplicate key"),
    (b"[]", "must be a JSON object"),
    (b'{"envelope":{}}', "keys: required field is missing"),
    (b'{"envelope":{},"keys":{},"x":1}', "x: unknown field"),
    (b'{"envelope":{},"keys":{}}', "envelope.payload: required field is missing"),
])
def test_malformed_entries(data: bytes, message: str) -> None:
    with pytest.raises(EntryError, match=message):
        decode_entry(data)


def test_size_cap_is_checked_first() -> None:
    with pytest.raises(EntryTooLargeError, match="65536 bytes; the limit is 65535") as info:
        decode_entry(b" " * (MAX_ENTRY_BYTES + 1))
    assert "blob" in str(info.value)
    body = ex.benchmark(1)
    body["notes"] = ["n" * 2000] * 40
    big = make_statement(ex.KERNEL_NAME, ex.SOURCE_SHA256, parse_predicate(BENCHMARK_V1, body))
    with pytest.raises(EntryTooLargeError):
        make_entry(big, [K1])


def entry_with(keys: dict[str, str] | None = None, env: Any = None) -> LogEntry:
    return LogEntry(envelope=env or ENTRY.envelope, keys=keys if keys is not None else dict(ENTRY.keys))


def test_every_signature_needs_its_key() -> None:
    k1 = keyid(K1.public_key())
    only_k1 = {k1: ENTRY.keys[k1]}
    with pytest.raises(EntryError, match=r"envelope.signatures\[1\].keyid: no key with this keyid"):
        verify_entry(entry_with(only_k1))


def test_keyid_must_be_the_key_digest() -> None:
    k1, k2 = keyid(K1.public_key()), keyid(K2.public_key())
    swapped = {k1: ENTRY.keys[k2], k2: ENTRY.keys[k1]}
    with pytest.raises(EntryError, match="keyid is not the SHA-256 of this public key"):
        verify_entry(entry_with(swapped))
    with pytest.raises(EntryError, match="canonical base64"):
        verify_entry(entry_with({k1: "AAAA", k2: ENTRY.keys[k2]}))


def test_unused_keys_and_duplicate_signers_are_rejected() -> None:
    extra = generate_private_key().public_key()
    keys = {**ENTRY.keys, keyid(extra): public_key_b64(extra)}
    with pytest.raises(EntryError, match="no signature uses this key"):
        verify_entry(entry_with(keys))
    env = ENTRY.envelope
    doubled = type(env)(env.payload, env.payload_type, (*env.signatures, env.signatures[0]))
    with pytest.raises(EntryError, match="the same key signs twice"):
        verify_entry(entry_with(env=doubled))


def test_wrong_payload_type_and_bad_statement() -> None:
    env = sign_envelope(ENTRY.envelope.payload, "text/plain", [K1])
    keys = {keyid(K1.public_key()): public_key_b64(K1.public_key())}
    with pytest.raises(EntryError, match=r"envelope\.payloadType: must be .application/vnd\.in-toto"):
        verify_entry(LogEntry(env, keys))
    doc = STATEMENT.to_json()
    doc["predicate"]["results"][0]["speedup_ci95"] = [3.0, 1.0]
    env = sign_envelope(rfc8785.dumps(doc), PAYLOAD_TYPE, [K1])
    with pytest.raises(ValidationError, match=r"^predicate.results\[0\].speedup_ci95: must be \[low, high\]"):
        verify_entry(LogEntry(env, keys))


@settings(max_examples=400, deadline=None)
@given(pos=st.integers(0, len(DATA) - 1), flip=st.integers(1, 255))
def test_tampering_any_byte_of_the_entry_fails(pos: int, flip: int) -> None:
    tampered = bytearray(DATA)
    tampered[pos] ^= flip
    with pytest.raises(AttestError):
        verify_entry(decode_entry(bytes(tampered)))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_tampering_any_decoded_byte_fails(data: st.DataObject) -> None:
    """Change one byte of the payload, a signature or a key, re-encode canonically: never verifies."""
    doc = json.loads(DATA)
    part = data.draw(st.sampled_from(["payload", "sig", "key"]))
    if part == "payload":
        holder, field = doc["envelope"], "payload"
    elif part == "sig":
        holder, field = doc["envelope"]["signatures"][data.draw(st.integers(0, 1))], "sig"
    else:
        holder, field = doc["keys"], data.draw(st.sampled_from(sorted(doc["keys"])))
    raw = bytearray(base64.b64decode(holder[field]))
    raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    holder[field] = base64.b64encode(bytes(raw)).decode()
    with pytest.raises((SignatureError, EntryError)):
        verify_entry(decode_entry(rfc8785.dumps(doc)))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["envelope", "keys", "payload", "payloadType", "signatures", "keyid",
                         "sig", "x"]) | st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(doc=JSON)
def test_arbitrary_json_is_rejected_cleanly(doc: Any) -> None:
    """Any JSON document: decode_entry either fails with EntryError or yields an entry
    that verify_entry rejects with an AttestError - never another exception."""
    try:
        data = rfc8785.dumps(doc)
    except rfc8785.CanonicalizationError:
        return
    with pytest.raises(AttestError):
        verify_entry(decode_entry(data))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes_are_rejected_cleanly(data: bytes) -> None:
    with pytest.raises(EntryError):
        decode_entry(data)


def test_attest_imports_no_web_database_or_http_code() -> None:
    import subprocess
    import sys

    code = ("import sys, attest, attest.policy, attest.entry; "
            "bad = {'flask', 'sqlite3', 'requests', 'sqlite_utils', 'werkzeug'} & set(sys.modules); "
            "print(sorted(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _doc_with_keys(keys: Any) -> dict[str, Any]:
    return {"envelope": ENTRY.envelope.to_json(), "keys": keys}


def test_an_entry_carries_1_to_16_keys() -> None:
    sixteen = [generate_private_key() for _ in range(16)]
    entry = make_entry(STATEMENT, sixteen)
    assert len(decode_entry(encode_entry(entry)).keys) == 16
    assert len(verify_entry(entry).signer_keyids) == 16
    seventeen = {**entry.keys, "f" * 64: ENTRY.keys[keyid(K1.public_key())]}
    for keys in ({}, seventeen, [], "keys"):
        with pytest.raises(EntryError, match="keys: must be an object of 1 to 16 keyid"):
            LogEntry.from_json(_doc_with_keys(keys))


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"F" * 64: "AAAA"}, "keyid must be 64 lowercase hex characters"),
        ({"f" * 63: "AAAA"}, "keyid must be 64 lowercase hex"),
        ({"f" * 65: "AAAA"}, "keyid must be 64 lowercase hex"),
        ({"f" * 64: 5}, "canonical base64 of 32 raw bytes"),
    ],
)
def test_bad_keys_in_an_entry(keys: dict[str, Any], message: str) -> None:
    with pytest.raises(EntryError, match=message):
        LogEntry.from_json(_doc_with_keys(keys))


def test_entry_envelope_and_bytes_are_checked() -> None:
    bad_env = {**ENTRY.envelope.to_json(), "payloadType": ""}
    with pytest.raises(EntryError, match=r"envelope\.payloadType: must be a non-empty string"):
        LogEntry.from_json({"envelope": bad_env, "keys": dict(ENTRY.keys)})
    with pytest.raises(EntryError, match="envelope: required field is missing"):
        LogEntry.from_json({"keys": dict(ENTRY.keys)})
    with pytest.raises(EntryError, match="log entry must be bytes"):
        decode_entry(DATA.decode())  # type: ignore[arg-type]
    assert decode_entry(bytearray(DATA)) == decode_entry(memoryview(DATA)) == ENTRY
    with pytest.raises(EntryError, match="cannot be canonicalized"):
        decode_entry(b'{"envelope":{},"keys":{},"n":1e400}')


def test_entry_of_exactly_the_limit_passes_the_size_cap() -> None:
    with pytest.raises(EntryError, match="not valid JSON") as info:
        decode_entry(b" " * 65535)  # the cap, written out: one tlog-tiles entry bundle record
    assert not isinstance(info.value, EntryTooLargeError)


def test_attack_an_entry_with_no_signatures_is_refused() -> None:
    """Built directly (not parsed), an unsigned entry must not verify as signed by nobody."""
    unsigned = LogEntry(type(ENTRY.envelope)(ENTRY.envelope.payload, PAYLOAD_TYPE, ()), {})
    with pytest.raises(EntryError, match="at least one signature is required"):
        verify_entry(unsigned)


def test_an_entry_of_exactly_65535_bytes_encodes_and_one_more_does_not() -> None:
    from attest import Envelope, Signature

    sig = ENTRY.envelope.signatures[0]

    def entry(keyid_len: int) -> LogEntry:
        env = Envelope(b"p" * 48000, PAYLOAD_TYPE, (Signature("k" * keyid_len, sig.sig),))
        return LogEntry(env, dict(ENTRY.keys))

    base = len(rfc8785.dumps(entry(1).to_json()))
    exact = entry(1 + 65535 - base)
    assert len(encode_entry(exact)) == 65535
    with pytest.raises(EntryTooLargeError, match="65536 bytes; the limit is 65535"):
        encode_entry(entry(2 + 65535 - base))



@pytest.mark.parametrize("bad", ["", "F" * 64, "f" * 63, "f" * 64 + "*", "k1"])
def test_a_signature_keyid_that_no_key_can_have_is_a_malformed_entry(bad: str) -> None:
    # The API contract test found this: DSSE lets a keyid be any hint, but a log entry's
    # must name one of its keys, so another shape is malformed (400), not a key mismatch.
    doc = ENTRY.to_json()
    doc["envelope"]["signatures"][0]["keyid"] = bad
    with pytest.raises(EntryError, match=r"signatures\[0\]\.keyid: must be 64 lowercase hex") as e:
        LogEntry.from_json(doc)
    assert not isinstance(e.value, EntryKeysError)

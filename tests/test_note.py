"""C2SP signed-note: known answers from tests/vectors/note.json, strictness and fuzzing."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st
from weak_keys import SMALL_ORDER

from ledger import LedgerError
from ledger.tlog.note import (
    MAX_NOTE_BYTES,
    MAX_SIGNATURES,
    NoteError,
    NoteSignature,
    NoteSigner,
    NoteVerifier,
    key_id,
    open_note,
    parse_ed25519_key_string,
    parse_key_string,
    parse_private_key_string,
    sign_note,
    split_note,
    verifier_key_string,
)

NOTE: dict[str, Any] = json.loads((Path(__file__).parent / "vectors" / "note.json").read_text())
KEY = NOTE["key"]
WITNESS = NOTE["witness_key"]


def _signer(k: dict[str, Any]) -> NoteSigner:
    return NoteSigner(k["name"], Ed25519PrivateKey.from_private_bytes(bytes.fromhex(k["seed_hex"])))


LOG = _signer(KEY)
LOG_V = NoteVerifier.from_key_string(KEY["verifier_key"])
WIT = _signer(WITNESS)


@pytest.mark.parametrize("k", [KEY, WITNESS], ids=["log", "witness"])
def test_key_vectors(k: dict[str, Any]) -> None:
    s = _signer(k)
    assert s.public_key_bytes.hex() == k["public_key_hex"]
    assert key_id(k["name"], s.public_key_bytes).hex() == k["key_id_hex"]
    assert verifier_key_string(k["name"], s.public_key_bytes) == k["verifier_key"]
    assert s.verifier_key_string() == k["verifier_key"]
    assert s.to_key_string() == k["signer_key"]
    again = NoteSigner.from_key_string(k["signer_key"])
    assert again.key_id.hex() == k["key_id_hex"] and again.name == k["name"]
    v = NoteVerifier.from_key_string(k["verifier_key"])
    assert v.key_string() == k["verifier_key"] and v.public_key_bytes == s.public_key_bytes


@pytest.mark.parametrize("case", ["signed_checkpoint", "empty_checkpoint"])
def test_signed_note_vectors(case: str) -> None:
    v = NOTE[case]
    out = sign_note(v["text"], [LOG])
    assert out.decode() == v["signed_note"]
    assert base64.b64encode(out).decode() == v["signed_note_base64"]
    assert hashlib.sha256(out).hexdigest() == v["signed_note_sha256"]
    assert out.decode().splitlines()[-1] == v["signature_line"]
    note = open_note(out, [LOG_V])
    assert note.text == v["text"]
    (sig,) = note.verified_signatures
    assert sig.signature.hex() == v["ed25519_signature_hex"]
    assert base64.b64encode(sig.key_id + sig.signature).decode() == v["signature_base64"]
    assert note.unverified_signatures == ()


@pytest.mark.parametrize("order", ["log_signature_first", "log_signature_last"])
def test_cosigned_vectors(order: str) -> None:
    v = NOTE["cosigned_checkpoint"][order]
    data = v["signed_note"].encode()
    note = open_note(data, [LOG_V])
    assert note.text == v["text"]
    assert [s.name for s in note.verified_signatures] == [KEY["name"]]
    assert [s.name for s in note.unverified_signatures] == [WITNESS["name"]]
    both = open_note(data, [LOG_V, WIT.verifier()])
    assert len(both.verified_signatures) == 2
    by_name = {KEY["name"]: LOG, WITNESS["name"]: WIT}
    signers = [by_name[line.split(" ")[1]] for line in v["signed_note"].splitlines()[4:]]
    assert len(signers) == 2
    assert sign_note(v["text"], signers) == data
    assert open_note(data, [WIT.verifier()]).verified_signatures[0].name == WITNESS["name"]


@pytest.mark.parametrize("v", NOTE["invalid_notes"], ids=lambda v: v["reason"])
def test_invalid_note_vectors(v: dict[str, Any]) -> None:
    with pytest.raises(NoteError):
        open_note(v["signed_note"].encode(), [LOG_V])


GOOD = NOTE["signed_checkpoint"]["signed_note"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (GOOD.encode()[:-1], "end with a newline"),
        (GOOD.replace("\n\n", "\n").encode(), "blank line"),
        (GOOD.encode() + GOOD.splitlines()[-1].encode() + b"\n", "duplicate signature"),
        (b"\xff" + GOOD.encode(), "UTF-8"),
        (GOOD.replace("1000", "10\t00").encode(), "control characters"),
        (GOOD.replace("\u2014 example.test/ktl ", "\u2014 example.test/ktl  ").encode(), "base64"),
        (GOOD.replace("\u2014 example.test/ktl", "\u2014 ").encode(), "key name"),
        (GOOD.replace("Qo=\n", "Qo\n").encode(), "base64"),
        (GOOD.replace("Qo=\n", "Qp=\n").encode(), "canonical"),
        ("a\n\n\u2014 x AAAA\n".encode(), "too short"),
        (b"a\n\n", "no signature lines"),
        (b"a\n\n" + b"x" * MAX_NOTE_BYTES, "larger than"),
    ],
)
def test_malformed_notes_rejected(data: bytes, message: str) -> None:
    with pytest.raises(NoteError, match=message):
        open_note(data, [LOG_V])


def test_unknown_signatures_ignored_but_one_known_required() -> None:
    other = NoteSigner("example.test/ktl", Ed25519PrivateKey.from_private_bytes(b"\x07" * 32))
    text = NOTE["signed_checkpoint"]["text"]
    only_other = sign_note(text, [other])
    with pytest.raises(NoteError, match="no signature from a trusted key"):
        open_note(only_other, [LOG_V])
    note = open_note(sign_note(text, [other, LOG]), [LOG_V])
    assert [s.key_id for s in note.unverified_signatures] == [other.key_id]
    with pytest.raises(NoteError, match="no verifier keys"):
        open_note(only_other, [])


def test_signature_count_limit() -> None:
    text = "hello\n"
    signers = [
        NoteSigner(f"k{i}", Ed25519PrivateKey.from_private_bytes(bytes([i]) * 32))
        for i in range(MAX_SIGNATURES + 1)
    ]
    data = sign_note(text, signers)
    with pytest.raises(NoteError, match="more than"):
        open_note(data, [signers[0].verifier()])
    assert open_note(sign_note(text, signers[:MAX_SIGNATURES]), [signers[0].verifier()])


@pytest.mark.parametrize(
    "vkey",
    [
        "",
        "example.test/ktl",
        "example.test/ktl+27045d62",
        KEY["verifier_key"].replace("+27045d62", "+27045d63"),
        KEY["verifier_key"].replace("+27045d62", "+27045D62"),
        KEY["verifier_key"].replace("+AQ", "+Ag"),
        KEY["verifier_key"][:-2],
        "exa mple+27045d62+AQOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4",
        " " + KEY["verifier_key"],
    ],
)
def test_bad_verifier_keys(vkey: str) -> None:
    with pytest.raises(NoteError):
        NoteVerifier.from_key_string(vkey)


def test_bad_signer_inputs() -> None:
    with pytest.raises(NoteError, match="PRIVATE"):
        NoteSigner.from_key_string(KEY["verifier_key"])
    with pytest.raises(NoteError, match="does not match"):
        NoteSigner.from_key_string(KEY["signer_key"].replace("+27045d62+", "+00000000+"))
    for name in ["", "a b", "a+b", "a\u00a0b"]:
        with pytest.raises(NoteError, match="key name"):
            NoteSigner(name, Ed25519PrivateKey.generate())
    with pytest.raises(NoteError, match="end with a newline"):
        sign_note("no newline", [LOG])
    with pytest.raises(NoteError, match="at least one"):
        sign_note("x\n", [])
    with pytest.raises(NoteError, match="twice"):
        sign_note("x\n", [LOG, LOG])


texts = st.text(
    alphabet=st.characters(blacklist_categories=["Cs", "Cc"]) | st.just("\n"), max_size=200
).map(lambda t: t + "\n")


@settings(max_examples=80, deadline=None)
@given(text=texts, data=st.data())
def test_sign_open_round_trip_and_tamper(text: str, data: st.DataObject) -> None:
    signed = sign_note(text, [LOG, WIT])
    note = open_note(signed, [LOG_V])
    assert note.text == text
    raw = text.encode()
    pos = data.draw(st.integers(0, len(raw) - 1))
    tampered = bytearray(signed)
    tampered[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(NoteError):
        open_note(bytes(tampered), [LOG_V])


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=600) | texts.map(lambda t: (t + "\n\u2014 " + t).encode()))
def test_parsers_only_raise_note_error(data: bytes) -> None:
    try:
        text, sigs = split_note(data)
    except NoteError:
        pass
    else:
        assert text.endswith("\n") and sigs
    with pytest.raises(LedgerError):
        open_note(data, [LOG_V])


@settings(max_examples=200, deadline=None)
@given(s=st.text(max_size=120))
def test_key_string_parsers_only_raise_note_error(s: str) -> None:
    for parse in (NoteVerifier.from_key_string, NoteSigner.from_key_string):
        with contextlib.suppress(NoteError):
            parse(s)


def test_note_signature_json_round_trip() -> None:
    note = open_note(NOTE["signed_checkpoint"]["signed_note"].encode(), [LOG_V])
    sig = note.verified_signatures[0]
    again = NoteSignature.from_json(json.loads(json.dumps(sig.to_json())))
    assert again == sig and again.line() == NOTE["signed_checkpoint"]["signature_line"] + "\n"
    for bad in [{}, {**sig.to_json(), "key_id": "xyz"}, {**sig.to_json(), "signature": "!"}]:
        with pytest.raises(NoteError):
            NoteSignature.from_json(bad)


def _line(name: str, kid: bytes, sig: bytes) -> str:
    return f"\u2014 {name} {base64.b64encode(kid + sig).decode()}\n"


@pytest.mark.parametrize("length", [1, 63, 65])
def test_attack_short_or_long_signature_under_a_trusted_key_is_refused(length: int) -> None:
    """A 'signature' of the wrong length under the trusted name and key ID fails the note."""
    text = NOTE["signed_checkpoint"]["text"]
    forged = (text + "\n" + _line(LOG.name, LOG.key_id, b"\x00" * length)).encode()
    with pytest.raises(NoteError, match=f"invalid signature for key {LOG.name}\\+27045d62"):
        open_note(forged, [LOG_V])
    assert LOG_V.verify(text.encode(), b"\x00" * length) is False


def test_attack_one_bad_known_signature_fails_the_note_despite_a_good_one() -> None:
    """Every known signature must verify: a bad witness signature is not outvoted by the log's."""
    text = NOTE["signed_checkpoint"]["text"]
    good = sign_note(text, [LOG]).decode()
    wit_sig = WIT.sign(text.encode())
    bad = bytes([wit_sig[0] ^ 1]) + wit_sig[1:]
    for data in (good + _line(WIT.name, WIT.key_id, bad), _insert(good, WIT, bad)):
        with pytest.raises(NoteError, match=f"invalid signature for key {WIT.name}"):
            open_note(data.encode(), [LOG_V, WIT.verifier()])
        assert open_note(data.encode(), [LOG_V]).unverified_signatures[0].name == WIT.name


def _insert(signed: str, signer: NoteSigner, sig: bytes) -> str:
    """``signed`` with a signature line by ``signer`` put before the existing ones."""
    text, _, sigs = signed.rpartition("\n\n")
    return text + "\n\n" + _line(signer.name, signer.key_id, sig) + sigs


def test_text_line_limit_is_1024() -> None:
    assert open_note(sign_note("l\n" * 1024, [LOG]), [LOG_V]).text == "l\n" * 1024
    with pytest.raises(NoteError, match="more than 1024 lines"):
        sign_note("l\n" * 1025, [LOG])
    data = ("l\n" * 1025 + "\n" + _line(LOG.name, LOG.key_id, b"\x00" * 64)).encode()
    with pytest.raises(NoteError, match="more than 1024 lines"):
        open_note(data, [LOG_V])


# The limits, written out as numbers so that a changed constant is noticed.
def test_note_size_limit_is_256_kib() -> None:
    from ledger.tlog.note import check_text

    limit = 256 * 1024
    at_limit = "x" * (limit - 1) + "\n"
    assert check_text(at_limit) == at_limit
    with pytest.raises(NoteError, match=f"note text is larger than {limit} bytes"):
        check_text("x" * limit + "\n")
    with pytest.raises(NoteError, match=f"signed note is larger than {limit} bytes"):
        split_note(b"x" * (limit + 1))
    with pytest.raises(NoteError, match="end with a newline"):
        split_note(b"x" * limit)


def test_signature_count_limit_is_64() -> None:
    signers = [NoteSigner(f"k{i}", Ed25519PrivateKey.from_private_bytes(bytes([i]) * 32)) for i in range(65)]
    assert len(split_note(sign_note("t\n", signers[:64]))[1]) == 64
    with pytest.raises(NoteError, match="more than 64 signatures"):
        split_note(sign_note("t\n", signers))


def test_key_names_are_at_most_256_characters() -> None:
    key = Ed25519PrivateKey.from_private_bytes(b"\x01" * 32)
    assert NoteSigner("n" * 256, key).name == "n" * 256
    with pytest.raises(NoteError, match="key name is longer than 256 characters"):
        NoteSigner("n" * 257, key)
    with pytest.raises(NoteError, match="key name"):
        key_id("a b", b"\x00" * 32)


@pytest.mark.parametrize(
    ("vkey", "message"),
    [
        (5, "^verifier key must be a string of reasonable length"),
        ("n" * 1025, "^verifier key must be a string of reasonable length"),
        ("n" * 1024, "^verifier key must look like <name>"),
        ("a b+zz+AAAA", "key name"),
        (KEY["verifier_key"].replace("+27045d62", "+27045D62"), "^verifier key key ID must be 8 lowercase hex"),
        (KEY["verifier_key"].replace("+27045d62", "+27045d6"), "^verifier key key ID must be 8 lowercase hex"),
        (KEY["verifier_key"][:-4] + "AA!A", "^verifier key key is not valid base64"),
        (KEY["verifier_key"].replace("+27045d62", "+27045d63"), "^verifier key key ID 27045d63 does not match"),
    ],
)
def test_bad_verifier_keys_say_what_is_wrong(vkey: object, message: str) -> None:
    with pytest.raises(NoteError, match=message):
        NoteVerifier.from_key_string(vkey)  # type: ignore[arg-type]


def test_bad_signer_keys_say_what_is_wrong() -> None:
    with pytest.raises(NoteError, match=r"^signer key key ID must be 8 lowercase hex"):
        NoteSigner.from_key_string(KEY["signer_key"].replace("+27045d62+", "+27045D62+"))
    from cryptography.hazmat.primitives.asymmetric import ec

    ec_key = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(NoteError, match="note signer needs an Ed25519 private key"):
        NoteSigner("n", ec_key)  # type: ignore[arg-type]
    with pytest.raises(NoteError, match="note verifier needs an Ed25519 public key"):
        NoteVerifier("n", ec_key.public_key())  # type: ignore[arg-type]


def test_verify_returns_false_for_a_bad_64_byte_signature() -> None:
    text = NOTE["signed_checkpoint"]["text"].encode()
    good = LOG.sign(text)
    assert LOG_V.verify(text, good) is True
    assert LOG_V.verify(text + b"x", good) is False


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("a\n\n\u2014 x AAAAAAAA\n", "signed note must be bytes"),
        (GOOD.replace("\u2014 example.test/ktl ", "\u2014 example.test/ktl\t").encode(), "signed note contains control characters"),
        (b"a\n\nx y AAAAAAAA\n", "signature line 1 must start with an em dash"),
        (GOOD.encode() + "\u2014 example.test/ktl\n".encode(), "signature line 2 must be '\u2014 <name> <base64>'"),
        ("a\n\n\u2014 x AA!AAAAA\n".encode(), "signature line 1 is not valid base64"),
    ],
)
def test_split_note_says_what_is_wrong(data: object, message: str) -> None:
    with pytest.raises(NoteError, match=message):
        split_note(data)  # type: ignore[arg-type]


def test_sign_note_checks_its_text() -> None:
    with pytest.raises(NoteError, match="note text must be a string"):
        sign_note(b"x\n", [LOG])  # type: ignore[arg-type]
    with pytest.raises(NoteError, match="note text must not contain control characters"):
        sign_note("a\tb\n", [LOG])


def test_verifiers_are_distinct_and_named_when_none_signed() -> None:
    with pytest.raises(NoteError, match=r"verifier example\.test/ktl\+27045d62 given twice"):
        open_note(GOOD.encode(), [LOG_V, LOG_V])
    other = NoteSigner("z.example", Ed25519PrivateKey.from_private_bytes(b"\x03" * 32))
    with pytest.raises(NoteError, match=f"trusted: example.test/ktl\\+27045d62, z.example\\+{other.key_id.hex()}\\)"):
        open_note(sign_note("t\n", [WIT]), [other.verifier(), LOG_V])


def test_signature_json_names_the_bad_field() -> None:
    sig = open_note(GOOD.encode(), [LOG_V]).verified_signatures[0].to_json()
    with pytest.raises(NoteError, match=r"^signature is not valid base64"):
        NoteSignature.from_json({**sig, "signature": "!!!!"})


def test_key_string_errors_name_the_kind_of_key_by_default() -> None:
    with pytest.raises(NoteError, match=r"^verifier key must look like"):
        parse_key_string("a+b", 0x01)
    with pytest.raises(NoteError, match=r"^verifier key must look like"):
        parse_ed25519_key_string("a+b", 0x01)
    with pytest.raises(NoteError, match=r"^signer key must start with PRIVATE\+KEY\+$"):
        parse_private_key_string("a+b+c", 0x01)
    with pytest.raises(NoteError, match=r"^witness key must look like"):
        parse_key_string("a+b", 0x04, "witness key")


@pytest.mark.parametrize("raw", list(SMALL_ORDER.values()), ids=list(SMALL_ORDER))
def test_small_order_keys_are_refused_as_key_strings_and_as_keys(raw: bytes) -> None:
    """Attack: a small-order key accepts one forged signature on every note. Refused
    whether it arrives as a vkey string or as a key object given to a verifier."""
    name = "example.org/log"
    material = base64.b64encode(bytes([0x01]) + raw).decode()
    vkey = f"{name}+{key_id(name, raw, 0x01).hex()}+{material}"
    assert parse_key_string(vkey, 0x01) == (name, raw)  # well-formed, and
    with pytest.raises(NoteError, match=r"^verifier key is not a usable Ed25519 public key: "):
        parse_ed25519_key_string(vkey, 0x01)
    public = Ed25519PublicKey.from_public_bytes(raw)  # cryptography itself accepts it
    with pytest.raises(NoteError,
                       match=r"^key 'example\.org/log' is not a usable Ed25519 public key: "):
        NoteVerifier(name, public)

"""Witness policies (Sigsum grammar) and the quorum check on cosigned checkpoints."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st
from weak_keys import SMALL_ORDER
from witness_support import FakeLog

from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.cosignature import CosignatureSigner, cosign_checkpoint
from ledger.tlog.witness_policy import PolicyError, WitnessPolicy, check_quorum


def _w(seed: int, name: str) -> CosignatureSigner:
    return CosignatureSigner(name, Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32),
                             clock=lambda: 1_700_000_000)


A, B, C = _w(1, "w.example/a"), _w(2, "w.example/b"), _w(3, "w.example/c")


def _policy(quorum: str = "both", extra: str = "") -> WitnessPolicy:
    return WitnessPolicy.parse(
        "# two witnesses, both needed\n"
        f"witness A {A.verifier_key_string()} http://127.0.0.1:9/\n"
        f"witness B {B.verifier_key_string()}   # no URL: enough for clients\n"
        "group both all A B\n"
        "group either any A B\n"
        f"{extra}quorum {quorum}\n")


def _cosigned(*signers: CosignatureSigner) -> tuple[FakeLog, bytes]:
    log = FakeLog().grow(3)
    note = log.note()
    for s in signers:
        note = cosign_checkpoint(note, log.signer.verifier(), s)
    return log, note


def test_parse_round_trips_and_keeps_urls() -> None:
    p = _policy()
    assert [w.name for w in p.witnesses] == ["A", "B"]
    assert p.witnesses[0].url == "http://127.0.0.1:9" and p.witnesses[1].url is None
    assert [(g.name, g.k) for g in p.groups] == [("both", 2), ("either", 1)]
    assert WitnessPolicy.parse(p.to_text()) == p
    assert WitnessPolicy.from_json(p.to_json()) == p


@pytest.mark.parametrize(("quorum", "signers", "met", "missing"), [
    ("both", (A, B), True, ()),
    ("both", (A,), False, ("B",)),
    ("either", (B,), True, ("A",)),
    ("either", (C,), False, ("A", "B")),   # a witness outside the policy does not count
    ("A", (A, C), True, ("B",)),
    ("none", (), True, ("A", "B")),
])
def test_quorum(quorum: str, signers: tuple[CosignatureSigner, ...], met: bool,
                missing: tuple[str, ...]) -> None:
    log, note = _cosigned(*signers)
    signed = open_checkpoint(note, log.signer.verifier())
    policy = _policy(quorum)
    if met:
        result = check_quorum(signed, log.signer.verifier(), policy)
        assert result.missing == missing and result.met
    else:
        with pytest.raises(PolicyError) as exc:
            check_quorum(signed, log.signer.verifier(), policy)
        assert "NOT met" in str(exc.value) and ", ".join(missing) in str(exc.value)


def test_a_forged_cosignature_from_a_policy_witness_is_refused() -> None:
    log, note = _cosigned(A, B)
    head, _, last = note[:-1].rpartition(b"\n")
    name, blob = last.rsplit(b" ", 1)
    raw = bytearray(base64.b64decode(blob))
    raw[-1] ^= 1  # B's line, its signature's last byte flipped
    forged = head + b"\n" + name + b" " + base64.b64encode(bytes(raw)) + b"\n"
    signed = open_checkpoint(log.note(), log.signer.verifier())
    signed = type(signed)(signed.checkpoint, forged, signed.note)
    with pytest.raises(PolicyError):
        check_quorum(signed, log.signer.verifier(), _policy())


def test_a_cosignature_on_another_checkpoint_does_not_count() -> None:
    log, note = _cosigned(A, B)
    other = log.grow(1).note()
    moved = other + note[note.index("\u2014 w.example".encode()):]
    signed = open_checkpoint(other, log.signer.verifier())
    signed = type(signed)(signed.checkpoint, moved, signed.note)
    with pytest.raises(PolicyError, match="invalid signature"):
        check_quorum(signed, log.signer.verifier(), _policy())


@pytest.mark.parametrize(("text", "why"), [
    ("", "no 'quorum NAME'"),
    ("quorum X\n", "defined above"),
    (f"witness A {A.verifier_key_string()}\nwitness A {B.verifier_key_string()}\nquorum A\n",
     "already defined"),
    (f"witness A {A.verifier_key_string()}\nwitness B {A.verifier_key_string()}\nquorum A\n",
     "already listed"),
    (f"witness A {FakeLog().vkey}\nquorum A\n", "type-0x04"),
    (f"witness A {A.verifier_key_string()} ftp://x\nquorum A\n", "http"),
    (f"witness A {A.verifier_key_string()}\ngroup g 2 A\nquorum g\n", "threshold"),
    (f"witness A {A.verifier_key_string()}\ngroup g any A A\nquorum g\n", "twice"),
    (f"witness A {A.verifier_key_string()}\ngroup g any Z\nquorum g\n", "member"),
    (f"witness A {A.verifier_key_string()}\nquorum A\nquorum A\n", "exactly one"),
    (f"log {FakeLog().vkey}\nquorum none\n", "pinned per URL"),
    ("frobnicate x\nquorum none\n", "unknown statement"),
    ("witness none x\nquorum none\n", "already defined"),
])
def test_bad_policies_name_their_line(text: str, why: str) -> None:
    with pytest.raises(PolicyError, match=why):
        WitnessPolicy.parse(text)


def test_limits() -> None:
    with pytest.raises(PolicyError, match="larger"):
        WitnessPolicy.parse(b"#" * (64 * 1024 + 1))
    with pytest.raises(PolicyError, match="UTF-8"):
        WitnessPolicy.parse(b"\xff\nquorum none\n")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("witnesgroupqum alny#12\n")), max_size=120))
def test_the_parser_only_raises_policy_error(text: str) -> None:
    try:
        p = WitnessPolicy.parse(text)
    except PolicyError:
        return
    assert WitnessPolicy.parse(p.to_text()) == p


@pytest.mark.parametrize("raw", list(SMALL_ORDER.values()), ids=list(SMALL_ORDER))
def test_small_order_keys_are_refused_as_witnesses_and_as_logs(raw: bytes) -> None:
    """A small-order key would accept the (identity, 0) signature on every checkpoint."""
    from ledger.tlog.note import key_id
    from ledger.witness_store import WitnessStoreError, make_log

    def vkey(name: str, sig_type: int) -> str:
        material = base64.b64encode(bytes([sig_type]) + raw).decode()
        return f"{name}+{key_id(name, raw, sig_type).hex()}+{material}"

    with pytest.raises(PolicyError, match="Ed25519"):
        WitnessPolicy.parse(f"witness W {vkey('evil/witness', 0x04)}\nquorum W\n")
    with pytest.raises(WitnessStoreError, match="Ed25519"):
        make_log("example.org/log", [vkey("example.org/log", 0x01)])


def _keys(n: int) -> list[str]:
    return [_w(10 + i, f"w.example/{i}").verifier_key_string() for i in range(n)]


def test_the_result_says_who_signed_and_serialises_all_of_it() -> None:
    log, note = _cosigned(A, C)
    result = check_quorum(open_checkpoint(note, log.signer.verifier()), log.signer.verifier(),
                          _policy("either"))
    assert result.signed == ("A",) and result.missing == ("B",)  # C is outside the policy
    assert result.describe() == "quorum 'either' met: signed by A; missing B"
    assert result.to_json() == {
        "met": True, "quorum": "either", "signed": ["A"], "missing": ["B"],
        "cosignatures": [{"name": "w.example/a", "key_id": A.verifier().key_id.hex(),
                          "timestamp": 1_700_000_000}]}
    log, note = _cosigned()
    with pytest.raises(PolicyError) as info:
        check_quorum(open_checkpoint(note, log.signer.verifier()), log.signer.verifier(),
                     _policy("both"))
    assert str(info.value) == ("witness quorum 'both' NOT met: signed by no witness; "
                               "missing A, B")


def test_the_size_limit_is_exact_for_text_and_bytes() -> None:
    body = "quorum none\n"
    at_limit = body + "#" * (65536 - len(body))
    assert WitnessPolicy.parse(at_limit).quorum == "none"
    assert WitnessPolicy.parse(at_limit.encode()).quorum == "none"
    with pytest.raises(PolicyError, match=r"^witness policy is larger than 65536 bytes$"):
        WitnessPolicy.parse(at_limit + "#")
    # a multi-byte character counts as its UTF-8 bytes
    with pytest.raises(PolicyError, match=r"^witness policy is larger than 65536 bytes$"):
        WitnessPolicy.parse(body + "\u00e9" * (65536 // 2))
    # oversized bytes are refused before decoding: the size, not the encoding, is named
    with pytest.raises(PolicyError, match=r"^witness policy is larger than 65536 bytes$"):
        WitnessPolicy.parse(b"\xff" * 65537)


def test_sixty_four_witnesses_and_groups_and_not_one_more() -> None:
    keys = _keys(65)
    lines = [f"witness w{i} {k}" for i, k in enumerate(keys[:64])]
    groups = [f"group g{i} any w{i}" for i in range(64)]
    policy = WitnessPolicy.parse("\n".join([*lines, *groups, "quorum g0"]))
    assert len(policy.witnesses) == 64 and len(policy.groups) == 64
    with pytest.raises(PolicyError, match=r"^witness policy line 65: more than 64 witnesses$"):
        WitnessPolicy.parse("\n".join([*lines, f"witness w64 {keys[64]}", "quorum w0"]))
    with pytest.raises(PolicyError, match=r"^witness policy line 129: more than 64 groups$"):
        WitnessPolicy.parse("\n".join([*lines, *groups, "group g64 any w0", "quorum g0"]))


@pytest.mark.parametrize(("text", "message"), [
    (f"\nwitness A {A.verifier_key_string()}\nquorum A B\n",
     "witness policy line 3: expected 'quorum NAME'"),
    ("witness A\nquorum none\n", "witness policy line 1: expected 'witness NAME VKEY [URL]'"),
    (f"witness a$b {A.verifier_key_string()}\nquorum none\n",
     "witness policy line 1: name 'a$b' must be letters, digits and ._:/@- (at most 128)"),
    (f"witness A {A.verifier_key_string()}\ngroup g any\nquorum g\n",
     "witness policy line 2: expected 'group NAME K|all|any MEMBER...'"),
    (f"witness A {A.verifier_key_string()}\ngroup g any A none\nquorum g\n",
     "witness policy line 2: group g: member 'none' is not a witness or group defined above"),
    ("# a # comment # with # hashes\nquorum none # trailing\n", ""),
])
def test_each_statement_error_is_exact(text: str, message: str) -> None:
    if not message:
        assert WitnessPolicy.parse(text).quorum == "none"
        return
    with pytest.raises(PolicyError) as info:
        WitnessPolicy.parse(text)
    assert str(info.value) == message


def test_a_trailing_slash_is_dropped_from_urls_and_nothing_else() -> None:
    p = WitnessPolicy.parse(f"witness A {A.verifier_key_string()} https://w.example/aX//\n"
                            "quorum A\n")
    assert p.witnesses[0].url == "https://w.example/aX"


@pytest.mark.parametrize(("obj", "message"), [
    ([], "policy JSON needs exactly witnesses, groups, quorum"),
    ({"witnesses": [], "groups": []}, "policy JSON needs exactly witnesses, groups, quorum"),
    ({"witnesses": [], "groups": [], "quorum": "none", "log": "x"},
     "policy JSON needs exactly witnesses, groups, quorum"),
    ({"witnesses": [{"name": "A"}], "groups": [], "quorum": "A"},
     "policy JSON has the wrong shape"),
    ({"witnesses": [], "groups": [{"name": "g", "k": 1, "members": 3}], "quorum": "g"},
     "policy JSON has the wrong shape"),
])
def test_policy_json_is_checked(obj: object, message: str) -> None:
    with pytest.raises(PolicyError) as info:
        WitnessPolicy.from_json(obj)
    assert str(info.value) == message


def _renamed(signer: CosignatureSigner, name: str) -> CosignatureSigner:
    """The same private (so public) key under another key name."""
    return CosignatureSigner(name, Ed25519PrivateKey.from_private_bytes(bytes([1]) * 32),
                             clock=lambda: 1_700_000_000)


def test_one_public_key_under_two_names_is_refused_and_counts_once() -> None:
    # Attack (issue 26 row 11): one key listed as two witnesses; its one cosignature,
    # copied under the second name (the signature does not cover the name), meets 2-of-2.
    twin = _renamed(A, "w.example/twin")
    assert twin.verifier_key_string() != A.verifier_key_string()
    text = (f"witness A {A.verifier_key_string()}\nwitness T {twin.verifier_key_string()}\n"
            "group both all A T\nquorum both\n")
    with pytest.raises(PolicyError, match="public key is already listed"):
        WitnessPolicy.parse(text)
    log, note = _cosigned(A)
    line = note[note.index("\u2014 w.example/a".encode()):]
    blob = line.rstrip(b"\n").rsplit(b" ", 1)[1]
    raw = base64.b64decode(blob)
    copied = base64.b64encode(twin.key_id + raw[4:])
    forged = note + "\u2014 w.example/twin ".encode() + copied + b"\n"
    # The copy verifies as the twin's signature, but one key is one witness:
    from ledger.tlog.cosignature import CosignatureError, verify_cosignatures
    _, cosigs = verify_cosignatures(forged, log.signer.verifier(),
                                    [A.verifier(), twin.verifier()], 1)
    assert len(cosigs) == 1
    with pytest.raises(CosignatureError, match="1 valid witness cosignatures; 2 required"):
        verify_cosignatures(forged, log.signer.verifier(), [A.verifier(), twin.verifier()], 2)

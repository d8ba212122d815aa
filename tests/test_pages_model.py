"""Decoding entries for display and gathering a kernel's claims (pure parts of the pages)."""

from __future__ import annotations

import base64
import json

from hypothesis import given
from hypothesis import strategies as st
from test_pages_helpers import (
    NAME,
    REPRODUCER_KEY,
    REPRODUCER_NAMES,
    TYPES,
    XSS,
    benchmark_body,
    digest_of,
    kernel_body,
    reproduction_body,
    signed,
    verification_body,
)

from ledger.tlog.merkle import leaf_hash
from ledger.web._decode import DecodedEntry, decode_for_display, predicate_kind
from ledger.web._kernel import parse_claim_shape, summarize_kernel
from ledger.web._note_lines import signature_lines

SUBJECT = digest_of("kernel-a")


def test_decode_a_real_entry() -> None:
    data = signed(NAME, SUBJECT, TYPES["benchmark"], benchmark_body([2.0], hostile=True))
    d = decode_for_display(data)
    assert d.signatures_verified and not d.problems
    assert d.kind == "benchmark"
    assert d.subjects == ((NAME, SUBJECT),)
    assert d.predicate is not None and d.predicate["notes"] == [XSS]
    assert d.raw_text == data.decode()
    assert len(d.signer_keyids) == 1 and len(d.signer_keyids[0]) == 64
    assert DecodedEntry.from_json(json.loads(json.dumps(d.to_json()))) == d


def test_decode_reports_tampering_instead_of_raising() -> None:
    data = signed(NAME, SUBJECT, TYPES["kernel"], kernel_body())
    obj = json.loads(data)
    stmt = json.loads(base64.b64decode(obj["envelope"]["payload"]))
    stmt["predicate"]["version"] = "9.9.9"
    obj["envelope"]["payload"] = base64.b64encode(json.dumps(stmt).encode()).decode()
    d = decode_for_display(json.dumps(obj).encode())
    assert not d.signatures_verified
    assert d.problems and "does not verify" in d.problems[0]
    assert d.predicate is not None and d.predicate["version"] == "9.9.9"  # still shown


@given(st.binary(max_size=300))
def test_decode_never_raises_on_garbage(data: bytes) -> None:
    d = decode_for_display(data)
    assert not d.signatures_verified
    assert d.problems


def test_predicate_kind() -> None:
    assert predicate_kind(TYPES["reproduction"]) == "reproduction"
    assert predicate_kind("https://example.com/other/v1") == "other"


def test_parse_claim_shape() -> None:
    assert parse_claim_shape("benchmark.speedup[M=1,N=2]") == {"M": "1", "N": "2"}
    assert parse_claim_shape("correctness.random") is None
    assert parse_claim_shape("benchmark.speedup[M]") is None


def test_summary_pairs_claims_with_reproductions_and_marks_refuted() -> None:
    key_bench = signed(NAME, SUBJECT, TYPES["benchmark"], benchmark_body([2.0, 6.0]))
    entries = {
        0: signed(NAME, SUBJECT, TYPES["kernel"], kernel_body()),
        1: key_bench,
        2: signed(NAME, SUBJECT, TYPES["verification"], verification_body()),
        3: signed(NAME, SUBJECT, TYPES["reproduction"],
                  reproduction_body(1, leaf_hash(key_bench).hex(), SUBJECT, [2.0, 6.0],
                                    [2.1, 2.0]), REPRODUCER_KEY),
    }
    decoded = [(i, decode_for_display(b)) for i, b in entries.items()]
    stranger = summarize_kernel(SUBJECT, decoded)  # nobody named: a stranger's word only
    assert stranger.refuted_count == 0 and stranger.unknown_refuted_count == 1
    s = summarize_kernel(SUBJECT, decoded, reproducers=REPRODUCER_NAMES)
    assert s.names == (NAME,)
    assert [i for i, _ in s.provenance] == [0]
    assert [i for i, _ in s.verifications] == [2]
    assert len(s.claims) == 2 and s.refuted_count == 1
    verdicts = {c.shape_label: r.verdict for c, r in s.pairs if r is not None}
    # canonical JSON sorts the shape keys; they are shown in the catalogue's order
    assert verdicts == {"M=64,N=64,K=64": "confirmed", "M=128,N=128,K=128": "refuted"}
    rows = {(r.label, r.note): r for r in s.chart_rows}
    refuted = rows["#1 M=128,N=128,K=128", "repro #3"]
    assert refuted.verdict == "refuted" and refuted.claimed == 6.0 and refuted.reproduced == 2.0


def test_summary_keeps_unreproduced_claims() -> None:
    bench = signed(NAME, SUBJECT, TYPES["benchmark"], benchmark_body([1.5]))
    s = summarize_kernel(SUBJECT, [(7, decode_for_display(bench))])
    assert [(c.entry, r) for c, r in s.pairs] == [(7, None)]
    assert s.chart_rows[0].reproduced is None and s.chart_rows[0].verdict == ""


def test_signature_lines_name_each_signer() -> None:
    sig = base64.b64encode(b"\x01\x02\x03\x04" + (5).to_bytes(8, "big") + b"\0" * 64).decode()
    note = f"origin\n1\nroot\n\n\u2014 log {base64.b64encode(b'abcd' + b'x' * 64).decode()}\n" \
           f"\u2014 witness.example {sig}\n\u2014 broken !!!\n".encode()
    lines = signature_lines(note)
    assert [(s.name, s.keyid_hex, s.timestamp) for s in lines] == [
        ("log", b"abcd".hex(), None), ("witness.example", "01020304", 5)]


def test_a_verdict_counts_only_for_the_leaf_it_names() -> None:
    from dataclasses import replace

    from test_pages_helpers import named_reproduction

    from ledger.web._verdicts import badge, verdicts_by_claim

    claim_leaf, other_leaf = "aa" * 32, "bb" * 32
    body = named_reproduction((0, "cc" * 32), SUBJECT, [(2, claim_leaf, 3.0, 1.1),
                                                        (3, other_leaf, 1.0, 1.0)])
    d = decode_for_display(signed(NAME, SUBJECT, TYPES["reproduction"], body, REPRODUCER_KEY))
    got = verdicts_by_claim([(5, d)], {2: claim_leaf, 3: "dd" * 32})  # 3's leaf is not named
    assert list(got) == [2] and badge(got[2]) == "refuted by an unknown key"
    got = verdicts_by_claim([(5, d)], {2: claim_leaf, 3: "dd" * 32}, REPRODUCER_NAMES)
    assert list(got) == [2] and badge(got[2]) == "refuted"
    assert got[2][0].by == "by reproducer 'test-lab'"
    assert got[2][0].summary.startswith("benchmark.speedup[M=64,N=64,K=64]: measured 1.1\u00d7")
    # an entry whose signatures do not verify judges nothing
    assert verdicts_by_claim([(5, replace(d, signatures_verified=False))], {2: claim_leaf}) == {}
    # a verdict about an entry that is not a claim on the page is dropped
    assert verdicts_by_claim([(5, d)], {}) == {}


def test_claims_show_their_dimensions_in_the_ops_order() -> None:
    """Canonical JSON logs softmax's shape as {"C":..., "R":...}; the page says R, then C.
    A claim still pairs with a reproduction naming the dimensions in either order."""
    shapes = [{"R": 512, "C": 1024}]
    bench = signed(NAME, SUBJECT, TYPES["benchmark"],
                   benchmark_body([2.0], op="softmax", shapes=shapes))
    d = decode_for_display(bench)
    assert d.predicate is not None and list(d.predicate["results"][0]["shape"]) == ["C", "R"]
    s = summarize_kernel(SUBJECT, [(4, d)])
    assert [c.shape_label for c in s.claims] == ["R=512,C=1024"]
    assert s.chart_rows[0].label == "#4 R=512,C=1024"
    unknown = benchmark_body([2.0], op="conv2d", shapes=[{"W": 3, "A": 2}])
    s = summarize_kernel(SUBJECT, [(5, decode_for_display(
        signed(NAME, SUBJECT, TYPES["benchmark"], unknown)))])
    assert [c.shape_label for c in s.claims] == ["A=2,W=3"]  # no catalogue order: as logged

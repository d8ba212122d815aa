"""Which logged claims `reproduce` uses: every subject considered, strangers skipped, search capped.

Attack 2 of issue 11: a stranger logs a statement with two subjects (their own kernel
and the victim's digest) to sabotage the victim's reproduction.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from client_fakes import MemoryLog, session_of
from client_server import kernel_folder

from attest import examples, make_entry, parse_predicate
from attest.entry import encode_entry
from attest.keys import generate_private_key, keyid
from attest.predicates import REPRODUCTION_V1, VERIFICATION_V1
from attest.statement import Statement, Subject
from client import reproduce as rep
from client.models import SearchPage
from client.publish import Claim, KernelRelease, kernel_claim, publish_claims
from client.reproduce import ClaimSearch, Skipped, gather
from client.session import connect
from client.state import TrustedState
from verifier.kernel import pack_kernel

NAME = "acme/matmul-blocked"


def _log_statement(log: MemoryLog, subjects: list[tuple[str, str]], key: object) -> int:
    stmt = Statement(subjects=tuple(Subject(n, d) for n, d in subjects),
                     predicate_type=VERIFICATION_V1,
                     predicate=parse_predicate(VERIFICATION_V1, examples.verification()))
    stmt = Statement.from_json(stmt.to_json())
    return log.submit(encode_entry(make_entry(stmt, [key]))).index  # type: ignore[list-item]


def _victim(tmp: Path) -> tuple[MemoryLog, TrustedState, str, object]:
    log = MemoryLog()
    trusted = TrustedState(tmp / "home")
    archive = pack_kernel(kernel_folder(tmp))
    vendor = generate_private_key()
    publish_claims(session_of(log, trusted), vendor,
                   KernelRelease(NAME, archive, (kernel_claim(kernel_folder(tmp / "k"))[2],
                                 Claim.parse("verification", VERIFICATION_V1, examples.verification()))),
                   tmp / "r")
    import hashlib

    return log, trusted, hashlib.sha256(archive).hexdigest(), vendor


def test_a_strangers_two_subject_claim_is_skipped_not_fatal(tmp_path: Path) -> None:
    log, trusted, digest, _ = _victim(tmp_path)
    stranger = generate_private_key()
    evil = _log_statement(log, [("evil/x", "ab" * 32), (NAME, digest)], stranger)
    sess = connect(log, trusted, url="http://memory.test")
    got = gather(sess, 0, tmp_path / "work")
    assert [c.index for c in got.claims] == [1]
    assert got.search.skipped_total == 1 and got.search.complete
    assert got.search.skipped[0].index == evil
    assert got.search.skipped[0].reason == "untrusted-signer"


def test_an_index_that_lies_about_the_signer_still_gets_the_claim_skipped(tmp_path: Path) -> None:
    log, trusted, digest, vendor = _victim(tmp_path)
    stranger = generate_private_key()
    evil = _log_statement(log, [("evil/x", "ab" * 32), (NAME, digest)], stranger)
    vendor_kid = keyid(vendor.public_key())  # type: ignore[attr-defined]
    honest_search = log.search

    def lying_search(**kw: object) -> SearchPage:
        page = honest_search(**kw)  # type: ignore[arg-type]
        rows = tuple(type(h)(h.index, h.leaf_hash, h.subject_name, h.subject_sha256,
                             h.predicate_type, (vendor_kid,)) for h in page.results)
        return SearchPage(rows, page.next_cursor)

    log.search = lying_search  # type: ignore[method-assign]
    got = gather(connect(log, trusted, url="http://memory.test"), 0, tmp_path / "work")
    assert [c.index for c in got.claims] == [1]
    assert [(k.index, k.reason) for k in got.search.skipped] == [(evil, "untrusted-signer")]
    assert got.search.fetched == 2  # the lie cost one fetch, and nothing else


def test_the_publishers_claim_counts_in_any_subject_position(tmp_path: Path) -> None:
    log, trusted, digest, vendor = _victim(tmp_path)
    both = _log_statement(log, [("acme/other", "cd" * 32), (NAME, digest)], vendor)
    wrong_name = _log_statement(log, [("acme/renamed", digest)], vendor)
    got = gather(connect(log, trusted, url="http://memory.test"), 0, tmp_path / "work")
    assert [c.index for c in got.claims] == [1, both]
    assert [(k.index, k.reason) for k in got.search.skipped] == [(wrong_name, "other-kernel")]


def test_a_policy_admits_another_trusted_signer(tmp_path: Path) -> None:
    from attest import TrustPolicy

    log, trusted, digest, _ = _victim(tmp_path)
    auditor = generate_private_key()
    theirs = _log_statement(log, [(NAME, digest)], auditor)
    policy = TrustPolicy.from_toml(
        'version = 1\n[[rule]]\nname = "auditors"\nkernel = "acme/*"\npredicate_types = ["*"]\n'
        f'keys = ["{keyid(auditor.public_key())}"]\nthreshold = 1\n')
    sess = connect(log, trusted, url="http://memory.test")
    assert [c.index for c in gather(sess, 0, tmp_path / "w1").claims] == [1]
    assert [c.index for c in gather(sess, 0, tmp_path / "w2", policy).claims] == [1, theirs]


def test_many_hostile_entries_are_capped_and_reported(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    log, trusted, digest, _ = _victim(tmp_path)
    stranger = generate_private_key()
    for i in range(12):
        _log_statement(log, [(f"evil/{i}", "ab" * 32), (NAME, digest)], stranger)
    monkeypatch.setattr(rep, "SEARCH_PAGE", 4)
    monkeypatch.setattr(rep, "MAX_SEARCH_HITS", 9)
    monkeypatch.setattr(rep, "MAX_SKIPS_LISTED", 3)
    got = gather(connect(log, trusted, url="http://memory.test"), 0, tmp_path / "work")
    assert [c.index for c in got.claims] == [1]
    s = got.search
    assert (s.examined, s.complete, len(s.skipped), s.skipped_total) == (9, False, 3, 7)
    assert "stopped after 9 index rows" in s.summary()
    assert ClaimSearch.from_json(s.to_json()) == s
    assert Skipped.from_json(s.skipped[0].to_json()) == s.skipped[0]


def test_the_caps_are_the_ones_the_docs_name() -> None:
    readme = (Path(__file__).resolve().parent.parent / "docs" / "reproducing.md").read_text()
    assert (rep.MAX_SEARCH_HITS, rep.MAX_FETCHED) == (2000, 256)
    assert "capped at 2,000 index rows and 256 fetched entries" in " ".join(readme.split())


def test_padding_the_digest_cannot_bury_the_publishers_later_claim(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 26 row 4: 2,000 junk entries about the digest by fresh keys, then the vendor's
    # own claim: the digest search stopped at its cap before the claim, and the rest was
    # CONFIRMED. The publisher's rows are found by its key, which strangers cannot pad.
    log, trusted, digest, vendor = _victim(tmp_path)
    for _ in range(12):
        _log_statement(log, [(NAME, digest)], generate_private_key())
    late = _log_statement(log, [(NAME, digest), ("acme/notes", "ef" * 32)], vendor)
    monkeypatch.setattr(rep, "SEARCH_PAGE", 4)
    monkeypatch.setattr(rep, "MAX_SEARCH_HITS", 9)
    got = gather(connect(log, trusted, url="http://memory.test"), 0, tmp_path / "work")
    assert [c.index for c in got.claims] == [1, late]
    assert not got.search.complete  # the padding is still reported, and never CONFIRMED


def test_the_publishers_other_kernels_cost_no_rows(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The publisher's claims are asked for by (digest, key): its entries about its other
    # kernels are not rows of that search, so they cannot exhaust the caps before a claim.
    log, trusted, digest, vendor = _victim(tmp_path)
    for i in range(12):
        _log_statement(log, [(f"acme/other-{i}", f"{i:02x}" * 32)], vendor)
    late = _log_statement(log, [("acme/notes", "ef" * 32), (NAME, digest)], vendor)
    asked: list[dict[str, object]] = []
    search = log.search

    def recording(**query: object) -> SearchPage:
        asked.append(query)
        return search(**query)  # type: ignore[arg-type]

    monkeypatch.setattr(log, "search", recording)
    monkeypatch.setattr(rep, "SEARCH_PAGE", 4)
    monkeypatch.setattr(rep, "MAX_ROWS_READ", 8)
    got = gather(connect(log, trusted, url="http://memory.test"), 0, tmp_path / "work")
    assert [c.index for c in got.claims] == [1, late]
    assert got.search.complete
    assert asked[0]["digest"] == digest and asked[0]["keyid"] == keyid(vendor.public_key())  # type: ignore[attr-defined]


def test_padding_cannot_bury_a_claim_by_a_key_the_policy_trusts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # With a policy the claims that count are also those by the keys it trusts for the
    # kernel: they are asked for by (digest, key), and strangers' rows are not fetched, so
    # padding the digest neither buries the auditor's later claim nor costs a fetch a row.
    from attest import TrustPolicy

    log, trusted, digest, _ = _victim(tmp_path)
    auditor = generate_private_key()
    for _ in range(12):
        _log_statement(log, [(NAME, digest)], generate_private_key())
    late = _log_statement(log, [(NAME, digest)], auditor)
    policy = TrustPolicy.from_toml(
        'version = 1\n[[rule]]\nname = "auditors"\nkernel = "acme/*"\npredicate_types = ["*"]\n'
        f'keys = ["{keyid(auditor.public_key())}"]\nthreshold = 1\n'
        '[[rule]]\nname = "anyone-reproduces"\nkernel = "*"\npredicate_types = ["reproduction"]\n'
        'keys = ["*"]\nthreshold = 1\n')
    assert policy.signers_for(NAME, [VERIFICATION_V1]) == {keyid(auditor.public_key())}
    assert policy.signers_for("other/k", [VERIFICATION_V1]) == frozenset()
    assert policy.signers_for(NAME, [REPRODUCTION_V1]) is None  # any signer: no key to ask
    monkeypatch.setattr(rep, "SEARCH_PAGE", 4)
    monkeypatch.setattr(rep, "MAX_SEARCH_HITS", 9)
    got = gather(connect(log, trusted, url="http://memory.test"), 0, tmp_path / "work", policy)
    assert [c.index for c in got.claims] == [1, late]
    assert got.search.fetched == 2  # the vendor's and the auditor's claims, no stranger's
    assert not got.search.complete  # the padding is still reported, and never CONFIRMED

"""attest.policy: strict TOML trust policies and their verdicts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attest import (
    BENCHMARK_V1,
    KERNEL_V1,
    PolicyError,
    TrustPolicy,
    VerifiedEntry,
    generate_private_key,
    keyid,
    make_entry,
    make_statement,
    parse_predicate,
    save_public_key,
    verify_entry,
)
from attest import examples as ex

A, B, C = (generate_private_key() for _ in range(3))
KA, KB, KC = (keyid(k.public_key()) for k in (A, B, C))


def verified(ptype: str, signers: list[object], name: str = ex.KERNEL_NAME) -> VerifiedEntry:
    body = ex.kernel() if ptype == KERNEL_V1 else ex.benchmark(2)
    if ptype == KERNEL_V1:
        body["name"] = name
    stmt = make_statement(name, ex.SOURCE_SHA256, parse_predicate(ptype, body))
    return verify_entry(make_entry(stmt, signers))  # type: ignore[arg-type]


POLICY = f"""
version = 1

[[rule]]
name = "acme-two-of-three"
kernel = "acme/*"
predicate_types = ["benchmark"]
keys = ["{KA}", "{KB}", "{KC}"]
threshold = 2

[[rule]]
name = "acme-provenance"
kernel = "acme/matmul-*"
predicate_types = ["{KERNEL_V1}"]
keys = ["{KA}"]
threshold = 1
"""


def test_rule_matches_with_threshold() -> None:
    policy = TrustPolicy.from_toml(POLICY)
    result = policy.evaluate(verified(BENCHMARK_V1, [A, C]))
    assert result.allowed and result.rule == "acme-two-of-three"
    assert "2 of 2 required" in result.reason
    assert policy.evaluate(verified(KERNEL_V1, [A])).rule == "acme-provenance"


def test_reasons_when_nothing_matches() -> None:
    policy = TrustPolicy.from_toml(POLICY)
    short = policy.evaluate(verified(BENCHMARK_V1, [A]))
    assert not short.allowed and short.rule is None
    assert "'acme-two-of-three' needs 2 trusted signature(s), found 1" in short.reason
    other = generate_private_key()
    assert "found 0" in policy.evaluate(verified(BENCHMARK_V1, [other])).reason
    wrong_kernel = policy.evaluate(verified(KERNEL_V1, [A], name="evil/matmul"))
    assert wrong_kernel.reason == "no rule covers kernel 'evil/matmul'"
    wrong_type = policy.evaluate(verified(KERNEL_V1, [A], name="acme/softmax"))
    assert not wrong_type.allowed
    assert "cover kernel 'acme/softmax' but none allows predicate type" in wrong_type.reason


def test_key_files_relative_to_policy(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    save_public_key(tmp_path / "keys" / "b.pub", B.public_key())
    (tmp_path / "policy.toml").write_text(
        'version = 1\n[[rule]]\nname = "b"\nkernel = "*"\npredicate_types = ["*"]\n'
        'key_files = ["keys/b.pub"]\nthreshold = 1\n')
    policy = TrustPolicy.load(tmp_path / "policy.toml")
    assert policy.rules[0].keyids == frozenset({KB})
    assert policy.evaluate(verified(KERNEL_V1, [B])).allowed
    assert not policy.evaluate(verified(KERNEL_V1, [A])).allowed


RULE = 'name = "r"\nkernel = "acme/*"\npredicate_types = ["benchmark"]\n'


@pytest.mark.parametrize(("text", "message"), [
    ("version = ", "not valid TOML"),
    ('[[rule]]\nname = "r"', "version: required field is missing"),
    ("version = 2\n[[rule]]\n", "version: must be 1"),
    ("version = 1\n", "rule: at least one"),
    ("version = 1\nextra = 1\n", "extra: unknown field"),
    (f"version = 1\n[[rule]]\n{RULE}keys = ['{KA}']\n", "rule[0].threshold: required field is missing"),
    (f"version = 1\n[[rule]]\n{RULE}threshold = 1\n", "rule[0]: list at least one trusted key"),
    (f"version = 1\n[[rule]]\n{RULE}keys = ['{KA}']\nthreshold = 2\n", "rule[0].threshold: must be an integer from 1 to the number of distinct keys (1)"),
    (f"version = 1\n[[rule]]\n{RULE}keys = ['{KA}', '{KA}']\nthreshold = 2\n", "rule[0].threshold"),
    (f"version = 1\n[[rule]]\n{RULE}keys = ['{KA}']\nthreshold = true\n", "rule[0].threshold"),
    (f"version = 1\n[[rule]]\n{RULE}keys = ['ABC']\nthreshold = 1\n", "rule[0].keys[0]: must be a keyid"),
    (f"version = 1\n[[rule]]\n{RULE}keys = '{KA}'\nthreshold = 1\n", "rule[0].keys: must be a list of strings"),
    (f"version = 1\n[[rule]]\n{RULE}key_files = ['missing.pub']\nthreshold = 1\n", "rule[0].key_files[0]: key file"),
    (f"version = 1\n[[rule]]\n{RULE}keys = ['{KA}']\nthreshold = 1\nkeyz = 1\n", "rule[0].keyz: unknown field"),
    (f"version = 1\n[[rule]]\nname = 'r'\nkernel = 'ACME/*'\npredicate_types = ['*']\nkeys = ['{KA}']\nthreshold = 1\n", "rule[0].kernel: must be a kernel-name glob"),
    (f"version = 1\n[[rule]]\nname = 'r'\nkernel = '*'\npredicate_types = ['bench']\nkeys = ['{KA}']\nthreshold = 1\n", "rule[0].predicate_types[0]: unknown predicate type 'bench'"),
    (f"version = 1\n[[rule]]\nname = 'r'\nkernel = '*'\npredicate_types = []\nkeys = ['{KA}']\nthreshold = 1\n", "rule[0].predicate_types: list at least one"),
    (f"version = 1\n[[rule]]\n{RULE}keys = ['{KA}']\nthreshold = 1\n[[rule]]\n{RULE}keys = ['{KA}']\nthreshold = 1\n", "rule[1].name: duplicate rule name 'r'"),
    (f"version = 1\n[[rule]]\nname = ''\nkernel = '*'\npredicate_types = ['*']\nkeys = ['{KA}']\nthreshold = 1\n", "rule[0].name"),
])
def test_invalid_policies(text: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as info:
        TrustPolicy.from_toml(text, base_dir=tmp_path)
    assert message in str(info.value)


def test_load_reports_the_file(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text("version = 3\n[[rule]]\n")
    with pytest.raises(PolicyError, match=r"p\.toml: version: must be 1"):
        TrustPolicy.load(tmp_path / "p.toml")
    with pytest.raises(PolicyError, match="cannot read policy file"):
        TrustPolicy.load(tmp_path / "absent.toml")


TOML_PIECES = st.sampled_from([
    "version = 1\n", "version = 2\n", "[[rule]]\n", 'name = "r"\n', 'kernel = "acme/*"\n',
    'kernel = "*"\n', 'predicate_types = ["*"]\n', 'predicate_types = ["benchmark"]\n',
    f'keys = ["{KA}"]\n', f'keys = ["{KA}", "{KB}"]\n', 'key_files = ["nope.pub"]\n',
    "threshold = 1\n", "threshold = 0\n", "threshold = 3\n", 'threshold = "1"\n', "x = 1\n",
    "[rule]\n", "= broken\n",
])


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(TOML_PIECES, max_size=14), tail=st.text(max_size=10))
def test_policy_parser_accepts_or_names_the_problem(pieces: list[str], tail: str) -> None:
    """Arbitrary mixes of policy lines either parse into consistent rules or raise PolicyError."""
    try:
        policy = TrustPolicy.from_toml("".join(pieces) + tail, base_dir="/nonexistent")
    except PolicyError as exc:
        assert str(exc)
        return
    for rule in policy.rules:
        assert 1 <= rule.threshold <= len(rule.keyids)
        assert rule.predicate_types


@settings(max_examples=200, deadline=None)
@given(vendor=st.from_regex(r"[a-z0-9][a-z0-9._-]{0,10}", fullmatch=True),
       kernel=st.from_regex(r"[a-z0-9][a-z0-9._-]{0,10}", fullmatch=True))
def test_vendor_glob_matches_exactly_that_vendor(vendor: str, kernel: str) -> None:
    rule = TrustPolicy.from_toml(
        f'version = 1\n[[rule]]\nname = "v"\nkernel = "{vendor}/*"\npredicate_types = ["*"]\n'
        f'keys = ["{KA}"]\nthreshold = 1\n').rules[0]
    assert rule.covers_kernel([f"{vendor}/{kernel}"])
    assert not rule.covers_kernel([f"x{vendor}/{kernel}"])


ANYONE = f"""
version = 1

[[rule]]
name = "acme releases"
kernel = "acme/*"
predicate_types = ["kernel", "benchmark", "verification"]
keys = ["{KA}"]
threshold = 1

[[rule]]
name = "anyone may reproduce"
kernel = "acme/*"
predicate_types = ["reproduction"]
keys = ["*"]
threshold = 1
"""


def test_anyone_may_log_a_reproduction_but_not_a_release() -> None:
    from attest import REPRODUCTION_V1

    policy = TrustPolicy.from_toml(ANYONE)
    stranger = generate_private_key()
    repro = verify_entry(make_entry(make_statement(
        ex.KERNEL_NAME, ex.SOURCE_SHA256, parse_predicate(REPRODUCTION_V1, ex.reproduction())),
        [stranger]))
    result = policy.evaluate(repro)
    assert result.allowed and result.rule == "anyone may reproduce"
    # a stranger's benchmark is still refused: '*' never reaches a release
    assert not policy.evaluate(verified(BENCHMARK_V1, [stranger])).allowed
    assert policy.evaluate(verified(BENCHMARK_V1, [A])).allowed


@pytest.mark.parametrize(("rule", "message"), [
    ('predicate_types = ["benchmark"]\nkeys = ["*"]\nthreshold = 1',
     "'*' (any signer) is only for predicate_types = [\"reproduction\"]"),
    ('predicate_types = ["*"]\nkeys = ["*"]\nthreshold = 1', "is only for predicate_types"),
    (f'predicate_types = ["reproduction"]\nkeys = ["*", "{KA}"]\nthreshold = 1', "stands alone"),
    ('predicate_types = ["reproduction"]\nkeys = ["*"]\nthreshold = 2', "must be 1 with keys"),
])
def test_any_signer_is_for_reproductions_only(rule: str, message: str) -> None:
    with pytest.raises(PolicyError, match=re.escape(message)):
        TrustPolicy.from_toml(f'version = 1\n[[rule]]\nname = "r"\nkernel = "*"\n{rule}\n')


# -- reproducers and their quorum (issue 25) ---------------------------------------------------

_LAB_A, _LAB_B, _LAB_C, _STRANGER = ("a" * 64, "b" * 64, "c" * 64, "d" * 64)
_REPRO_POLICY = f'''
version = 1
reproducer_quorum = 2
[[rule]]
name = "anyone may reproduce"
kernel = "*"
predicate_types = ["reproduction"]
keys = ["*"]
threshold = 1
[[reproducer]]
name = "lab-a"
keys = ["{_LAB_A}"]
[[reproducer]]
name = "lab-b"
keys = ["{_LAB_B}"]
[[reproducer]]
name = "lab-c"
keys = ["{_LAB_C}"]
'''


def _rep(i: int, key: str, env: str, verdict: str) -> Any:
    from attest.policy import Reproduction

    return Reproduction(i, (key,), (env, "2", "x86_64", "None"), verdict)


def test_reproducers_are_named_and_strangers_are_unknown() -> None:
    policy = TrustPolicy.from_toml(_REPRO_POLICY)
    assert policy.reproducer_quorum == 2 and [r.name for r in policy.reproducers] == [
        "lab-a", "lab-b", "lab-c"]
    assert policy.signer_phrase([_LAB_B]) == f"by reproducer 'lab-b' (key {_LAB_B[:16]}…)"
    assert policy.signer_phrase([_STRANGER]) == f"by an unknown key {_STRANGER[:16]}…"


def test_quorum_needs_k_named_reproducers_on_distinct_environments() -> None:
    policy = TrustPolicy.from_toml(_REPRO_POLICY)
    one = policy.quorum([_rep(1, _LAB_A, "epyc", "confirmed")])
    assert one.status == "unsettled" and one.confirming == ("lab-a",)
    same_env = policy.quorum([_rep(1, _LAB_A, "epyc", "refuted"),
                              _rep(2, _LAB_B, "epyc", "refuted")])
    assert same_env.status == "unsettled"  # two labs, one environment: not independent
    two = policy.quorum([_rep(1, _LAB_A, "epyc", "refuted"), _rep(2, _LAB_B, "xeon", "refuted")])
    assert two.status == "refuted" and set(two.refuting) == {"lab-a", "lab-b"}
    twice = policy.quorum([_rep(1, _LAB_A, "epyc", "confirmed"),
                           _rep(2, _LAB_A, "xeon", "confirmed")])
    assert twice.status == "unsettled"  # one reproducer counts once
    strangers = policy.quorum([_rep(i, _STRANGER, f"env{i}", "refuted") for i in range(9)])
    assert strangers.status == "unsettled" and len(strangers.unknown) == 9


@given(st.lists(st.tuples(st.sampled_from([_LAB_A, _LAB_B, _LAB_C, _STRANGER]),
                          st.sampled_from(["e1", "e2", "e3"]),
                          st.sampled_from(["confirmed", "refuted", "inconclusive"])),
                max_size=12))
def test_quorum_outcome_against_a_naive_count(reps: list[tuple[str, str, str]]) -> None:
    """Settled only with >= k distinct named reproducers whose environments can be told
    apart (brute force over assignments); strangers never change the outcome."""
    from itertools import permutations

    policy = TrustPolicy.from_toml(_REPRO_POLICY)
    names = {_LAB_A: "lab-a", _LAB_B: "lab-b", _LAB_C: "lab-c"}
    got = policy.quorum([_rep(i, k, e, v) for i, (k, e, v) in enumerate(reps)])

    def reached(verdict: str) -> bool:
        envs: dict[str, set[str]] = {}
        for k, e, v in reps:
            if v == verdict and k in names:
                envs.setdefault(names[k], set()).add(e)
        for pair in permutations(envs, 2):
            if any(a != b for a in envs[pair[0]] for b in envs[pair[1]]):
                return True
        return False

    want = "refuted" if reached("refuted") else "confirmed" if reached("confirmed") else \
        "unsettled"
    assert got.status == want, (reps, got)
    without = policy.quorum([_rep(i, k, e, v) for i, (k, e, v) in enumerate(reps)
                             if k != _STRANGER])
    assert without.status == got.status


@pytest.mark.parametrize(("extra", "words"), [
    ('reproducer_quorum = 4\n', "reproducer_quorum: must be an integer from 1 to the number"),
    (f'[[reproducer]]\nname = "lab-d"\nkeys = ["{_LAB_A}"]\n', "already belongs to reproducer"),
    ('[[reproducer]]\nname = "lab-a"\nkeys = ["' + "e" * 64 + '"]\n', "duplicate reproducer"),
    ('[[reproducer]]\nname = "lab-e"\n', "list at least one key"),
    ('[[reproducer]]\nname = "lab-f"\nkeys = ["' + "f" * 64 + '"]\nthreshold = 1\n',
     "unknown field"),
])
def test_bad_reproducer_tables_are_refused(extra: str, words: str) -> None:
    if extra.startswith("reproducer_quorum"):
        text = _REPRO_POLICY.replace("reproducer_quorum = 2\n", extra)
    else:
        text = _REPRO_POLICY + extra
    with pytest.raises(PolicyError, match=words):
        TrustPolicy.from_toml(text)

"""`ktl reproduce --policy` ends with where each claim it judged stands under the reader's
reproducer quorum: the same `TrustPolicy.quorum` as `ktl get`, over the logged
reproductions (fetched and verified), this one included once logged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from client_fakes import MemoryLog, session_of
from client_server import kernel_folder

from attest import REPRODUCTION_V1, examples, make_entry, parse_predicate
from attest.entry import encode_entry
from attest.keys import generate_private_key, keyid
from attest.policy import reproducer_panel
from attest.predicates import VERIFICATION_V1, ReproductionPredicate
from attest.statement import Statement, Subject
from client.publish import Claim, KernelRelease, kernel_claim, publish_claims
from client.reproduce import independently
from client.session import connect
from client.state import TrustedState
from verifier.kernel import pack_kernel

NAME = "acme/matmul-blocked"


def _published(tmp: Path) -> tuple[MemoryLog, TrustedState, str]:
    log = MemoryLog()
    trusted = TrustedState(tmp / "home")
    archive = pack_kernel(kernel_folder(tmp))
    publish_claims(session_of(log, trusted), generate_private_key(),
                   KernelRelease(NAME, archive, (kernel_claim(kernel_folder(tmp / "k"))[2],
                                 Claim.parse("verification", VERIFICATION_V1, examples.verification()))),
                   tmp / "r")
    return log, trusted, hashlib.sha256(archive).hexdigest()


def _refute(log: MemoryLog, digest: str, claim: tuple[int, str], key: Any, cpu: str
            ) -> ReproductionPredicate:
    body = examples.reproduction_v2()
    body["target"].update(origin=log.origin, index=claim[0], leaf_hash=claim[1],
                          predicate_type=VERIFICATION_V1, subject_sha256=digest)
    body["environment"]["cpu_model"] = cpu
    body["claims"] = [dict(body["claims"][1], verdict="refuted", claimed={"verdict": "pass"},
                           measured={"verdict": "fail"}, reason="fails here",
                           entry={"index": claim[0], "leaf_hash": claim[1]})]
    body["verdict"] = "refuted"
    pred = parse_predicate(REPRODUCTION_V1, body)
    stmt = Statement(subjects=(Subject(NAME, digest),), predicate_type=REPRODUCTION_V1,
                     predicate=pred)
    log.submit(encode_entry(make_entry(Statement.from_json(stmt.to_json()), [key])))
    assert isinstance(pred, ReproductionPredicate)
    return pred


def test_reproduce_reports_the_readers_quorum_over_the_logged_reproductions(
        tmp_path: Path) -> None:
    log, trusted, digest = _published(tmp_path)
    sess = connect(log, trusted, url="http://memory.test")
    claim_index = next(i for i in range(4)
                       if sess.fetch_entry(i).verified.statement.predicate_type
                       == VERIFICATION_V1)
    claim = (claim_index, sess.fetch_entry(claim_index).summary()["leaf_hash"])
    lab_a, lab_b = generate_private_key(), generate_private_key()
    policy = reproducer_panel({keyid(lab_a.public_key()): "lab-a",
                               keyid(lab_b.public_key()): "lab-b"}, 2)
    mine = _refute(log, digest, claim, lab_a, "AMD EPYC")
    got = independently(sess, mine, policy)
    assert list(got) == [claim_index]
    assert got[claim_index].quorum is not None
    assert got[claim_index].quorum.status == "unsettled"  # one of the two needed
    for _ in range(5):  # strangers' refutations never count
        _refute(log, digest, claim, generate_private_key(), "AMD EPYC")
    assert independently(sess, mine, policy)[claim_index].quorum.status == "unsettled"  # type: ignore[union-attr]
    _refute(log, digest, claim, lab_b, "Intel Xeon")
    settled = independently(sess, mine, policy)[claim_index]
    assert settled.quorum is not None and settled.quorum.status == "refuted"
    assert sorted(settled.quorum.refuting) == ["lab-a", "lab-b"]
    assert "refuted: confirmed by none, refuted by" in settled.summary()


@pytest.mark.slow
def test_ktl_reproduce_policy_ends_with_the_quorum_outcome_its_own_verdict_included(
        tmp_path: Path) -> None:
    """Through the real server and `ktl`: a reproducer the reader's policy names signs and
    logs its reproduction; at quorum 1 the claim is then independently confirmed, said in
    `independently` (--json) and in the text."""
    import shutil

    from client_server import REPO, Ktl, running_log

    from attest.keys import save_private_key, save_public_key

    kdir = tmp_path / "sum"
    shutil.copytree(REPO / "examples" / "sum-rows", kdir)
    keys = {}
    for name in ("vendor", "me"):
        key = generate_private_key()
        save_private_key(tmp_path / f"{name}.key", key)
        save_public_key(tmp_path / f"{name}.pub", key.public_key())
        keys[name] = keyid(key.public_key())
    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n[[rule]]\nname = "acme"\nkernel = "*"\n'
                      'predicate_types = ["*"]\nkey_files = ["vendor.pub"]\nthreshold = 1\n'
                      '[[reproducer]]\nname = "me"\nkey_files = ["me.pub"]\n')
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "log") as url:
        res = ktl("publish", str(kdir), "--key", str(tmp_path / "vendor.key"), "--log", url,
                  "--json")
        assert res.exit_code == 0, res.stderr
        ver = next(e for e in json.loads(res.stdout)["entries"] if e["kind"] == "verification")
        args = ["reproduce", "--index", str(ver["index"]), "--log", url, "--policy", str(policy),
                "--sign", str(tmp_path / "me.key"), "--submit", "--receipts",
                str(tmp_path / "receipts")]
        got = ktl.json(*args)
        weighed = got["independently"][str(ver["index"])]["independently"]
        assert weighed["status"] == "confirmed" and weighed["confirming"] == ["me"]
        text = ktl(*args)
        assert f"Independently (your policy's reproducer quorum), entry {ver['index']}: " \
            "confirmed: confirmed by me" in " ".join(text.stdout.split())

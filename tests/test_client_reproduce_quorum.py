"""`ktl reproduce --policy` ends with where each claim it judged stands under the reader's
reproducer quorum: the same `TrustPolicy.quorum` as `ktl get`, over the logged
reproductions (fetched and verified), this one included once logged."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from client_fakes import MemoryLog
from client_server import kernel_folder

from attest import REPRODUCTION_V1, examples, make_entry, parse_predicate
from attest.entry import encode_entry
from attest.keys import generate_private_key, keyid
from attest.policy import reproducer_panel
from attest.predicates import VERIFICATION_V1, ReproductionPredicate
from attest.statement import Statement, Subject
from client.publish import Claim, kernel_claim, publish_claims
from client.reproduce import independently
from client.session import connect, fetch_entry
from client.state import TrustedState
from client.trust import load_verifier
from verifier.kernel import pack_kernel

NAME = "acme/matmul-blocked"


def _published(tmp: Path) -> tuple[MemoryLog, TrustedState, str]:
    log = MemoryLog()
    trusted = TrustedState(tmp / "home")
    archive = pack_kernel(kernel_folder(tmp))
    publish_claims(log, load_verifier(log.verifier_key), log.origin, trusted,
                   generate_private_key(), name=NAME, archive=archive,
                   claims=[kernel_claim(kernel_folder(tmp / "k"))[2],
                           Claim("verification", VERIFICATION_V1, examples.verification())],
                   receipt_folder=tmp / "r")
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
                       if fetch_entry(sess, i).verified.statement.predicate_type
                       == VERIFICATION_V1)
    claim = (claim_index, fetch_entry(sess, claim_index).summary()["leaf_hash"])
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

"""`ktl reproduce` end to end: verified gathering, verdicts, exit codes, signed attestation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from client_fakes import MemoryLog, session_of
from client_server import REPO, Ktl, kernel_folder, running_log
from test_client_publish import _publish

from attest import examples
from attest.keys import generate_private_key, save_private_key
from client import VerificationFailed
from client.publish import Claim
from client.reproduce import gather
from client.session import connect
from client.state import TrustedState


def _verification_only(tmp: Path) -> Path:
    path = tmp / "verification-only.json"
    path.write_text(json.dumps({"verification": examples.verification()}))
    return path


@pytest.mark.slow
def test_reproduce_confirms_honest_refutes_flawed_and_logs_verdict(tmp_path: Path) -> None:
    key = tmp_path / "vendor.key"
    save_private_key(key, generate_private_key())
    results = _verification_only(tmp_path)
    honest = kernel_folder(tmp_path)
    flawed = tmp_path / "flawed"
    shutil.copytree(REPO / "tests" / "flawed_kernels" / "remainder", flawed)
    vendor, auditor = Ktl(tmp_path / "vendor"), Ktl(tmp_path / "auditor")
    with running_log(tmp_path / "log") as url:
        for kdir in (honest, flawed):  # both claim "verdict: pass"
            vendor.json("publish", str(kdir), "--key", str(key), "--results", str(results),
                        "--log", url)
        ok = auditor.json("reproduce", "--index", "0", "--log", url)
        assert ok["reproduction"]["verdict"] == "confirmed"
        assert ok["reproduction"]["target"]["index"] == 0
        receipts = tmp_path / "r"
        bad = auditor.json("reproduce", "--index", "3", "--log", url, "--sign", str(key),
                           "--submit", "--receipts", str(receipts), code=1)
        assert bad["reproduction"]["verdict"] == "refuted"
        assert any(c["verdict"] == "refuted" for c in bad["reproduction"]["claims"])
        assert bad["attestation"]["index"] == 4
        judged = auditor.json("get", "--index", "3", "--log", url)  # the claim entry re-run
        assert {json.dumps(c["entry"], sort_keys=True) for c in bad["reproduction"]["claims"]} \
            == {json.dumps({"index": 3, "leaf_hash": judged["leaf_hash"]}, sort_keys=True)}
        log_key = auditor.json("log-info", "--log", url)["verifier_key"]
    for name in ("reproduction-4.tlog-proof", "reproduction.tlog-proof"):  # logged at 4; latest
        got = auditor.json("verify", str(receipts / name), "--log-key", log_key,
                           "--source", str(flawed))
        assert got["predicate_type"].endswith("/reproduction/v1") and got["index"] == 4


def test_reproduce_needs_sign_for_submit(tmp_path: Path) -> None:
    res = Ktl(tmp_path)("reproduce", "--index", "0", "--log", "http://127.0.0.1:9", "--submit")
    assert res.exit_code == 2 and "--sign" in res.stderr


def test_gather_refuses_a_blob_that_does_not_match(tmp_path: Path) -> None:
    log = MemoryLog()
    _publish(log, tmp_path)
    digest = next(iter(log.blobs))
    log.blobs[digest] = b"something else"
    sess = connect(log, TrustedState(tmp_path / "home"), url="http://memory.test")
    with pytest.raises(VerificationFailed, match="does not hash"):
        gather(sess, 0, tmp_path / "work")


def test_gather_takes_only_the_publishers_claims(tmp_path: Path) -> None:
    from attest.predicates import VERIFICATION_V1
    from client.publish import Claim, KernelRelease, publish_claims
    from verifier.kernel import pack_kernel

    log = MemoryLog()
    trusted = TrustedState(tmp_path / "home")
    archive = pack_kernel(kernel_folder(tmp_path))
    claim = Claim.parse("verification", VERIFICATION_V1, examples.verification())
    for key, claims in ((generate_private_key(), [_kernel_claim(tmp_path), claim]),
                        (generate_private_key(), [claim])):  # a stranger's claim on the digest
        publish_claims(session_of(log, trusted), key,
                       KernelRelease("acme/matmul-blocked", archive, tuple(claims)), tmp_path / "r")
    sess = connect(log, trusted, url="http://memory.test")
    got = gather(sess, 0, tmp_path / "work")
    assert [c.index for c in got.claims] == [1]
    assert (got.kernel_dir / "kernel.toml").exists()


def _kernel_claim(tmp: Path) -> Claim:
    from client.publish import kernel_claim

    return kernel_claim(kernel_folder(tmp / "k"))[2]



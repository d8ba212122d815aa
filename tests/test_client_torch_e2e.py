"""End to end for kernels defined by a PyTorch module, through the real server and `ktl`:
import a KernelBench problem, publish it, get it, verify it offline, see it in the explorer
with the reference's digest as its op, and have a monitor accept the log."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import requests
from client_server import Ktl, running_log, small_results

from attest.keys import generate_private_key, save_private_key, save_public_key
from verifier import KernelSpec

FIXTURES = Path(__file__).resolve().parent / "kernelbench"
RECEIPTS = Path(".ktl/receipts")


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    out = tmp_path / "ln"
    ktl = Ktl(tmp_path / "home")
    res = ktl("import", "kernelbench", str(FIXTURES / "problems" / "layer_norm.py"),
              str(FIXTURES / "solutions" / "layer_norm.py"), "--out", str(out),
              "--name", "acme/layernorm-fused")
    assert res.exit_code == 0, res.stderr
    return out


@pytest.mark.slow
def test_publish_get_verify_and_explorer(tmp_path: Path, imported: Path) -> None:
    key = generate_private_key()
    save_private_key(tmp_path / "vendor.key", key)
    save_public_key(tmp_path / "vendor.key.pub", key.public_key())
    ktl = Ktl(tmp_path / "home")
    digest = KernelSpec.load(imported).reference_digest
    with running_log(tmp_path / "log") as url:
        log_key = ktl.json("log-info", "--log", url)["verifier_key"]
        report = ktl.json("publish", str(imported), "--key", str(tmp_path / "vendor.key"),
                          "--results", str(small_results(tmp_path, op="torch")), "--log", url)
        kinds = [e["kind"] for e in report["entries"]]
        assert kinds == ["kernel", "verification", "benchmark"]
        index = report["entries"][0]["index"]
        got = ktl.json("get", "--index", str(index), "--log", url, "--log-key", log_key)
        page = requests.get(f"{url}/entries/{index}", timeout=10)
        monitor = ktl("monitor", "--log", url, "--log-key", log_key)
    body = got.get("predicate") or got.get("statement", {}).get("predicate")
    assert body["op"] == "torch" and body["runtime"] == "torch"
    assert body["reference"]["sha256"] == digest
    assert body["reference"]["torch_version"].startswith("2.")
    sources = {s["path"]: s["sha256"] for s in body["sources"]}
    assert sources["reference.py"] == hashlib.sha256(
        (FIXTURES / "problems" / "layer_norm.py").read_bytes()).hexdigest()
    proof = imported / RECEIPTS / "kernel.tlog-proof"
    verified = ktl.json("verify", str(proof), "--log-key", log_key, "--source", str(imported))
    assert verified["subject_name"] == "acme/layernorm-fused"
    assert page.status_code == 200
    assert digest in page.text and "reference module" in page.text
    assert monitor.exit_code == 0, (monitor.stdout, monitor.stderr)
    # a changed reference is another op: the published archive no longer verifies
    (imported / "reference.py").write_text("# another op\n" + (imported / "reference.py").read_text())
    res = ktl("verify", str(proof), "--log-key", log_key, "--source", str(imported))
    assert res.exit_code == 1
    assert json.dumps(body["reference"])  # recorded in the statement

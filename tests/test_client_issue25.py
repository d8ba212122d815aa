"""Issue 25's table, row by row, through the real log server on 127.0.0.1 and the real `ktl`.

Each test names the row it covers: whose reproductions count (1), a publish that checks
everything first (2, 3) and resumes (3), fresh seeds (4), what was signed (5), verdicts that
settle (6, 6b), diagnoses that name the defect (7, 8, 9).
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from client_server import REPO, Ktl, running_log

from attest import examples
from attest.keys import generate_private_key, keyid, save_private_key, save_public_key
from attest.ops import CATALOGUE_VERSION
from attest.predicates import KERNEL_V1, VERIFICATION_V1
from client.api import LogClient
from client.publish import Claim, publish_claims
from client.state import TrustedState
from client.trust import load_verifier

FLAWED = REPO / "tests" / "flawed_kernels"


def _key(tmp: Path, name: str) -> tuple[Path, str]:
    key = generate_private_key()
    path = tmp / f"{name}.key"
    save_private_key(path, key)
    save_public_key(tmp / f"{name}.pub", key.public_key())
    return path, keyid(key.public_key())


def _ustar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(files[name]), 0o644
            tar.addfile(info, io.BytesIO(files[name]))
    return buf.getvalue()


def test_row9_an_unknown_op_is_inconclusive_naming_the_catalogue(tmp_path: Path) -> None:
    """Row 9: a claim about an op this ktl does not know is `inconclusive: op X is not known
    to this verifier (catalogue version V)`, exit 4, never 'VERIFICATION FAILED'."""
    toml = (REPO / "examples" / "rmsnorm-rows" / "kernel.toml").read_text()
    toml = toml.replace('op = "rmsnorm"', 'op = "layernorm"')
    src = next(p for p in (REPO / "examples" / "rmsnorm-rows").glob("*.c"))
    archive = _ustar({"kernel.toml": toml.encode(), src.name: src.read_bytes()})
    kernel = examples.kernel()
    kernel["op"] = "layernorm"
    verification = examples.verification()
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "log") as url:
        log_key = ktl.json("log-info", "--log", url)["verifier_key"]
        log = LogClient(url)
        publish_claims(log, load_verifier(log_key), log.info().origin,
                       TrustedState(tmp_path / "vendor"), generate_private_key(),
                       name=examples.KERNEL_NAME, archive=archive,
                       claims=[Claim("kernel", KERNEL_V1, kernel),
                               Claim("verification", VERIFICATION_V1, verification)],
                       receipt_folder=tmp_path / "r")
        res = ktl("reproduce", "--index", "0", "--log", url)
        assert res.exit_code == 4, (res.exit_code, res.stdout, res.stderr)
        assert "VERIFICATION FAILED" not in res.stdout + res.stderr
        got = ktl.json("reproduce", "--index", "0", "--log", url, code=4)
    want = f"op layernorm is not known to this verifier (catalogue version {CATALOGUE_VERSION})"
    assert got["reproduction"]["verdict"] == "inconclusive"
    assert got["reproduction"]["claims"] and all(
        want in c["reason"] and c["verdict"] == "inconclusive"
        for c in got["reproduction"]["claims"])


@pytest.mark.slow
def test_rows7_8_diagnoses_name_the_defect_through_ktl(tmp_path: Path) -> None:
    """Rows 7 and 8 through `ktl check`: a kernel that never writes its tail columns is a
    remainder defect (not 'must not cache by pointer'); a kernel killed on every call has
    `not run (why)` rows, never `pass ... after 0 calls`."""
    ktl = Ktl(tmp_path / "home")
    tail = ktl.json("check", str(FLAWED / "tail_unwritten"), "--seed", "5", code=1)
    rows = {c["name"]: c for c in tail["checks"]}
    assert rows["state.reuse"]["fault"]["kind"] == "unaligned_remainder"
    assert "cache by pointer" not in rows["state.reuse"]["detail"]
    assert "remainder after whole blocks" in rows["state.reuse"]["detail"]
    dead = ktl.json("check", str(FLAWED / "always_crash"), "--seed", "5", code=1)
    rows = {c["name"]: c for c in dead["checks"]}
    for name in ("inputs.unchanged", "guards.canaries"):
        assert rows[name]["outcome"] == "skip" and rows[name]["detail"].startswith("not run ("), \
            rows[name]
    shown = ktl("check", str(FLAWED / "always_crash"), "--seed", "5")
    assert "after 0 calls" not in shown.stdout


@pytest.mark.slow
def test_row4_publish_checks_with_a_fresh_seed_and_reproduce_runs_two(tmp_path: Path) -> None:
    """Row 4: `publish` (no --results) verifies with a fresh seed, recorded in the statement;
    `reproduce` re-runs the claimed seed and one of its own and says which found what."""
    kdir = tmp_path / "sum"
    shutil.copytree(REPO / "examples" / "sum-rows", kdir)
    key, _ = _key(tmp_path, "vendor")
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "log") as url:
        res = ktl("publish", str(kdir), "--key", str(key), "--log", url, "--json")
        assert res.exit_code == 0, res.stderr
        ver = next(e for e in json.loads(res.stdout)["entries"] if e["kind"] == "verification")
        got = ktl.json("get", "--index", str(ver["index"]), "--log", url)
        seed = got["statement"]["predicate"]["seed"]
        assert seed != 1
        repro = ktl.json("reproduce", "--index", str(ver["index"]), "--log", url)
    rows = repro["reproduction"]["claims"]
    verdict = next(c for c in rows if c["claim"] == "verification.verdict")
    assert f"at the claimed seed {seed}" in verdict["reason"]
    assert "at this reproducer's seed" in verdict["reason"]

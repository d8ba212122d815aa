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
from typing import Any

import pytest
from client_server import REPO, Ktl, running_log

from attest import examples
from attest.keys import generate_private_key, keyid, save_private_key, save_public_key
from attest.ops import CATALOGUE_VERSION
from attest.predicates import KERNEL_V1, VERIFICATION_V1
from client.api import LogClient
from client.publish import Claim, KernelRelease, publish_claims
from client.session import connect
from client.state import TrustedState

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
        publish_claims(connect(log, TrustedState(tmp_path / "vendor"), log_key),
                       generate_private_key(),
                       KernelRelease(examples.KERNEL_NAME, archive,
                                     (Claim.parse("kernel", KERNEL_V1, kernel),
                                      Claim.parse("verification", VERIFICATION_V1, verification))),
                       tmp_path / "r")
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


# -- row 1: whose reproductions count ----------------------------------------------------------


def _reproduction(url: str, key_path: Path, published: dict[str, Any], verdict: str,
                  cpu: str = "AMD EPYC 7B13") -> int:
    """Sign and log a reproduction/v1 of the published benchmark entry, as `key_path`."""
    return LogClient(url).submit(_reproduction_entry(key_path, published, verdict, cpu)).index


def _reproduction_entry(key_path: Path, published: dict[str, Any], verdict: str,
                        cpu: str = "AMD EPYC 7B13") -> bytes:
    """A signed reproduction/v1 entry of the published benchmark entry, as `key_path`."""
    from attest.entry import encode_entry, make_entry
    from attest.keys import load_private_key
    from attest.predicates import REPRODUCTION_V1, parse_predicate
    from attest.statement import make_statement

    bench = next(e for e in published["entries"] if e["kind"] == "benchmark")
    body = examples.reproduction()
    body["environment"]["cpu_model"] = cpu
    body["target"].update(index=bench["index"], leaf_hash=bench["leaf_hash"],
                          subject_sha256=published["subject_sha256"], origin="127.0.0.1/ktl-test")
    body["claims"] = [{"claim": "benchmark.speedup[M=64,N=64,K=64]", "verdict": verdict,
                       "claimed": {"speedup": 2.0}, "measured": {"speedup": 1.1},
                       "reason": "my own words: this vendor is a fraud",
                       "entry": {"index": bench["index"], "leaf_hash": bench["leaf_hash"]}}]
    body["verdict"] = verdict
    stmt = make_statement(published["name"], published["subject_sha256"],
                          parse_predicate(REPRODUCTION_V1, body))
    return encode_entry(make_entry(stmt, [load_private_key(key_path)]))


def _html(url: str) -> str:
    import requests

    res = requests.get(url, timeout=10)
    assert res.status_code == 200, res.status_code
    return res.text


def test_row1_a_strangers_refutation_is_shown_as_such_and_readers_decide(tmp_path: Path) -> None:
    """Row 1: an unknown key's "refuted" is never the kernel page's headline nor a bare red
    badge; its keyid is shown. A reproducer the operator names is headline; `ktl get` and
    `ktl monitor --policy` name signers as the reader's policy does, and a refutation by a
    trusted reproducer is a monitor finding (exit 1)."""
    from client_server import kernel_folder, small_results

    vendor, _ = _key(tmp_path, "vendor")
    _, stranger_id = _key(tmp_path, "stranger")
    _, lab_id = _key(tmp_path, "lab")
    operator = tmp_path / "reproducers.toml"
    operator.write_text(f'[[reproducer]]\nname = "lab-on-the-log"\nkeys = ["{lab_id}"]\n')
    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n[[rule]]\nname = "any-repro"\nkernel = "*"\n'
                      'predicate_types = ["reproduction"]\nkeys = ["*"]\nthreshold = 1\n'
                      '[[rule]]\nname = "acme"\nkernel = "acme/*"\npredicate_types = ["*"]\n'
                      'key_files = ["vendor.pub"]\nthreshold = 1\n'
                      '[[reproducer]]\nname = "my-lab"\nkey_files = ["lab.pub"]\n')
    ktl = Ktl(tmp_path / "home")
    kdir = kernel_folder(tmp_path)
    with running_log(tmp_path / "log", reproducers=str(operator)) as url:
        published = ktl.json("publish", str(kdir), "--key", str(vendor), "--results",
                             str(small_results(tmp_path)), "--log", url)
        digest = published["subject_sha256"]
        bench = next(e["index"] for e in published["entries"] if e["kind"] == "benchmark")
        bad = _reproduction(url, tmp_path / "stranger.key", published, "refuted")
        page = _html(f"{url}/kernels/{digest}")
        assert "refuted</strong> by reproducers" not in page  # no headline from a stranger
        assert f"refuted by an unknown key {stranger_id[:16]}" in page
        search = _html(f"{url}/search?q={digest}")
        assert "refuted by an unknown key" in search
        assert 'class="verdict verdict-refuted"' not in search
        entry_page = _html(f"{url}/entries/{bench}")
        assert "bad-card" not in entry_page and stranger_id[:16] in entry_page
        got = ktl.json("get", "--index", str(bad), "--log", url, "--policy", str(policy))
        assert got["reproducer"] == f"by an unknown key {stranger_id[:16]}…"
        claim = ktl.json("get", "--index", str(bench), "--log", url, "--policy", str(policy))
        assert claim["reproduced"]["independently"]["status"] == "unsettled"
        assert [r["by"] for r in claim["reproduced"]["reproductions"]] == [
            f"by an unknown key {stranger_id[:16]}…"]
        res = ktl("monitor", "--log", url, "--policy", str(policy), "--json")
        report = json.loads(res.stdout.splitlines()[-1])
        assert res.exit_code == 0 and report["refutations"] == 0, res.stdout
        seen = [f for f in report["findings"] if f["kind"] == "reproduction"]
        assert [f["index"] for f in seen] == [bad] and stranger_id[:16] in seen[0]["detail"]

        named = _reproduction(url, tmp_path / "lab.key", published, "refuted")
        page = _html(f"{url}/kernels/{digest}")
        assert "1 claim refuted</strong> by reproducers this log&#39;s operator names" in page \
            or "1 claim refuted</strong> by reproducers this log's operator names" in page
        assert "by reproducer &#39;lab-on-the-log&#39;" in page or \
            "by reproducer 'lab-on-the-log'" in page
        claim = ktl.json("get", "--index", str(bench), "--log", url, "--policy", str(policy))
        assert claim["reproduced"]["independently"]["status"] == "refuted"
        assert claim["reproduced"]["independently"]["refuting"] == ["my-lab"]
        res = ktl("monitor", "--log", url, "--policy", str(policy), "--json")
        report = json.loads(res.stdout.splitlines()[-1])
        assert res.exit_code == 1 and report["refutations"] == 1, res.stdout
        found = next(f for f in report["findings"] if f["kind"] == "refutation")
        assert found["index"] == named and "by reproducer 'my-lab'" in found["detail"]


def _cost_of_reproductions(url: str, tmp: Path, claim: int, policy_path: Path
                           ) -> tuple[list[tuple[str, str]], int]:
    """The searches `reproductions_of` asks for claim entry `claim`, and its entry fetches."""
    from attest.policy import TrustPolicy
    from client.claims_view import reproductions_of
    from client.session import connect

    sess = connect(url, TrustedState(tmp / "cost-home"))
    try:
        target = sess.fetch_entry(claim)
        asked: list[tuple[str, str]] = []
        fetched = [0]
        search, entry = sess.log.search, sess.log.entry

        def recording_search(**query: Any) -> Any:
            asked.append(("digest+keyid" if query.get("keyid") else "digest",
                          str(query.get("keyid") or "")))
            return search(**query)

        def counting_entry(index: int) -> Any:
            fetched[0] += 1
            return entry(index)

        sess.log.search, sess.log.entry = recording_search, counting_entry  # type: ignore[method-assign]
        reproductions_of(sess, target, TrustPolicy.load(policy_path))
    finally:
        sess.close()
    return asked, fetched[0]


def test_row1_padding_by_a_stranger_cannot_hide_a_trusted_refutation(tmp_path: Path) -> None:
    """Row 1 against padding: a stranger logs 100 "confirmed" reproductions of the claim
    (more than the strangers' cap), then the reader's named reproducer refutes it. `ktl get`
    asks for the named reproducer's entries by (digest, key) first, so it still shows the
    refutation and the refuted verdict, lists the stranger's muted, and says plainly that
    their list was cut off."""
    from client_server import kernel_folder, small_results

    from client.claims_view import MAX_REPRODUCTIONS

    vendor, _ = _key(tmp_path, "vendor")
    _, stranger_id = _key(tmp_path, "stranger")
    _, lab_id = _key(tmp_path, "lab")
    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n[[rule]]\nname = "acme"\nkernel = "acme/*"\n'
                      'predicate_types = ["*"]\nkey_files = ["vendor.pub"]\nthreshold = 1\n'
                      '[[reproducer]]\nname = "my-lab"\nkey_files = ["lab.pub"]\n')
    ktl = Ktl(tmp_path / "home")
    padding = 100
    assert padding > MAX_REPRODUCTIONS
    with running_log(tmp_path / "log") as url:
        published = ktl.json("publish", str(kernel_folder(tmp_path)), "--key", str(vendor),
                             "--results", str(small_results(tmp_path)), "--log", url)
        bench = next(e["index"] for e in published["entries"] if e["kind"] == "benchmark")
        pad = [_reproduction_entry(tmp_path / "stranger.key", published, "confirmed",
                                   cpu=f"padding cpu {i}") for i in range(padding)]
        answers = LogClient(url).submit_batch(pad)
        assert all(not isinstance(a, Exception) for a in answers), answers[:3]
        named = _reproduction(url, tmp_path / "lab.key", published, "refuted")
        got = ktl.json("get", "--index", str(bench), "--log", url, "--policy", str(policy))
        shown = ktl("get", "--index", str(bench), "--log", url, "--policy", str(policy))
        asked, fetched = _cost_of_reproductions(url, tmp_path, bench, policy)
    # O(keys named + results): one (digest, key) page for the one named key, then one page
    # of the digest's rows, cut at the strangers' cap; one fetch per reproduction listed
    assert asked == [("digest+keyid", lab_id), ("digest", "")], asked
    assert fetched == 1 + MAX_REPRODUCTIONS
    found = got["reproduced"]
    first = found["reproductions"][0]
    assert (first["index"], first["verdict"], first["trusted"]) == (named, "refuted", True)
    assert first["by"].startswith("by reproducer 'my-lab'") and lab_id[:16] in first["by"]
    assert found["independently"]["status"] == "refuted"
    assert found["independently"]["refuting"] == ["my-lab"]
    strangers = found["reproductions"][1:]
    assert len(strangers) == MAX_REPRODUCTIONS  # the cap, not the padding
    assert all(not r["trusted"] and stranger_id[:16] in r["by"] for r in strangers)
    assert found["complete"] is True and found["strangers_complete"] is False
    assert "CUT OFF" in found["strangers_note"]
    assert shown.exit_code == 0, shown.stderr
    assert "Cut off: the list of reproductions by unknown keys was CUT OFF" in shown.stdout
    assert "REFUTED" in shown.stdout and "Independently: refuted" in shown.stdout


# -- rows 2, 3, 5: publish checks everything first, resumes, says what was signed ---------------


def _sum_results(tmp: Path) -> Path:
    """Valid results of another op (sum over rows), as if measured on another kernel."""
    bench = examples.benchmark()
    shape = {"R": 64, "C": 64}
    bench["workload"].update(op="sum", shapes=[shape])
    bench["results"][0].update(shape=shape, gflops=64 * 64 / 1000.0)
    ver = examples.verification()
    for check in ver["checks"]:
        if "shapes" in check["inputs"]:
            check["inputs"]["shapes"] = [shape]
    path = tmp / "sum-results.json"
    path.write_text(json.dumps({"verification": ver, "benchmark": bench}))
    return path


def _tree_size(ktl: Ktl, url: str) -> int:
    return int(ktl.json("log-info", "--log", url)["tree_size"])


def test_row2_results_of_another_op_are_refused_before_anything_is_sent(tmp_path: Path) -> None:
    """Row 2: a matmul folder published with sum results is refused with one message naming
    the mismatches, exit 2, and the log is left as it was."""
    from client_server import kernel_folder

    key, _ = _key(tmp_path, "vendor")
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "log") as url:
        res = ktl("publish", str(kernel_folder(tmp_path)), "--key", str(key), "--results",
                  str(_sum_results(tmp_path)), "--log", url)
        assert res.exit_code == 2, (res.stdout, res.stderr)
        assert "nothing was sent" in res.stderr
        assert "the benchmark measured op 'sum', but the kernel folder's op is 'matmul'" \
            in res.stderr
        assert "the verification ran shapes with dimensions ['C', 'R']" in res.stderr
        assert _tree_size(ktl, url) == 0


def test_row3_malformed_results_log_nothing(tmp_path: Path) -> None:
    """Row 3: a benchmark that is not a valid benchmark/v1 is refused before the kernel and
    verification entries are sent (nothing stays in the append-only log)."""
    from client_server import kernel_folder, small_results

    key, _ = _key(tmp_path, "vendor")
    results = small_results(tmp_path)
    doc = json.loads(results.read_text())
    doc["benchmark"]["results"][0]["speedup_ci95"] = [3.0, 1.0]
    results.write_text(json.dumps(doc))
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "log") as url:
        res = ktl("publish", str(kernel_folder(tmp_path)), "--key", str(key), "--results",
                  str(results), "--log", url)
        assert res.exit_code == 2 and "nothing was sent" in res.stderr, res.stderr
        assert "speedup_ci95" in res.stderr
        assert _tree_size(ktl, url) == 0


def test_row3_a_failure_between_submissions_resumes_where_it_stopped(tmp_path: Path) -> None:
    """Row 3: the log refuses the third submission (here: over its entry size limit, as a
    503 or a dropped connection would stop it); the same command run again logs only what
    is missing, reusing the already-logged entries (duplicates), and leaves no journal."""
    from client_server import kernel_folder, small_results

    from attest.keys import load_private_key
    from client.publish import Claim, kernel_claim, load_results, prepare_claims

    key, _ = _key(tmp_path, "vendor")
    kdir = kernel_folder(tmp_path)
    results = small_results(tmp_path)
    doc = json.loads(results.read_text())
    doc["benchmark"]["notes"].append("a long note " * 80)  # the biggest entry: sent last
    results.write_text(json.dumps(doc))
    name, archive, kclaim = kernel_claim(kdir)
    got = load_results(results)
    assert got.verification is not None and got.benchmark is not None
    sizes = [len(e) for e in prepare_claims(name, archive, [
        kclaim, Claim("verification", got.verification),
        Claim("benchmark", got.benchmark)], load_private_key(key)).entries]
    assert sizes[2] > max(sizes[:2]), sizes
    ktl = Ktl(tmp_path / "home")
    args = ("publish", str(kdir), "--key", str(key), "--results", str(results))
    with running_log(tmp_path / "log", max_entry_bytes=max(sizes[:2])) as url:
        port = url.rsplit(":", 1)[1]
        first = ktl(*args, "--log", url)
        assert first.exit_code != 0, first.stdout
        assert (kdir / ".ktl" / "publish-pending.json").is_file()
    with running_log(tmp_path / "log", port=int(port)) as url:
        assert _tree_size(ktl, url) == 2
        done = ktl.json(*args, "--log", url)
        assert [(e["kind"], e["index"], e["duplicate"]) for e in done["entries"]] == [
            ("kernel", 0, True), ("verification", 1, True), ("benchmark", 2, False)]
        assert _tree_size(ktl, url) == 3
    assert not (kdir / ".ktl" / "publish-pending.json").exists()


def test_row5_publish_and_get_say_what_was_signed(tmp_path: Path) -> None:
    """Row 5: `publish` ends with the claims as signed (speed-up and interval per shape, the
    check verdict) and `get` on the benchmark shows the same, both saying what below 1x
    means."""
    from client_server import kernel_folder, small_results

    key, _ = _key(tmp_path, "vendor")
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "log") as url:
        res = ktl("publish", str(kernel_folder(tmp_path)), "--key", str(key), "--results",
                  str(small_results(tmp_path)), "--log", url)
        assert res.exit_code == 0, res.stderr
        for text in ("What was signed", "M=64,N=64,K=64", "2.1x (faster than the baseline)",
                     "[1.95, 2.3]", "verdict PASS", "below 1x it is SLOWER"):
            assert text in res.stdout, (text, res.stdout)
        shown = ktl("get", "--index", "2", "--log", url)
        for text in ("What was signed", "M=64,N=64,K=64", "[1.95, 2.3]", "below 1x it is SLOWER",
                     "Not reproduced yet"):
            assert text in shown.stdout, (text, shown.stdout)
        signed = ktl.json("get", "--index", "2", "--log", url)["signed"]
        assert signed["rows"][0][:3] == ["M=64,N=64,K=64", "2.1x (faster than the baseline)",
                                         "[1.95, 2.3]"]


def test_a_speedup_below_one_says_slower() -> None:
    from client.claims_view import speedup_phrase

    assert speedup_phrase(0.394) == "0.394x (SLOWER: 2.5x the baseline's time)"
    assert speedup_phrase(1.0) == "1x (faster than the baseline)"


def test_row2_another_versions_results_are_refused(tmp_path: Path) -> None:
    """Row 2: results measured on v0.1.0 (they name the folder: name, version, source
    digest) are refused for v0.1.1, before anything is sent."""
    from client_server import kernel_folder, small_results

    from verifier.kernel import measured_kernel

    old = kernel_folder(tmp_path / "old", version="0.1.0")
    new = kernel_folder(tmp_path / "new", version="0.1.1")
    (new / "matmul.c").write_text((new / "matmul.c").read_text() + "\n/* 0.1.1 */\n")
    results = small_results(tmp_path)
    doc = json.loads(results.read_text())
    doc["verification"]["kernel"] = doc["benchmark"]["kernel"] = measured_kernel(old)
    results.write_text(json.dumps(doc))
    key, _ = _key(tmp_path, "vendor")
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "log") as url:
        res = ktl("publish", str(new), "--key", str(key), "--results", str(results),
                  "--log", url)
        assert res.exit_code == 2, (res.stdout, res.stderr)
        assert "measured on version '0.1.0', but the kernel folder's is '0.1.1'" in res.stderr
        assert "measured on source_sha256" in res.stderr
        assert _tree_size(ktl, url) == 0
        ok = ktl("publish", str(old), "--key", str(key), "--results", str(results), "--log", url)
        assert ok.exit_code == 0, ok.stderr


def test_the_docs_say_what_the_decision_uses() -> None:
    """docs/reproducing.md's figures for the between-sitting spread and the time budget are the
    code's."""
    from client.reproduce import DEFAULT_TIME_BUDGET_S
    from verifier.stats import SIGMA_BETWEEN

    text = (REPO / "docs" / "reproducing.md").read_text()
    assert f"`verifier.stats.SIGMA_BETWEEN`, {100 * SIGMA_BETWEEN:g} %" in text
    assert f"`--time-budget` (default {DEFAULT_TIME_BUDGET_S:g} s)" in text
    res = Ktl(Path("/nonexistent"))("reproduce", "--help")
    assert "--time-budget" in res.stdout and f"{DEFAULT_TIME_BUDGET_S:g}" in res.stdout

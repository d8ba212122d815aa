"""Issue 16's first-hour frictions, each through the real `ktl` and a real log on 127.0.0.1.

Receipts are never overwritten, a missing entry and a bogus type are usage errors (exit 2),
a glob is refused with a clear "no globs", `monitor` says when nothing is new and prints
one JSON line per pass, counts agree with their nouns, and tables are not cut when
stdout is not a terminal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from client_server import REPO, Ktl, kernel_folder, running_log, small_results

from attest.keys import generate_private_key, save_private_key
from ledger.tlog.proof_bundle import TlogProof

RECEIPTS = Path(".ktl") / "receipts"


def test_first_hour_through_the_real_ktl(tmp_path: Path) -> None:
    key = tmp_path / "vendor.key"
    save_private_key(key, generate_private_key())
    results = small_results(tmp_path)
    kdir = kernel_folder(tmp_path)
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "log") as url:
        first = ktl.json("publish", str(kdir), "--key", str(key), "--results", str(results),
                         "--log", url)
        # a second release from the same folder: the first receipts stay where they were
        (kdir / "kernel.toml").write_text((kdir / "kernel.toml").read_text().replace(
            'version = "1.0.0"', 'version = "1.0.1"'))
        second = ktl.json("publish", str(kdir), "--key", str(key), "--results", str(results),
                          "--log", url)
        receipts = kdir / RECEIPTS
        for pub in first["entries"] + second["entries"]:
            proof = receipts / f"{pub['kind']}-{pub['index']}.tlog-proof"
            assert TlogProof.from_text(proof.read_bytes()).index == pub["index"]
            assert (receipts / f"{pub['kind']}-{pub['index']}.entry.json").is_file()
        latest = {p["kind"]: p["index"] for p in second["entries"]}
        for kind, index in latest.items():  # <kind>.* is the latest receipt of that kind
            assert TlogProof.from_text((receipts / f"{kind}.tlog-proof").read_bytes()).index \
                == index
        log_key = ktl.json("log-info", "--log", url)["verifier_key"]
        ktl.json("verify", str(receipts / "benchmark.tlog-proof"), "--log-key", log_key)
        res = ktl("verify", str(receipts / "benchmark.tlog-proof"), "--log-key", log_key,
                  "--log", "http://127.0.0.1:9")  # the log is down: say what did verify
        assert res.exit_code == 3, res.stderr
        assert (f"entry {latest['benchmark']}) verified offline (checkpoint signature, inclusion"
                " proof, envelope signature and statement), but its consistency") in res.stderr

        res = ktl("get", "--index", "99", "--log", url)
        assert res.exit_code == 2 and "entry 99 is not in the log" in res.stderr, res.stderr
        res = ktl("search", "--type", "bogus", "--log", url)
        assert res.exit_code == 2 and "--type 'bogus' is not a predicate type" in res.stderr
        res = ktl("search", "--name", "acme/*", "--log", url)
        assert res.exit_code == 2 and "no globs" in res.stderr, res.stderr
        res = ktl("search", "--name", "acme/matmul-blocked", "--type", "kernel", "--log", url,
                  "--log-key", log_key)
        assert res.exit_code == 0 and "2 entries" in res.stdout, res.stdout
        res = ktl("search", "--name", "acme/matmul-blocked", "--type", "kernel", "--limit", "1",
                  "--log", url)
        assert "1 entry " in res.stdout and "1 entries" not in res.stdout, res.stdout

        ktl("monitor", "--log", url)
        res = ktl("monitor", "--log", url)  # nothing new since the last pass
        assert res.exit_code == 0 and "No new entries" in res.stdout and ".." not in res.stdout
        res = ktl("monitor", "--log", url, "--json")
        lines = res.stdout.splitlines()
        assert res.exit_code == 0 and len(lines) == 1 and json.loads(lines[0])["violations"] == 0


def test_tables_are_wide_when_stdout_is_not_a_terminal(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["KTL_HOME"] = str(tmp_path)
    ident = "x" * 150
    out = subprocess.run(
        [sys.executable, "-c", "from client.output import Output, rows_table; "
         f"Output(False).console.print(rows_table('t', ['a', 'b'], [['{ident}', 'end']]))"],
        capture_output=True, text=True, cwd=REPO, env=env, check=True, timeout=60)
    assert any(ident in line and "end" in line for line in out.stdout.splitlines()), out.stdout


def test_a_wrong_entry_symbol_fails_the_build_saying_so(tmp_path: Path) -> None:
    kdir = tmp_path / "wrong-entry"
    shutil.copytree(REPO / "examples" / "sum-rows", kdir)
    toml = kdir / "kernel.toml"
    toml.write_text(toml.read_text().replace('entry = "sum_rows"', 'entry = "sum_rowz"'))
    res = Ktl(tmp_path / "home")("check", str(kdir), "--json")
    assert res.exit_code == 1, res.stderr
    checks = json.loads(res.stdout)["checks"]
    assert [(c["name"], c["outcome"]) for c in checks] == [("build", "fail")]
    assert "entry symbol 'sum_rowz' not found in the built library" in checks[0]["detail"]
    assert "Traceback" not in res.stderr


def _readme_policy() -> str:
    text = (REPO / "docs" / "auditing.md").read_text(encoding="utf-8")
    start = text.index("## Verify receipts offline and watch the log")
    return text[text.index("```toml\n", start) + 8: text.index("```", text.index("```toml\n",
                                                                                  start) + 8)]


def test_the_auditing_page_policy_lets_customers_reproduce(tmp_path: Path) -> None:
    from attest import examples, make_entry, make_statement, parse_predicate
    from attest.entry import encode_entry
    from attest.keys import save_public_key
    from attest.predicates import REPRODUCTION_V1
    from client.api import LogClient

    vendor = generate_private_key()
    save_private_key(tmp_path / "acme.key", vendor)
    save_public_key(tmp_path / "acme.key.pub", vendor.public_key())
    (tmp_path / "policy.toml").write_text(_readme_policy())
    kdir = kernel_folder(tmp_path)
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "log") as url:
        pub = ktl.json("publish", str(kdir), "--key", str(tmp_path / "acme.key"), "--results",
                       str(small_results(tmp_path)), "--log", url)
        body = examples.reproduction()
        body["target"].update(index=0, subject_sha256=pub["subject_sha256"])
        for claim in body["claims"]:
            claim.pop("entry", None)
        stmt = make_statement(pub["name"], pub["subject_sha256"],
                              parse_predicate(REPRODUCTION_V1, body))
        with LogClient(url) as log:  # a customer nobody named in the policy
            log.submit(encode_entry(make_entry(stmt, [generate_private_key()])))
        res = ktl("monitor", "--policy", str(tmp_path / "policy.toml"), "--log", url)
        assert res.exit_code == 0 and "0 violations" in res.stdout, res.stdout
        stranger = tmp_path / "stranger"  # ... but a stranger's release is still a violation
        stranger.mkdir()
        save_private_key(stranger / "k.key", generate_private_key())
        ktl.json("publish", str(kdir), "--key", str(stranger / "k.key"), "--results",
                 str(small_results(stranger)), "--log", url)
        res = ktl("monitor", "--policy", str(tmp_path / "policy.toml"), "--log", url)
        assert res.exit_code == 1 and "VIOLATION" in res.stdout, res.stdout

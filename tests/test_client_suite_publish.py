"""`ktl suite publish` and `ktl suite verify` through the real log server and the real `ktl`.

A finished suite run of three problems (one correct and benchmarked, one incorrect, one
refused) is laid out as `ktl suite run` leaves it (results, kernel folders, the check and
bench outputs: prepared, so the test is fast), published, then verified. The attacker's
statements: a summary inflating correct %, a row naming an entry that is not in the log, a
row naming another problem's entries, a speed-up the named benchmark does not give, a
correct problem without a passing verification; each is refused with its typed fault.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest
from client_server import Ktl, running_log, small_results

from attest import (
    KERNEL_V1,
    PAYLOAD_TYPE,
    SUITE_V1,
    ValidationError,
    canonical_json,
    examples,
    generate_private_key,
    parse_predicate,
)
from attest.dsse import sign_envelope
from attest.entry import LogEntry, encode_entry, make_entry
from attest.keys import keyid, public_key_b64, save_private_key
from attest.predicates import SuitePredicate, SuiteRow, SuiteRunSettings
from attest.statement import make_statement
from client.api import LogClient
from client.errors import InputError, VerificationFailed
from client.kernelbench import scalar_adapter, solution_as_given
from client.suite import (
    EntryResult,
    PublishSettings,
    SuiteRefuted,
    check_rows,
    dataset_manifest,
    kernel_name_of,
    publish_suite,
    read_suite,
    suite_body,
)
from verifier.kernel import TORCH_ENTRY

KEYS = ("level1/1_Add", "level1/2_Relu", "level1/3_Huge")


def _problems(tmp: Path) -> Path:
    root = tmp / "problems" / "level1"
    root.mkdir(parents=True)
    for key in KEYS:
        (root / f"{key.split('/')[1]}.py").write_text(f"# problem {key}\n")
    return root.parent


def _store(out: Path, result: EntryResult) -> None:
    path = out / "entries" / f"{result.key.replace('/', '__')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.to_json()))


SOLUTION = b"import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def _torch_folder(dest: Path, name: str, solution: bytes) -> None:
    """A kernel folder as `ktl import kernelbench` writes it (the sources are not run)."""
    dest.mkdir(parents=True)
    (dest / "kernel.toml").write_text(
        f'name = "{name}"\nversion = "0.1.0"\nop = "torch"\nruntime = "torch"\n'
        'reference = "reference.py"\nsolution = "solution.py"\n'
        'sources = ["reference.py", "solution.py"]\nentry = "ModelNew"\nflags = []\n'
        'dtype = "float32"\n\n[generator]\nagent = "unknown"\nagent_version = "0"\n'
        'model = "unknown"\n\n[target]\nhardware_class = "cpu"\n')
    (dest / "reference.py").write_bytes(SOLUTION.replace(b"ModelNew", b"Model"))
    (dest / "solution.py").write_bytes(solution)


def _judged(out: Path, tmp: Path, key: str, verdict: str) -> None:
    """A kernel folder named as `ktl suite run` names it, and the check (and bench) output."""
    file_key = key.replace("/", "__")
    solution = SOLUTION if verdict == "pass" else SOLUTION + scalar_adapter(TORCH_ENTRY,
                                                                             "float32")
    _torch_folder(out / "kernels" / file_key, kernel_name_of(key), solution)
    (tmp / "k" / file_key).mkdir(parents=True)
    results = json.loads(small_results(tmp / "k" / file_key, op="torch").read_text())
    ev = out / "evidence" / file_key
    ev.mkdir(parents=True)
    ver = results["verification"]
    if verdict == "fail":
        ver["checks"][0]["outcome"], ver["verdict"] = "fail", "fail"
    (ev / "verification.json").write_text(json.dumps(ver))
    if verdict == "pass":
        (ev / "benchmark.json").write_text(json.dumps(results["benchmark"]))
        (ev / "samples.json").write_text(results["samples"])


def _finished_run(tmp: Path) -> tuple[Path, Path]:
    """What `ktl suite run` leaves in --out for the three problems."""
    problems, out = _problems(tmp), tmp / "out"
    _judged(out, tmp, KEYS[0], "pass")
    _judged(out, tmp, KEYS[1], "fail")
    sha = hashlib.sha256(SOLUTION).hexdigest()
    _store(out, EntryResult(KEYS[0], 1, 1, "correct", "done", speedup=2.1, trusted=True,
                            solution_sha256=sha))
    _store(out, EntryResult(KEYS[1], 1, 2, "incorrect", "check", reason="correctness: wrong",
                            solution_sha256=sha))
    _store(out, EntryResult(KEYS[2], 1, 3, "refused", "import", refusal="does_not_fit",
                            reason="import: one call "
                            "needs 9,000,000,000 bytes", solution_sha256=sha))
    (out / "run.json").write_text(json.dumps({"budget": "quick", "bench": True, "shard": "1/1",
                                              "memory_limit_bytes": 1 << 33}))
    return problems, out


def _raw_entry(statement: dict[str, Any], key: Any) -> bytes:
    """A signed entry of any statement, valid or not (what an attacker can always make)."""
    env = sign_envelope(canonical_json(statement), PAYLOAD_TYPE, [key])
    pub = key.public_key()
    return canonical_json(LogEntry(env, {keyid(pub): public_key_b64(pub)}).to_json())


def _signed(rows: list[SuiteRow], dataset: str, like: SuitePredicate, key: Any) -> bytes:
    """A valid suite statement (its summary recomputed) of these rows, signed by `key`."""
    body = suite_body(rows, dataset, like.settings)
    return encode_entry(make_entry(make_statement("kernelbench/suite", dataset, body), [key]))


def _resigned(body: SuitePredicate, dataset: str, key: Any, **row0: Any) -> bytes:
    return _signed([replace(body.rows[0], **row0), *body.rows[1:]], dataset, body, key)


def test_a_suite_run_is_published_as_one_claim_and_verified(tmp_path: Path) -> None:
    problems, out = _finished_run(tmp_path)
    key = generate_private_key()
    key_path = tmp_path / "vendor.key"
    save_private_key(key_path, key)
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "log") as url:
        report = ktl.json("suite", "publish", str(out), "--problems", str(problems),
                          "--key", str(key_path), "--log", url)
        index = report["suite"]["index"]
        summary = report["summary"]
        assert summary["entries"] == 3 and summary["correct_pct"] == 33.3
        assert summary["fast_p"] == {"1": 33.3, "1.5": 33.3, "2": 33.3}
        assert summary["refused"] == {"one call does not fit this machine": 1}
        rows = {r["key"]: r for r in report["rows"]}
        assert len(rows[KEYS[0]]["indices"]) == 3 and len(rows[KEYS[1]]["indices"]) == 2
        assert rows[KEYS[2]]["indices"] == [] and rows[KEYS[0]]["speedup"] == pytest.approx(2.1)
        assert report["dataset_sha256"] == hashlib.sha256(dataset_manifest(problems)).hexdigest()

        checked = ktl.json("suite", "verify", "--index", str(index), "--log", url,
                           "--problems", str(problems))
        assert checked["verified"] and checked["checked_entries"] == 5
        assert checked["summary"] == summary
        said = ktl("suite", "verify", "--index", str(index), "--log", url,
                   "--problems", str(problems))
        # figures as words, never a Python repr ({'1': 33.3, ...})
        assert said.exit_code == 0 and "fast_1 33.3%, fast_1.5 33.3%, fast_2 33.3%" in \
            said.stdout and "{" not in said.stdout, said.stdout

        got = ktl.json("get", "--index", str(index), "--log", url)
        assert got["predicate_type"] == SUITE_V1 and got["subject_sha256"] == \
            report["dataset_sha256"]
        with urlopen(f"{url}/entries/{index}") as page:  # the explorer shows it
            assert page.status == 200 and "suite" in page.read().decode()

        again = ktl.json("suite", "publish", str(out), "--problems", str(problems),
                         "--key", str(key_path), "--log", url)
        assert again["suite"]["index"] == index and again["suite"]["duplicate"]

        (problems / "level1" / "1_Add.py").write_text("# another problem\n")
        other = ktl("suite", "verify", "--index", str(index), "--log", url,
                    "--problems", str(problems))
        assert other.exit_code == 1 and "not the suite's dataset" in other.stderr

        log = LogClient(url)
        entry = log.entry(index).entry_bytes
        claim = read_suite(entry)
        named = {i: log.entry(i).entry_bytes for r in claim.predicate.rows for i in r.indices}
        assert check_rows(claim, named) == 5
        _attacks(claim, named, key, ktl, url, log)


def _faults(claim_entry: bytes, named: dict[int, bytes],
            sources: Callable[[str], bytes | None] | None = None) -> set[tuple[str, str]]:
    with pytest.raises(SuiteRefuted) as caught:
        check_rows(read_suite(claim_entry), named, sources)
    return {(p.key, p.fault) for p in caught.value.problems}


def _attacks(claim: Any, named: dict[int, bytes], key: Any, ktl: Ktl, url: str,
             log: LogClient) -> None:
    body, dataset = claim.predicate, claim.dataset_sha256
    first, second = body.rows[0], body.rows[1]

    # a summary inflating correct % (signed by hand: attest would not build it)
    stmt = make_statement("kernelbench/suite", dataset, body).to_json()
    stmt["predicate"]["summary"]["correct_pct"] = 66.7
    with pytest.raises(VerificationFailed, match=r"summary\.correct_pct: must be 33\.3"):
        read_suite(_raw_entry(stmt, key))

    # an entry named that is not in the log (index past the tree)
    ghost = _resigned(body, dataset, key, indices=(*first.indices[:2], 10_000))
    assert _faults(ghost, named) == {(KEYS[0], "missing_entry"), (KEYS[0], "figure_mismatch")}
    logged = log.submit(ghost)
    refused = ktl("suite", "verify", "--index", str(logged.index), "--log", url)
    assert refused.exit_code == 1 and "missing_entry" in refused.stderr

    # a row naming another problem's entries (the incorrect one's, as its own)
    rows = [replace(first, indices=second.indices, entries_sha256=second.entries_sha256,
                    speedup=None, trusted=None),
            replace(second, indices=(), entries_sha256=None), *body.rows[2:]]
    swapped = _signed(rows, dataset, body, key)
    assert _faults(swapped, named) == {(KEYS[0], "other_problem"),
                                       (KEYS[0], "unsupported_status")}
    with pytest.raises(ValidationError, match="names a log entry another row names"):
        suite_body([rows[0], second, *body.rows[2:]], dataset, body.settings)

    # a speed-up the named benchmark does not give; an entries digest that is not theirs
    faster = _resigned(body, dataset, key, speedup=3.0)
    assert _faults(faster, named) == {(KEYS[0], "figure_mismatch")}
    wrong_digest = _resigned(body, dataset, key, entries_sha256="0" * 64)
    assert _faults(wrong_digest, named) == {(KEYS[0], "digest_mismatch")}

    # the incorrect problem stated correct (its verification failed)
    upgraded = _signed([first, replace(second, status="correct"), *body.rows[2:]], dataset,
                       body, key)
    assert _faults(upgraded, named) == {(KEYS[1], "unsupported_status")}

    # another key's entries named as one's own
    stolen = _signed(list(body.rows), dataset, body, generate_private_key())
    assert {f for _k, f in _faults(stolen, named)} == {"other_signer"}
    _solution_attacks(body, dataset, named, key, ktl, url, log)


def _solution_attacks(body: SuitePredicate, dataset: str, named: dict[int, bytes], key: Any,
                      ktl: Ktl, url: str, log: LogClient) -> None:
    """A row's solution_sha256 must be the named kernel's logged solution file."""
    assert check_rows(read_suite(_signed(list(body.rows), dataset, body, key)), named,
                      log.get_blob) == 5  # the adapter-appended one (row 2) included
    # a solution the logged kernel does not hold: another generation's file, claimed
    other = _resigned(body, dataset, key, solution_sha256=hashlib.sha256(b"x").hexdigest())
    assert _faults(other, named, log.get_blob) == {(KEYS[0], "solution_mismatch")}
    logged = log.submit(other)
    refused = ktl("suite", "verify", "--index", str(logged.index), "--log", url)
    assert refused.exit_code == 1 and "solution_mismatch" in refused.stderr
    skipped = ktl.json("suite", "verify", "--index", str(logged.index), "--log", url,
                       "--no-solutions")
    assert skipped["verified"] and skipped["solutions_checked"] is False
    # an archive the log does not serve, or bytes that are not the named archive
    assert _faults(other, named, lambda _d: None) == {
        (k, "solution_mismatch") for k in KEYS[:2]}
    assert _faults(other, named, lambda _d: b"not the archive") == {
        (k, "solution_mismatch") for k in KEYS[:2]}


def test_only_the_exact_scalar_adapter_is_taken_off_a_logged_solution() -> None:
    for dtype in ("float32", "float16", "bfloat16"):
        assert solution_as_given(SOLUTION + scalar_adapter(TORCH_ENTRY, dtype)) == SOLUTION
    assert solution_as_given(SOLUTION) == SOLUTION
    # the reference's adapter, a cut adapter, or text after it: the file stays as logged
    for tail in (scalar_adapter("Model", "float32"), scalar_adapter(TORCH_ENTRY, "float32")[:-1],
                 scalar_adapter(TORCH_ENTRY, "float32") + b"x = 1\n"):
        assert solution_as_given(SOLUTION + tail) == SOLUTION + tail


def test_reading_a_suite_refuses_other_statements_and_oversized_bytes() -> None:
    key = generate_private_key()
    other = encode_entry(make_entry(make_statement(
        examples.KERNEL_NAME, examples.SOURCE_SHA256,
        SuitePredicate.from_json(examples.suite())), [key]))
    assert read_suite(other).predicate.summary.correct == 1
    kernel = encode_entry(make_entry(make_statement(
        examples.KERNEL_NAME, examples.SOURCE_SHA256,
        parse_predicate(KERNEL_V1, examples.kernel())), [key]))
    with pytest.raises(VerificationFailed, match="not a suite statement"):
        read_suite(kernel)
    with pytest.raises(InputError, match="at most"):
        read_suite(b" " * 70_000)
    with pytest.raises(VerificationFailed):
        read_suite(b"{}")


def test_a_run_settings_node_states_the_memory_bound() -> None:
    settings = SuiteRunSettings(budget="quick", bench=False, levels=(1,), shard="1/1",
                                memory_limit_bytes=1 << 30)
    assert settings.to_json()["memory_limit_bytes"] == 1 << 30
    assert SUITE_V1.endswith("/suite/v1")


def test_a_run_too_large_for_one_statement_is_refused_before_anything_is_logged(
        tmp_path: Path) -> None:
    problems = _problems(tmp_path)
    key_path = tmp_path / "vendor.key"
    save_private_key(key_path, generate_private_key())
    results = [EntryResult(f"level1/{i}_Conv_transposed_3D_square_input_asymmetric_kernel",
                           1, i, "refused", reason="one call needs 9 GiB") for i in range(160)]
    run = SuiteRunSettings(budget="quick", bench=True, levels=(1,), shard="1/1",
                           memory_limit_bytes=None)
    settings = PublishSettings(tmp_path / "out", problems, key_path, "http://127.0.0.1:9")
    with pytest.raises(InputError, match=r"nothing was sent: a suite statement of 160 "
                                         r"problems could not be one log entry"):
        publish_suite(settings, results, run, None)


def test_publish_without_a_key_is_refused_before_the_run(tmp_path: Path) -> None:
    problems = _problems(tmp_path)
    ktl = Ktl(tmp_path / "home")
    res = ktl("suite", "run", str(problems), str(problems), "--publish", "--out",
              str(tmp_path / "o"))
    assert res.exit_code == 2 and "--publish needs --key" in res.stderr
    assert not (tmp_path / "o").exists()
    res = ktl("suite", "publish", str(tmp_path / "o"), "--problems", str(problems))
    assert res.exit_code == 2 and "--key is required" in res.stderr


def test_a_kernel_not_named_for_its_problem_is_refused_before_it_is_logged(
        tmp_path: Path) -> None:
    problems, out = _finished_run(tmp_path)
    toml = out / "kernels" / "level1__1_Add" / "kernel.toml"
    toml.write_text(toml.read_text().replace(kernel_name_of(KEYS[0]), "local/1_add"))
    key_path = tmp_path / "vendor.key"
    save_private_key(key_path, generate_private_key())
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "log") as url:
        res = ktl("suite", "publish", str(out), "--problems", str(problems), "--key",
                  str(key_path), "--log", url)
        assert res.exit_code == 2 and "is named 'local/1_add'" in res.stderr
        assert ktl.json("log-info", "--log", url)["tree_size"] == 0

"""Issue 11's four attacks, each tried through the real server on 127.0.0.1 and the real `ktl`.

1. the URL that served log A serves log B (new origin and key): refused, evidence saved;
2. a stranger's two-subject claim naming the victim's digest: skipped, not fatal;
3. an entry under a small-order key with the signature (identity, 0): refused;
4. blob abuse: see tests/test_ledger_blobs.py and tests/test_ledger_serve.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
import requests
from client_server import Ktl, kernel_folder, running_log
from ledger_support import entry_bytes
from weak_keys import SMALL_ORDER, forged_entry

from attest import examples, make_entry, parse_predicate
from attest.entry import encode_entry
from attest.keys import generate_private_key, save_private_key
from attest.predicates import VERIFICATION_V1
from attest.statement import Statement, Subject
from ledger.tlog.note import verifier_key_string

JSON = {"Content-Type": "application/json"}


def _post(url: str, data: bytes) -> requests.Response:
    return requests.post(f"{url}/api/v1/entries", data=data, headers=JSON, timeout=30)


def test_attack1_another_log_at_a_pinned_url_is_refused(tmp_path: Path) -> None:
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "a", origin="example.org/kernels") as url:
        assert _post(url, entry_bytes(0)).status_code == 201
        first = ktl("get", "--index", "0", "--log", url)
        assert first.exit_code == 0, first.stderr
        key_a = ktl.json("log-info", "--log", url)["verifier_key"]
    port = int(url.rsplit(":", 1)[1])
    with running_log(tmp_path / "b", origin="example.org/kernels/v2", port=port) as url_b:
        assert url_b == url
        assert _post(url, entry_bytes(7, "evil/forged")).status_code == 201
        res = ktl("get", "--index", "0", "--log", url)
        assert res.exit_code == 1, res.stdout
        assert "PIN MISMATCH" in res.stderr and "example.org/kernels/v2" in res.stderr
        evidence = list((tmp_path / "home" / "evidence").glob("*pin-mismatch*"))
        assert len(evidence) == 1
        key_b = requests.get(f"{url}/api/v1/log", timeout=10).json()["verifier_key"]
        # --log-key with log B's key neither passes nor replaces the pin
        res = ktl("get", "--index", "0", "--log", url, "--log-key", key_b)
        assert res.exit_code == 1 and "PIN MISMATCH" in res.stderr
        pins = ktl.json("trust", "list")["pins"]
        assert [(p["url"], p["origin"], p["log_key"]) for p in pins] == [
            (url, "example.org/kernels", key_a)]
        shown = ktl("trust", "list")
        assert shown.exit_code == 0 and "example.org/kernels" in shown.stdout
        assert "tofu" in shown.stdout
        # only after `ktl trust forget` is the new log trusted (on first use, and said so)
        forgot = ktl.json("trust", "forget", url + "/")
        assert forgot["forgotten"]["origin"] == "example.org/kernels"
        assert forgot["checkpoint_dropped"] is True
        res = ktl("get", "--index", "0", "--log", url)
        assert res.exit_code == 0 and "FIRST USE" in res.stderr
        res = ktl("trust", "forget", url)
        assert res.exit_code == 0
        assert ktl("trust", "forget", url).exit_code == 2  # nothing pinned any more


def test_attack1_a_new_key_under_the_same_origin_is_refused(tmp_path: Path) -> None:
    ktl = Ktl(tmp_path / "home")
    with running_log(tmp_path / "a", origin="example.org/kernels") as url:
        assert _post(url, entry_bytes(0)).status_code == 201
        assert ktl("log-info", "--log", url).exit_code == 0
    port = int(url.rsplit(":", 1)[1])
    with running_log(tmp_path / "b", origin="example.org/kernels", port=port):
        assert _post(url, entry_bytes(1)).status_code == 201
        res = ktl("log-info", "--log", url)
        assert res.exit_code == 1
        assert "PIN MISMATCH" in res.stderr and "announces key" in res.stderr


@pytest.mark.slow
def test_attack2_a_strangers_claim_cannot_block_reproduction(tmp_path: Path) -> None:
    key = tmp_path / "vendor.key"
    save_private_key(key, generate_private_key())
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"verification": examples.verification()}))
    kdir = kernel_folder(tmp_path)
    vendor, auditor = Ktl(tmp_path / "vendor"), Ktl(tmp_path / "auditor")
    with running_log(tmp_path / "log") as url:
        vendor.json("publish", str(kdir), "--key", str(key), "--results", str(results),
                    "--log", url)
        digest = auditor.json("get", "--index", "0", "--log", url)["subject_sha256"]
        body = examples.verification()
        body["verdict"] = "fail"
        stmt = Statement.from_json(Statement(
            subjects=(Subject("evil/x", "ab" * 32), Subject("acme/matmul-blocked", digest)),
            predicate_type=VERIFICATION_V1,
            predicate=parse_predicate(VERIFICATION_V1, body)).to_json())
        r = _post(url, encode_entry(make_entry(stmt, [generate_private_key()])))
        assert r.status_code == 201, r.text
        evil = r.json()["index"]
        res = auditor("reproduce", "--index", "0", "--log", url, "--json")
        assert res.exit_code == 0, (res.stdout, res.stderr)
        out = json.loads(res.stdout)
        assert out["reproduction"]["verdict"] == "confirmed"
        search = out["claim_search"]
        assert [(s["index"], s["reason"]) for s in search["skipped"]] == [
            (evil, "untrusted-signer")]
        assert search["complete"] is True
        assert "1 entry about this digest skipped" in res.stderr


def test_attack3_a_small_order_key_is_refused_by_the_log_and_by_ktl(tmp_path: Path) -> None:
    raw = SMALL_ORDER["order 1 (identity, y=1)"]
    with running_log(tmp_path / "log") as url:
        r = _post(url, forged_entry(raw))
        assert r.status_code == 422, r.text  # a rule JSON Schema cannot state (openapi.json)
        assert "small order" in r.json()["error"]["message"]
        assert requests.get(f"{url}/api/v1/log", timeout=10).json()["tree_size"] == 0
    ktl = Ktl(tmp_path / "home")
    weak_log_key = verifier_key_string("127.0.0.1/ktl-test", raw)
    res = ktl("log-info", "--log", url, "--log-key", weak_log_key)
    assert res.exit_code == 2 and "small order" in res.stderr
    spki = bytes.fromhex("302a300506032b6570032100") + SMALL_ORDER["order 8 (y=0x7a03…)"]
    (tmp_path / "weak.pub").write_bytes(b"-----BEGIN PUBLIC KEY-----\n" + base64.encodebytes(spki)
                                        + b"-----END PUBLIC KEY-----\n")
    (tmp_path / "policy.toml").write_text(
        'version = 1\n[[rule]]\nname = "r"\nkernel = "*"\npredicate_types = ["*"]\n'
        'key_files = ["weak.pub"]\nthreshold = 1\n')
    res = ktl("monitor", "--log", "http://127.0.0.1:9", "--policy", str(tmp_path / "policy.toml"))
    assert res.exit_code == 2 and "small order" in res.stderr
    assert hashlib.sha256(raw).hexdigest()  # the keyid an attacker would have claimed

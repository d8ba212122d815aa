"""Witnesses end to end, all real processes on 127.0.0.1: two `ktl witness serve`, a `ktl serve`
with a 2-of-2 policy, the real `ktl`; a witness that goes down; a forked copy of the log."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
import requests
from client_server import Ktl, kernel_folder, small_results
from ledger_support import entry_bytes
from witness_support import free_port, log_process, witness_process

from ledger.server import load_or_create_signer
from ledger.storage import SqliteStorage
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.merkle import EMPTY_ROOT
from ledger.tlog.note import NoteVerifier
from ledger.tlog.witness import encode_add_checkpoint
from ledger.tlog.witness_policy import WitnessPolicy, check_quorum
from ledger.witness_server import load_or_create_witness_key

ORIGIN = "127.0.0.1/witnessed-log"


def _checkpoint(base: str, verifier: NoteVerifier, at_least: int, wait: float = 20.0) -> bytes:
    """The log's published checkpoint once it covers `at_least` entries."""
    deadline = time.monotonic() + wait
    while True:
        r = requests.get(f"{base}/checkpoint", timeout=5)
        if r.status_code == 200 and open_checkpoint(r.content, verifier).checkpoint.size >= at_least:
            return r.content
        assert time.monotonic() < deadline, (r.status_code, r.text)
        time.sleep(0.1)


def _submit(base: str, i: int, name: str = "acme/matmul") -> requests.Response:
    return requests.post(f"{base}/api/v1/entries", data=entry_bytes(i, name), timeout=30,
                         headers={"Content-Type": "application/json"})


@pytest.mark.slow
def test_witnessed_log_end_to_end(tmp_path: Path) -> None:
    ktl = Ktl(tmp_path / "home")
    w1d, w2d, logd = tmp_path / "w1", tmp_path / "w2", tmp_path / "log"
    k1 = load_or_create_witness_key(w1d, "w1.test/witness").verifier_key_string()
    k2 = load_or_create_witness_key(w2d, "w2.test/witness").verifier_key_string()
    k3 = load_or_create_witness_key(tmp_path / "w3", "w3.test/witness").verifier_key_string()
    log_vkey = load_or_create_signer(logd, ORIGIN).verifier_key_string()
    verifier = NoteVerifier.from_key_string(log_vkey)
    for d in (w1d, w2d):
        res = ktl("witness", "add-log", "--data", str(d), "--origin", ORIGIN, "--log-key", log_vkey)
        assert res.exit_code == 0, res.stderr
    p1, p2 = free_port(), free_port()
    policy = tmp_path / "witnesses.policy"
    policy.write_text(f"# both must cosign\nwitness w1 {k1} http://127.0.0.1:{p1}\n"
                      f"witness w2 {k2} http://127.0.0.1:{p2}\ngroup both all w1 w2\n"
                      "quorum both\n")
    three = tmp_path / "three.policy"
    three.write_text(f"witness w1 {k1}\nwitness w2 {k2}\nwitness w3 {k3}\n"
                     "group all3 all w1 w2 w3\nquorum all3\n")
    serve_args = ("--witness-policy", str(policy), "--witness-wait", "2")
    parsed = WitnessPolicy.parse(policy.read_text())

    with witness_process(w1d, "w1.test/witness", p1), \
            witness_process(w2d, "w2.test/witness", p2) as (w2, _, _):
        with log_process(logd, *serve_args) as (_, base, _):
            # a new log's size-0 checkpoint, cosigned by both, is served at once
            cp0 = open_checkpoint(_checkpoint(base, verifier, 0), verifier)
            assert (cp0.checkpoint.size, cp0.checkpoint.root_hash) == (0, EMPTY_ROOT)
            assert check_quorum(cp0, verifier, parsed).signed == ("w1", "w2")

            kdir = kernel_folder(tmp_path)
            env = {"KTL_LOG": base, "KTL_WITNESS_POLICY": str(policy)}
            res = ktl("publish", str(kdir), "--key", str(_key(ktl, tmp_path)), "--results",
                      str(small_results(tmp_path)), "--log-key", log_vkey, env=env)
            assert res.exit_code == 0, (res.stdout, res.stderr)
            receipt = kdir / ".ktl" / "receipts" / "benchmark.tlog-proof"
            res = ktl("verify", str(receipt), "--log-key", log_vkey, "--witness-policy",
                      str(policy), "--json")
            assert res.exit_code == 0, res.stderr
            assert "quorum 'both' met" in json.loads(res.stdout)["notes"][0]
            # offline against a policy the receipt cannot meet: refused, naming who is missing
            res = ktl("verify", str(receipt), "--log-key", log_vkey, "--witness-policy", str(three))
            assert res.exit_code == 1 and "missing w3" in res.stderr, res.stderr
            info = ktl.json("log-info", "--log", base, "--witness-policy", str(policy))
            assert info["witnesses"]["signed"] == ["w1", "w2"] and info["tree_size"] == 3
            res = Ktl(tmp_path / "home3")("log-info", "--log", base, "--witness-policy",
                                          str(three), "--log-key", log_vkey)
            assert res.exit_code == 1 and "missing w3" in res.stderr
            # get and monitor enforce it the same way (the one trust path)
            assert ktl("get", "--index", "0", "--log", base, env=env).exit_code == 0
            for cmd in (["get", "--index", "0"], ["monitor"]):
                res = ktl(*cmd, "--log", base, env={"KTL_WITNESS_POLICY": str(three)})
                assert res.exit_code == 1 and "missing w3" in res.stderr, (cmd, res.stderr)

            # witness 2 goes down: a submission waits, then 503 naming its index; nothing lost
            os.killpg(w2.pid, signal.SIGKILL)
            w2.wait(10)
            r = _submit(base, 100)
            assert r.status_code == 503 and r.json()["error"]["code"] == "not_witnessed", r.text
            assert "sequenced at index 3" in r.json()["error"]["message"]
            assert open_checkpoint(_checkpoint(base, verifier, 3), verifier).checkpoint.size == 3
            with witness_process(w2d, "w2.test/witness", p2):
                # once it is back the log publishes the checkpoint by itself (retry, backoff)
                _checkpoint(base, verifier, 4)
                r = _submit(base, 100)  # the same entry again: its receipt, now witnessed
                assert r.status_code in (200, 201), r.text
                assert r.json()["index"] == 3 and r.json()["tree_size"] >= 4
                cp = open_checkpoint(r.json()["checkpoint"].encode(), verifier)
                assert check_quorum(cp, verifier, parsed).met
        # --- a fork: a copy of the data folder that grows differently
        shutil.copytree(logd, tmp_path / "fork")
        with witness_process(w2d, "w2.test/witness", p2):
            with log_process(logd, *serve_args) as (_, base, _):
                assert _submit(base, 200).status_code in (200, 201)  # the log goes on: size 5
            with log_process(tmp_path / "fork", *serve_args) as (_, fork, _):
                r = _submit(fork, 300, "evil/matmul")  # the fork's entry 4 differs
                assert r.status_code == 503, r.text
                assert open_checkpoint(_checkpoint(fork, verifier, 4), verifier
                                       ).checkpoint.size == 4  # never published
    # a witness restarted from its data still refuses the fork's checkpoint
    forked = SqliteStorage(tmp_path / "fork").latest_checkpoint()
    assert forked is not None and forked.size == 5
    with witness_process(w1d, "w1.test/witness", p1) as (_, wbase, _):
        r = requests.post(f"{wbase}/add-checkpoint", timeout=10,
                          data=encode_add_checkpoint(5, [], forked.note))
        assert r.status_code == 422, r.text
        r = requests.post(f"{wbase}/add-checkpoint", timeout=10,
                          data=encode_add_checkpoint(4, [], forked.note))
        assert (r.status_code, r.text) == (409, "5\n")


def _key(ktl: Ktl, tmp: Path) -> Path:
    path = tmp / "acme.key"
    if not path.exists():
        assert ktl("keygen", "--out", str(path)).exit_code == 0
    return path

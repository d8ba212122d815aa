"""Runs docs/witnesses.md's walkthrough literally: two real `ktl witness serve`
processes, a log with the page's policy (2-of-2), and every `$ ktl ...` line of its
console block through the real `ktl`; each must exit 0."""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import time
from pathlib import Path

import pytest
import requests
from client_server import ORIGIN, Ktl, kernel_folder, running_log, small_results
from witness_support import free_port, witness_process

from ledger.server import load_or_create_signer
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.note import NoteVerifier
from ledger.tlog.witness_policy import WitnessPolicy
from ledger.witness_store import WitnessStore, make_log

DOC = Path(__file__).resolve().parent.parent / "docs" / "witnesses.md"
TITLE = "# Witnesses"
BLOCK = re.compile(r"```(console|text)\n(.*?)```", re.S)


def _blocks() -> dict[str, str]:
    text = DOC.read_text()
    assert text.startswith(TITLE + "\n")
    return {m.group(1): m.group(2) for m in BLOCK.finditer(text)}


def test_the_policy_example_parses_once_keys_are_filled_in() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ledger.tlog.cosignature import CosignatureSigner

    text = _blocks()["text"]
    for n in (1, 2):
        key = CosignatureSigner(f"w{n}.example/witness", Ed25519PrivateKey.generate())
        text = text.replace(f"<w{n} key>", key.verifier_key_string())
    policy = WitnessPolicy.parse(text)
    assert policy.quorum == "both" and [w.url for w in policy.witnesses] == [
        "http://127.0.0.1:8091", "http://127.0.0.1:8092"]


@pytest.mark.slow
def test_witnesses_walkthrough_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(kernel_folder(tmp_path / "src"), work / "matmul-blocked")
    shutil.copy(small_results(tmp_path), work / "results.json")
    monkeypatch.chdir(work)
    ktl = Ktl(tmp_path / "home")
    assert ktl("keygen", "--out", "acme.key").exit_code == 0
    log_key = load_or_create_signer(tmp_path / "log", ORIGIN).verifier_key_string()
    ports = {8091: free_port(), 8092: free_port()}
    WitnessStore(work / "w2").add_log(make_log(ORIGIN, [log_key]))  # w2 as w1 in the page
    with contextlib.ExitStack() as stack:
        keys = {}
        for n, port in ((1, 8091), (2, 8092)):
            _, _, keys[n] = stack.enter_context(
                witness_process(work / f"w{n}", f"w{n}.example/witness", ports[port]))
        text = _blocks()["text"]
        for n, port in ((1, 8091), (2, 8092)):
            text = text.replace(f"<w{n} key>", keys[n]).replace(f":{port}", f":{ports[port]}")
        (work / "witnesses.policy").write_text(text)
        url = ""
        ran = 0
        for line in _blocks()["console"].splitlines():
            assert line.startswith("$ "), line
            args = shlex.split(line[2:].replace("$LOG_KEY", log_key))
            assert args[0] == "ktl", line
            if args[1] != "witness" and not url:  # the log starts once w1 knows it
                url = stack.enter_context(running_log(
                    tmp_path / "log", witness_policy=str(work / "witnesses.policy")))
                _published(url, NoteVerifier.from_key_string(log_key))
            res = ktl(*args[1:], env={"KTL_LOG": url})
            assert res.exit_code == 0, (line, res.stdout, res.stderr)
            if args[1:3] == ["witness", "key"]:
                assert res.stdout.strip().splitlines()[-1] == keys[1]
            ran += 1
        assert ran == 6
        # the explorer's home page names each witness that cosigned, with its key ID
        page = requests.get(f"{url}/", timeout=10).text
        for n in (1, 2):
            key_id = keys[n].split("+")[1]
            assert f"w{n}.example/witness" in page and key_id in page


def _published(url: str, verifier: NoteVerifier, wait: float = 20.0) -> None:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        r = requests.get(f"{url}/checkpoint", timeout=5)
        if r.status_code == 200:
            open_checkpoint(r.content, verifier)
            return
        time.sleep(0.05)
    raise AssertionError("the log never published its witnessed size-0 checkpoint")

"""End to end through the real log server on 127.0.0.1 and the real `ktl` command.

publish -> verify offline with the server stopped -> tamper with one byte of
receipt, entry or source (each fails with its own message); rollback and fork
(a copied data folder served in place of the log) caught by `verify --log` and
by `monitor`; wrong log key, an inclusion proof for another tree size and a
truncated tile rejected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from client_server import Ktl, copy_log, kernel_folder, running_log, small_results

from attest.keys import generate_private_key, keyid, save_private_key, save_public_key
from client import VerificationFailed
from client.api import LogClient
from client.monitor import run_monitor
from client.session import connect
from client.state import TrustedState
from ledger.tlog.proof_bundle import TlogProof

RECEIPTS = Path(".ktl/receipts")


@dataclass
class World:
    tmp: Path
    ktl: Ktl
    data: Path
    key: Path
    keyid: str
    log_key: str
    results: Path


def _vendor_key(tmp: Path, name: str) -> tuple[Path, str]:
    key = generate_private_key()
    path = tmp / f"{name}.key"
    save_private_key(path, key)
    save_public_key(tmp / f"{name}.key.pub", key.public_key())
    return path, keyid(key.public_key())


def _publish(w: World, url: str, kdir: Path, key: Path | None = None) -> dict[str, object]:
    out: dict[str, object] = w.ktl.json("publish", str(kdir), "--key", str(key or w.key),
                                        "--results", str(w.results), "--log", url)
    return out


@pytest.fixture
def world(tmp_path: Path) -> World:
    key, kid = _vendor_key(tmp_path, "vendor")
    ktl = Ktl(tmp_path / "home")
    data = tmp_path / "log"
    with running_log(data) as url:
        log_key = ktl.json("log-info", "--log", url)["verifier_key"]
    return World(tmp_path, ktl, data, key, kid, log_key, small_results(tmp_path))


def test_publish_then_verify_offline_and_tamper(world: World) -> None:
    kdir = kernel_folder(world.tmp)
    with running_log(world.data) as url:
        report = _publish(world, url, kdir)
    entries = report["entries"]
    assert isinstance(entries, list)
    assert [e["kind"] for e in entries] == ["kernel", "verification", "benchmark"]
    # server stopped: everything below is offline
    rdir = kdir / RECEIPTS
    for kind in ("kernel", "verification", "benchmark"):
        got = world.ktl.json("verify", str(rdir / f"{kind}.tlog-proof"), "--log-key",
                             world.log_key, "--source", str(kdir))
        assert got["subject_name"] == "acme/matmul-blocked"
        assert got["signer_keyids"] == [world.keyid]
        assert got["source"].endswith(got["subject_sha256"])
    proof = rdir / "kernel.tlog-proof"
    entry = rdir / "kernel.entry.json"

    def fails(*extra: str) -> str:
        res = world.ktl("verify", str(proof), "--log-key", world.log_key, *extra)
        assert res.exit_code == 1, (res.stdout, res.stderr)
        return res.stderr

    # one byte of the entry: its leaf hash no longer has an inclusion proof
    good_entry = entry.read_bytes()
    i = good_entry.index(b'"payload":"') + 20
    entry.write_bytes(good_entry[:i] + bytes([good_entry[i] ^ 0x01]) + good_entry[i + 1:])
    assert "inclusion proof" in fails()
    entry.write_bytes(good_entry)
    # one byte of the receipt's checkpoint: the signature fails
    good_proof = proof.read_bytes()
    root_line = good_proof.split(b"\n\n", 1)[1].split(b"\n")[2]
    bad = good_proof.replace(root_line, root_line[:5] + (b"A" if root_line[5:6] != b"A" else b"B")
                             + root_line[6:])
    proof.write_bytes(bad)
    assert "checkpoint signature" in fails()
    # a byte of the receipt's index line: the inclusion proof no longer matches
    proof.write_bytes(good_proof.replace(b"index 0", b"index 1"))
    assert "inclusion proof" in fails()
    proof.write_bytes(good_proof)
    # one byte of the source
    src = kdir / "matmul.c"
    src.write_bytes(src.read_bytes() + b" ")
    assert "source digest" in fails("--source", str(kdir))
    assert "source digest" in fails("--source", str(src))
    # the wrong log key
    other = Ktl(world.tmp / "other-home")
    with running_log(world.tmp / "other-log") as url2:
        wrong_key = other.json("log-info", "--log", url2)["verifier_key"]
    res = world.ktl("verify", str(proof), "--log-key", wrong_key)
    assert res.exit_code == 1 and "checkpoint signature" in res.stderr
    # a witness the auditor requires never cosigned this checkpoint
    from ledger.tlog.cosignature import CosignatureSigner

    witness = CosignatureSigner("witness.example/w", generate_private_key())
    assert "witness cosignatures" in fails("--witness", witness.verifier_key_string())
    # an inclusion proof for another tree size: the kernel's proof under the size-3 checkpoint
    parsed = TlogProof.from_text(good_proof)
    later = TlogProof.from_text((rdir / "benchmark.tlog-proof").read_bytes())
    proof.write_text(TlogProof(parsed.index, parsed.hashes, later.checkpoint).to_text())
    assert "inclusion proof" in fails()
    proof.write_bytes(good_proof)


def test_policy_allows_vendor_and_rejects_others(world: World) -> None:
    kdir = kernel_folder(world.tmp)
    mallory, _ = _vendor_key(world.tmp, "mallory")
    evil = kernel_folder(world.tmp / "evil", version="6.6.6")
    with running_log(world.data) as url:
        _publish(world, url, kdir)
        _publish(world, url, evil, key=mallory)
        policy = world.tmp / "policy.toml"
        policy.write_text(
            'version = 1\n[[rule]]\nname = "acme"\nkernel = "acme/*"\n'
            'predicate_types = ["*"]\nkey_files = ["vendor.key.pub"]\nthreshold = 1\n')
        ok = world.ktl.json("verify", str(kdir / RECEIPTS / "kernel.tlog-proof"), "--log-key",
                            world.log_key, "--policy", str(policy))
        assert "acme" in ok["policy"]
        res = world.ktl("verify", str(evil / RECEIPTS / "kernel.tlog-proof"), "--log-key",
                        world.log_key, "--policy", str(policy))
        assert res.exit_code == 1 and "policy" in res.stderr
        mon = world.ktl("monitor", "--log", url, "--policy", str(policy), "--json")
        assert mon.exit_code == 1, mon.stderr
        report = json.loads(mon.stdout)
        assert report["violations"] == 3  # mallory's kernel, verification, benchmark
        assert {f["index"] for f in report["findings"] if f["kind"] == "violation"} == {3, 4, 5}
        releases = [f for f in report["findings"] if f["kind"] == "release"]
        assert [r["detail"].split()[1] for r in releases] == ["1.0.0", "6.6.6"]


def test_get_search_log_info(world: World) -> None:
    kdir = kernel_folder(world.tmp)
    with running_log(world.data) as url:
        report = _publish(world, url, kdir)
        digest = report["subject_sha256"]
        found = world.ktl.json("search", "--digest", str(digest), "--log", url)["results"]
        assert [r["index"] for r in found] == [0, 1, 2]
        assert [r["index"] for r in world.ktl.json(
            "search", "--name", "acme/matmul-blocked", "--type", "benchmark",
            "--log", url)["results"]] == [2]
        by_key = world.ktl.json("search", "--key", str(world.key) + ".pub", "--log", url)
        assert len(by_key["results"]) == 3
        out = world.tmp / "bench.entry.json"
        got = world.ktl.json("get", "--index", "2", "--out", str(out), "--log", url)
        assert got["predicate_type"].endswith("/benchmark/v1")
        info = world.ktl.json("log-info", "--log", url)
        assert info["tree_size"] == 3 and info["consistency"] == "same"
    # the receipt `get` saved verifies offline
    world.ktl.json("verify", str(world.tmp / "bench.tlog-proof"), "--log-key", world.log_key)
    assert out.read_bytes() == (kdir / RECEIPTS / "benchmark.entry.json").read_bytes()


def test_monitor_reports_releases_and_resumes(world: World) -> None:
    with running_log(world.data) as url:
        _publish(world, url, kernel_folder(world.tmp))
        first = world.ktl.json("monitor", "--log", url)
        assert first["entries_checked"] == 3 and first["violations"] == 0
        assert [f["name"] for f in first["findings"]] == ["acme/matmul-blocked"]
        _publish(world, url, kernel_folder(world.tmp / "v2", version="2.0.0"))
        second = world.ktl.json("monitor", "--log", url)
        assert (second["start_index"], second["entries_checked"]) == (3, 3)
        assert second["findings"][0]["detail"].startswith("acme/matmul-blocked 2.0.0")
        again = world.ktl.json("monitor", "--log", url, "--since", "0")
        assert again["entries_checked"] == 6



def test_monitor_follow_sees_what_is_logged_between_passes(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    import client.monitor as cmd

    with running_log(world.data) as url:
        _publish(world, url, kernel_folder(world.tmp))
        waits: list[float] = []

        def between_passes(seconds: float) -> None:  # instead of sleeping: a new release
            waits.append(seconds)
            _publish(world, url, kernel_folder(world.tmp / "v2", version="2.0.0"))

        monkeypatch.setattr(cmd.time, "sleep", between_passes)
        res = world.ktl("monitor", "--log", url, "--follow", "--interval", "5", "--passes", "2",
                        "--json")
        assert res.exit_code == 0, res.stderr
        first, second = (json.loads(line) for line in res.stdout.splitlines())
        assert waits == [5.0]
        assert (first["start_index"], first["entries_checked"]) == (0, 3)
        assert (second["start_index"], second["entries_checked"]) == (3, 3)
        assert second["findings"][0]["detail"].startswith("acme/matmul-blocked 2.0.0")
        res = world.ktl("monitor", "--log", url, "--passes", "2")
        assert res.exit_code == 2 and "--passes goes with --follow" in res.stderr

def _diverge(world: World) -> tuple[Path, Path]:
    """The honest log at size 6 (trusted), a rolled-back copy at size 3, a fork of size 6."""
    with running_log(world.data) as url:
        _publish(world, url, kernel_folder(world.tmp / "a"))
    old = copy_log(world.data, world.tmp / "log-old")
    fork = copy_log(world.data, world.tmp / "log-fork")
    with running_log(world.data) as url:
        _publish(world, url, kernel_folder(world.tmp / "b", version="2.0.0"))
    # the fork: same key, same first 3 entries, a different 2.0.0
    elsewhere = Ktl(world.tmp / "fork-home")
    with running_log(fork) as furl:
        elsewhere.json("publish", str(kernel_folder(world.tmp / "c", version="2.0.0-evil")),
                       "--key", str(world.key), "--results", str(world.results), "--log", furl)
    return old, fork


def test_rollback_and_fork_detected_by_verify_and_monitor(world: World) -> None:
    old, fork = _diverge(world)
    receipt = world.tmp / "b" / "acme_matmul-blocked" / "2.0.0" / RECEIPTS / "kernel.tlog-proof"
    # a fresh auditor (no trusted state) with only the receipt: verify --log catches both
    auditor = Ktl(world.tmp / "auditor")
    with running_log(old) as url:
        res = auditor("verify", str(receipt), "--log-key", world.log_key, "--log", url)
        assert res.exit_code == 1 and "ROLLBACK" in res.stderr, res.stderr
        evidence = Path(res.stderr.split("Evidence: ")[1].split()[0].rstrip("."))
        assert evidence.exists() and b"CONFLICTING CHECKPOINT" in evidence.read_bytes()
    with running_log(fork) as url:
        res = auditor("verify", str(receipt), "--log-key", world.log_key, "--log", url)
        assert res.exit_code == 1 and "FORK" in res.stderr, res.stderr
        # the vendor's monitor (trusted state at size 6 of the honest log) catches the fork
        res = world.ktl("monitor", "--log", url)
        assert res.exit_code == 1 and "FORK" in res.stderr, res.stderr
    with running_log(old) as url:
        res = world.ktl("monitor", "--log", url)
        assert res.exit_code == 1 and "ROLLBACK" in res.stderr, res.stderr
    # the honest log still verifies and is consistent (nothing failed was trusted)
    with running_log(world.data) as url:
        ok = auditor.json("verify", str(receipt), "--log-key", world.log_key, "--log", url)
        assert ok["consistent_with"] == 6


class TruncatingLog(LogClient):
    """The real server's answers, with one tile cut short by a byte on the way."""

    def __init__(self, url: str, victim: str) -> None:
        super().__init__(url)
        self.victim = victim

    def tile(self, path: str) -> bytes:
        data = super().tile(path)
        return data[:-1] if path.startswith(self.victim) else data


@pytest.mark.parametrize("victim", ["tile/0/", "tile/entries/"])
def test_truncated_tile_rejected_by_monitor(world: World, victim: str) -> None:
    trusted = TrustedState(world.tmp / "monitor-home")
    with running_log(world.data) as url:
        _publish(world, url, kernel_folder(world.tmp))
        log = TruncatingLog(url, victim)
        with pytest.raises(VerificationFailed, match="tile"):
            run_monitor(connect(log, trusted, world.log_key), world.tmp / "m.json")
        log.close()


def test_corrupted_tile_rejected_by_monitor(world: World) -> None:
    with running_log(world.data) as url:
        _publish(world, url, kernel_folder(world.tmp))
        tiles = sorted(p for p in (world.data / "tiles").rglob("*") if p.is_file()
                       and "/tile/0/" in p.as_posix())
        assert tiles, "the server wrote no level-0 tile files"
        # a log that serves a tile with one flipped bit (same length) is caught by the client
        log = FlippingLog(url, "tile/0/")
        with pytest.raises(VerificationFailed, match="tile"):
            run_monitor(connect(log, TrustedState(world.tmp / "flip-home"), world.log_key),
                        world.tmp / "f.json")
        log.close()
        # stored tiles with a flipped bit: the server refuses to serve them (issue 26 row 8)
        for t in tiles:
            data = t.read_bytes()
            t.write_bytes(bytes([data[0] ^ 1]) + data[1:])
        res = world.ktl("monitor", "--log", url)
    assert res.exit_code == 3 and "corrupt_storage" in res.stderr, res.stderr


class FlippingLog(LogClient):
    """The real server's answers, with one bit of a tile flipped on the way."""

    def __init__(self, url: str, victim: str) -> None:
        super().__init__(url)
        self.victim = victim

    def tile(self, path: str) -> bytes:
        data = super().tile(path)
        return bytes([data[0] ^ 1]) + data[1:] if path.startswith(self.victim) else data


def test_exit_codes_for_usage_and_network(world: World, tmp_path: Path) -> None:
    res = world.ktl("log-info")
    assert res.exit_code == 2 and "--log" in res.stderr
    res = world.ktl("log-info", "--log", "http://127.0.0.1:9")
    assert res.exit_code == 3, res.stderr
    res = world.ktl("verify", str(tmp_path / "missing.tlog-proof"), "--log-key", world.log_key)
    assert res.exit_code == 2 and "does not exist" in res.stderr
    res = world.ktl("verify", str(tmp_path / "missing.tlog-proof"))
    assert res.exit_code == 2 and "--log-key" in res.stderr


def test_publish_from_separate_check_and_bench_outputs(world: World) -> None:
    prepared = json.loads(world.results.read_text())
    (world.tmp / "check.json").write_text(json.dumps(prepared["verification"]))
    (world.tmp / "bench.json").write_text(json.dumps(prepared["benchmark"]))
    (world.tmp / "samples.json").write_text(prepared["samples"])
    kdir = kernel_folder(world.tmp)
    args = ["publish", str(kdir), "--key", str(world.key), "--verification",
            str(world.tmp / "check.json"), "--benchmark", str(world.tmp / "bench.json")]
    with running_log(world.data) as url:
        res = world.ktl(*args, "--results", str(world.results), "--log", url)
        assert res.exit_code == 2 and "either --results" in res.stderr
        (world.tmp / "other-samples.json").write_text("[1]")
        res = world.ktl(*args, "--samples", str(world.tmp / "other-samples.json"), "--log", url)
        assert res.exit_code == 2 and "not the ones the benchmark names" in res.stderr
        report = world.ktl.json(*args, "--samples", str(world.tmp / "samples.json"), "--log", url)
    assert [e["kind"] for e in report["entries"]] == ["kernel", "verification", "benchmark"]

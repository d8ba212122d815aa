"""Witness figures, all on 127.0.0.1 in one run: checkpoint publication latency with 0, 1 and
2 witnesses, and a witness's add-checkpoint throughput against a bare Flask baseline.

    .venv/bin/python benchmarks/bench_witness.py [--submits 100] [--seconds 3] [--clients 8] [--tiny]

1. Latency: `ktl serve` (gunicorn, 2 workers) with no witness policy, then with a policy of
   one and of two `ktl witness serve` processes (quorum: all). One client submits
   --submits distinct entries one after another; each answer carries a checkpoint that
   met the quorum, so its latency is sequencing + cosigning + publishing. p50/p99 in ms.
2. Throughput: --clients threads, each growing its own log (one origin per thread, as
   add-checkpoint requests for one origin are sequential by nature), send prepared
   add-checkpoint requests (one new entry each, a real consistency proof) to one witness
   process for --seconds; every answer must be a 200 cosignature. Baseline: the same
   gunicorn settings (1 worker, gthread, 16 threads) serving a Flask view that reads the
   body and answers a constant line, hit the same way.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if sys.path and Path(sys.path[0] or ".").resolve() == _HERE:
    sys.path[0] = str(_HERE.parent)
sys.path.insert(1, str(_HERE.parent / "tests"))

import requests  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from ledger.server import load_or_create_signer  # noqa: E402
from ledger.witness_server import load_or_create_witness_key  # noqa: E402
from ledger.witness_store import WitnessStore, make_log  # noqa: E402

KTL = [sys.executable, "-c", "from client.cli import main; main()"]
ORIGIN = "127.0.0.1/bench-witnessed"


@contextmanager
def process(args: list[str]) -> Iterator[str]:
    """A serving `ktl` command; yields its base URL."""
    proc = subprocess.Popen([*KTL, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, cwd=_HERE.parent, start_new_session=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("serving on "):
                threading.Thread(target=proc.stdout.read, daemon=True).start()
                yield line.split()[-1]
                return
        raise RuntimeError(f"{args[0]} did not start")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def latency(tmp: Path, n_witnesses: int, submits: int) -> list[float]:
    """Submit latencies (s) against a log whose policy names `n_witnesses` (0: no policy)."""
    from ledger_support import entry_bytes

    data = tmp / f"log{n_witnesses}"
    log_key = load_or_create_signer(data, ORIGIN).verifier_key_string()
    with ExitStack() as stack:
        args = ["serve", "--data", str(data), "--port", "0", "--workers", "2",
                "--batch-delay-ms", "1", "--rate", "1000000"]
        if n_witnesses:
            lines = []
            for i in range(n_witnesses):
                wd = tmp / f"w{n_witnesses}-{i}"
                key = load_or_create_witness_key(wd, f"w{i}.bench/witness")
                WitnessStore(wd).add_log(make_log(ORIGIN, [log_key]))
                port = free_port()
                stack.enter_context(process(["witness", "serve", "--data", str(wd),
                                             "--port", str(port)]))
                lines.append(f"witness w{i} {key.verifier_key_string()} http://127.0.0.1:{port}")
            names = " ".join(f"w{i}" for i in range(n_witnesses))
            policy = tmp / f"policy{n_witnesses}"
            policy.write_text("\n".join(lines) + f"\ngroup q all {names}\nquorum q\n")
            args += ["--witness-policy", str(policy)]
        base = stack.enter_context(process(args))
        session = requests.Session()
        deadline = time.monotonic() + 30
        while session.get(f"{base}/checkpoint", timeout=5).status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("the log never published its size-0 checkpoint")
            time.sleep(0.05)
        out = []
        for i in range(submits):
            body = entry_bytes(10_000 * n_witnesses + i, "bench/witness")
            t0 = time.perf_counter()
            r = session.post(f"{base}/api/v1/entries", data=body, timeout=60,
                             headers={"Content-Type": "application/json"})
            out.append(time.perf_counter() - t0)
            if r.status_code != 201:
                raise RuntimeError(f"submit {i}: {r.status_code} {r.text[:200]}")
        return out


BARE_APP = """
from flask import Flask, Response, request
app = Flask("bare")
@app.post("/add-checkpoint")
def add():
    request.get_data()
    return Response("\\u2014 bare/witness AAAA\\n", mimetype="text/plain")
"""


@contextmanager
def bare_flask(tmp: Path) -> Iterator[str]:
    (tmp / "bare_app.py").write_text(BARE_APP)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "--chdir", str(tmp), "-b",
                             f"127.0.0.1:{port}", "-w", "1", "-k", "gthread", "--threads", "16",
                             "--log-level", "warning", "bare_app:app"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.post(f"{base}/add-checkpoint", data=b"x", timeout=2)
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)


def hammer(base: str, bodies: list[list[bytes]], seconds: float,
           check: Callable[[requests.Response], None]) -> float:
    """Requests per second over `seconds`, one thread per body list (sent in order)."""
    done = [0] * len(bodies)
    stop = time.monotonic() + seconds
    errors: list[str] = []

    def run(k: int) -> None:
        s = requests.Session()
        for body in bodies[k]:
            if time.monotonic() > stop:
                return
            r = s.post(f"{base}/add-checkpoint", data=body, timeout=30)
            try:
                check(r)
            except AssertionError as exc:
                errors.append(str(exc))
                return
            done[k] += 1

    t0 = time.monotonic()
    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(errors[0])
    return sum(done) / (time.monotonic() - t0)


def prepared(clients: int, per_client: int) -> tuple[list[list[bytes]], list[tuple[str, str]]]:
    """Per client: a log of its own and its requests (sizes 0, 1, 2, ..., each proved)."""
    from witness_support import FakeLog

    bodies, logs = [], []
    for k in range(clients):
        log = FakeLog(origin=f"bench.example/log{k}", seed=k + 1)
        reqs = [log.request(0, 0)]
        for size in range(1, per_client):
            log.grow(1)
            reqs.append(log.request(size - 1))
        bodies.append(reqs)
        logs.append((log.origin, log.vkey))
    return bodies, logs


def throughput(tmp: Path, seconds: float, clients: int, per_client: int) -> tuple[float, float]:
    bodies, logs = prepared(clients, per_client)
    wd = tmp / "wthroughput"
    load_or_create_witness_key(wd, "tp.bench/witness")
    store = WitnessStore(wd)
    for origin, vkey in logs:
        store.add_log(make_log(origin, [vkey]))
    store.close()

    def ok(r: requests.Response) -> None:
        assert r.status_code == 200, f"{r.status_code} {r.text[:200]}"

    with process(["witness", "serve", "--data", str(wd), "--port", "0"]) as base:
        witness = hammer(base, bodies, seconds, ok)
    with bare_flask(tmp) as base:
        bare = hammer(base, bodies, seconds, ok)
    return witness, bare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--submits", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--tiny", action="store_true", help="a smoke run: a few requests each")
    a = ap.parse_args()
    if a.tiny:
        a.submits, a.seconds, a.clients = 5, 0.5, 2
    per_client = 20 if a.tiny else 3000
    console = Console()
    with tempfile.TemporaryDirectory(prefix="ktl-bench-witness-") as tmp_name:
        tmp = Path(tmp_name)
        table = Table(title=f"Checkpoint publication latency ({a.submits} sequential submits, "
                            "127.0.0.1)")
        for col in ("witnesses", "p50 ms", "p99 ms", "mean ms"):
            table.add_column(col)
        for n in (0, 1, 2):
            xs = latency(tmp, n, a.submits)
            table.add_row(str(n) if n else "0 (no policy, baseline)",
                          f"{percentile(xs, 0.5) * 1e3:.1f}", f"{percentile(xs, 0.99) * 1e3:.1f}",
                          f"{statistics.mean(xs) * 1e3:.1f}")
        console.print(table)
        witness, bare = throughput(tmp, a.seconds, a.clients, per_client)
        t2 = Table(title=f"add-checkpoint throughput ({a.clients} clients, {a.seconds:g} s, "
                         "gunicorn 1 worker x 16 threads)")
        for col in ("server", "req/s", "vs baseline"):
            t2.add_column(col)
        t2.add_row("bare Flask (reads body, constant answer)", f"{bare:.0f}", "1.00")
        t2.add_row("ktl witness (verify, prove, cosign, fsync)", f"{witness:.0f}",
                   f"{witness / bare:.2f}")
        console.print(t2)


if __name__ == "__main__":
    main()

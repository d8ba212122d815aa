"""Well-behaved requests against `ktl serve` and `ktl witness serve` with and without a
slowloris attack held against them (issue 26 rows 1-2).

For each server: a quiet phase (honest clients only), then an attack phase: `--slow`
connections sending one header line every `--interval` s from `--sources` source
addresses (127.0.0.2, ...), each reopened as soon as the server cuts it, and `--empty`
connections a second that send nothing and are held until the server closes them.
Honest clients (`--clients` threads) each make one GET at a time on a fresh connection,
with a 1 s limit; the table gives how many were answered within 1 s, and the latency
percentiles. The attacker, the honest clients and the servers share this machine's cores.

    python benchmarks/bench_front.py                # 1,000 slow + 100 empty/s, 20 s a phase
    python benchmarks/bench_front.py --tiny         # a smoke run of a few seconds
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

KTL = [sys.executable, "-c", "from client.cli import main; main()"]
LIMIT_S = 1.0


@dataclass
class AttackStats:
    slow_opened: int = 0
    slow_cut: int = 0
    empty_opened: int = 0
    refused: int = 0
    open_now: int = 0
    peak_open: int = 0

    def opened(self, n: int = 1) -> None:
        self.open_now += n
        self.peak_open = max(self.peak_open, self.open_now)


@dataclass
class Probes:
    took: list[float | None] = field(default_factory=list)

    def row(self) -> tuple[int, int, float, float, float]:
        ok = sorted(t for t in self.took if t is not None)
        n = len(self.took)
        pct = 100.0 * len(ok) / n if n else 0.0
        p50 = statistics.median(ok) * 1000 if ok else float("nan")
        p99 = ok[min(len(ok) - 1, int(0.99 * n))] * 1000 if ok else float("nan")
        return n, len(ok), pct, p50, p99


def start(argv: list[str]) -> tuple[subprocess.Popen[str], str, int]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith("serving on http://"):
            host, port = line.split("http://", 1)[1].strip().rsplit(":", 1)
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            time.sleep(1.0)  # the workers boot after the banner
            return proc, host, int(port)
    stop(proc)
    raise SystemExit("the server did not start:\n" + "".join(seen[-20:]))


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def honest(host: str, port: int, paths: list[str], until: float, out: Probes) -> None:
    i = 0
    while time.monotonic() < until:
        path = paths[i % len(paths)]
        i += 1
        t0 = time.monotonic()
        conn = http.client.HTTPConnection(host, port, timeout=LIMIT_S)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            resp.read()
            took = time.monotonic() - t0
            out.took.append(took if resp.status < 500 and took <= LIMIT_S else None)
        except OSError:
            out.took.append(None)
        finally:
            conn.close()
        time.sleep(0.02)


async def _slow_one(host: str, port: int, source: str, interval: float, until: float,
                    stats: AttackStats) -> None:
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0))
        except OSError:
            stats.refused += 1
            await asyncio.sleep(0.2)
            continue
        stats.slow_opened += 1
        stats.opened()
        try:
            writer.write(b"POST /api/v1/entries HTTP/1.1\r\nHost: x\r\n")
            line = 0
            while time.monotonic() < until:
                await writer.drain()
                try:
                    got = await asyncio.wait_for(reader.read(1024), interval)
                except TimeoutError:
                    got = None
                if got == b"":
                    stats.slow_cut += 1  # the server cut it: open another
                    break
                line += 1
                writer.write(b"X-Slow-%d: %d\r\n" % (line, line))
        except OSError:
            stats.slow_cut += 1
        finally:
            stats.open_now -= 1
            writer.close()


async def _empty_one(host: str, port: int, source: str, until: float,
                     stats: AttackStats) -> None:
    try:
        reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0))
    except OSError:
        stats.refused += 1
        return
    stats.empty_opened += 1
    stats.opened()
    try:
        left = max(0.1, until - time.monotonic())
        await asyncio.wait_for(reader.read(1024), left)  # held until the server closes it
    except (OSError, TimeoutError):
        pass
    finally:
        stats.open_now -= 1
        writer.close()


async def attack(host: str, port: int, args: argparse.Namespace, until: float,
                 stats: AttackStats) -> None:
    sources = [f"127.0.0.{2 + i}" for i in range(args.sources)]
    tasks = []
    for i in range(args.slow):
        tasks.append(asyncio.create_task(_slow_one(host, port, sources[i % len(sources)],
                                                   args.interval, until, stats)))
        if i % 50 == 49:
            await asyncio.sleep(0.01)
    n, t0 = 0, time.monotonic()
    while time.monotonic() < until:
        # On schedule however late the loop wakes: n connections by t0 + n / rate.
        while n < (time.monotonic() - t0) * args.empty:
            source = sources[(n * 7) % len(sources)]
            tasks.append(asyncio.create_task(_empty_one(host, port, source, until, stats)))
            n += 1
        await asyncio.sleep(0.01)
    await asyncio.gather(*tasks, return_exceptions=True)


def run_phase(host: str, port: int, paths: list[str], args: argparse.Namespace,
              attacked: bool) -> tuple[Probes, AttackStats]:
    probes, stats = Probes(), AttackStats()
    ramp = args.ramp if attacked else 0.0
    until = time.monotonic() + ramp + args.seconds
    loop_thread = None
    if attacked:
        loop_thread = threading.Thread(
            target=lambda: asyncio.run(attack(host, port, args, until, stats)), daemon=True)
        loop_thread.start()
        time.sleep(ramp)  # the slow connections are open by now
    clients = [threading.Thread(target=honest, args=(host, port, paths, until, probes))
               for _ in range(args.clients)]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    if loop_thread is not None:
        loop_thread.join(60)
    return probes, stats


def _servers(tmp: Path) -> list[tuple[str, list[str], list[str]]]:
    return [
        ("ktl serve (2 workers)", [*KTL, "serve", "--data", str(tmp / "log"), "--port", "0"],
         ["/api/v1/log", "/checkpoint"]),
        ("ktl witness serve", [*KTL, "witness", "serve", "--data", str(tmp / "witness"),
                               "--name", "bench/witness", "--port", "0"], ["/nothing-here"]),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slow", type=int, default=1000)
    ap.add_argument("--empty", type=float, default=100.0, help="empty connections a second")
    ap.add_argument("--sources", type=int, default=32, help="attacker source addresses")
    ap.add_argument("--interval", type=float, default=1.0, help="s between header lines")
    ap.add_argument("--seconds", type=float, default=20.0, help="measured s per phase")
    ap.add_argument("--ramp", type=float, default=3.0, help="s to open the slow connections")
    ap.add_argument("--clients", type=int, default=4, help="honest client threads")
    ap.add_argument("--tiny", action="store_true", help="a smoke run of a few seconds")
    args = ap.parse_args()
    if args.tiny:
        args.slow, args.empty, args.sources, args.seconds, args.ramp = 40, 10.0, 4, 2.0, 1.0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 2 * args.slow + int(args.empty * 30) + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    print(f"attack: {args.slow} slow connections (a header line every {args.interval:g} s, "
          f"{args.sources} sources, reopened when cut) + {args.empty:g} empty connections/s; "
          f"{args.clients} honest clients, {LIMIT_S:g} s limit, {args.seconds:g} s a phase; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-front-") as tmp:
        for label, argv, paths in _servers(Path(tmp)):
            proc, host, port = start(argv)
            try:
                for attacked in (False, True):
                    probes, stats = run_phase(host, port, paths, args, attacked)
                    rows.append((label, attacked, probes.row(), stats))
            finally:
                stop(proc)
    print("\n| server | phase | requests | within 1 s | % | p50 ms | p99 ms | attack |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for label, attacked, (n, ok, pct, p50, p99), st in rows:
        what = (f"{st.slow_opened} slow opened ({st.slow_cut} cut and reopened), "
                f"{st.empty_opened} empty, peak {st.peak_open} open, {st.refused} refused"
                if attacked else "none")
        phase = "attack" if attacked else "quiet"
        print(f"| {label} | {phase} | {n:,} | {ok:,} | {pct:.1f} | {p50:.1f} | {p99:.1f} | "
              f"{what} |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

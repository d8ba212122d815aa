"""What an explorer page costs at 1 M entries with adversarial content (issue 26, item 2).

    .venv/bin/python benchmarks/bench_pages.py                    # 1,000,000 entries (a few minutes)
    .venv/bin/python benchmarks/bench_pages.py --entries 20000    # quick run
    .venv/bin/python benchmarks/bench_pages.py --tiny             # smoke run (seconds)

A SQLite log in a temporary folder is pre-filled with `--entries` synthetic entries
(`bench_ledger.prefill`, direct integration), then given the adversarial content of
`tests/test_pages_budget.py` (`seed_adversarial`: a kernel, a 64 KB claim, a 64 KB
refutation of it by the named reproducer, `--padding` reproductions by fresh keys about the
same digest, 20 newer claims). Each page is then rendered `--views` times through the real
app (Flask's test client, in process: the time is the server's, no network) and the table
gives p50 / p99 / max milliseconds and the bytes of the answer, against the budget of
50 ms and 1 MB a view. The home page is timed twice: its first view after a new checkpoint
(the cache emptied before each view) and the cached one.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))
sys.path.insert(2, str(ROOT / "tests"))

from bench_ledger import prefill  # noqa: E402
from flask import Flask  # noqa: E402
from test_pages_helpers import ORIGIN, REPRODUCER_NAMES, seed_adversarial  # noqa: E402

from attest import generate_private_key  # noqa: E402
from ledger.sequencer import Sequencer  # noqa: E402
from ledger.server import ServerConfig, create_app  # noqa: E402
from ledger.storage import SqliteStorage  # noqa: E402
from ledger.tlog.note import NoteSigner  # noqa: E402

BUDGET_MS = 50.0
BUDGET_BYTES = 1 << 20


@dataclass(frozen=True)
class Timed:
    page: str
    ms: list[float]
    size: int

    def pct(self, q: float) -> float:
        xs = sorted(self.ms)
        return xs[min(len(xs) - 1, int(q * len(xs)))]


def _time(page: str, get: Callable[[], bytes], views: int,
          before: Callable[[], None] = lambda: None) -> Timed:
    get()  # the first view warms the process (imports, templates), not the page
    ms, size = [], 0
    for _ in range(views):
        before()
        t0 = time.perf_counter()
        size = len(get())
        ms.append((time.perf_counter() - t0) * 1000.0)
    return Timed(page, ms, size)


def _next(body: bytes) -> str | None:
    found = re.search(rb'rel="next" href="([^"]+)"', body)
    return None if found is None else found.group(1).decode().replace("&amp;", "&")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=1_000_000, help="synthetic entries first")
    ap.add_argument("--padding", type=int, default=10_000, help="stranger reproductions")
    ap.add_argument("--views", type=int, default=50, help="views of each page")
    ap.add_argument("--tiny", action="store_true", help="1,000 entries, 100 padding, 5 views")
    args = ap.parse_args(argv)
    if args.tiny:
        args.entries, args.padding, args.views = 1000, 100, 5
    tmp = Path(tempfile.mkdtemp(prefix="ktl-bench-pages-"))
    try:
        storage = SqliteStorage(tmp / "data")
        signer = NoteSigner(ORIGIN, generate_private_key())
        took = prefill(storage, signer, args.entries)
        print(f"pre-filled {args.entries:,} synthetic entries in {took:.1f} s", file=sys.stderr)
        t0 = time.perf_counter()
        seeded = seed_adversarial(Sequencer(storage, signer, ORIGIN), args.padding)
        print(f"seeded the adversarial content in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
        from ledger.web._service import REPRODUCERS

        app = create_app(ServerConfig(origin=ORIGIN, batch_delay_ms=0.0), storage=storage,
                         signer=signer)
        app.extensions[REPRODUCERS] = dict(REPRODUCER_NAMES)
        rows = _measure(app, seeded.digest, seeded.claim, seeded.reproduction,
                        storage.entry_count(), args.padding, args.views)
        app.extensions["ktl"].close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size = args.entries + args.padding + 23
    print(f"\n{size:,} entries ({args.padding:,} padding reproductions), {args.views} views a "
          f"page; budget {BUDGET_MS:g} ms and {BUDGET_BYTES // 1024} KiB a view\n")
    print("| page | p50 ms | p99 ms | max ms | bytes | within budget |")
    print("|---|---:|---:|---:|---:|---|")
    over = 0
    for r in rows:
        ok = r.pct(0.99) <= BUDGET_MS and r.size <= BUDGET_BYTES
        over += not ok
        print(f"| {r.page} | {r.pct(0.5):.2f} | {r.pct(0.99):.2f} | {max(r.ms):.2f} | "
              f"{r.size:,} | {'yes' if ok else 'NO'} |")
    print(f"\n{len(rows) - over} of {len(rows)} pages within the budget at p99")
    return 0


def _measure(app: Flask, digest: str, claim: int, reproduction: int, size: int,
             padding: int, views: int) -> list[Timed]:
    client = app.test_client()

    def getter(url: str) -> Callable[[], bytes]:
        def get() -> bytes:
            resp = client.get(url)
            if resp.status_code != 200:
                raise SystemExit(f"{url}: {resp.status_code}")
            return resp.get_data()
        return get

    def uncache() -> None:
        from ledger.web._views import HOME_CACHE

        app.extensions.pop(HOME_CACHE, None)

    rows = [_time("home, first view after a checkpoint", getter("/"), views, uncache),
            _time("home, cached", getter("/"), views)]
    url: str | None = f"/kernels/{digest}"
    for n in range(1, 4):
        assert url is not None
        rows.append(_time(f"kernel page {n}", getter(url), views))
        url = _next(getter(url)())
    rows += [_time("claim page (64 KB claim, every stranger reproduction judges it)",
                   getter(f"/entries/{claim}"), views),
             _time("64 KB reproduction's page", getter(f"/entries/{reproduction}"), views),
             _time("newest entry's page", getter(f"/entries/{size - 1}"), views),
             _time("search by the digest", getter(f"/search?q={digest}"), views),
             _time("search by the digest, halfway through its entries", getter(
                 f"/search?q={digest}&cursor={max(0, size - padding // 2)}&limit=100"), views)]
    return rows


if __name__ == "__main__":
    raise SystemExit(main())

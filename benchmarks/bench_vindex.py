"""The verifiable index: update cost per entry, lookup + proof, verification, proof bytes.

    python benchmarks/bench_vindex.py [--entries 100000] [--batch 256] [--lookups 2000] [--tiny]
    python benchmarks/bench_vindex.py --sequencer [--entries 50000] [--batch 256] [--tiny]
                                      [--prefill 200000] [--frontends 2]
    python benchmarks/bench_vindex.py --stored [--entries 1000000] [--batch 4096] [--at 100000,300000] [--write-back 8192]
    python benchmarks/bench_vindex.py --pages [--entries 300000] [--lookups 20] [--tiny]

Each form takes `--python-walk`: the map's update and tile splits in Python (the
reference, and what runs where the compiled walk could not be built) instead of C.

The first form measures the map alone, in memory. `--sequencer` measures the write
path as the log runs it: the same entries integrated by two sequencers on SQLite, one
without the index and one keeping it (its rows in tiles of 8 levels in the same
database, its root in each checkpoint); then server-side lookups (the index's rows
read from SQLite, the proof built) and the client's verification. `--stored` builds
the index on SQLite directly (no log around it, big batches) to measure lookups at
sizes the sequencer comparison would take hours to reach here. `--pages` writes one
key's list of `--entries` indices (with 10,000 other keys around it) on SQLite and reads
it page by page as a client does: a page's cost at the list's start, middle and end
(it must not grow with the offset), against the baseline of the largest whole-list
answer (100,000 indices), and the client's check of every page.

Entries are synthetic: each names 4 keys (digest, name, signer, type) drawn so that
digests are mostly fresh, names repeat, signers and types are few, as in a real log.
The baseline in the same run is the RFC 9162 leaf hashing the sequencer does anyway
(one SHA-256 per entry plus the tree's interior hashes), per entry.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attest import PREDICATE_NAMESPACE
from ledger.tlog.merkle import leaf_hash as rfc_leaf
from ledger.tlog.merkle import node_hash as rfc_node
from ledger.vindex import (
    IndexKey,
    MemoryNodes,
    lookup_proof,
    root_of,
    update,
    verify_lookup,
)
from ledger.vindex._proof import LIST_START, extend_list_hash
from ledger.vindex._tiles import compiled

STATEMENT = "https://in-toto.io/Statement/v1"


def synthetic_keys(i: int, rng: random.Random) -> list[IndexKey]:
    return [IndexKey("digest", hashlib.sha256(b"d%d" % rng.randrange(i // 3 + 1)).hexdigest()),
            IndexKey("name", f"vendor{rng.randrange(50)}/kernel{rng.randrange(2000)}"),
            IndexKey("signer", hashlib.sha256(b"k%d" % rng.randrange(200)).hexdigest()),
            IndexKey("type", f"{PREDICATE_NAMESPACE}t{rng.randrange(4)}/v1")]


def synthetic_entry(i: int, rng: random.Random) -> tuple[bytes, list[IndexKey]]:
    """An entry with the shape docs/vindex.md reads (its signature is not checked there)."""
    keys = synthetic_keys(i, rng)
    digest, name, signer, ptype = (k.value for k in keys)
    stmt = {"_type": STATEMENT, "subject": [{"name": name, "digest": {"sha256": digest}}],
            "predicateType": ptype, "predicate": {"n": i}}
    payload = base64.b64encode(json.dumps(stmt, separators=(",", ":")).encode()).decode()
    entry = {"envelope": {"payload": payload, "payloadType": "application/vnd.in-toto+json",
                          "signatures": [{"keyid": signer, "sig": "AA=="}]},
             "keys": {signer: "AA=="}}
    return json.dumps(entry, separators=(",", ":"), sort_keys=True).encode(), keys


def synthetic_submission(i: int, rng: random.Random) -> tuple[Any, list[IndexKey]]:
    """`synthetic_entry` as the sequencer takes it (a `Submission` with its facts)."""
    from ledger.sequencer import Submission
    from ledger.storage import EntryFacts

    data, keys = synthetic_entry(i, rng)
    digest, name, signer, ptype = (k.value for k in keys)
    return Submission(data, EntryFacts(ptype, ((name, digest),), (signer,))), keys


def _q(values: list[float]) -> str:
    if len(values) < 2:
        return "n/a"
    return f"{statistics.median(values):.3f} / {statistics.quantiles(values, n=100)[98]:.3f}"


def _small(lookup_ms: list[float], rows: list[int]) -> str:
    """Lookup p50/p99 over the keys read in at most 16 rows (short lists: digests, names)."""
    return _q([t for t, r in zip(lookup_ms, rows, strict=True) if r <= 16])


def _lookups(index: Any, keys: list[IndexKey], n: int, rng: random.Random
             ) -> tuple[list[float], list[float], list[int], list[int]]:
    """Server-side lookup+proof times (ms), client verification times (ms), proof JSON
    bytes and rows read, for `n` keys drawn from `keys`."""
    root = index.root()
    lookup_ms, verify_ms, sizes, rows = [], [], [], []
    from ledger.vindex import TooManyResults

    for _ in range(n):
        key = rng.choice(keys)
        t0 = time.perf_counter()
        try:
            answer = index.lookup(key)
        except TooManyResults:  # the server answers 422: search a narrower key
            continue
        lookup_ms.append((time.perf_counter() - t0) * 1e3)
        raw = index.rows.lookup_rows(key.hash, 100_000)
        rows.append(len(raw.tiles) + len(raw.indices))
        t0 = time.perf_counter()
        verify_lookup(root, key.hash, answer.indices or None, answer.proof)
        verify_ms.append((time.perf_counter() - t0) * 1e3)
        sizes.append(len(json.dumps(answer.proof.to_json())))
    return lookup_ms, verify_ms, sizes, rows


def run_stored(args: argparse.Namespace) -> None:
    """The index alone on SQLite, built in big batches; lookups at each size of `--at`
    (a row printed as each is reached, so a long run reports what it got to)."""
    from ledger.storage import SqliteStorage
    from ledger.vindex import WriteBack, open_index

    tmp = Path(tempfile.mkdtemp(prefix="bench-vindex-"))
    storage = SqliteStorage(tmp)
    index = open_index(storage, None if not args.write_back else WriteBack(args.write_back, 1e9))
    rng = random.Random(1)
    sample: list[IndexKey] = []
    build_s = build_cpu = 0.0
    done = 0
    marks = sorted({*(int(a) for a in args.at.split(",") if a), args.entries})
    held = f", rows written every {args.write_back:,} entries" if args.write_back else ""
    print(f"| entries | keys | build µs/entry (batches of {args.batch}{held}) | lookup+proof p50/p99 ms "
          "| rows read p50/max | verify p50/p99 ms | proof JSON bytes p50/max | index MB |")
    print("|---|---|---|---|---|---|---|---|", flush=True)  # 8 columns
    try:
        while done < args.entries:
            n = min(args.batch, args.entries - done, marks[0] - done)
            batch = []
            for j in range(n):
                data, keys = synthetic_entry(done + j, rng)
                batch.append(data)
                if len(sample) < 4 * args.lookups or rng.random() < 0.01:
                    sample.append(rng.choice(keys))
            t0, c0 = time.perf_counter(), time.process_time()
            index.commit(index.prepare(done, batch))
            build_s += time.perf_counter() - t0
            build_cpu += time.process_time() - c0
            done += n
            if done % (args.batch * 25) < n:
                print(f"  {done:,} entries indexed", file=sys.stderr, flush=True)
            if done == marks[0]:
                marks.pop(0)
                t0, c0 = time.perf_counter(), time.process_time()
                index.flush()  # what a write-back holds: lookups read the written rows
                build_s += time.perf_counter() - t0
                build_cpu += time.process_time() - c0
                lookup_ms, verify_ms, sizes, rows = _lookups(index, sample, args.lookups, rng)
                db_mb = (tmp / "log.db").stat().st_size / 1e6
                keys_n = storage._conn().execute(
                    "SELECT count(DISTINCT key) FROM vindex_postings").fetchone()[0]
                print(f"| {done:,} | {keys_n:,} | {build_s / done * 1e6:.0f} "
                      f"({build_cpu / done * 1e6:.0f} CPU) | {_q(lookup_ms)}; "
                      f"{_small(lookup_ms, rows)} "
                      f"| {int(statistics.median(rows))} / {max(rows)} | {_q(verify_ms)} "
                      f"| {int(statistics.median(sizes))} / {max(sizes)} | {db_mb:.0f} |",
                      flush=True)
    finally:
        storage.close()
        shutil.rmtree(tmp, ignore_errors=True)


def run_sequencer(args: argparse.Namespace) -> None:
    """Two sequencers on SQLite, without and with the index; then lookups from SQLite."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ledger.sequencer import Sequencer
    from ledger.storage import SqliteStorage
    from ledger.tlog.note import NoteSigner
    from ledger.vindex import open_index

    signer = NoteSigner("bench.example/log", Ed25519PrivateKey.from_private_bytes(b"\x07" * 32))
    tmp = Path(tempfile.mkdtemp(prefix="bench-vindex-"))
    stores = [SqliteStorage(tmp / folder) for folder in ("plain", "indexed")
              for _ in range(args.frontends)]
    plains = [Sequencer(s, signer, signer.name) for s in stores[: args.frontends]]
    indexes = [open_index(s) for s in stores[args.frontends:]]
    indexed = [Sequencer(s, signer, signer.name, index=i)
               for s, i in zip(stores[args.frontends:], indexes, strict=True)]
    rng = random.Random(1)
    plain_s = indexed_s = 0.0
    all_keys: list[IndexKey] = []
    done = turn = 0
    try:
        while done < args.prefill + args.entries:
            n = (min(4096, args.prefill - done) if done < args.prefill  # untimed, big batches
                 else min(args.batch, args.prefill + args.entries - done))
            subs = []
            for j in range(n):
                sub, keys = synthetic_submission(done + j, rng)
                if len(all_keys) < 4 * args.lookups or rng.random() < 0.01:
                    all_keys.append(rng.choice(keys))  # a sample of the keys, to look up
                subs.append(sub)
            turn = (turn + 1) % args.frontends  # frontends of one log take batches in turn
            t0 = time.perf_counter()
            plains[turn].integrate(subs)
            t1 = time.perf_counter()
            indexed[turn].integrate(subs)
            t2 = time.perf_counter()
            if done >= args.prefill:
                plain_s, indexed_s = plain_s + t1 - t0, indexed_s + t2 - t1
            done += n
            if done % (args.batch * 200) < n or done == args.prefill + args.entries:
                print(f"  {done:,} entries integrated by each"
                      f"{' (pre-filling)' if done <= args.prefill else ''}", file=sys.stderr)
        lookup_ms, verify_ms, sizes, rows = _lookups(indexes[0], all_keys, args.lookups, rng)
        db_mb, plain_mb = (sum(f.stat().st_size for f in (tmp / folder).glob("log.db*")) / 1e6
                           for folder in ("indexed", "plain"))
    finally:
        for store in stores:
            store.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.prefill or args.frontends > 1:
        print(f"(the last {args.entries:,} entries timed after {args.prefill:,}, "
              f"{args.frontends} sequencer(s) per log in turn, batches of {args.batch})")
    print("| entries | sequencer µs/entry | with index µs/entry | write path cost | "
          "lookup+proof p50/p99 ms (all keys; keys read in <= 16 rows) | rows read p50/max "
          "| verify p50/p99 ms | "
          "proof JSON bytes p50/max | log.db MB without / with |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| {args.entries:,} | {plain_s / args.entries * 1e6:.0f} "
          f"| {indexed_s / args.entries * 1e6:.0f} | {indexed_s / plain_s:.2f}x "
          f"| {_q(lookup_ms)}; {_small(lookup_ms, rows)} | {int(statistics.median(rows))} / "
          f"{max(rows)} | {_q(verify_ms)} "
          f"| {int(statistics.median(sizes))} / {max(sizes)} | {plain_mb:.0f} / {db_mb:.0f} |")


def run_pages(args: argparse.Namespace) -> None:
    """One long list on SQLite, read page by page (server and client)."""
    from ledger.storage import SqliteStorage
    from ledger.vindex import (
        MAX_ANSWER,
        MAX_PAGE,
        ListChain,
        ListPage,
        PendingIndex,
        TiledNodes,
        extend_lists,
        open_index,
    )

    tmp = Path(tempfile.mkdtemp(prefix="bench-vindex-pages-"))
    storage = SqliteStorage(tmp)
    try:
        index = open_index(storage)
        n, key = args.entries, IndexKey("type", "https://bench.example/long/v1")
        lists = {key.hash: list(range(n))}
        lists.update({hashlib.sha256(b"%d" % i).digest(): [i % n] for i in range(10_000)})
        nodes = TiledNodes(index.rows.read_tiles)
        root = extend_lists(nodes, lists)
        index.rows.write(PendingIndex(0, n, root, nodes.changed_tiles(),
                                      [(k, i) for k, v in lists.items() for i in v]))
        reps = max(2, args.lookups)
        cells = []
        for where, after in (("start", None), ("middle", n // 2), ("end", n - MAX_PAGE - 1)):
            ms = []
            for _ in range(reps):
                t0 = time.perf_counter()
                index.lookup_page(key, after, MAX_PAGE)
                ms.append((time.perf_counter() - t0) * 1e3)
            cells.append(f"{where} {_q(ms)}")
        whole = []
        for _ in range(reps):
            t0 = time.perf_counter()
            raw = index.rows.lookup_rows(key.hash, MAX_ANSWER - 1)
            whole.append((time.perf_counter() - t0) * 1e3)
        assert len(raw.indices) == MAX_ANSWER
        chain, server_s, client_s, page_bytes = ListChain(MAX_PAGE), 0.0, 0.0, 0
        while True:
            t0 = time.perf_counter()
            a = index.lookup_page(key, chain.last, MAX_PAGE)
            obj = ListPage(key.text(), a.size, chain.last, a.indices, a.more, a.proof,
                           "").to_json()
            text = json.dumps(obj)
            t1 = time.perf_counter()
            page = ListPage.from_json(json.loads(text), MAX_PAGE)
            chain.add(page)
            if not page.more:
                chain.finish(root, key.hash, page.proof)
            client_s += time.perf_counter() - t1
            server_s += t1 - t0
            page_bytes = max(page_bytes, len(text))
            if not page.more:
                break
        print(f"| list length | page of {MAX_PAGE:,}: lookup+proof p50/p99 ms "
              f"| whole answer of {MAX_ANSWER:,} rows p50/p99 ms (baseline) | pages "
              "| all pages: server s / client s (client µs/entry) | page JSON bytes max |")
        print("|---|---|---|---|---|---|")
        print(f"| {n:,} | {'; '.join(cells)} | {_q(whole)} | {chain.pages} "
              f"| {server_s:.2f} / {client_s:.2f} ({client_s / n * 1e6:.2f}) | {page_bytes:,} |")
    finally:
        storage.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=None,
                    help="default 100,000 (300,000 with --pages)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lookups", type=int, default=2000)
    ap.add_argument("--sequencer", action="store_true",
                    help="the write path on SQLite, without and with the index")
    ap.add_argument("--prefill", type=int, default=0, metavar="N",
                    help="--sequencer: first integrate N entries into both logs, untimed")
    ap.add_argument("--frontends", type=int, default=1, metavar="F",
                    help="--sequencer: F sequencers on each log taking batches in turn, as "
                         "the frontends of a SQLite log do (each then reads what the other wrote)")
    ap.add_argument("--stored", action="store_true",
                    help="the index alone on SQLite, built in big batches; then lookups")
    ap.add_argument("--at", default="100000,300000",
                    help="with --stored: also measure lookups at these sizes (comma-separated)")
    ap.add_argument("--write-back", type=int, default=0, metavar="ENTRIES",
                    help="--stored: hold the rows of batches up to ENTRIES entries, as the "
                         "shared queue's integrator does while the log is saturated")
    ap.add_argument("--pages", action="store_true",
                    help="one long list on SQLite, read page by page")
    ap.add_argument("--tiny", action="store_true", help="a smoke run of a few seconds")
    ap.add_argument("--python-walk", action="store_true",
                    help="update the map and split tiles in Python, as where the compiled "
                         "walk (ledger/vindex/_ctrie.c) could not be built: its baseline")
    args = ap.parse_args()
    if args.python_walk:
        import ledger.vindex._tiles as tiles

        tiles._compiled = tiles._split = None
    print(f"the index's walk: {'compiled' if compiled() else 'Python'}", file=sys.stderr)
    if args.pages:
        args.entries = 120_000 if args.tiny else args.entries or 300_000
        args.lookups = 3 if args.tiny else min(args.lookups, 20)
        run_pages(args)
        return
    args.entries = args.entries or 100_000
    if args.tiny:
        args.entries, args.lookups, args.at = 2000, 50, "1000"
    if args.sequencer:
        run_sequencer(args)
        return
    if args.stored:
        run_stored(args)
        return
    rng = random.Random(1)
    store = MemoryNodes()
    lists: dict[bytes, list[int]] = {}
    heads: dict[bytes, bytes] = {}
    update_s = 0.0
    baseline_s = 0.0
    done = 0
    while done < args.entries:
        n = min(args.batch, args.entries - done)
        batch_keys = [synthetic_keys(done + j, rng) for j in range(n)]
        t0 = time.perf_counter()
        touched: dict[bytes, list[int]] = {}
        for j, keys in enumerate(batch_keys):
            for key in keys:
                touched.setdefault(key.hash, []).append(done + j)
        values = {}
        for kh, more in touched.items():
            lists.setdefault(kh, []).extend(more)
            values[kh] = extend_list_hash(heads.get(kh, LIST_START), more)
        heads.update(values)
        update(store, values)
        update_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        leaves = [rfc_leaf(b"x" * 1000) for _ in range(n)]
        while len(leaves) > 1:  # the interior hashes a batch adds, about one per leaf
            leaves = [rfc_node(a, b) for a, b in zip(leaves[::2], leaves[1::2], strict=False)]
        baseline_s += time.perf_counter() - t0
        done += n
        if done % (args.batch * 100) == 0 or done == args.entries:
            print(f"  {done:,} entries indexed", file=sys.stderr)
    root_hash = root_of(store)
    keys = list(lists)
    lookup_ms, verify_ms, sizes = [], [], []
    for _ in range(args.lookups):
        kh = rng.choice(keys)
        t0 = time.perf_counter()
        proof, _leaf = lookup_proof(store, kh)
        lookup_ms.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        verify_lookup(root_hash, kh, lists[kh], proof)
        verify_ms.append((time.perf_counter() - t0) * 1e3)
        sizes.append(32 * len(proof.siblings) + 64)
    q = statistics.quantiles
    print("| entries | keys | update µs/entry | RFC 9162 hashing µs/entry (baseline) "
          "| lookup+proof p50/p99 ms | verify p50/p99 ms | proof bytes p50/max |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.entries:,} | {len(keys):,} | {update_s / args.entries * 1e6:.1f} "
          f"| {baseline_s / args.entries * 1e6:.1f} "
          f"| {statistics.median(lookup_ms):.3f} / {q(lookup_ms, n=100)[98]:.3f} "
          f"| {statistics.median(verify_ms):.3f} / {q(verify_ms, n=100)[98]:.3f} "
          f"| {int(statistics.median(sizes))} / {max(sizes)} |")


if __name__ == "__main__":
    main()

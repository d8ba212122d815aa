"""The verifiable index's map in memory: update cost per entry, lookup + proof, verification.

    python benchmarks/bench_vindex.py [--entries 100000] [--batch 256] [--lookups 2000] [--tiny]

Entries are synthetic: each names 4 keys (digest, name, signer, type) drawn so that
digests are mostly fresh, names repeat, signers and types are few, as in a real log.
The baseline in the same run is the RFC 9162 leaf hashing the sequencer does anyway
(one SHA-256 per entry plus the tree's interior hashes), per entry.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attest import PREDICATE_NAMESPACE
from ledger.merkle import leaf_hash as rfc_leaf
from ledger.merkle import node_hash as rfc_node
from ledger.vindex import (
    IndexKey,
    MemoryNodes,
    lookup_proof,
    update,
    verify_lookup,
)
from ledger.vindex._proof import LIST_START, extend_list_hash


def synthetic_keys(i: int, rng: random.Random) -> list[IndexKey]:
    return [IndexKey("digest", hashlib.sha256(b"d%d" % rng.randrange(i // 3 + 1)).hexdigest()),
            IndexKey("name", f"vendor{rng.randrange(50)}/kernel{rng.randrange(2000)}"),
            IndexKey("signer", hashlib.sha256(b"k%d" % rng.randrange(200)).hexdigest()),
            IndexKey("type", f"{PREDICATE_NAMESPACE}t{rng.randrange(4)}/v1")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lookups", type=int, default=2000)
    ap.add_argument("--tiny", action="store_true", help="a smoke run of a few seconds")
    args = ap.parse_args()
    if args.tiny:
        args.entries, args.lookups = 2000, 50
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
    root = store.get_node(0, b"")
    assert root is not None
    root_hash = root.hash
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

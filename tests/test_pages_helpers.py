"""Real signed entries for the explorer tests (built with attest, never hand-written bytes).

``hostile`` puts HTML and script into every free-text field the predicates allow,
the way an attacker would.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from flask import Flask
from flask.testing import FlaskClient

from attest import (
    BENCHMARK_V1,
    KERNEL_V1,
    REPRODUCTION_V1,
    VERIFICATION_V1,
    decode_entry,
    encode_entry,
    generate_private_key,
    keyid,
    make_entry,
    make_statement,
    parse_predicate,
    verify_entry,
)
from attest._errors import EntryTooLargeError
from attest.ops import op_flops
from ledger.sequencer import Sequencer, Submission
from ledger.server import ServerConfig, create_app
from ledger.server._admit import admit_bytes
from ledger.storage import EntryFacts, MemoryStorage
from ledger.tlog.merkle import leaf_hash
from ledger.tlog.note import NoteSigner

XSS = '<script>alert("xss")</script><img src=x onerror=alert(2)>'
NAME = "acme/matmul-blocked"
SHAPES = [{"M": 64, "N": 64, "K": 64}, {"M": 128, "N": 128, "K": 128}]


def digest_of(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def environment(hostile: bool = False) -> dict[str, Any]:
    return {
        "cpu_model": XSS if hostile else "Test CPU @ 3.0GHz", "cpu_flags": ["avx2"], "cores": 2,
        "machine": "x86_64", "gpu": None, "gpu_driver": None, "compiler": "gcc 12.2.0",
        "libraries": {"numpy": "2.1.0"}, "os": "Linux 6.1", "python": "3.11.7",
    }


def kernel_body(name: str = NAME, hostile: bool = False) -> dict[str, Any]:
    return {
        "name": name, "version": "1.0.0", "op": "matmul", "runtime": "c",
        "entry": "matmul_blocked", "abi_version": 1,
        "sources": [{"path": "matmul.c", "sha256": digest_of("src")}],
        "build": {"compiler": "gcc", "compiler_version": "12.2.0", "flags": ["-O3"]},
        "generator": {"agent": "kernelsmith", "agent_version": "0.3",
                      "model": XSS[:120] if hostile else "m-2026", "prompt_sha256": None},
        "target": {"hardware_class": "x86_64-avx2"}, "parent": None,
    }


def benchmark_body(speedups: list[float], hostile: bool = False, op: str = "matmul",
                   shapes: list[dict[str, int]] = SHAPES) -> dict[str, Any]:
    results = []
    for shape, s in zip(shapes, speedups, strict=False):
        results.append({
            "shape": shape, "n": 50, "median_ns": 1000.0, "p5_ns": 900.0, "p95_ns": 1100.0,
            "baseline_median_ns": 1000.0 * s, "speedup": s,
            "speedup_ci95": [s * 0.9, s * 1.1], "gflops": (op_flops(op, shape) or 0) / 1000.0,
        })
    return {
        "environment": environment(hostile),
        "workload": {"op": op, "dtype": "float32", "seed": 1,
                     "shapes": shapes[: len(speedups)]},
        "method": {"warmup": 5, "repetitions": 50, "timer": "perf_counter_ns",
                   "interleaved": True, "baseline": "numpy-reference", "fresh_inputs": True,
                   "outputs_rechecked": True},
        "results": results,
        "samples": {"sha256": digest_of("samples"), "size": 10, "media_type": "application/json"},
        "trusted": True,
        "notes": [XSS] if hostile else ["quick budget"],
    }


def verification_body(hostile: bool = False) -> dict[str, Any]:
    return {
        "environment": environment(), "budget": "quick", "seed": 1,
        "checks": [{"name": "correctness.random", "outcome": "pass",
                    "detail": XSS if hostile else "max rel err 1e-7 <= tol 1e-5",
                    "inputs": {"shapes": [{"M": 3, "N": 5, "K": 7}]},
                    "metrics": {"max_abs_err": 0.0, "max_rel_err": 0.0, "max_ulp": 0,
                                "tolerance": 1e-5}}],
        "verdict": "pass",
    }


def reproduction_body(target_index: int, leaf_hex: str, subject: str,
                      claimed: list[float], measured: list[float]) -> dict[str, Any]:
    claims = []
    for shape, c, m in zip(SHAPES, claimed, measured, strict=False):
        label = ",".join(f"{k}={v}" for k, v in shape.items())
        refuted = m * 1.1 < c * 0.9
        claims.append({
            "claim": f"benchmark.speedup[{label}]",
            "verdict": "refuted" if refuted else "confirmed",
            "claimed": {"speedup": c, "speedup_ci95": [c * 0.9, c * 1.1]},
            "measured": {"speedup": m, "speedup_ci95": [m * 0.9, m * 1.1]},
            "reason": "intervals do not overlap" if refuted else "intervals overlap",
        })
    verdict = "refuted" if any(c["verdict"] == "refuted" for c in claims) else "confirmed"
    return {
        "target": {"origin": "test.example/log", "index": target_index, "leaf_hash": leaf_hex,
                   "predicate_type": BENCHMARK_V1, "subject_sha256": subject},
        "environment": environment(), "claims": claims, "verdict": verdict,
    }


def named_reproduction(target: tuple[int, str], subject: str,
                       rows: list[tuple[int, str, float, float]]) -> dict[str, Any]:
    """A reproduction of kernel entry `target` (index, leaf hex) whose verdicts name the
    claim entries they judge: rows of (claim index, claim leaf hex, claimed, measured), all
    on the first shape, as issue 16's two claims on one shape."""
    label = ",".join(f"{k}={v}" for k, v in SHAPES[0].items())
    claims = []
    for index, leaf, c, m in rows:
        refuted = m * 1.1 < c * 0.7
        claims.append({
            "claim": f"benchmark.speedup[{label}]", "verdict": "refuted" if refuted else "confirmed",
            "claimed": {"speedup": c, "speedup_ci95": [c * 0.9, c * 1.1]},
            "measured": {"speedup": m, "speedup_ci95": [round(m * 0.96, 2), round(m * 1.04, 2)]},
            "reason": "below 70% of the claimed lower bound" if refuted else "within the margin",
            "entry": {"index": index, "leaf_hash": leaf},
        })
    return {
        "target": {"origin": "test.example/log", "index": target[0], "leaf_hash": target[1],
                   "predicate_type": KERNEL_V1, "subject_sha256": subject},
        "environment": environment(), "claims": claims,
        "verdict": "refuted" if any(c["verdict"] == "refuted" for c in claims) else "confirmed",
    }


def signed(name: str, subject: str, predicate_type: str, body: dict[str, Any],
           key: Ed25519PrivateKey | None = None) -> bytes:
    """Canonical bytes of a signed log entry."""
    pred = parse_predicate(predicate_type, body)
    entry = make_entry(make_statement(name, subject, pred), [key or generate_private_key()])
    return encode_entry(entry)


SHAPE = SHAPES[0]
"""The one shape of the big claim's results."""


def big_benchmark(key: Any) -> bytes:
    """A benchmark claim of nearly 64 KB: as many results on one shape as fit."""
    n = 200
    while True:
        body = benchmark_body([2.0] * n, shapes=[SHAPE] * n)
        try:
            return signed(NAME, digest_of("k"), BENCHMARK_V1, body, key)
        except EntryTooLargeError:
            n -= 10


def big_reproduction(target: tuple[int, str], claim: tuple[int, str]) -> bytes:
    """A reproduction of nearly 64 KB by the named reproducer: one verdict row per claim
    result, all on `claim` (index, leaf hex), refuting it."""
    n = 160
    while True:
        rows = [(claim[0], claim[1], 2.0, 1.0)] * n
        try:
            return signed(NAME, digest_of("k"), REPRODUCTION_V1,
                          named_reproduction(target, digest_of("k"), rows), REPRODUCER_KEY)
        except EntryTooLargeError:
            n -= 5


def padding_reproductions(template: bytes, digest: str, count: int) -> list[Submission]:
    """Entries about `digest` that index as reproductions by a fresh key each (their bytes
    vary, so their signatures do not verify: the pages must render them anyway)."""
    out = []
    for i in range(count):
        data = template[:-1] + f',"pad":{i}}}'.encode()
        keyid = hashlib.sha256(b"stranger %d" % i).hexdigest()
        out.append(Submission(data, EntryFacts(REPRODUCTION_V1, ((NAME, digest),), (keyid,))))
    return out


@dataclass(frozen=True)
class Adversarial:
    """Where `seed_adversarial` put the honest claim and its named refutation."""

    digest: str
    claim: int
    reproduction: int


def seed_adversarial(seq: Sequencer, padding: int) -> Adversarial:
    """Log the adversarial content of the pages' budget (issue 26 rows 3 and 5) after
    whatever `seq`'s log holds: a kernel, a 64 KB benchmark claim, a 64 KB refutation of
    it by the named reproducer, `padding` reproductions by fresh keys about the digest,
    and 20 newer claims (so the home page looks for their verdicts)."""
    digest, key = digest_of("k"), generate_private_key()
    kernel = signed(NAME, digest, KERNEL_V1, kernel_body(), key)
    bench = big_benchmark(key)
    first = seq.integrate([admit_bytes(kernel), admit_bytes(bench)])
    k, b = first[0].index, first[1].index
    repro = big_reproduction((k, leaf_hash(kernel).hex()), (b, leaf_hash(bench).hex()))
    r = seq.integrate([admit_bytes(repro)])[0].index
    template = signed(NAME, digest, REPRODUCTION_V1, named_reproduction(
        (k, leaf_hash(kernel).hex()), digest, [(b, leaf_hash(bench).hex(), 2.0, 2.0)]))
    pads = padding_reproductions(template, digest, padding)
    for i in range(0, len(pads), 1000):
        seq.integrate(pads[i : i + 1000])
    seq.integrate([admit_bytes(signed(NAME, digest, BENCHMARK_V1, benchmark_body([1.0 + i]),
                                      generate_private_key())) for i in range(20)])
    return Adversarial(digest, b, r)


ORIGIN = "test.example/log"
REPRODUCER_KEY = generate_private_key()
"""The key the test log's operator names as reproducer "test-lab" (see `make_app`)."""
REPRODUCER_NAMES = {keyid(REPRODUCER_KEY.public_key()): "test-lab"}

TYPES = {"kernel": KERNEL_V1, "benchmark": BENCHMARK_V1, "verification": VERIFICATION_V1,
         "reproduction": REPRODUCTION_V1}


def test_helpers_make_entries_that_verify() -> None:
    subject = digest_of("k")
    for kind, body in (("kernel", kernel_body(hostile=True)),
                       ("benchmark", benchmark_body([2.0], hostile=True)),
                       ("verification", verification_body(hostile=True))):
        data = signed(NAME, subject, TYPES[kind], body)
        verified = verify_entry(decode_entry(data))
        assert verified.statement.predicate_type == TYPES[kind]


def make_app() -> Flask:
    """The real app (JSON API + pages) over the in-memory storage fake."""
    from ledger.web._service import REPRODUCERS

    signer = NoteSigner(ORIGIN, generate_private_key())
    app = create_app(ServerConfig(origin=ORIGIN, batch_delay_ms=0.0),
                     storage=MemoryStorage(), signer=signer)
    app.extensions[REPRODUCERS] = dict(REPRODUCER_NAMES)  # as `ktl serve --reproducers` does
    return app


def close_app(app: Flask) -> None:
    app.extensions["ktl"].close()


def submit(client: FlaskClient, data: bytes) -> int:
    """POST a signed entry through the JSON API, as `ktl publish` does; its index."""
    resp = client.post("/api/v1/entries", json=json.loads(data))
    assert resp.status_code in (200, 201), resp.get_data(as_text=True)
    index: int = resp.get_json()["index"]
    return index


@dataclass
class Populated:
    """What `populate` logged: one honest kernel, one with an inflated claim, one hostile."""

    subject: str
    hostile_subject: str
    publisher_keyid: str
    kernel: int = 0
    benchmark: int = 0
    verification: int = 0
    reproduction: int = 0
    hostile_kernel: int = 0
    hostile_benchmark: int = 0
    fillers: list[int] = field(default_factory=list)
    #: Issue 16: two claims on one shape; reproduction #first confirms `claim_ok` and
    #: refutes `claim_refuted`, reproduction #second refutes `claim_refuted` again.
    issue_subject: str = ""
    claim_ok: int = 0
    claim_refuted: int = 0
    first: int = 0
    second: int = 0


def populate(client: FlaskClient, fillers: int = 6) -> Populated:
    key = generate_private_key()
    subject, hostile_subject = digest_of("kernel-a"), digest_of("kernel-evil")
    p = Populated(subject, hostile_subject, keyid(key.public_key()))
    p.kernel = submit(client, signed(NAME, subject, KERNEL_V1, kernel_body(), key))
    bench = signed(NAME, subject, BENCHMARK_V1, benchmark_body([2.0, 6.0]), key)
    p.benchmark = submit(client, bench)
    p.verification = submit(client, signed(NAME, subject, VERIFICATION_V1,
                                           verification_body(), key))
    p.reproduction = submit(client, signed(
        NAME, subject, REPRODUCTION_V1,
        reproduction_body(p.benchmark, leaf_hash(bench).hex(), subject, [2.0, 6.0], [2.1, 2.0]),
        REPRODUCER_KEY))
    evil = "evil/x-kernel"
    p.hostile_kernel = submit(client, signed(evil, hostile_subject, KERNEL_V1,
                                             kernel_body(evil, hostile=True)))
    p.hostile_benchmark = submit(client, signed(evil, hostile_subject, BENCHMARK_V1,
                                                benchmark_body([1.5], hostile=True)))
    _two_claims_on_one_shape(client, p, key)
    for i in range(fillers):
        body = benchmark_body([1.0 + i / 10])
        p.fillers.append(submit(client, signed(NAME, subject, BENCHMARK_V1, body, key)))
    return p


ISSUE_NAME = "acme/rmsnorm"


def _two_claims_on_one_shape(client: FlaskClient, p: Populated, key: Ed25519PrivateKey) -> None:
    p.issue_subject = subject = digest_of("kernel-rmsnorm")
    kernel = signed(ISSUE_NAME, subject, KERNEL_V1, kernel_body(ISSUE_NAME), key)
    k = submit(client, kernel)
    ok, bad = (signed(ISSUE_NAME, subject, BENCHMARK_V1, benchmark_body([s]), key)
               for s in (1.1, 3.0))
    p.claim_ok, p.claim_refuted = submit(client, ok), submit(client, bad)
    target = (k, leaf_hash(kernel).hex())
    ok_row = (p.claim_ok, leaf_hash(ok).hex(), 1.1, 1.11)
    bad_row = (p.claim_refuted, leaf_hash(bad).hex(), 3.0, 1.11)
    p.first = submit(client, signed(ISSUE_NAME, subject, REPRODUCTION_V1,
                                    named_reproduction(target, subject, [ok_row, bad_row]),
                                    REPRODUCER_KEY))
    p.second = submit(client, signed(ISSUE_NAME, subject, REPRODUCTION_V1,
                                     named_reproduction(target, subject, [bad_row]),
                                     REPRODUCER_KEY))

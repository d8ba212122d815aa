"""Two verifier checks a loaded machine could slip past: calls that must overlap in time
(the concurrency row) and threads a call starts that outlive it (the escape row)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier import OPS, KernelSpec, VerifierError, check, get_runtime
from verifier.sandbox import Limits
from verifier.worker._arena import layout, view
from verifier.worker._channel import OP_PAIR, SharedArena, WorkerGone, encode
from verifier.worker._escape import ThreadStarts, running_threads
from verifier.worker._native import NativeWorker, WorkerSandbox
from verifier.worker._overlap import TIME_WORDS, overlapping_pairs

ROOT = Path(__file__).resolve().parent.parent
FLAWED = ROOT / "tests" / "flawed_kernels"
WINDOW = (1_000, 10_000)


def _times(first: list[tuple[int, int]], second: list[tuple[int, int]]) -> np.ndarray:
    return np.asarray([w for span in first + second for w in span], dtype=np.int64)


# -- which pairs of calls overlapped -----------------------------------------------------


def test_overlap_known_answers() -> None:
    # thread 1: [2000,3000] [3000,5000]; thread 2: [2500,2600] [4000,6000]
    times = _times([(2000, 3000), (3000, 5000)], [(2500, 2600), (4000, 6000)])
    assert overlapping_pairs(times, 2, WINDOW) == 2
    # one after the other: touching ends are not an overlap
    assert overlapping_pairs(_times([(2000, 3000)], [(3000, 4000)]), 1, WINDOW) == 0
    assert overlapping_pairs(np.zeros(0, dtype=np.int64), 0, WINDOW) == 0
    with pytest.raises(ValueError, match="timing words"):
        overlapping_pairs(np.zeros(3, dtype=np.int64), 1, WINDOW)


def test_words_the_kernel_could_forge_never_add_an_overlap() -> None:
    """The timing words come from the kernel's process: zeroed (never written), outside the
    parent's own window, ending before they start or out of order, they count for nothing."""
    assert overlapping_pairs(np.zeros(TIME_WORDS * 4, dtype=np.int64), 4, WINDOW) == 0
    outside = _times([(500, 20_000)], [(600, 19_000)])
    assert overlapping_pairs(outside, 1, WINDOW) == 0
    backwards = _times([(5000, 2000)], [(2000, 6000)])
    assert overlapping_pairs(backwards, 1, WINDOW) == 0
    # the second thread's calls claim to run at once with each other: both discarded
    reordered = _times([(2000, 8000), (8000, 9000)], [(3000, 7000), (2000, 7500)])
    assert overlapping_pairs(reordered, 2, WINDOW) == 1


spans = st.lists(st.tuples(st.integers(-5_000, 15_000), st.integers(-5_000, 15_000)),
                 min_size=0, max_size=6)


@settings(max_examples=200, deadline=None)
@given(spans, spans)
def test_overlap_matches_a_brute_force_count(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    calls = min(len(a), len(b))
    a, b = a[:calls], b[:calls]

    def credible(seq: list[tuple[int, int]]) -> list[tuple[int, int]]:
        ok = []
        for i, (s, e) in enumerate(seq):
            if WINDOW[0] <= s <= e <= WINDOW[1] and (i == 0 or s >= seq[i - 1][1]):
                ok.append((s, e))
        return ok

    want = sum(1 for s1, e1 in credible(a) for s2, e2 in credible(b) if max(s1, s2) < min(e1, e2))
    got = overlapping_pairs(_times(a, b), calls, WINDOW)
    assert got == want
    assert got == overlapping_pairs(_times(b, a), calls, WINDOW)  # symmetric
    assert got <= calls * calls


# -- the worker's two-thread command ---------------------------------------------------------


def _worker(kernel: Path, tmp: Path, arena: SharedArena) -> NativeWorker:
    spec = KernelSpec.load(kernel)
    art = get_runtime(spec.runtime).build(spec, "release", tmp)
    run = tmp / "run"
    run.mkdir()
    return NativeWorker(art.path, spec.entry, OPS[spec.op], arena,
                        WorkerSandbox(run, Limits(wall_s=60.0, step_wall_s=None),
                                      readable=[art.path.parent]))


def test_pair_command_writes_credible_times_and_right_answers(tmp_path: Path) -> None:
    op, dims = OPS["sum"], {"R": 64, "C": 4096}
    lay = layout(op, dims)
    calls = 4
    arena = SharedArena(2 * calls * lay.total + 8 * TIME_WORDS * calls)
    worker = _worker(ROOT / "examples" / "sum-rows", tmp_path, arena)
    try:
        x = np.random.default_rng(0).standard_normal((64, 4096)).astype(np.float32)
        for j in range(2 * calls):
            view(arena.bytes[j * lay.total:(j + 1) * lay.total], lay.slots[0])[...] = x + j
        offsets = [j * lay.total for j in range(2 * calls)]
        at = 2 * calls * lay.total
        pairs = worker.pair(offsets[:calls], offsets[calls:], [s.offset for s in lay.slots],
                            list(dims.values()), 20.0, at)
        times = arena.bytes[at:at + 8 * TIME_WORDS * calls].view(np.int64)
        lo, hi = worker.last_window
        assert np.all((times >= lo) & (times <= hi)), (times, worker.last_window)
        assert 0 <= pairs <= calls * calls
        for j in range(2 * calls):
            out = view(arena.bytes[j * lay.total:(j + 1) * lay.total], lay.slots[1])
            assert np.allclose(out, (x + j).sum(axis=1), rtol=1e-4, atol=1e-2)
        with pytest.raises(VerifierError, match="timing words"):
            worker.pair(offsets[:1], offsets[1:2], [s.offset for s in lay.slots],
                        list(dims.values()), 20.0, arena.nbytes - 8)
    finally:
        worker.close()
        arena.close()


def test_worker_refuses_timing_words_outside_its_arena(tmp_path: Path) -> None:
    """The worker checks the command's words itself: no write past the shared memory."""
    op, dims = OPS["sum"], {"R": 2, "C": 8}
    lay = layout(op, dims)
    arena = SharedArena(2 * lay.total)
    worker = _worker(ROOT / "examples" / "sum-rows", tmp_path, arena)
    try:
        command = encode(OP_PAIR, [s.offset for s in lay.slots], list(dims.values()),
                         [0, lay.total, arena.nbytes - 16])
        with pytest.raises(WorkerGone):
            worker.roundtrip(command, 10.0)
        result = worker.close()
        assert result is not None and result.returncode == 8
    finally:
        worker.close()
        arena.close()


def test_concurrency_that_never_overlapped_is_not_established(monkeypatch: pytest.MonkeyPatch) -> None:
    """Timing words that show no overlap (a busy machine, or a kernel garbling them) never
    pass the row: it is an error, the report fails, and the pass condition is a count."""
    monkeypatch.setattr(NativeWorker, "pair", lambda self, *a, **k: (
        NativeWorker.call(self, [*a[0], *a[1]], a[2], a[3], a[4]), 0)[1])
    report = check(ROOT / "examples" / "sum-rows", budget="quick", seed=5)
    row = report.get("concurrency")
    assert row.outcome == "error" and row.metrics["overlapping_pairs"] == 0, row
    assert row.metrics["calls"] == 2 * 8 * 4  # every command the budget allows was tried
    assert not report.passed


def test_static_scratch_is_caught_with_overlapping_pairs_counted() -> None:
    report = check(FLAWED / "static_scratch", budget="quick", seed=2)
    row = report.get("concurrency")
    assert row.outcome == "fail" and row.fault is not None and row.fault.kind == "not_reentrant"
    assert row.metrics["overlapping_pairs"] >= 1, row


# -- threads a call started -------------------------------------------------------------------


def _thread(stop: threading.Event) -> tuple[threading.Thread, int]:
    ready = threading.Event()
    ids: list[int] = []

    def body() -> None:
        ids.append(threading.get_native_id())
        ready.set()
        stop.wait(30)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    ready.wait(5)
    return t, ids[0]


def test_a_pool_started_once_passes_and_later_threads_do_not() -> None:
    import os

    pid = os.getpid()
    stop = threading.Event()
    pool_thread, pool = _thread(stop)
    watch = ThreadStarts()
    try:
        assert running_threads(pid, {pool, 2**22 + 7}) == {pool}
        watch.answered(frozenset({pool}))  # the first call started a pool: taken as one
        watch.look(pid)  # still there at the next look
        assert watch.take() == []
        _, later = _thread(stop)
        watch.answered(frozenset({later}))
        (found,) = watch.take()
        assert found.key == ("threads_started", 1)
    finally:
        stop.set()
        pool_thread.join()


def test_a_first_thread_that_ends_after_the_answer_is_no_pool() -> None:
    import os

    stop = threading.Event()
    t, tid = _thread(stop)
    watch = ThreadStarts()
    watch.answered(frozenset({tid}))
    stop.set()
    t.join()
    deadline = time.monotonic() + 5
    while running_threads(os.getpid(), {tid}) and time.monotonic() < deadline:
        time.sleep(0.01)
    watch.look(os.getpid())
    assert [f.key for f in watch.take()] == [("threads_started", 1)]


def test_lazy_output_is_caught_by_the_threads_it_starts() -> None:
    """The kernel finishes its outputs in a detached thread after the call: whatever else
    a loaded machine lets the parent see, that thread is running at the call's answer."""
    report = check(FLAWED / "lazy_output", budget="quick", seed=1)
    row = report.get("escape")
    assert row.outcome == "fail" and row.fault is not None and row.fault.kind == "escaped"
    assert row.metrics.get("escaped_threads_started", 0) >= 1, row


def test_lazy_fork_is_caught_by_the_processes_alive_at_the_answer() -> None:
    """The same deferral by a forked process that shares the outputs: no thread outlives
    the call, but the process is alive at the answer."""
    report = check(FLAWED / "lazy_fork", budget="quick", seed=1)
    row = report.get("escape")
    assert row.outcome == "fail" and row.fault is not None and row.fault.kind == "escaped"
    assert row.metrics.get("escaped_processes", 0) >= 1, row

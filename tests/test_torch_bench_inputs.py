"""The parent's preparation of a torch bench's timed calls (pure: no torch, no processes):
each call's own input bytes, and the poison its output regions are prefilled with."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from verifier.benchmark._torch_pool import FreshInputs, TensorDraw
from verifier.runtimes import TorchSession
from verifier.tensors import decode, encode

# Round 4 changed this deliberately: the pool of 4 recurring sets with one element changed
# per call let a per-set cache (2.08x) and a sampled-element memo (6.46x) through. Every
# timed call's floating inputs are now drawn for it alone and differ from the call
# before in every element.

_STATS = {"min": -3.0, "max": 3.0, "mean": 0.0, "std": 1.0}


def _fresh(dtype: str = "float32", ahead: int = 1 << 20) -> FreshInputs:
    draws = [TensorDraw((5,), "int64", {"min": 0, "max": 6, "integral": True}),
             TensorDraw((4, 6), dtype, _STATS), TensorDraw(None, "float32", {}, 2.5)]
    return FreshInputs(draws, np.random.default_rng(3), ahead_bytes=ahead)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_every_call_changes_every_floating_element(dtype: str) -> None:
    fresh = _fresh(dtype)
    seen: set[bytes] = set()
    before = None
    index = None
    for _ in range(200):
        args, data = fresh.take()
        assert data[2] is None and args[2] == 2.5
        assert data[0] is not None and data[1] is not None
        if index is not None:
            assert np.array_equal(data[0], index)  # the index input is never moved
        index = data[0]
        got = decode(data[1].copy(), (4, 6), dtype)
        if before is not None:
            assert np.all(got != before), "an element repeated the call before"
        before = got
        rows = {got[r].tobytes() for r in range(4)}
        assert not rows & seen, "a row was seen in an earlier call"
        seen |= rows
    assert fresh.taken == 200


def test_a_bf16_stream_still_differs_where_draws_collide() -> None:
    """bfloat16 has 8 bits of mantissa: two draws round to the same value often; the repeat
    is moved by one unit in the last place."""
    draws = [TensorDraw((4096,), "bfloat16", {"min": 0.0, "max": 1.0, "mean": 0.5, "std": 0.3})]
    fresh = FreshInputs(draws, np.random.default_rng(1))
    last = None
    for _ in range(20):
        _, data = fresh.take()
        assert data[0] is not None
        words = data[0].view(np.uint16).copy()
        if last is not None:
            assert np.all(words != last)
        last = words


def test_inputs_are_drawn_in_bulk_ahead_and_the_time_is_counted() -> None:
    ticks = iter(range(0, 10**9, 1000))
    draws = [TensorDraw((8, 8), "float32", _STATS)]
    fresh = FreshInputs(draws, np.random.default_rng(0), ahead_bytes=8 * 8 * 4 * 10,
                        clock=lambda: next(ticks))
    assert fresh.per_refill == 10
    fresh.take()
    assert fresh.draw_ns == 1000  # one refill of ten sets, timed by the injected clock
    for _ in range(9):
        fresh.take()
    assert fresh.draw_ns == 1000  # staged from the stock
    fresh.take()
    assert fresh.draw_ns == 2000


def test_the_unseen_set_and_the_warm_up_set_are_float64_and_never_timed() -> None:
    fresh = _fresh()
    assert fresh.unseen[1].dtype == np.float64 and fresh.unseen[1].shape == (4, 6)
    timed = [fresh.take()[1][1] for _ in range(50)]
    for data in timed:
        assert data is not None
        assert not np.array_equal(data, encode(fresh.unseen[1], "float32"))
        assert not np.array_equal(data, encode(fresh.example[1], "float32"))
    with pytest.raises(ValueError):
        FreshInputs([], np.random.default_rng(0))


def test_inputs_without_floating_tensors_are_the_example_every_time() -> None:
    fresh = FreshInputs([TensorDraw((4,), "int32", {"min": 0, "max": 9, "integral": True})],
                        np.random.default_rng(0))
    first = fresh.take()[1][0]
    assert first is not None and np.array_equal(first, fresh.take()[1][0])


def _replay(name: str, calls: int = 40) -> object:
    """Feed round 4's caching attackers the stream a bench gives them, in-process."""
    torch = pytest.importorskip("torch")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent / "torch_flawed" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"r4_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ModelNew(64)
    fresh = FreshInputs([TensorDraw((16, 64), "float32", _STATS)], np.random.default_rng(5))
    for _ in range(calls):
        _, data = fresh.take()
        assert data[0] is not None
        x = torch.from_numpy(data[0].view(np.float32).reshape(16, 64).copy())
        model(x)
    return model


def test_a_per_set_cache_finds_nothing_to_reuse() -> None:
    assert _replay("set_cache").reused_rows == 0  # type: ignore[attr-defined]


def test_a_sampled_element_memo_never_hits() -> None:
    model = _replay("sample_memo")
    assert len(model.memo) == 40  # type: ignore[attr-defined]  # every call a miss


@pytest.mark.parametrize("shape,dtype", [((7,), "float32"), ((3,), "int8"), ((5,), "bool"),
                                         ((0,), "float16")])
def test_prefill_writes_the_poison_word_everywhere_and_nowhere_else(
        shape: tuple[int, ...], dtype: str) -> None:
    mems = [SimpleNamespace(bytes=np.zeros(256, dtype=np.uint8)) for _ in range(2)]
    fake = SimpleNamespace(poison=0xFFC1, cand_mem=mems[0], ref_mem=mems[1])
    TorchSession.prefill(fake, [65], [(shape, dtype)])  # type: ignore[arg-type]
    n = int(np.prod(shape)) * np.dtype({"bool": np.bool_}.get(dtype, dtype)).itemsize
    word = np.frombuffer(np.uint16(0xFFC1).tobytes(), dtype=np.uint8)
    for mem in mems:
        assert np.array_equal(mem.bytes[65:65 + n], np.resize(word, n))
        assert not mem.bytes[:65].any() and not mem.bytes[65 + n:].any()

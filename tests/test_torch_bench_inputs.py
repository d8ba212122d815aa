"""The parent's preparation of a torch bench's timed calls (pure: no torch, no processes):
each call's own input bytes, and the poison its output regions are prefilled with."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from verifier.benchmark._torch_pool import POOL, InputPool
from verifier.runtimes import TorchSession
from verifier.tensors import decode, encode


def _pool(dtype: str = "float32") -> InputPool:
    rng = np.random.default_rng(3)
    sets = [[rng.integers(0, 7, size=(5,)).astype(np.float64), rng.standard_normal((4, 6)), 2.5]
            for _ in range(POOL + 1)]
    return InputPool(sets, ["int64", dtype, "float32"])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_each_call_changes_one_element_of_the_first_floating_input(dtype: str) -> None:
    pool = _pool(dtype)
    rng = np.random.default_rng(0)
    seen = set()
    for k in range(3 * POOL):
        args, data = pool.call(k, rng)
        assert args is pool.sets[k % POOL]
        base = pool.encoded[k % POOL]
        assert data[0] is not None and base[0] is not None
        assert np.array_equal(data[0], base[0])  # the index input is never moved
        assert data[2] is None
        got, want = decode(data[1].copy(), (4, 6), dtype), decode(base[1].copy(), (4, 6), dtype)
        assert np.count_nonzero(got != want) == 1
        seen.add(data[1].tobytes())
    assert len(seen) == 3 * POOL  # no two calls see the same contents
    assert np.array_equal(pool.encoded[0][1], encode(pool.sets[0][1], dtype))  # the set is kept


def test_a_pool_without_floating_inputs_changes_nothing() -> None:
    sets = [[np.arange(4.0)] for _ in range(POOL + 1)]
    pool = InputPool(sets, ["int32"])
    assert pool.changed is None
    _, data = pool.call(1, np.random.default_rng(0))
    assert data[0] is not None and np.array_equal(data[0], encode(np.arange(4.0), "int32"))


def test_a_pool_holds_its_sets_and_one_unseen() -> None:
    with pytest.raises(ValueError, match="sets"):
        InputPool([[np.zeros(2)]] * POOL, ["float32"])
    pool = _pool()
    assert pool.unseen is pool.sets[POOL]


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

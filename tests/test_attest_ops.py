"""The op shapes attest shares with the verifier and the explorer: dimension order and FLOPs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from attest.ops import OP_DIMS, OP_FLOPS, op_flops, ordered_shape


def test_known_flop_counts() -> None:
    assert op_flops("matmul", {"K": 3, "M": 2, "N": 5}) == 2 * 2 * 5 * 3
    assert op_flops("softmax", {"C": 7, "R": 3}) == 5 * 21
    assert op_flops("sum", {"C": 7, "R": 3}) == 21
    assert op_flops("rmsnorm", {"C": 7, "R": 3}) == 4 * 21
    att = {"B": 2, "D": 8, "H": 3, "S": 5}
    assert op_flops("attention", att) == 4 * 2 * 3 * 25 * 8 + 5 * 2 * 3 * 25
    assert op_flops("attention_causal", att) == op_flops("attention", att)


def test_no_flops_for_an_unknown_op_or_a_shape_of_other_dims() -> None:
    assert op_flops("conv2d", {"M": 1}) is None
    assert op_flops("matmul", {"M": 1, "N": 1}) is None
    assert op_flops("matmul", {"M": 1, "N": 1, "K": 1, "X": 1}) is None
    assert op_flops("softmax", {"M": 1, "N": 1}) is None


def test_every_op_has_both_a_dimension_order_and_a_flop_count() -> None:
    assert set(OP_DIMS) == set(OP_FLOPS)
    for op, dims in OP_DIMS.items():
        assert len(set(dims)) == len(dims), op
        assert OP_FLOPS[op](dict.fromkeys(dims, 0)) == 0, op


def test_shapes_follow_the_catalogue_not_the_alphabet() -> None:
    # canonical JSON sorts keys: C before R, K before M
    assert list(ordered_shape("softmax", {"C": 1024, "R": 512})) == ["R", "C"]
    assert list(ordered_shape("matmul", {"K": 1, "M": 2, "N": 3})) == ["M", "N", "K"]
    assert list(ordered_shape("attention", {"B": 1, "D": 2, "H": 3, "S": 4})) == [
        "B", "H", "S", "D"]
    # an op outside the catalogue, or names it does not declare, keep their given order
    assert list(ordered_shape("conv2d", {"Z": 1, "A": 2})) == ["Z", "A"]
    assert list(ordered_shape("softmax", {"Z": 0, "C": 1, "A": 2, "R": 3})) == [
        "R", "C", "Z", "A"]


@given(st.sampled_from(sorted(OP_DIMS)),
       st.dictionaries(st.sampled_from("ABCDHKMNRSXZ"), st.integers(0, 9), max_size=8))
def test_ordering_only_reorders(op: str, shape: dict[str, int]) -> None:
    out = ordered_shape(op, shape)
    assert out == shape  # same items
    known = [k for k in out if k in OP_DIMS[op]]
    assert known == [d for d in OP_DIMS[op] if d in shape]

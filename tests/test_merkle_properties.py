"""Property tests and a naive reference written straight from RFC 9162 section 2.1."""

from __future__ import annotations

import hashlib
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.tlog.merkle import (
    EMPTY_ROOT,
    CompactRange,
    MemoryHashStore,
    MissingHashError,
    ProofError,
    RootMismatchError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root_of,
    subtree_proof,
    tree_root,
    verify_consistency,
    verify_inclusion,
    verify_subtree,
)

N = 300
ENTRIES = [b"entry %d" % i for i in range(N + 1)]


# ---- the reference: RFC 9162 2.1.1, 2.1.3.1, 2.1.4.1, recursion exactly as written ----


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


@cache
def mth(lo: int, hi: int) -> bytes:
    """MTH(D[lo:hi])."""
    n = hi - lo
    if n == 0:
        return _sha(b"")
    if n == 1:
        return _sha(b"\x00" + ENTRIES[lo])
    k = 1
    while k * 2 < n:
        k *= 2
    return _sha(b"\x01" + mth(lo, lo + k) + mth(lo + k, hi))


def ref_path(m: int, lo: int, hi: int) -> list[bytes]:
    """PATH(m, D[lo:hi]) with m relative to lo."""
    n = hi - lo
    if n == 1:
        return []
    k = 1
    while k * 2 < n:
        k *= 2
    if m < k:
        return [*ref_path(m, lo, lo + k), mth(lo + k, hi)]
    return [*ref_path(m - k, lo + k, hi), mth(lo, lo + k)]


def ref_subproof(m: int, lo: int, hi: int, b: bool) -> list[bytes]:
    """SUBPROOF(m, D[lo:hi], b)."""
    n = hi - lo
    if m == n:
        return [] if b else [mth(lo, hi)]
    k = 1
    while k * 2 < n:
        k *= 2
    if m <= k:
        return [*ref_subproof(m, lo, lo + k, b), mth(lo + k, hi)]
    return [*ref_subproof(m - k, lo + k, hi, False), mth(lo, lo + k)]


def ref_proof(m: int, n: int) -> list[bytes]:
    """PROOF(m, D[0:n]); empty for m == n and (by convention here) for m == 0."""
    if m in (0, n):
        return []
    return ref_subproof(m, 0, n, True)


@pytest.fixture(scope="module")
def store() -> MemoryHashStore:
    return MemoryHashStore.from_entries(ENTRIES[:N])


def test_reference_agrees_on_roots(store: MemoryHashStore) -> None:
    cr = CompactRange()
    leaves = [leaf_hash(e) for e in ENTRIES[:N]]
    for size in range(N + 1):
        want = mth(0, size)
        assert cr.root() == want
        assert tree_root(size, store) == want
        assert root_of(leaves[:size]) == want
        if size < N:
            cr.append(leaves[size])


def test_reference_agrees_on_every_inclusion_proof(store: MemoryHashStore) -> None:
    for size in range(1, N + 1):
        root = mth(0, size)
        for index in range(size):
            proof = inclusion_proof(index, size, store)
            assert proof == ref_path(index, 0, size)
            verify_inclusion(leaf_hash(ENTRIES[index]), index, size, proof, root)


def test_reference_agrees_on_every_consistency_proof(store: MemoryHashStore) -> None:
    for new in range(N + 1):
        new_root = mth(0, new)
        for old in range(new + 1):
            proof = consistency_proof(old, new, store)
            assert proof == ref_proof(old, new)
            verify_consistency(old, new, mth(0, old), new_root, proof)


# ---- hypothesis: random trees ----


def _flip(b: bytes, bit: int) -> bytes:
    bit %= len(b) * 8
    out = bytearray(b)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def _incl_shape(index: int, size: int) -> tuple[str, ...]:
    """The left/right pairing the RFC 2.1.3.2 verifier does for (index, size), step by step."""
    fn, sn, steps = index, size - 1, []
    while sn:
        if fn & 1 or fn == sn:
            steps.append("L")
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            steps.append("R")
        fn, sn = fn >> 1, sn >> 1
    return tuple(steps)


def _cons_shape(m: int, n: int) -> tuple[object, ...]:
    """The operations the RFC 2.1.4.2 verifier does for (m, n), step by step."""
    if m in (0, n):
        return ("trivial", m == 0)
    fn, sn = m - 1, n - 1
    steps: list[object] = [m & (m - 1) == 0]
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    while sn:
        if fn & 1 or fn == sn:
            steps.append("L")
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            steps.append("R")
        fn, sn = fn >> 1, sn >> 1
    return tuple(steps)


def _leaves(n: int, salt: int) -> list[bytes]:
    return [leaf_hash(b"%d/%d" % (salt, i)) for i in range(n)]


tree_sizes = st.integers(min_value=1, max_value=600)


@settings(max_examples=150, deadline=None)
@given(size=tree_sizes, data=st.data())
def test_inclusion_proofs_verify_and_any_bit_flip_fails(size: int, data: st.DataObject) -> None:
    salt = data.draw(st.integers(0, 1 << 30))
    store = MemoryHashStore()
    for h in _leaves(size, salt):
        store.append(h)
    root = store.root()
    index = data.draw(st.integers(0, size - 1))
    leaf = _leaves(index + 1, salt)[index]
    proof = inclusion_proof(index, size, store)
    verify_inclusion(leaf, index, size, proof, root)

    bit = data.draw(st.integers(0, 255))
    with pytest.raises(RootMismatchError) as exc:
        verify_inclusion(_flip(leaf, bit), index, size, proof, root)
    assert exc.value.expected_root == root and exc.value.computed_root != root
    with pytest.raises(RootMismatchError):
        verify_inclusion(leaf, index, size, proof, _flip(root, bit))
    if proof:
        i = data.draw(st.integers(0, len(proof) - 1))
        bad = [*proof[:i], _flip(proof[i], bit), *proof[i + 1 :]]
        with pytest.raises(RootMismatchError):
            verify_inclusion(leaf, index, size, bad, root)
    # A flipped index or size is accepted only where the RFC verifier would pair the
    # very same hashes the very same way (the checkpoint, not the proof, fixes the size).
    for which in ("index", "size"):
        b = data.draw(st.integers(0, 62))
        i2, s2 = (index ^ (1 << b), size) if which == "index" else (index, size ^ (1 << b))
        same = 0 <= i2 < s2 and _incl_shape(i2, s2) == _incl_shape(index, size)
        if same:
            verify_inclusion(leaf, i2, s2, proof, root)
        else:
            with pytest.raises(ProofError):
                verify_inclusion(leaf, i2, s2, proof, root)


@settings(max_examples=150, deadline=None)
@given(new=tree_sizes, data=st.data())
def test_consistency_proofs_verify_and_any_bit_flip_fails(new: int, data: st.DataObject) -> None:
    salt = data.draw(st.integers(0, 1 << 30))
    old = data.draw(st.integers(1, new))
    store = MemoryHashStore()
    old_root = EMPTY_ROOT
    for h in _leaves(new, salt):
        store.append(h)
        if store.size == old:
            old_root = store.root()
    new_root = store.root()
    proof = consistency_proof(old, new, store)
    verify_consistency(old, new, old_root, new_root, proof)

    bit = data.draw(st.integers(0, 255))
    with pytest.raises(RootMismatchError):
        verify_consistency(old, new, _flip(old_root, bit), new_root, proof)
    with pytest.raises(RootMismatchError):
        verify_consistency(old, new, old_root, _flip(new_root, bit), proof)
    if proof:
        i = data.draw(st.integers(0, len(proof) - 1))
        bad = [*proof[:i], _flip(proof[i], bit), *proof[i + 1 :]]
        with pytest.raises(RootMismatchError):
            verify_consistency(old, new, old_root, new_root, bad)
    for which in ("old", "new"):
        b = data.draw(st.integers(0, 62))
        m2, n2 = (old ^ (1 << b), new) if which == "old" else (old, new ^ (1 << b))
        same = 0 < m2 <= n2 and _cons_shape(m2, n2) == _cons_shape(old, new)
        if same:
            verify_consistency(m2, n2, old_root, new_root, proof)
        else:
            with pytest.raises(ProofError):
                verify_consistency(m2, n2, old_root, new_root, proof)


@settings(max_examples=60, deadline=None)
@given(size=st.integers(0, 2000), cut=st.integers(0, 2000))
def test_compact_range_resumes_from_right_edge(size: int, cut: int) -> None:
    cut = min(cut, size)
    leaves = _leaves(size, 7)
    cr = CompactRange()
    for h in leaves[:cut]:
        cr.append(h)
    resumed = CompactRange(cr.size, cr.hashes)
    store = MemoryHashStore()
    for h in leaves[:cut]:
        store.append(h)
    for h in leaves[cut:]:
        new = resumed.append(h)
        assert new[0] == (0, store.size, h)
        store.append(h)
        assert [x for _, _, x in new] == store.read_hashes([(lv, ix) for lv, ix, _ in new])
    assert resumed.root() == root_of(leaves) == store.root()


def test_compact_range_rejects_bad_state() -> None:
    with pytest.raises(ProofError, match="needs 2 hashes"):
        CompactRange(3, [EMPTY_ROOT])
    with pytest.raises(ProofError, match="32 bytes"):
        CompactRange(1, [b"short"])
    with pytest.raises(ProofError):
        CompactRange(-1)
    with pytest.raises(ProofError, match="32 bytes"):
        CompactRange().append(b"x" * 31)


def test_preconditions_are_checked() -> None:
    h = EMPTY_ROOT
    with pytest.raises(ProofError, match="not below"):
        verify_inclusion(h, 1, 1, [], h)
    with pytest.raises(ProofError, match="not below"):
        verify_inclusion(h, 0, 0, [], h)
    with pytest.raises(ProofError, match="not below"):
        verify_inclusion(h, -1, 4, [h, h], h)
    with pytest.raises(ProofError, match="exactly 2"):
        verify_inclusion(h, 0, 4, [h], h)
    with pytest.raises(ProofError, match="proof hash 1"):
        verify_inclusion(h, 0, 4, [h, h[:31]], h)
    with pytest.raises(ProofError, match="larger than"):
        verify_consistency(5, 4, h, h, [])
    with pytest.raises(ProofError, match="exactly 0"):
        verify_consistency(0, 4, h, h, [h])
    with pytest.raises(ProofError, match="integer"):
        verify_consistency(True, 4, h, h, [])
    with pytest.raises(ProofError, match="integer"):
        verify_inclusion(h, 0, 1 << 64, [], h)
    other = leaf_hash(b"x")
    with pytest.raises(RootMismatchError, match="empty-tree"):
        verify_consistency(0, 4, other, h, [])
    with pytest.raises(RootMismatchError, match="empty-tree"):
        verify_consistency(0, 0, h, other, [])
    verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    verify_consistency(0, 9, EMPTY_ROOT, other, [])


def test_generation_preconditions(store: MemoryHashStore) -> None:
    with pytest.raises(ProofError, match="not below"):
        inclusion_proof(N, N, store)
    with pytest.raises(ProofError, match="larger than"):
        consistency_proof(3, 2, store)
    with pytest.raises(MissingHashError, match="no stored hash"):
        tree_root(N + 1, store)
    with pytest.raises(MissingHashError):
        inclusion_proof(0, N + 5, store)
    assert tree_root(0, store) == EMPTY_ROOT
    assert consistency_proof(0, 5, store) == []


def test_every_complete_subtree_verifies_against_the_reference_and_nothing_else(
        store: MemoryHashStore) -> None:
    # A tile's or an entry bundle's own root checked against a signed root (issue 26 row 8).
    for size in (1, 2, 3, 7, 8, 9, 100, 255, 256, 257, N):
        root = mth(0, size)
        for level in range(0, size.bit_length()):
            for index in range(size >> level):
                node = mth(index << level, (index + 1) << level)
                proof = subtree_proof(level, index, size, store)
                verify_subtree(node, level, index, size, proof, root)
                if level == 0:
                    assert proof == inclusion_proof(index, size, store)
                with pytest.raises(RootMismatchError):
                    verify_subtree(_flip(node, 3), level, index, size, proof, root)
                if index + 1 < size >> level:  # a neighbour's subtree is not this one
                    with pytest.raises(ProofError):
                        verify_subtree(node, level, index + 1, size, proof, root)
        with pytest.raises(ProofError, match="no complete subtree"):
            verify_subtree(root, size.bit_length(), 0, size, [], root)

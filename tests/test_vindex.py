"""The verifiable index's map: known answers, the incremental trie against a naive
reference, lookup proofs (present, absent, tampered), and which keys an entry names."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.vindex import (
    EMPTY,
    IndexKey,
    IndexProofError,
    IndexRootMismatchError,
    LookupProof,
    MemoryNodes,
    VerifiableIndex,
    entry_key_hashes,
    entry_keys,
    extend_lists,
    list_hash,
    lookup_proof,
    root_of,
    update,
    verify_lookup,
)
from ledger.vindex._map import inner_node, is_leaf, leaf_node, node_digest
from ledger.vindex._proof import bit, leaf_hash, node_hash

VECTORS = Path(__file__).parent / "vectors" / "vindex.json"


def sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def naive_root(items: dict[bytes, bytes], depth: int = 0) -> bytes:
    """The definition, written out: empty -> zeros; one key -> its leaf; else split on a bit."""
    if not items:
        return bytes(32)
    if len(items) == 1:
        ((k, v),) = items.items()
        return sha(b"\x00" + k + v)
    left = {k: v for k, v in items.items() if not (k[depth // 8] >> (7 - depth % 8)) & 1}
    right = {k: v for k, v in items.items() if (k[depth // 8] >> (7 - depth % 8)) & 1}
    return sha(b"\x01" + naive_root(left, depth + 1) + naive_root(right, depth + 1))


def key_with_bits(bits: str, fill: int = 0) -> bytes:
    """A 32-byte key hash starting with `bits`, then `fill` bytes."""
    value = int(bits + "0" * (256 - len(bits)), 2) if bits else 0
    raw = bytearray(value.to_bytes(32, "big"))
    for i in range((len(bits) + 7) // 8, 32):
        raw[i] = fill
    return bytes(raw)


# ---------------------------------------------------------------- known answers


def test_empty_map_root_is_32_zero_bytes() -> None:
    assert root_of(MemoryNodes()) == EMPTY == bytes(32)
    assert naive_root({}) == bytes(32)


def test_one_key_root_is_its_leaf_hash() -> None:
    store = MemoryNodes()
    key, value = sha(b"k"), list_hash([7])
    assert update(store, {key: value}) == sha(b"\x00" + key + value)


def test_a_stored_node_is_its_hash_preimage() -> None:
    k, v = sha(b"k"), sha(b"v")
    assert node_digest(leaf_node(k, v)) == leaf_hash(k, v) == sha(b"\x00" + k + v)
    assert node_digest(inner_node(k, v)) == node_hash(k, v) == sha(b"\x01" + k + v)
    assert is_leaf(leaf_node(k, v)) and not is_leaf(inner_node(k, v))


def test_list_hash_is_a_chain_of_big_endian_indices() -> None:
    h0 = sha(b"ktl/vindex/v1 list\x00")
    want = sha(sha(h0 + (3).to_bytes(8, "big")) + (300).to_bytes(8, "big"))
    assert list_hash([3, 300]) == want
    assert list_hash([]) == h0


def test_key_hash_is_domain_kind_and_value() -> None:
    assert IndexKey("digest", "ab" * 32).hash == sha(b"ktl/vindex/v1 key\x00digest\x00" + b"ab" * 32)


def test_keys_sharing_their_first_bits_split_where_they_differ() -> None:
    a, b = key_with_bits("0000000001", 0x11), key_with_bits("0000000000", 0x22)
    va, vb = list_hash([1]), list_hash([2])
    store = MemoryNodes()
    root = update(store, {a: va, b: vb})
    node = sha(b"\x01" + sha(b"\x00" + b + vb) + sha(b"\x00" + a + va))
    for _ in range(9):  # nine shared zero bits: nine levels with an empty right sibling
        node = sha(b"\x01" + node + bytes(32))
    assert root == node == naive_root({a: va, b: vb})
    proof, leaf = lookup_proof(store, a)
    assert leaf is not None and len(proof.siblings) == 10
    verify_lookup(root, a, [1], proof)


def test_known_answer_vectors() -> None:
    """tests/vectors/vindex.json: roots and proofs computed from the definition."""
    vectors = json.loads(VECTORS.read_text())
    assert len(vectors) >= 4
    for case in vectors:
        items = {bytes.fromhex(k): bytes.fromhex(v) for k, v in case["items"].items()}
        store = MemoryNodes()
        for batch in case["batches"]:
            update(store, {bytes.fromhex(k): items[bytes.fromhex(k)] for k in batch})
        assert root_of(store).hex() == case["root"], case["name"]
        assert naive_root(items).hex() == case["root"], case["name"]
        for probe in case["lookups"]:
            proof = LookupProof.from_json(probe["proof"])
            got, _ = lookup_proof(store, bytes.fromhex(probe["key"]))
            assert got == proof, (case["name"], probe["key"])


def make_vectors() -> list[dict[str, object]]:
    """How tests/vectors/vindex.json was made (run this module's __main__ to rewrite it)."""
    cases = []
    specs = [
        ("empty", {}, [], [sha(b"absent")]),
        ("one key", {sha(b"a"): list_hash([0])}, [[sha(b"a")]], [sha(b"a"), sha(b"b")]),
        ("collision in the first 12 bits", {
            key_with_bits("101010101010" + "0", 1): list_hash([0, 4]),
            key_with_bits("101010101010" + "1", 2): list_hash([1]),
            key_with_bits("0", 3): list_hash([2, 3])},
         [[key_with_bits("101010101010" + "0", 1)],
          [key_with_bits("101010101010" + "1", 2), key_with_bits("0", 3)]],
         [key_with_bits("101010101010" + "1", 2), key_with_bits("1010101010100", 9),
          key_with_bits("11", 0)]),
        ("a list grows (no deletion)", {sha(b"x"): list_hash([0, 5, 9]), sha(b"y"): list_hash([1])},
         [[sha(b"x"), sha(b"y")], [sha(b"x")]], [sha(b"x"), sha(b"y"), sha(b"z")]),
    ]
    for name, items, batches, probes in specs:
        store = MemoryNodes()
        for batch in batches:
            update(store, {k: items[k] for k in batch})
        cases.append({
            "name": name, "items": {k.hex(): v.hex() for k, v in items.items()},
            "batches": [[k.hex() for k in b] for b in batches], "root": root_of(store).hex(),
            "lookups": [{"key": k.hex(), "proof": lookup_proof(store, k)[0].to_json()}
                        for k in probes]})
    return cases


# ---------------------------------------------------------------- properties

keys32 = st.binary(min_size=32, max_size=32)
# keys that share long prefixes, to exercise deep splits
clustered = st.builds(lambda head, tail: head + tail, st.sampled_from([b"\x00" * 3, b"\xff\x00\x00"]),
                      st.binary(min_size=29, max_size=29))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.one_of(keys32, clustered), st.binary(min_size=32, max_size=32),
                                max_size=12), min_size=1, max_size=4))
def test_incremental_batches_match_the_naive_root(batches: list[dict[bytes, bytes]]) -> None:
    store = MemoryNodes()
    everything: dict[bytes, bytes] = {}
    for batch in batches:
        everything.update(batch)
        assert update(store, batch) == naive_root(everything)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.one_of(keys32, clustered), max_size=12), min_size=1, max_size=5))
def test_extending_lists_in_place_matches_the_naive_root(batches: list[list[bytes]]) -> None:
    """extend_lists reads each key's current list hash from its own leaf (none: a new key):
    batch j appends entry j to the lists of its keys; the root is the naive one over
    the whole lists, batch after batch, with leaves pushed down beside new keys."""
    store = MemoryNodes()
    lists: dict[bytes, list[int]] = {}
    for j, batch in enumerate(batches):
        for key in set(batch):
            lists.setdefault(key, []).append(j)
        root = extend_lists(store, {key: [j] for key in set(batch)})
        assert root == naive_root({k: list_hash(v) for k, v in lists.items()})


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.one_of(keys32, clustered), st.lists(st.integers(0, 2**40), min_size=1,
                                                               max_size=5, unique=True),
                       min_size=0, max_size=20), st.one_of(keys32, clustered))
def test_every_lookup_proves_presence_or_absence(lists: dict[bytes, list[int]], other: bytes) -> None:
    store = MemoryNodes()
    lists = {k: sorted(v) for k, v in lists.items()}
    root = update(store, {k: list_hash(v) for k, v in lists.items()}) if lists else EMPTY
    for key, indices in lists.items():
        proof, leaf = lookup_proof(store, key)
        assert leaf is not None
        verify_lookup(root, key, indices, proof)
        with pytest.raises(IndexProofError):
            verify_lookup(root, key, None, proof)  # a present key cannot be shown absent
        with pytest.raises(IndexProofError):
            verify_lookup(root, key, [*indices, indices[-1] + 1], proof)  # nor with another list
    proof, leaf = lookup_proof(store, other)
    if other in lists:
        assert leaf is not None
    else:
        assert leaf is None
        verify_lookup(root, other, None, proof)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(keys32, st.binary(min_size=32, max_size=32), min_size=2, max_size=16),
       st.data())
def test_any_flipped_bit_in_a_proof_is_refused(items: dict[bytes, bytes], data: st.DataObject) -> None:
    store = MemoryNodes()
    root = update(store, items)
    key = data.draw(st.sampled_from(sorted(items)))
    proof, _ = lookup_proof(store, key)
    which = data.draw(st.integers(0, len(proof.siblings)))
    flip = data.draw(st.integers(0, 255))
    if which == len(proof.siblings):
        assert proof.leaf_value is not None
        value = bytearray(proof.leaf_value)
        value[flip // 8] ^= 1 << (flip % 8)
        bad = LookupProof(proof.siblings, proof.leaf_key, bytes(value))
    else:
        sib = bytearray(proof.siblings[which])
        sib[flip // 8] ^= 1 << (flip % 8)
        bad = LookupProof((*proof.siblings[:which], bytes(sib), *proof.siblings[which + 1:]),
                          proof.leaf_key, proof.leaf_value)
    _verify_value(root, key, proof)
    with pytest.raises(IndexProofError):  # a root mismatch, or a shape refused before it
        _verify_value(root, key, bad)


def _verify_value(root: bytes, key: bytes, proof: LookupProof) -> None:
    """verify_lookup's fold for the proof's own value hash (these items are raw hashes)."""
    from ledger.vindex._proof import _check_shape, leaf_hash, node_hash
    _check_shape(key, proof, root)
    assert proof.leaf_key == key and proof.leaf_value is not None
    node = leaf_hash(key, proof.leaf_value)
    for depth in range(len(proof.siblings) - 1, -1, -1):
        sib = proof.siblings[depth]
        node = node_hash(sib, node) if bit(key, depth) else node_hash(node, sib)
    if node != root:
        raise IndexRootMismatchError(root, node)


def test_a_proof_against_another_root_is_a_typed_mismatch() -> None:
    store = MemoryNodes()
    update(store, {sha(b"a"): list_hash([1]), sha(b"b"): list_hash([2])})
    proof, _ = lookup_proof(store, sha(b"a"))
    with pytest.raises(IndexRootMismatchError) as err:
        verify_lookup(sha(b"another root"), sha(b"a"), [1], proof)
    assert err.value.expected_root == sha(b"another root")


def test_malformed_proofs_are_refused_before_hashing() -> None:
    key = sha(b"a")
    with pytest.raises(IndexProofError, match="at most 256"):
        verify_lookup(EMPTY, key, None, LookupProof((EMPTY,) * 257))
    with pytest.raises(IndexProofError, match="path"):
        verify_lookup(EMPTY, key, None, LookupProof((sha(b"s"),), _flip_first(key), sha(b"v")))
    with pytest.raises(IndexProofError, match="one level up"):
        verify_lookup(EMPTY, key, [1], LookupProof((EMPTY,), key, list_hash([1])))
    with pytest.raises(IndexProofError, match="ascending"):
        verify_lookup(EMPTY, key, [3, 2], LookupProof((), key, list_hash([3, 2])))
    for garbage in ({}, {"siblings": "x", "leaf": None}, {"siblings": ["00"], "leaf": None},
                    {"siblings": [], "leaf": {"key": "zz" * 32, "value": "00" * 32}},
                    {"siblings": ["AB" * 32], "leaf": None}):
        with pytest.raises(IndexProofError):
            LookupProof.from_json(garbage)


def _flip_first(key: bytes) -> bytes:
    return bytes([key[0] ^ 0x80]) + key[1:]


# ---------------------------------------------------------------- entries and the index


def _entry(subjects: list[tuple[str, str]], ptype: str, keyid: str) -> bytes:
    statement = {"_type": "https://in-toto.io/Statement/v1", "predicateType": ptype,
                 "subject": [{"name": n, "digest": {"sha256": d}} for n, d in subjects],
                 "predicate": {}}
    payload = base64.b64encode(json.dumps(statement).encode()).decode()
    entry = {"envelope": {"payload": payload, "payloadType": "application/vnd.in-toto+json",
                          "signatures": [{"keyid": keyid, "sig": "AA=="}]},
             "keys": {keyid: "AA=="}}
    return json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()


def test_an_entry_names_its_subjects_signer_and_predicate_type() -> None:
    d1, d2, kid = "11" * 32, "22" * 32, "ab" * 32
    keys = entry_keys(_entry([("acme/mm", d1), ("acme/mm2", d2)], "https://x/kernel/v1", kid))
    assert keys == {IndexKey("digest", d1), IndexKey("digest", d2), IndexKey("name", "acme/mm"),
                    IndexKey("name", "acme/mm2"), IndexKey("signer", kid),
                    IndexKey("type", "https://x/kernel/v1")}
    # the map's own reading names the same keys, by hash
    raw = _entry([("acme/mm", d1), ("acme/mm2", d2)], "https://x/kernel/v1", kid)
    assert sorted(entry_key_hashes(raw)) == sorted(k.hash for k in keys)


def test_an_entry_counts_once_per_key_and_a_signer_needs_its_key() -> None:
    d, kid = "33" * 32, "cd" * 32
    raw = json.loads(_entry([("a/b", d), ("a/b", d)], "t", kid))
    raw["keys"] = {"ef" * 32: "AA=="}  # the signature's keyid is not among the entry's keys
    keys = entry_keys(json.dumps(raw).encode())
    assert IndexKey("signer", kid) not in keys and keys == {IndexKey("digest", d),
                                                            IndexKey("name", "a/b"),
                                                            IndexKey("type", "t")}


@pytest.mark.parametrize("junk", [b"", b"[]", b"{\"envelope\": 1}", b"\xff",
                                  b"{\"envelope\": {\"payload\": \"!!\"}}", b"x" * 70000])
def test_an_entry_without_the_shape_names_nothing(junk: bytes) -> None:
    assert entry_keys(junk) == frozenset() and entry_key_hashes(junk) == []


def test_the_index_answers_every_entry_of_a_key_in_order_with_a_proof() -> None:
    d, other, kid = "44" * 32, "55" * 32, "ab" * 32
    entries = [_entry([("v/k", d)], "kernel", kid), _entry([("v/j", other)], "kernel", kid),
               _entry([("v/k", d)], "reproduction", "cd" * 32)]
    index = VerifiableIndex()
    index.extend(0, entries[:2])
    root = index.extend(2, entries[2:])
    assert index.size == 3
    answer = index.lookup(IndexKey("digest", d))
    assert answer.indices == [0, 2]
    verify_lookup(root, IndexKey("digest", d).hash, answer.indices, answer.proof)
    absent = index.lookup(IndexKey("digest", "66" * 32))
    assert absent.indices == []
    verify_lookup(root, IndexKey("digest", "66" * 32).hash, None, absent.proof)
    # omitting the refutation (index 2) from the answer is caught
    with pytest.raises(IndexProofError):
        verify_lookup(root, IndexKey("digest", d).hash, [0], answer.proof)
    fresh = VerifiableIndex()
    assert fresh.extend(0, entries) == root  # a function of the entries, not of the batches
    with pytest.raises(ValueError, match="cannot add from 5"):
        index.extend(5, entries)


def test_index_keys_parse_and_refuse_garbage() -> None:
    assert IndexKey.parse("digest:" + "ab" * 32) == IndexKey("digest", "ab" * 32)
    for bad in ("digest", "digest:xyz", "colour:red", "name:", "signer:" + "AB" * 32):
        with pytest.raises(ValueError):
            IndexKey.parse(bad)


if __name__ == "__main__":
    VECTORS.parent.mkdir(exist_ok=True)
    VECTORS.write_text(json.dumps(make_vectors(), indent=1) + "\n")

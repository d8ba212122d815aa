"""Kernels that pass checks they should fail (issue 22, second round), each a kernel of ours.

- sanitizer two-faces: out-of-bounds reads only when not built with AddressSanitizer,
  caught in the release build by guard pages (after every buffer in some cases, before it
  in others);
- an input written and restored within the call: inputs are read-only in the kernel's
  process, so the write itself is the fault.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier import check
from verifier.ops import OPS
from verifier.worker import PAGE, layout
from verifier.worker._arena import PROT_NONE, PROT_READ

ROOT = Path(__file__).resolve().parent.parent
FLAWED = ROOT / "tests" / "flawed_kernels"

CHECK_ATTACKS = {
    # kernel -> (the typed fault, the rows that must fail with it, words of the detail)
    "twoface_read": ("oob_read", ("guards.canaries", "correctness.random"),
                     "read the guard page after input X"),
    "twoface_read_before": ("oob_read", ("guards.canaries", "correctness.random"),
                            "read the guard page before input X"),
    "write_restore": ("input_mutated", ("inputs.unchanged", "correctness.random"),
                      "wrote to input X"),
}


@pytest.mark.parametrize("name", sorted(CHECK_ATTACKS))
def test_attack_is_caught_in_the_release_build(name: str) -> None:
    kind, rows, words = CHECK_ATTACKS[name]
    report = check(FLAWED / name, budget="quick", seed=1)
    assert not report.passed
    for row in rows:
        got = report.get(row)
        assert got.outcome == "fail", (row, got.detail)
        assert got.fault is not None and got.fault.kind == kind, (row, got.to_json())
    assert words in report.get(rows[0]).detail
    if name.startswith("twoface"):
        # the sanitizer build is the honest face: it is the release build that gives it away
        assert report.get("sanitizer.asan_ubsan").outcome == "pass"


@settings(max_examples=60, deadline=None)
@given(op=st.sampled_from(sorted(OPS)), abut=st.sampled_from(["end", "start"]),
       sizes=st.lists(st.integers(0, 3000), min_size=9, max_size=9))
def test_paged_layouts_put_a_guard_page_on_the_chosen_end_of_every_buffer(
        op: str, abut: str, sizes: list[int]) -> None:
    spec = OPS[op]
    dims = dict(zip(spec.dims, sizes, strict=False))
    lay = layout(spec, dims, abut)  # type: ignore[arg-type]
    assert lay.total % PAGE == 0
    guards = {g.offset for g in lay.guard_pages}
    assert len(guards) == len(lay.slots)
    spans = sorted((s.offset, s.offset + s.nbytes) for s in lay.slots)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    for s in lay.slots:
        edge = s.offset + s.nbytes if abut == "end" else s.offset - PAGE
        assert edge in guards
        assert not any(g < s.offset + s.nbytes and s.offset < g + PAGE for g in guards)
        where = lay.locate(edge)
        assert where is not None and where.region == "guard" and where.slot == s
    prot = lay.protections(0)
    for off, length, how in prot:
        assert off % PAGE == 0 and length % PAGE == 0
        if how == PROT_READ:  # read-only pages hold no output byte
            assert not any(s.is_output and s.nbytes and off < s.offset + s.nbytes
                           and s.offset < off + length for s in lay.slots)
        else:
            assert how == PROT_NONE and off in guards


def test_unpaged_layouts_are_unchanged() -> None:
    lay = layout(OPS["sum"], {"R": 3, "C": 5})
    assert lay.abut is None and lay.guard_pages == () and lay.protections(0) == []
    assert lay.slots[0].offset == 256

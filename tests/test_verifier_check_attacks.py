"""Kernels that pass checks they should fail (issue 22, second round), each a kernel of ours.

- sanitizer two-faces: out-of-bounds reads only when not built with AddressSanitizer,
  caught in the release build by guard pages (after every buffer in some cases, before it
  in others);
- an input written and restored within the call: inputs are read-only in the kernel's
  process, so the write itself is the fault.
"""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attest.predicates import VERIFICATION_V1, parse_predicate
from verifier import check
from verifier.errors import KernelSpecError
from verifier.kernel import KernelSpec
from verifier.ops import OPS
from verifier.runtimes._audit import AuditError, read_elf
from verifier.worker import PAGE, layout
from verifier.worker._arena import PROT_NONE, PROT_READ

ROOT = Path(__file__).resolve().parent.parent
FLAWED = ROOT / "tests" / "flawed_kernels"


def _build_real_elf() -> bytes:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "k.so"
        subprocess.run(["gcc", "-O2", "-fopenmp", "-shared", "-fPIC", "-o", str(out),
                        str(ROOT / "examples" / "attention" / "attention.c"), "-lm"], check=True)
        return out.read_bytes()


_REAL_ELF = _build_real_elf()

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
    parse_predicate(VERIFICATION_V1, report.to_predicate().to_json())
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


# -- the static audit of the built library ----------------------------------------------------


def test_a_sandbox_detector_is_found_by_the_audit() -> None:
    report = check(FLAWED / "sandbox_detector", budget="quick", seed=1)
    row = report.get("audit.library")
    assert row.outcome == "fail" and row.fault is not None
    assert row.fault.kind == "forbidden_import"
    for words in ("imports fopen (file)", "'/proc/self/status' (host path)",
                  "'Seccomp:' (sandbox tell)"):
        assert words in row.detail
    # its dynamic face is honest: every other row passes, which is why the audit exists
    assert report.get("correctness.random").outcome == "pass"
    assert [c.name for c in report.failures] == ["audit.library"]
    assert row.metrics["undeclared_file"] == 3.0 and row.metrics["undeclared_sandbox_tell"] == 1.0
    parse_predicate(VERIFICATION_V1, report.to_predicate().to_json())  # the typed rows publish


def _copy(name: str, dest: Path, extra: str = "") -> Path:
    folder = dest / name
    folder.mkdir()
    for f in (FLAWED / name).iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    with open(folder / "kernel.toml", "a") as fh:
        fh.write(extra)
    return folder


DECLARED = """
[audit.allow]
fopen = "reads its tuning table"
fgets = "reads its tuning table"
fclose = "reads its tuning table"
"/proc/self/status" = "reads the status of the process"
"""


def test_declared_findings_pass_with_their_reasons_and_undeclared_ones_still_fail(
        tmp_path: Path) -> None:
    from verifier.checks._static import audit_row
    from verifier.kernel import KernelSpec
    from verifier.runtimes import get_runtime

    folder = _copy("sandbox_detector", tmp_path, DECLARED)
    spec = KernelSpec.load(folder)
    art = get_runtime("c").build(spec, "release", tmp_path)
    row, audit = audit_row(art, spec)
    assert audit is not None
    assert row.outcome == "fail"  # 'Seccomp:' is not declared
    assert "'Seccomp:' (sandbox tell)" in row.detail and "fopen" not in row.detail.split(":")[0]
    assert "declared: reads its tuning table" in row.detail
    # a declaration names a symbol, an instruction or a path: a sandbox tell cannot be declared
    (tmp_path / "again").mkdir()
    whole = DECLARED + '"Seccomp:" = "looks for its own sandbox"\n'
    with pytest.raises(KernelSpecError, match=r"audit\.allow"):
        KernelSpec.load(_copy("sandbox_detector", tmp_path / "again", whole))


@pytest.mark.parametrize("bad", ['[audit]\nallow = {getenv = "short"}\n',
                                 '[audit]\nallow = {"a b" = "a long enough reason"}\n',
                                 '[audit]\ndeny = {}\n'])
def test_the_audit_table_is_validated(tmp_path: Path, bad: str) -> None:
    with pytest.raises(KernelSpecError, match="audit"):
        KernelSpec.load(_copy("sandbox_detector", tmp_path, bad))


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").iterdir()
                                           if (p / "kernel.toml").is_file()))
def test_every_honest_example_passes_the_audit(example: str, tmp_path: Path) -> None:
    from verifier.checks._static import audit_row
    from verifier.runtimes import get_runtime

    spec = KernelSpec.load(ROOT / "examples" / example)
    if spec.runtime != "c":
        pytest.skip(f"runtime {spec.runtime}: not audited (see audit_row)")
    art = get_runtime("c").build(spec, "release", tmp_path)
    row, audit = audit_row(art, spec)
    assert row.outcome == "pass", row.detail
    assert audit is not None and audit.threaded == ("-fopenmp" in spec.flags)


def test_threads_started_by_a_pasted_name_still_get_thread_sanitizer() -> None:
    report = check(FLAWED / "race_pasted", budget="quick", seed=1)
    row = report.get("sanitizer.tsan")
    assert row.outcome == "fail" and row.fault is not None and row.fault.kind == "race"
    assert b"pthread_create" not in (FLAWED / "race_pasted" / "k.c").read_bytes()


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=4096), cut=st.integers(0, 20000), flip=st.integers(0, 20000))
def test_the_elf_reader_takes_any_bytes(data: bytes, cut: int, flip: int) -> None:
    real = _REAL_ELF[:cut] + data
    flipped = bytearray(_REAL_ELF)
    flipped[flip % len(flipped)] ^= 0xFF
    for blob in (data, real, bytes(flipped), b"\x7fELF\x02\x01" + data):
        with contextlib.suppress(AuditError):
            read_elf(blob)


def test_the_elf_reader_lists_what_nm_lists(tmp_path: Path) -> None:
    import subprocess

    lib = tmp_path / "k.so"
    lib.write_bytes(_REAL_ELF)
    nm = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True,
                        text=True, check=True).stdout.split()
    expected = sorted({w.split("@")[0] for w in nm if w != "U" and w != "w"})
    assert list(read_elf(_REAL_ELF).undefined) == expected


def test_a_kernels_stderr_reaches_no_row_of_the_statement() -> None:
    """stderr_names prints a fake sanitizer report naming the host on every call and crashes
    at N == 1: the rows fail (crash, the fake report's own `oob_write`), and the signed
    statement carries none of its words: stderr as length and digest, frames as a count and
    digest, a location only inside the kernel's declared sources."""
    import json

    report = check(FLAWED / "stderr_names", budget="quick", seed=1)
    assert not report.passed
    crashed = [c for c in report.checks if c.fault is not None and c.fault.kind == "crash"]
    assert crashed, [(c.name, c.outcome, c.detail) for c in report.checks]
    assert any("stderr of " in c.detail and "sha256" in c.detail for c in crashed)
    text = json.dumps(report.to_predicate().to_json())
    for word in ("LEAKMARK", "db01", "00:11:22", "/home/", "launcher"):
        assert word not in text, word

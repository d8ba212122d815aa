"""load_inline solutions: built once in the compiler's sandbox, cached by digest, and only
read (never written) by the kernel's process; a compile error is a build verdict; a CUDA
solution is not run without a GPU.

The C++ build takes about a minute here, so these are slow; the cache is one folder
per test session (KTL_CACHE_DIR), shared by the tests that need the built extension."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is installed by `make test`")

from tests.test_torch_check import faults, torch_folder
from verifier import check
from verifier.checks import CheckReport
from verifier.runtimes import TorchKernel, build_key, cache_root


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, CheckReport]]:
    """A C++ solution checked once with an empty cache: (folder, cache, report)."""
    cache = tmp_path_factory.mktemp("ktl-cache")
    before = os.environ.get("KTL_CACHE_DIR")
    os.environ["KTL_CACHE_DIR"] = str(cache)
    try:
        folder = torch_folder(tmp_path_factory.mktemp("cpp"), "honest_cpp.py")
        yield folder, cache, check(folder)
    finally:
        if before is None:
            os.environ.pop("KTL_CACHE_DIR", None)
        else:
            os.environ["KTL_CACHE_DIR"] = before


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_cpp_solution_builds_in_the_sandbox_and_passes(built: tuple[Path, Path, CheckReport]) -> None:
    folder, cache, report = built
    assert report.passed, [(c.name, c.detail) for c in report.failures]
    assert report.get("build").metrics["cached"] == 0.0
    assert cache_root() == cache
    from verifier.kernel import KernelSpec

    entry = cache / "torch-ext" / build_key(TorchKernel.from_spec(KernelSpec.load(folder)))
    assert (entry / "COMPLETE").is_file()
    assert any(p.suffix == ".so" for p in entry.rglob("*"))


@pytest.mark.slow
def test_second_check_uses_the_cache_and_never_writes_it(
        built: tuple[Path, Path, CheckReport]) -> None:
    folder, cache, _ = built
    before = _digests(cache)
    again = check(folder)
    assert again.passed, [(c.name, c.detail) for c in again.failures]
    assert again.get("build").metrics["cached"] == 1.0
    assert "build cache" in again.get("build").detail
    assert _digests(cache) == before


@pytest.mark.slow
def test_changed_source_is_a_new_cache_key(built: tuple[Path, Path, CheckReport]) -> None:
    from verifier.kernel import KernelSpec

    folder, _, _ = built
    key = build_key(TorchKernel.from_spec(KernelSpec.load(folder)))
    solution = folder / "solution.py"
    solution.write_text(solution.read_text() + "\n# another build\n")
    try:
        assert build_key(TorchKernel.from_spec(KernelSpec.load(folder))) != key
    finally:
        solution.write_text(solution.read_text().removesuffix("\n# another build\n"))


@pytest.mark.slow
def test_compile_error_is_a_build_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTL_CACHE_DIR", str(tmp_path / "cache"))
    report = check(torch_folder(tmp_path, "compile_error.py"))
    assert faults(report) == {"build": "build"}
    assert "error" in report.get("build").detail
    assert not (tmp_path / "cache" / "torch-ext").exists() or not any(
        (tmp_path / "cache" / "torch-ext").iterdir())


def test_cuda_solution_is_never_passed_unrun(tmp_path: Path) -> None:
    report = check(torch_folder(tmp_path, "cuda.py"))
    assert not report.passed
    assert report.get("build").outcome == "error"
    assert "GPU" in report.get("build").detail and "never passes" in report.get("build").detail
    # the machine's limit is typed (what `ktl suite` counts it by), not only worded
    from attest.predicates import row_limits
    assert row_limits(report.get("build").metrics) == ("needs_gpu",)

"""kernel.toml validation and the canonical archive."""

from __future__ import annotations

import contextlib
import hashlib
import io
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier import ArchiveError, KernelSpec, KernelSpecError, pack_kernel, unpack_kernel

GOOD = """
name = "acme/matmul-x"
version = "1.0.0"
op = "matmul"
runtime = "c"
sources = ["k.c", "inc/util.h"]
entry = "mm"
flags = ["-O3", "-ffast-math"]

[generator]
agent = "kernelsmith"
agent_version = "0.3"
model = "m-2026"

[target]
hardware_class = "x86_64-avx2"
"""


def _folder(tmp: Path, manifest: str = GOOD) -> Path:
    (tmp / "inc").mkdir(parents=True, exist_ok=True)
    (tmp / "kernel.toml").write_text(manifest)
    (tmp / "k.c").write_text('#include "inc/util.h"\nvoid mm(void) {}\n')
    (tmp / "inc" / "util.h").write_text("/* util */\n")
    return tmp


def test_load_valid_and_round_trip(tmp_path: Path) -> None:
    spec = KernelSpec.load(_folder(tmp_path))
    assert spec.name == "acme/matmul-x" and spec.relaxed_math
    again = KernelSpec.from_json(spec.to_json(), spec.directory)
    assert again == spec


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('name = "acme/matmul-x"', 'name = "Acme/x"', "name"),
        ('name = "acme/matmul-x"', 'name = "noslash"', "name"),
        ('op = "matmul"', 'op = "conv"', "op"),
        ('runtime = "c"', 'runtime = "rust"', "runtime"),
        ('"k.c", "inc/util.h"', '"../k.c"', "sources"),
        ('"k.c", "inc/util.h"', '"/etc/passwd.c"', "sources"),
        ('"k.c", "inc/util.h"', '"k.c", "k.c"', "sources"),
        ('"k.c", "inc/util.h"', '"k.py"', "sources"),
        ('entry = "mm"', 'entry = "mm; rm -rf /"', "entry"),
        ('"-O3", "-ffast-math"', '"-O3", "-fplugin=evil.so"', "flags"),
        ('"-O3", "-ffast-math"', '"-O3 -fopenmp"', "flags"),
        ('version = "1.0.0"', 'version = "1 0"', "version"),
        ('model = "m-2026"', 'model = "m"\nextra = 1', "generator"),
        ('hardware_class = "x86_64-avx2"', 'hardware_class = "x"\ncores = 2', "target"),
        ('op = "matmul"', 'op = "matmul"\nparent = "abc"', "parent"),
        ('op = "matmul"', 'op = "matmul"\nsurprise = true', "unknown keys"),
        ('entry = "mm"', "", "missing keys"),
    ],
)
def test_rejects_bad_manifest(tmp_path: Path, old: str, new: str, field: str) -> None:
    assert old in GOOD
    with pytest.raises(KernelSpecError, match=field):
        KernelSpec.load(_folder(tmp_path, GOOD.replace(old, new)))


def test_rejects_missing_source_and_symlink(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "k.c").unlink()
    with pytest.raises(KernelSpecError, match=r"k\.c"):
        KernelSpec.load(folder)
    (folder / "k.c").symlink_to("/etc/hostname")
    with pytest.raises(KernelSpecError, match=r"k\.c"):
        KernelSpec.load(folder)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300))
def test_parse_never_crashes_on_garbage(data: bytes) -> None:
    with contextlib.suppress(KernelSpecError):
        KernelSpec.parse(data)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "op", "runtime", "sources", "entry", "flags",
                                        "generator", "target", "version", "x"]),
                       st.one_of(st.text(max_size=10), st.integers(), st.lists(st.text(max_size=5)))))
def test_from_json_rejects_or_accepts_cleanly(obj: dict[str, object]) -> None:
    with contextlib.suppress(KernelSpecError):
        KernelSpec.from_json(obj)


def test_pack_is_deterministic_and_unpacks(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "a")
    one = pack_kernel(folder)
    (folder / "k.c").touch()  # mtime changes must not matter
    assert pack_kernel(folder) == one
    with tarfile.open(fileobj=io.BytesIO(one)) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["inc/util.h", "k.c", "kernel.toml"]
    assert all(m.mtime == 0 and m.uid == 0 and m.mode == 0o644 for m in members)
    dest = unpack_kernel(one, tmp_path / "b")
    assert pack_kernel(dest) == one
    assert hashlib.sha256(pack_kernel(dest)).hexdigest() == hashlib.sha256(one).hexdigest()
    with pytest.raises(ArchiveError, match="empty"):
        unpack_kernel(one, tmp_path / "b")


def _tar(members: list[tuple[str, bytes, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("members", "match"),
    [
        ([("../evil.c", tarfile.REGTYPE, b"x")], "safe relative path"),
        ([("/abs.c", tarfile.REGTYPE, b"x")], "safe relative path"),
        ([("k.c", tarfile.SYMTYPE, b"")], "not a regular file"),
        ([("k.c", tarfile.REGTYPE, b"x")], "no kernel.toml"),
        ([("kernel.toml", tarfile.REGTYPE, GOOD.encode()), ("k.c", tarfile.REGTYPE, b"x")],
         "differ"),
        ([("kernel.toml", tarfile.REGTYPE, GOOD.encode()), ("k.c", tarfile.REGTYPE, b"x"),
          ("inc/util.h", tarfile.REGTYPE, b""), ("extra.c", tarfile.REGTYPE, b"")], "differ"),
    ],
)
def test_unpack_rejects_unsafe(tmp_path: Path, members: list[tuple[str, bytes, bytes]], match: str) -> None:
    with pytest.raises(ArchiveError, match=match):
        unpack_kernel(_tar(members), tmp_path / "out")
    assert not (tmp_path / "evil.c").exists()


def test_unpack_rejects_garbage_and_oversize(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError):
        unpack_kernel(b"not a tar" * 100, tmp_path / "x")
    with pytest.raises(ArchiveError, match="cap"):
        unpack_kernel(b"\0" * (10 * 2**20), tmp_path / "y")


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=4096))
def test_unpack_garbage_is_an_archive_error(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, contextlib.suppress(ArchiveError):
        unpack_kernel(data, Path(tmp) / "out")


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10239), st.integers(0, 255))
def test_unpack_bit_flips_never_crash(tmp_path_factory: pytest.TempPathFactory, where: int,
                                      value: int) -> None:
    import tempfile

    base = tmp_path_factory.mktemp("flip")
    good = pack_kernel(_folder(base))
    flipped = bytearray(good)
    flipped[where % len(flipped)] ^= value
    with tempfile.TemporaryDirectory() as tmp, contextlib.suppress(ArchiveError):
        unpack_kernel(bytes(flipped), Path(tmp) / "out")


def test_no_verifier_module_is_shadowed_by_a_public_name() -> None:
    """`import verifier.check` once gave the function `check`, not its module: every public
    name of `verifier` must name one thing only, never also a submodule file."""
    import importlib
    import pkgutil

    import verifier

    modules = {m.name for m in pkgutil.iter_modules(verifier.__path__)}
    assert not modules & set(verifier.__all__), modules & set(verifier.__all__)
    for name in ("check", "bench"):
        assert callable(getattr(verifier, name))
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"verifier.{name}")

"""Kernel folders: strict `kernel.toml` validation and the canonical source archive.

A kernel folder holds `kernel.toml` and its sources::

    name = "acme/matmul-blocked"      # vendor/kernel-name
    version = "1.0.0"
    op = "matmul"                     # a key of verifier.ops.OPS, or "torch" (below)
    runtime = "c"                     # c | cuda | torch | triton
    sources = ["matmul.c"]            # relative paths inside the folder
    entry = "matmul_blocked"          # a C identifier
    flags = ["-O3", "-march=native"]  # from FLAG_ALLOWLIST
    parent = "<sha256 hex>"           # optional
    [generator]
    agent = "kernelsmith"
    agent_version = "0.3"
    model = "m-2026"
    prompt_sha256 = "<hex>"           # optional
    [target]
    hardware_class = "x86_64-avx2"
    [audit.allow]                     # optional: audit findings the kernel declares, with why
    getenv = "reads KERNEL_TILE to choose a tile size"

A kernel defined by a PyTorch module (the KernelBench format) has op "torch": the op
is the reference module itself, recorded by its sha256 (`reference_digest`)::

    name = "acme/layernorm-fused"
    version = "0.1.0"
    op = "torch"                      # the reference module is the op
    runtime = "torch"                 # torch | triton (ModelNew calls @triton.jit kernels)
    reference = "reference.py"        # Model(nn.Module), get_inputs(), get_init_inputs()
    solution = "solution.py"          # ModelNew, with Model's constructor arguments
    sources = ["reference.py", "solution.py"]   # plus any .cpp/.cu files the solution reads
    entry = "ModelNew"
    flags = []
    dtype = "float32"                 # float32 | float16 | bfloat16
    [generator] and [target] as above (hardware_class "cpu" or a GPU class)

Unknown keys are errors. Nothing from the manifest ever reaches a shell: flags are
matched exactly against an allowlist and passed in an argv list.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from attest import (
    HEX64_PATTERN,
    KERNEL_NAME_PATTERN,
    RUNTIMES,
    TORCH_OP,
    TORCH_RUNTIMES,
    Node,
    ValidationError,
)
from attest.ops import CATALOGUE_VERSION
from attest.predicates import (
    BuildRecipe,
    Generator,
    KernelPredicate,
    KernelReference,
    SourceFile,
    Target,
)
from verifier.environment import library_version, module_runtime_missing
from verifier.errors import ArchiveError, KernelSpecError, UnknownOpError
from verifier.ops import OPS

__all__ = [
    "ABI_VERSION",
    "CUDA_FLAG_ALLOWLIST",
    "FLAG_ALLOWLIST",
    "MANIFEST",
    "MAX_ARCHIVE_BYTES",
    "MAX_SOURCES",
    "MAX_SOURCE_BYTES",
    "RUNTIMES",
    "TORCH_DTYPES",
    "TORCH_ENTRY",
    "TORCH_OP",
    "TORCH_RUNTIMES",
    "GeneratorInfo",
    "KernelSpec",
    "pack_kernel",
    "read_kernel_archive",
    "unpack_kernel",
]

MANIFEST = "kernel.toml"
ABI_VERSION = 1
MAX_MANIFEST_BYTES = 64 * 1024
MAX_MANIFEST_DEPTH = 16
"""Arrays and inline tables nested deeper than this are refused before parsing (the TOML
parser recurses once per level: 2,000 nested arrays would raise RecursionError)."""
MAX_SOURCES = 32
MAX_SOURCE_BYTES = 1024 * 1024
MAX_TOTAL_BYTES = 4 * 1024 * 1024
MAX_ARCHIVE_BYTES = MAX_TOTAL_BYTES + MAX_MANIFEST_BYTES + (MAX_SOURCES + 1) * 2048 + 10240

FLAG_ALLOWLIST = frozenset({
    "-O0", "-O1", "-O2", "-O3", "-Os",
    "-march=native", "-mtune=native", "-mavx", "-mavx2", "-mfma", "-mavx512f",
    "-ffast-math", "-fno-math-errno", "-ffp-contract=fast", "-ffp-contract=off",
    "-fopenmp", "-funroll-loops", "-fno-strict-aliasing", "-ftree-vectorize",
    "-fno-tree-vectorize", "-fomit-frame-pointer",
    "-std=c99", "-std=c11", "-std=c17", "-std=gnu99", "-std=gnu11", "-std=gnu17",
    "-Wall", "-Wextra",
})
"""Every compiler flag a manifest may name. `-ffast-math` is allowed and recorded."""
CUDA_FLAG_ALLOWLIST = frozenset({
    "-O0", "-O1", "-O2", "-O3", "-arch=native", "--use_fast_math", "-lineinfo",
    "-std=c++14", "-std=c++17", "-std=c++20",
})
"""nvcc flags for runtime `cuda`, plus `-arch=sm_XX` (CUDA_ARCH_RE); fast math is recorded."""
CUDA_ARCH_RE = re.compile(r"-arch=sm_[0-9]{2,3}[af]?")
RELAXED_MATH_FLAGS = frozenset({"-ffast-math", "-ffp-contract=fast", "--use_fast_math"})

NAME_RE = re.compile(KERNEL_NAME_PATTERN)
VERSION_RE = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+-]*")
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TEXT_RE = re.compile(r"[\x20-\x7e]+")
HEX64_RE = re.compile(HEX64_PATTERN)
PART_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
TORCH_DTYPES = ("float32", "float16", "bfloat16")
"""The dtypes a torch kernel may declare for its floating-point inputs."""
TORCH_ENTRY = "ModelNew"
"""The class a torch kernel's solution defines (KernelBench's name)."""
_MODULE_SOURCE_EXT = (".py", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".cu", ".cuh")
SOURCE_EXT = {"c": (".c", ".h"), "cuda": (".cu", ".cuh", ".h"),
              "torch": _MODULE_SOURCE_EXT, "triton": _MODULE_SOURCE_EXT}

_TORCH_KEYS = {"reference", "solution", "dtype"}
_TOP_KEYS = {"name", "version", "op", "runtime", "sources", "entry", "flags", "parent",
             "generator", "target", "abi_version", "audit", *_TORCH_KEYS}
_REQUIRED = _TOP_KEYS - {"parent", "flags", "abi_version", "audit", *_TORCH_KEYS}
MAX_AUDIT_ALLOW = 16
AUDIT_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}|/[\x21-\x7e]{1,127}")
"""What `[audit.allow]` may name: a symbol or instruction, or a path string the library holds."""
_GEN_KEYS = {"agent", "agent_version", "model", "prompt_sha256"}
T = TypeVar("T")


GeneratorInfo = Generator
"""Who wrote the kernel: attest's `Generator` (agent, its version, the model, optionally the
prompt digest), the very object the kernel/v1 statement carries."""


def _generator(obj: Any) -> Generator:
    """The manifest's [generator] table, checked here (printable ASCII) and by attest's own
    rule (field lengths), so a generator the statement would refuse fails before any run."""
    if not isinstance(obj, Mapping):
        raise KernelSpecError("generator: must be a table with agent, agent_version, model")
    extra = set(obj) - _GEN_KEYS
    if extra:
        raise KernelSpecError(f"generator: unknown keys {sorted(extra)}")
    for key in ("agent", "agent_version", "model"):
        _text(obj, key, "generator.")
    return _attest(Generator.from_json, {"prompt_sha256": None, **obj}, "generator")


def _attest(build: Callable[[Any, str], T], value: Any, path: str) -> T:
    """`build(value, path)` with attest's rules; their refusal as a KernelSpecError."""
    try:
        return build(value, path)
    except ValidationError as exc:
        raise KernelSpecError(f"{exc} (a kernel/v1 statement would refuse it)") from exc


def _attest_field(node: type[Node], name: str, value: Any, path: str | None = None) -> None:
    """Check one manifest value against the attest rule of the statement field it becomes."""
    _attest(node.rule(name).check, value, path or name)


def _nesting_depth(text: str) -> int:
    """The deepest nesting of `[`/`{` outside strings and comments (table headers count 1 or 2).

    Strings are skipped by their TOML quoting (basic and literal, one-line and multi-line,
    backslash escapes in basic strings); an unterminated string runs to the end. A linear
    scan with no recursion: it is what bounds the parser's."""
    depth = deepest = 0
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif ch in "\"'":
            quote = ch * 3 if text.startswith(ch * 3, i) else ch
            i += len(quote)
            while i < n and not text.startswith(quote, i):
                i += 2 if ch == '"' and text[i] == "\\" else 1
            i += len(quote)
            continue
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
        i += 1
    return deepest


def _text(obj: Mapping[str, Any], key: str, prefix: str = "", limit: int = 128) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not TEXT_RE.fullmatch(value) or len(value) > limit:
        raise KernelSpecError(
            f"{prefix}{key}: must be printable ASCII text of 1..{limit} characters, got {value!r}"
        )
    return value


def _audit_allow(obj: Any) -> tuple[tuple[str, str], ...]:
    """`[audit] allow = {name = "why"}`: findings of the library audit the kernel declares."""
    if obj is None:
        return ()
    if not isinstance(obj, Mapping) or set(obj) != {"allow"} or not isinstance(obj["allow"], Mapping):
        raise KernelSpecError("audit: must be a table with exactly allow = {name = \"why\"}")
    allow = obj["allow"]
    if len(allow) > MAX_AUDIT_ALLOW:
        raise KernelSpecError(f"audit.allow: at most {MAX_AUDIT_ALLOW} entries")
    out = []
    for name in sorted(allow):
        if not AUDIT_NAME_RE.fullmatch(name):
            raise KernelSpecError(f"audit.allow: {name[:80]!r} must be a symbol, an instruction "
                                  "or a path (/...) of printable ASCII")
        why = allow[name]
        if not isinstance(why, str) or not TEXT_RE.fullmatch(why) or not 8 <= len(why) <= 200:
            raise KernelSpecError(f"audit.allow.{name}: the reason must be printable ASCII text "
                                  "of 8..200 characters")
        out.append((name, why))
    return tuple(out)


def _check_source_path(path: Any, runtime: str) -> str:
    if not isinstance(path, str) or len(path) > 200:
        raise KernelSpecError(f"sources: {path!r} must be a relative path of at most 200 characters")
    parts = path.split("/")
    if len(parts) > 4 or not all(PART_RE.fullmatch(p) and p not in (".", "..") for p in parts):
        raise KernelSpecError(
            f"sources: {path!r} must be a relative path inside the folder "
            "(letters, digits, _ . -; no '..', no leading '/', at most 4 levels)"
        )
    if path == MANIFEST:
        raise KernelSpecError("sources: kernel.toml cannot be a source")
    if not path.endswith(SOURCE_EXT[runtime]):
        raise KernelSpecError(f"sources: {path!r} must end with one of {SOURCE_EXT[runtime]}")
    return path


def _check_op(op: Any, runtime: str) -> str:
    if runtime in TORCH_RUNTIMES:
        if op != TORCH_OP:
            raise KernelSpecError(
                f"op: runtime {runtime!r} runs a PyTorch module, so op must be {TORCH_OP!r} "
                f"(the reference module is the op), got {op!r}"
            )
        return TORCH_OP
    if op == TORCH_OP:
        raise KernelSpecError(
            f"op: {TORCH_OP!r} (a reference PyTorch module) needs runtime torch or triton, "
            f"not {runtime!r}"
        )
    if not isinstance(op, str):
        raise KernelSpecError(f"op: must be a string, got {op!r}")
    if op not in OPS:
        raise UnknownOpError(op[:64], CATALOGUE_VERSION, sorted(OPS))
    return str(op)


def _check_flags(flags: Any, runtime: str) -> tuple[str, ...]:
    if not isinstance(flags, list) or len(flags) > 32:
        raise KernelSpecError("flags: must be a list of at most 32 flags")
    if runtime in TORCH_RUNTIMES and flags:
        raise KernelSpecError(
            f"flags: runtime {runtime!r} takes no compiler flags (a load_inline solution names "
            f"its own in solution.py); got {flags!r}"
        )
    for flag in flags:
        if runtime == "cuda":
            if not isinstance(flag, str) or not (flag in CUDA_FLAG_ALLOWLIST
                                                 or CUDA_ARCH_RE.fullmatch(flag)):
                raise KernelSpecError(
                    f"flags: {flag!r} is not allowed for runtime cuda; allowed flags: "
                    f"{sorted(CUDA_FLAG_ALLOWLIST)} and -arch=sm_XX"
                )
        elif flag not in FLAG_ALLOWLIST:
            raise KernelSpecError(
                f"flags: {flag!r} is not allowed; allowed flags: {sorted(FLAG_ALLOWLIST)}"
            )
    return tuple(flags)


def _check_module_keys(obj: Mapping[str, Any], runtime: str, entry: str,
                       sources: tuple[str, ...]) -> tuple[str | None, str | None, str | None]:
    """reference, solution and dtype: required for runtimes torch/triton, absent otherwise."""
    present = sorted(k for k in _TORCH_KEYS if obj.get(k) is not None)
    if runtime not in TORCH_RUNTIMES:
        if present:
            raise KernelSpecError(
                f"kernel.toml: {present} belong to runtimes torch/triton, not {runtime!r}"
            )
        return None, None, None
    missing = sorted(_TORCH_KEYS - set(present))
    if missing:
        raise KernelSpecError(f"kernel.toml: runtime {runtime!r} needs {missing}")
    paths = []
    for key in ("reference", "solution"):
        value = obj[key]
        if not isinstance(value, str) or not value.endswith(".py"):
            raise KernelSpecError(f"{key}: {value!r} must be a .py file of the folder")
        if value not in sources:
            raise KernelSpecError(f"{key}: {value!r} must be listed in sources {list(sources)}")
        paths.append(value)
    if paths[0] == paths[1]:
        raise KernelSpecError("reference and solution must be two different files")
    dtype = obj["dtype"]
    if dtype not in TORCH_DTYPES:
        raise KernelSpecError(f"dtype: {dtype!r} is not one of {list(TORCH_DTYPES)}")
    if entry != TORCH_ENTRY:
        raise KernelSpecError(
            f"entry: runtime {runtime!r} loads the class {TORCH_ENTRY!r} from the solution, "
            f"got {entry!r}"
        )
    return paths[0], paths[1], str(dtype)


@dataclass(frozen=True)
class KernelSpec:
    """A validated `kernel.toml` (plus the folder it was read from, if any)."""

    name: str
    version: str
    op: str
    runtime: str
    sources: tuple[str, ...]
    entry: str
    flags: tuple[str, ...]
    generator: GeneratorInfo
    hardware_class: str
    parent: str | None = None
    abi_version: int = ABI_VERSION
    directory: Path | None = None
    reference: str | None = None
    """Runtimes torch/triton: the source defining Model, get_inputs, get_init_inputs."""
    solution: str | None = None
    """Runtimes torch/triton: the source defining ModelNew."""
    dtype: str | None = None
    """Runtimes torch/triton: the floating-point dtype of the inputs (TORCH_DTYPES)."""
    audit_allow: tuple[tuple[str, str], ...] = ()
    """Findings of the built library's audit the manifest declares, each with its reason
    (`[audit.allow]`; `verifier.runtimes._audit`)."""

    @property
    def is_torch(self) -> bool:
        """A kernel defined by a PyTorch module (op `torch`, runtime torch or triton)."""
        return self.runtime in TORCH_RUNTIMES

    @property
    def reference_digest(self) -> str:
        """sha256 (hex) of the reference file's bytes: the op of a torch kernel."""
        if self.reference is None:
            raise KernelSpecError(f"{self.name}: runtime {self.runtime!r} has no reference module")
        return hashlib.sha256(self._read_source(self.reference)).hexdigest()

    @property
    def relaxed_math(self) -> bool:
        return bool(RELAXED_MATH_FLAGS & set(self.flags))

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON (the folder is not part of it)."""
        return {
            "name": self.name, "version": self.version, "op": self.op,
            "runtime": self.runtime, "sources": list(self.sources), "entry": self.entry,
            "flags": list(self.flags), "generator": self.generator.to_json(),
            "target": {"hardware_class": self.hardware_class}, "parent": self.parent,
            "abi_version": self.abi_version,
            **({"reference": self.reference, "solution": self.solution, "dtype": self.dtype}
               if self.is_torch else {}),
            **({"audit": {"allow": dict(self.audit_allow)}} if self.audit_allow else {}),
        }

    @classmethod
    def from_json(cls, obj: Any, directory: Path | None = None) -> KernelSpec:
        """Validate a manifest mapping strictly; raise KernelSpecError naming the field."""
        if not isinstance(obj, Mapping):
            raise KernelSpecError("kernel.toml: must be a table")
        extra = set(obj) - _TOP_KEYS
        if extra:
            raise KernelSpecError(f"kernel.toml: unknown keys {sorted(extra)}")
        missing = _REQUIRED - {k for k, v in obj.items() if v is not None}
        if missing:
            raise KernelSpecError(f"kernel.toml: missing keys {sorted(missing)}")
        name = _text(obj, "name")
        if not NAME_RE.fullmatch(name):
            raise KernelSpecError(
                f"name: {name!r} must look like vendor/kernel-name "
                "(lowercase letters, digits, . _ -)"
            )
        version = _text(obj, "version", limit=64)
        if not VERSION_RE.fullmatch(version):
            raise KernelSpecError(f"version: {version!r} must be letters, digits, '.', '+', '-'")
        runtime = obj["runtime"]
        if runtime not in RUNTIMES:
            raise KernelSpecError(f"runtime: {runtime!r} is not one of {list(RUNTIMES)}")
        op = _check_op(obj["op"], runtime)
        sources = obj["sources"]
        if not isinstance(sources, list) or not 1 <= len(sources) <= MAX_SOURCES:
            raise KernelSpecError(f"sources: must be a list of 1..{MAX_SOURCES} paths")
        checked = tuple(_check_source_path(s, runtime) for s in sources)
        if len(set(checked)) != len(checked):
            raise KernelSpecError("sources: lists a path twice")
        entry = obj["entry"]
        if not isinstance(entry, str) or not IDENT_RE.fullmatch(entry) or len(entry) > 64:
            raise KernelSpecError(f"entry: {entry!r} must be a C identifier of at most 64 characters")
        flags = _check_flags(obj.get("flags", []), runtime)
        module = _check_module_keys(obj, runtime, entry, checked)
        parent = obj.get("parent")
        if parent is not None and not (isinstance(parent, str) and HEX64_RE.fullmatch(parent)):
            raise KernelSpecError("parent: must be the 64-hex sha256 of the parent kernel archive")
        target = obj["target"]
        if not isinstance(target, Mapping) or set(target) != {"hardware_class"}:
            raise KernelSpecError("target: must be a table with exactly hardware_class")
        abi = obj.get("abi_version", ABI_VERSION)
        if abi != ABI_VERSION or isinstance(abi, bool):
            raise KernelSpecError(f"abi_version: only {ABI_VERSION} is supported, got {abi!r}")
        hardware_class = _text(target, "hardware_class", "target.", limit=64)
        generator = _generator(obj["generator"])
        for key, value in (("name", name), ("version", version), ("op", op),
                           ("runtime", runtime), ("entry", entry), ("parent", parent)):
            _attest_field(KernelPredicate, key, value)
        for i, path in enumerate(checked):
            _attest_field(SourceFile, "path", path, f"sources[{i}]")
        _attest_field(BuildRecipe, "flags", list(flags), "flags")
        _attest(Target.from_json, {"hardware_class": hardware_class}, "target")
        return cls(
            name=name, version=version, op=op, runtime=runtime, sources=checked, entry=entry,
            flags=tuple(flags), generator=generator, hardware_class=hardware_class,
            parent=parent, abi_version=ABI_VERSION, directory=directory,
            reference=module[0], solution=module[1], dtype=module[2],
            audit_allow=_audit_allow(obj.get("audit")),
        )

    @classmethod
    def parse(cls, text: bytes, directory: Path | None = None) -> KernelSpec:
        """Parse and validate the bytes of a `kernel.toml`."""
        if len(text) > MAX_MANIFEST_BYTES:
            raise KernelSpecError(f"kernel.toml: {len(text)} bytes; the cap is {MAX_MANIFEST_BYTES}")
        try:
            decoded = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise KernelSpecError(f"kernel.toml: not valid UTF-8: {exc}") from exc
        depth = _nesting_depth(decoded)
        if depth > MAX_MANIFEST_DEPTH:
            raise KernelSpecError(f"kernel.toml: arrays or tables nested {depth} deep; the cap is "
                                  f"{MAX_MANIFEST_DEPTH}")
        try:
            obj = tomllib.loads(decoded)
        except tomllib.TOMLDecodeError as exc:
            raise KernelSpecError(f"kernel.toml: not valid TOML: {str(exc)[:300]}") from exc
        except RecursionError:
            raise KernelSpecError("kernel.toml: nested too deeply to parse") from None
        return cls.from_json(obj, directory)

    @classmethod
    def load(cls, directory: str | Path) -> KernelSpec:
        """Read and validate `<directory>/kernel.toml`; every listed source must exist."""
        folder = Path(directory)
        manifest = folder / MANIFEST
        if not folder.is_dir():
            raise KernelSpecError(f"{folder}: not a folder; a kernel is a folder with kernel.toml")
        if not manifest.is_file() or manifest.is_symlink():
            raise KernelSpecError(f"{manifest}: missing (or not a regular file)")
        spec = cls.parse(manifest.read_bytes(), folder.resolve())
        spec.read_sources()
        return spec

    def _source_path(self, rel: str) -> Path:
        """The path of one listed source, checked to be a regular file inside the folder."""
        if self.directory is None:
            raise KernelSpecError("this kernel spec has no folder to read sources from")
        root = self.directory.resolve()
        path = root / rel
        if path.is_symlink() or not path.is_file():
            raise KernelSpecError(f"sources: {rel} is missing or not a regular file in {root}")
        if root not in path.resolve().parents:
            raise KernelSpecError(f"sources: {rel} resolves outside {root}")
        size = path.stat().st_size
        if size > MAX_SOURCE_BYTES:
            raise KernelSpecError(f"sources: {rel} is {size} bytes; the cap is {MAX_SOURCE_BYTES}")
        return path

    def _read_source(self, rel: str) -> bytes:
        data = self._source_path(rel).read_bytes()
        if len(data) > MAX_SOURCE_BYTES:
            raise KernelSpecError(f"sources: {rel} grew past the cap of {MAX_SOURCE_BYTES} bytes")
        return data

    def read_sources(self) -> dict[str, bytes]:
        """The source files' bytes, after checking each is a regular file inside the folder."""
        out: dict[str, bytes] = {}
        total = 0
        for rel in self.sources:
            total += self._source_path(rel).stat().st_size
            if total > MAX_TOTAL_BYTES:
                raise KernelSpecError(f"sources: more than {MAX_TOTAL_BYTES} bytes in all")
            out[rel] = self._read_source(rel)
        return out

    def kernel_predicate(self, compiler: str, compiler_version: str) -> KernelPredicate:
        """The `kernel/v1` predicate for this kernel (see CONTRACTS)."""
        sources = self.read_sources()
        return KernelPredicate(
            name=self.name, version=self.version, op=self.op, runtime=self.runtime,
            entry=self.entry, abi_version=self.abi_version,
            sources=tuple(SourceFile(path=p, sha256=hashlib.sha256(b).hexdigest())
                          for p, b in sorted(sources.items())),
            build=BuildRecipe(compiler=compiler, compiler_version=compiler_version,
                              flags=self.flags),
            generator=self.generator, target=Target(hardware_class=self.hardware_class),
            parent=self.parent,
            reference=KernelReference.from_json(self._reference_json(sources))
            if self.is_torch else None)

    def _reference_json(self, sources: Mapping[str, bytes]) -> dict[str, Any]:
        """kernel/v1's `reference`: the op of a torch kernel and the torch it is published with."""
        assert self.reference is not None and self.solution is not None
        version = library_version("torch")
        if version is None:
            raise KernelSpecError(module_runtime_missing("torch") or "torch is not installed")
        return {"sha256": hashlib.sha256(sources[self.reference]).hexdigest(),
                "path": self.reference, "solution": self.solution, "torch_version": version,
                "dtype": self.dtype}


def _tar_member(name: str, data: bytes) -> tuple[tarfile.TarInfo, io.BytesIO]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info, io.BytesIO(data)


def pack_kernel(directory: str | Path) -> bytes:
    """The canonical archive of a kernel folder; its sha256 is the subject digest.

    A deterministic ustar of `kernel.toml` and the listed sources, sorted by path,
    mtime 0, uid/gid 0, mode 0644, no compression.
    """
    spec = KernelSpec.load(directory)
    assert spec.directory is not None
    files = spec.read_sources()
    files[MANIFEST] = (spec.directory / MANIFEST).read_bytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(files):
            info, data = _tar_member(name, files[name])
            tar.addfile(info, data)
    return buf.getvalue()


def measured_kernel(directory: str | Path) -> dict[str, str] | None:
    """What results measured on this folder record about it: name, version and the sha256
    of its canonical archive (None when the folder cannot be packed)."""
    try:
        spec = KernelSpec.load(directory)
        digest = hashlib.sha256(pack_kernel(directory)).hexdigest()
    except (KernelSpecError, ArchiveError, OSError):
        return None
    return {"name": spec.name, "version": spec.version, "source_sha256": digest}


def _archive_files(data: bytes) -> dict[str, bytes]:
    """The archive's files by name: regular files with safe relative names, each once,
    within the count and size caps."""
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                if len(files) > MAX_SOURCES:
                    raise ArchiveError(f"archive holds more than {MAX_SOURCES + 1} files")
                if not member.isreg():
                    raise ArchiveError(f"archive member {member.name!r} is not a regular file")
                name = member.name
                parts = name.split("/")
                if not all(PART_RE.fullmatch(p) and p not in (".", "..") for p in parts):
                    raise ArchiveError(f"archive member {name!r} is not a safe relative path")
                if name in files:
                    raise ArchiveError(f"archive member {name!r} appears twice")
                if member.size > max(MAX_SOURCE_BYTES, MAX_MANIFEST_BYTES):
                    raise ArchiveError(f"archive member {name!r} is over the size cap")
                handle = tar.extractfile(member)
                if handle is None:
                    raise ArchiveError(f"archive member {name!r} cannot be read")
                files[name] = handle.read()
    except tarfile.TarError as exc:
        raise ArchiveError(f"not a valid tar archive: {exc}") from exc
    return files


def read_kernel_archive(data: bytes) -> tuple[KernelSpec, dict[str, bytes]]:
    """A kernel archive's manifest and files, read in memory (pure: nothing is written).

    Only regular files named by safe relative paths are accepted, within the size
    and count caps; the file set must be exactly `kernel.toml` plus its sources.
    """
    if len(data) > MAX_ARCHIVE_BYTES:
        raise ArchiveError(f"archive is {len(data)} bytes; the cap is {MAX_ARCHIVE_BYTES}")
    files = _archive_files(data)
    if MANIFEST not in files:
        raise ArchiveError("archive has no kernel.toml")
    try:
        spec = KernelSpec.parse(files[MANIFEST])
    except UnknownOpError:
        raise  # a limit of this verifier, not a bad archive
    except KernelSpecError as exc:
        raise ArchiveError(f"archive's kernel.toml is invalid: {exc}") from exc
    if set(files) != {MANIFEST, *spec.sources}:
        raise ArchiveError(
            f"archive files {sorted(files)} differ from kernel.toml plus its sources "
            f"{sorted([MANIFEST, *spec.sources])}"
        )
    return spec, files


def unpack_kernel(data: bytes, dest: str | Path) -> Path:
    """Unpack a kernel archive (checked by `read_kernel_archive`) into the empty or new
    folder `dest` and validate it."""
    _spec, files = read_kernel_archive(data)
    target = Path(dest)
    if target.exists() and any(target.iterdir()):
        raise ArchiveError(f"{target}: destination must be empty or not exist")
    target.mkdir(parents=True, exist_ok=True)
    root = target.resolve()
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    KernelSpec.load(root)
    return root
